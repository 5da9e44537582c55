package shard

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// joinInside joins count nodes evenly inside r with no maintenance in
// between, so that they all find r's owner as their successor, and
// returns them in ring order.
func (c *cluster) joinInside(r Range, count int) []*testNode {
	c.tb.Helper()
	width := uint64(r.To - r.From)
	var out []*testNode
	for i := 1; i <= count; i++ {
		out = append(out, c.add(r.From+ring.ID(width/uint64(count+1)*uint64(i))))
	}
	return out
}

// TestReleaseAfterManyJoins: twelve nodes join inside one owner's arc
// before it hands anything off, more than fit in a successor list (8), so
// the owners of the farthest pieces do not list the old owner among their
// successors and, by their view of the ring alone, cannot tell it from a
// stranger. The old owner's successor witnessed its claim, so every piece
// still reaches its owner by handoff, with everything in it: pending
// records, done ones and host states. Nothing is left releasing.
//
// Before witnesses the pieces 9 and more positions away were refused for
// ever ("passes over 9 known nodes, more than 2"): their owners claimed
// them empty by pull after FailureTimeout, the old owner pushed them every
// tick, and the records accepted there never reached their owners.
func TestReleaseAfterManyJoins(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 31)
	c.build(3)
	old := c.nodes[1]
	claim := ownerClaim(t, old)
	recs := c.acceptIn(ctx, old, claim.Range, 120)
	old.app.enqueue(recs...)
	// The farthest piece gets a done record and a host state too.
	far := Range{claim.Range.From, claim.Range.From + ring.ID(uint64(claim.Range.To-claim.Range.From)/13)}
	done := c.acceptIn(ctx, old, far, 1)[0]
	done.Done = true
	if err := old.m.Progress([]Record{done}, []HostState{{Key: uint64(far.To) - 1, Host: "far.example", Data: []byte("clock")}}); err != nil {
		t.Fatal(err)
	}

	joined := c.joinInside(claim.Range, 12)
	c.until(300, "settle after the joins", c.settled)

	for _, r := range recs {
		owner := c.ownerOf(r.Key)
		if _, ok := owner.st.Record(r.Key, r.Hash); !ok {
			t.Errorf("record at %s accepted by %s never reached its owner %s", ring.ID(r.Key), old.peer.Addr, owner.peer.Addr)
		}
		if owner != old && !owner.app.queued(IDOf(r)) {
			t.Errorf("record at %s not queued at its owner %s", ring.ID(r.Key), owner.peer.Addr)
		}
	}
	first := joined[0]
	if got, ok := first.st.Record(done.Key, done.Hash); !ok || !got.Done {
		t.Errorf("the farthest owner %s has the done record as %+v (found %v), want it done", first.peer.Addr, got, ok)
	}
	var hosts []HostState
	first.st.ScanHosts(ownerClaim(t, first).Range, func(h HostState) error { hosts = append(hosts, h); return nil })
	if len(hosts) != 1 || string(hosts[0].Data) != "clock" {
		t.Errorf("the farthest owner %s has host states %+v, want the old owner's", first.peer.Addr, hosts)
	}
	witnessed := int64(0)
	for _, n := range joined {
		witnessed += n.stats().Witnessed
	}
	if st := old.stats(); witnessed < 4 || st.Rerouted != 0 || st.HandoffsOut < int64(len(joined)) {
		t.Errorf("witnessed givers %d (want the 4 pieces beyond a successor list), rerouted %d (want 0), handoffs out %d (want %d)",
			witnessed, st.Rerouted, st.HandoffsOut, len(joined))
	}
	c.checkApps()
}

// TestUnwitnessedReleaseRerouted: a node that claimed the whole ring alone
// (no witness heard anyone before it) has twenty nodes join just before it
// before it hands anything off. The owners of the pieces 9 and more
// positions back cannot judge it and no witness vouches, so they claim
// their pieces by pull; told so, the old owner gives those pieces up and
// sends their pending records as tasks, which reach their owners. Its two
// successors, which it replicates to, take their arcs from it by handoff.
// Nothing is left releasing and no pending record is lost.
//
// Before, the old owner pushed those pieces every tick for ever and their
// records never reached their owners.
func TestUnwitnessedReleaseRerouted(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 32)
	c.build(1)
	old := c.nodes[0]
	// A quarter of the ring before the node, where the others join.
	part := Range{From: old.peer.ID - 1<<62, To: old.peer.ID - 1}
	recs := c.acceptIn(ctx, old, part, 120)
	old.app.enqueue(recs...)

	c.joinInside(part, 20)
	c.until(300, "settle after the joins", c.settled)

	for _, r := range recs {
		owner := c.ownerOf(r.Key)
		if _, ok := owner.st.Record(r.Key, r.Hash); !ok {
			t.Errorf("record at %s accepted by %s never reached its owner %s", ring.ID(r.Key), old.peer.Addr, owner.peer.Addr)
		}
		if owner != old && !owner.app.queued(IDOf(r)) {
			t.Errorf("record at %s not queued at its owner %s", ring.ID(r.Key), owner.peer.Addr)
		}
	}
	if st := old.stats(); st.Rerouted == 0 {
		t.Errorf("no release rerouted: handoffs out %d", st.HandoffsOut)
	}
	c.checkApps()
}

// TestWitnessVouchesOnlyThePredecessorsArc: a node witnesses its ring
// predecessor's claims over the arc back to the nearest peer it hears
// from, and nothing else. A member that claims a range behind its live
// predecessor, at its successor (which takes the claim in: it knows no
// node there) and at the next node, is witnessed by neither, so its
// handoff into that range stays refused after the range's owner asked the
// witnesses, even once the owner took a claim of it in as a replica:
// nothing is stored and nothing claimed. A stranger's is refused the same
// way.
func TestWitnessVouchesOnlyThePredecessorsArc(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 33)
	c.build(48)
	nodes := c.live()
	slices.SortFunc(nodes, func(a, b *testNode) int { return cmp.Compare(a.peer.ID, b.peer.ID) })
	victim, h := nodes[30], nodes[40] // 10 positions apart: beyond a successor list
	before := victim.stats()
	vc := ownerClaim(t, victim)
	epoch := Epoch{N: clockEpoch(c.clock.Now()), Owner: h.peer.Addr}
	plant := Claim{Range{From: vc.Range.From, To: h.peer.ID}, epoch}
	for i, w := range []*testNode{nodes[41], nodes[42]} {
		reply := w.m.HandleReplicate(ctx, h.peer, &WriteRequest{Claims: []Claim{plant}})
		if i == 0 && (reply.Refused != "" || len(reply.Rejected) > 0) {
			t.Fatalf("%s did not take the planted claim in (refused %q, rejected %v): the test proves nothing", w.peer.Addr, reply.Refused, reply.Rejected)
		}
		if got := w.m.witnessedOver(vc.Range, c.clock.Now()); len(got) > 0 {
			t.Errorf("%s witnessed %v over the victim's arc %s", w.peer.Addr, got, vc.Range)
		}
	}
	// The genuine claim is witnessed: h's own arc, at its successor.
	hc := ownerClaim(t, h)
	if got := nodes[41].m.witnessedOver(hc.Range, c.clock.Now()); !witnessedAll(got, hc.Range, hc.Epoch) {
		t.Errorf("h's successor witnessed %v over h's arc %s, want %v", got, hc.Range, hc)
	}

	// A claim of h that the victim takes in (a sliver just behind h, where
	// it knows no node) makes h a peer that replicates to it, but not one
	// of the predecessors it replicates: those are nearer, and write too.
	sliver := Claim{Range{From: h.peer.ID - 10, To: h.peer.ID}, epoch}
	if reply := victim.m.HandleReplicate(ctx, h.peer, &WriteRequest{Claims: []Claim{sliver}}); reply.Refused != "" {
		t.Fatalf("the victim refused h's sliver (%s): the test proves less", reply.Refused)
	}

	stranger := ring.Peer{ID: h.peer.ID + 1, Addr: "stranger"}
	for _, tc := range []struct {
		from  ring.Peer
		epoch Epoch
	}{{h.peer, epoch}, {stranger, Epoch{N: epoch.N, Owner: stranger.Addr}}} {
		rec := c.record(c.keyIn(vc.Range))
		req := &HandoffRequest{Range: vc.Range, Epoch: tc.epoch, Records: []Record{rec}, Final: true}
		for round := 0; round < 10; round++ {
			reply := victim.m.HandleHandoff(ctx, tc.from, req)
			if reply.Accepted {
				t.Fatalf("%s: handoff into the victim's arc accepted after %d rounds", tc.from.Addr, round)
			}
			if !strings.Contains(reply.Reason, "not a plausible owner") {
				t.Errorf("%s: refused for %q", tc.from.Addr, reply.Reason)
			}
			c.round()
		}
		if _, ok := victim.st.Record(rec.Key, rec.Hash); ok {
			t.Errorf("%s: the forged handoff's record was stored", tc.from.Addr)
		}
	}
	if st := victim.stats(); len(st.Claims) != 1 || st.Claims[0] != vc || st.HandoffsIn != before.HandoffsIn || st.Witnessed != 0 {
		t.Errorf("victim after the forged handoffs: claims %v (want %v), handoffs in %d→%d, witnessed %d",
			st.Claims, vc, before.HandoffsIn, st.HandoffsIn, st.Witnessed)
	}
}
