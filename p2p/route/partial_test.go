package route

import (
	"context"
	"fmt"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// partlyReplicator stores every record but those of one key, which it
// reports failed: a node's ring position that lost its claim between the
// owner's check and the write, beside positions that took theirs.
type partlyReplicator struct {
	m    *shard.Manager
	fail uint64
}

func (p partlyReplicator) Accept(ctx context.Context, recs []shard.Record) error {
	var took []shard.Record
	var failed []shard.RecordID
	for _, r := range recs {
		if r.Key == p.fail {
			failed = append(failed, shard.IDOf(r))
		} else {
			took = append(took, r)
		}
	}
	if err := p.m.Accept(ctx, took); err != nil {
		return err
	}
	if len(failed) > 0 {
		return &PartlyStored{Failed: failed, Err: fmt.Errorf("position 0: %w", shard.ErrNotOwned)}
	}
	return nil
}

func (p partlyReplicator) AcceptOwn(ctx context.Context, recs []shard.Record) error {
	return p.Accept(ctx, recs)
}

// TestOwnerTakesAPartlyStoredBatch: when the records of one key could not
// be stored (a position lost its claim mid-write) and the others were,
// the others are queued and acknowledged, and only that key's tasks go
// back as not owned. Before, the whole batch went back: the stored
// records were left neither queued nor seen, and the sender, whose
// receipts were missing, handed them to the replicas to hold, where they
// waited a minute for the replicas' watch (TestGrowthJoins).
func TestOwnerTakesAPartlyStoredBatch(t *testing.T) {
	c := newCluster(t, 9, 1)
	n := c.nodes[0]
	tasks := testTasks(3, 9) // hosts h0, h1, h2
	fail := tasks[1].Key
	owner := NewOwner(n.m, partlyReplicator{n.m, fail}, NewIntake(n.q, n.q, 10), testURLs{}, nil, 10)
	res, err := owner.Accept(context.Background(), tasks, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 6 || len(res.NotOwned) != 3 {
		t.Fatalf("result %+v: want 6 accepted and the failed key's 3 handed back", res)
	}
	for _, tk := range res.NotOwned {
		if tk.Key != fail {
			t.Errorf("handed back %s, of a key that was stored", tk.URL)
		}
	}
	for _, tk := range tasks {
		h := testURLs{}.Hash(tk.URL)
		_, queued := n.q.queue[h]
		if want := tk.Key != fail; queued != want {
			t.Errorf("%s queued %v, want %v", tk.URL, queued, want)
		}
	}
	// Sent again once the key is stored, they are taken.
	res, err = n.owner.Accept(context.Background(), res.NotOwned, false, false)
	if err != nil || res.Accepted != 3 {
		t.Fatalf("the handed-back tasks sent again: %+v %v; want 3 accepted", res, err)
	}
}
