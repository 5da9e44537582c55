package shard

import (
	"context"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// TestLateDoneMarkReachesTheReceiver: a node joins inside an owner's arc
// and takes its piece by handoff, pending records and all. Then fetches
// the old owner had under way end (its own last request, or a helper's
// batch whose reply comes late) and their done marks reach the old owner,
// which claims the piece no more. They go to the receiver: the pages are
// done there and leave its queue, so it does not fetch them again.
//
// Before, the heartbeat dropped the done marks of a range no longer
// claimed, and the receiver fetched every such page a second time.
func TestLateDoneMarkReachesTheReceiver(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 31)
	c.build(3)
	old := c.nodes[1]
	claim := ownerClaim(t, old)
	recs := c.acceptIn(ctx, old, claim.Range, 60)
	old.app.enqueue(recs...)
	joiner := c.joinInside(claim.Range, 1)[0]
	c.until(300, "settle after the join", c.settled)

	var late []Record
	for _, r := range recs {
		if c.ownerOf(r.Key) == joiner {
			if !joiner.app.queued(IDOf(r)) {
				t.Fatalf("record %s not queued at the joiner after the handoff: the test proves nothing", ring.ID(r.Key))
			}
			r.Done = true
			late = append(late, r)
		}
	}
	if len(late) < 5 {
		t.Fatalf("only %d records in the joiner's piece: the test proves nothing", len(late))
	}
	if err := old.m.Progress(late, nil); err != nil {
		t.Fatal(err)
	}
	c.round()
	c.round()
	for _, r := range late {
		if got, ok := joiner.st.Record(r.Key, r.Hash); !ok || !got.Done {
			t.Errorf("the joiner has fetched page %s as %+v (found %v), want it done", ring.ID(r.Key), got, ok)
		}
		if joiner.app.queued(IDOf(r)) {
			t.Errorf("the joiner still queues fetched page %s: it would fetch it again", ring.ID(r.Key))
		}
	}
	if st := old.stats(); st.LateDoneOut != int64(len(late)) {
		t.Errorf("LateDoneOut %d, want %d", st.LateDoneOut, len(late))
	}
	c.checkApps()
}
