package shard

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// TestReplicaRefusesImplausibleClaims is the attack of the issue: one
// replicate write per node claiming the whole ring at epoch 2^64-1 left
// every node without claims or lease, and the poisoned table was saved.
// Each forged claim below is refused (Refused set, nothing stored, the
// table unchanged) and the owner keeps its range; the owner's genuine
// claim is still taken. Before the checks (issue 9) every forged claim
// was accepted and the owner's next Accept failed with ErrStale.
func TestReplicaRefusesImplausibleClaims(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 11)
	c.build(4)
	owner := c.nodes[1]
	claim := ownerClaim(t, owner)
	s1 := c.successor(owner)
	rep := c.successor(s1) // the owner's second replica
	key := c.keyIn(claim.Range)
	now := c.clock.Now()
	stranger := ring.Peer{ID: claim.Range.To + 1, Addr: "stranger"}
	// The stranger here has joined (the replica's ring places it): its
	// claims are judged by the view. One that never joined is refused
	// before (TestReplicaRefusesUnplacedSender).
	rep.m.placeForTest(stranger)
	for _, tc := range []struct {
		name string
		from ring.Peer
		c    Claim
		why  string
	}{
		{"whole ring at 2^64-1", stranger,
			Claim{Range{stranger.ID, stranger.ID}, Epoch{math.MaxUint64, "stranger"}}, "ahead of this node's clock"},
		{"whole ring at the current epoch", stranger,
			Claim{Range{stranger.ID, stranger.ID}, Epoch{claim.Epoch.N + 1, "stranger"}}, "covers this node"},
		{"the owner's range from a stranger past it", stranger,
			Claim{claim.Range, Epoch{claim.Epoch.N + 1, "stranger"}}, "which is alive"},
		{"the owner's range from its live successor", s1.peer,
			Claim{claim.Range, Epoch{claim.Epoch.N + 1, s1.peer.Addr}}, "which is alive"},
		{"an epoch naming someone else", s1.peer,
			Claim{c.trueArc(s1).ranges()[0], Epoch{claim.Epoch.N + 1, owner.peer.Addr}}, "names another owner"},
		{"an epoch two hours ahead", owner.peer,
			Claim{claim.Range, Epoch{clockEpoch(now.Add(2 * time.Hour)), owner.peer.Addr}}, "ahead of this node's clock"},
		{"a range the sender lies inside", owner.peer,
			Claim{Range{claim.Range.From, claim.Range.To + 10}, Epoch{claim.Epoch.N + 1, owner.peer.Addr}}, "inside the range"},
	} {
		rec := c.record(key)
		rec.Hash ^= uint64(len(tc.name)) // a record of its own per case
		reply := rep.m.HandleReplicate(ctx, tc.from, &WriteRequest{Claims: []Claim{tc.c}, Records: []Record{rec}})
		if reply.Refused == "" || !strings.Contains(reply.Refused, tc.why) {
			t.Errorf("%s: refused %q, want a refusal saying %q", tc.name, reply.Refused, tc.why)
		}
		if _, ok := rep.st.Record(rec.Key, rec.Hash); ok {
			t.Errorf("%s: the forged write's record was stored", tc.name)
		}
		if got := rep.tableAt(key); got != claim.Epoch {
			t.Errorf("%s: table at the owner's key is %v, want the owner's %v", tc.name, got, claim.Epoch)
		}
	}
	// The owner never noticed: its writes still go through, its genuine
	// claim is accepted, and it keeps its range.
	if err := owner.m.Accept(ctx, []Record{c.record(key)}); err != nil {
		t.Fatalf("owner's Accept after the forged claims: %v", err)
	}
	if reply := rep.m.HandleReplicate(ctx, owner.peer, &WriteRequest{Claims: []Claim{claim}}); reply.Refused != "" || len(reply.Rejected) > 0 {
		t.Fatalf("the owner's own claim: refused %q, rejected %v", reply.Refused, reply.Rejected)
	}
	if st := owner.stats(); len(st.Claims) != 1 || st.StaleRejections != 0 {
		t.Fatalf("owner after the attack: claims %v, stale rejections %d", st.Claims, st.StaleRejections)
	}
	if got := rep.stats().Implausible; got < 7 {
		t.Fatalf("Implausible = %d, want every forged claim counted", got)
	}
}

// TestForgedHandoffRefused: a handoff (or merge) of a node's range from a
// peer that cannot have held it, or at an epoch not its own, moves
// nothing: no records, no claim.
func TestForgedHandoffRefused(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 12)
	c.build(6)
	target := c.nodes[2]
	claim := ownerClaim(t, target)
	key := c.keyIn(claim.Range)
	// A peer just before the target's predecessor: the target knows the
	// predecessor is alive and more than K nodes lie between.
	far := ring.Peer{ID: claim.Range.From - 1, Addr: "far"}
	rec := c.record(key)
	before := target.stats()
	for _, tc := range []struct {
		name string
		req  HandoffRequest
	}{
		{"merge from far away", HandoffRequest{Range: claim.Range, Records: []Record{rec}, Merge: true, Final: true}},
		{"handoff at another's epoch", HandoffRequest{Range: claim.Range, Epoch: Epoch{claim.Epoch.N, target.peer.Addr}, Records: []Record{rec}, Final: true}},
		{"handoff at 2^64-1", HandoffRequest{Range: claim.Range, Epoch: Epoch{math.MaxUint64, "far"}, Records: []Record{rec}, Final: true}},
		{"handoff from far away", HandoffRequest{Range: claim.Range, Epoch: Epoch{claim.Epoch.N, "far"}, Records: []Record{rec}, Final: true}},
	} {
		reply := target.m.HandleHandoff(ctx, far, &tc.req)
		if reply.Accepted || reply.Reason == "" {
			t.Errorf("%s: accepted %v, reason %q; want a refusal", tc.name, reply.Accepted, reply.Reason)
		}
	}
	if _, ok := target.st.Record(rec.Key, rec.Hash); ok {
		t.Fatal("a forged handoff's record was stored")
	}
	if st := target.stats(); len(st.Claims) != 1 || st.Claims[0] != claim || st.HandoffsIn != before.HandoffsIn || st.MergesIn != before.MergesIn {
		t.Fatalf("after forged handoffs: claims %v, handoffs in %d→%d, merges in %d→%d",
			st.Claims, before.HandoffsIn, st.HandoffsIn, before.MergesIn, st.MergesIn)
	}
}

// TestPoisonedEpochTableRecovers: nodes whose saved epoch tables say a
// stranger holds the whole ring at 2^64-1 (as the attack of the issue left
// them, before the checks) start, drop the entries from the future, and
// settle with every node claiming its arc under a lease. Epochs stay near
// the clock, far from wrapping.
func TestPoisonedEpochTableRecovers(t *testing.T) {
	c := newCluster(t, 13)
	c.build(4)
	var poison epochTable
	poison.raise(Range{7, 7}, Epoch{math.MaxUint64, "attacker"})
	b, err := poison.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		c.crash(n)
	}
	for _, n := range c.nodes {
		if err := n.st.SaveEpochs(b); err != nil {
			t.Fatal(err)
		}
		c.restart(n)
	}
	c.until(400, "settle after restart on poisoned tables", c.settled)
	limit := clockEpoch(c.clock.Now().Add(time.Hour))
	for _, n := range c.nodes {
		st := n.stats()
		if st.FutureEpochs == 0 {
			t.Errorf("%s: no epoch from the future counted", n.peer.Addr)
		}
		for _, cl := range st.Claims {
			if cl.Epoch.N > limit {
				t.Errorf("%s claims %v: epoch beyond the clock", n.peer.Addr, cl)
			}
		}
	}
}

// TestEpochsFollowTheClock: a new claim's epoch is at least the claimer's
// clock in milliseconds and above the table, and a claim never wraps.
func TestEpochsFollowTheClock(t *testing.T) {
	c := newCluster(t, 14)
	n := c.add(0)
	r := Range{100, 200}
	now := c.clock.Now()
	n.m.mu.Lock()
	e1 := n.m.newEpochLocked(r, Epoch{}, now)
	n.m.table.raise(r, Epoch{e1.N + 5, "x"})
	e2 := n.m.newEpochLocked(r, Epoch{}, now)
	e3 := n.m.newEpochLocked(r, Epoch{e2.N + 3, "y"}, now)
	n.m.mu.Unlock()
	if e1.N != clockEpoch(now) || e2.N != e1.N+6 || e3.N != e2.N+4 {
		t.Fatalf("epochs %v, %v, %v: want the clock, one above the table, one above the floor", e1, e2, e3)
	}
}
