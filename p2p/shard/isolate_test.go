package shard

import (
	"testing"
)

// A node cut off from every other one lost all its successors. It used to
// take itself for a ring of one, claim every range and accept and fetch
// URLs that the rest of the ring owned too (the simulator's partition runs
// saw a third or more of all fetches duplicated). It must own no key
// outside the arc it had, no key may have two owners while it is cut off,
// and once the network heals it rejoins and the ring settles.
func TestIsolatedNodeClaimsOnlyItsArc(t *testing.T) {
	c := newCluster(t, 71)
	c.build(6)
	x := c.live()[2]
	arc := c.trueArc(x)
	var rest []string
	for _, n := range c.live() {
		if n != x {
			rest = append(rest, n.peer.Addr)
		}
	}
	keys := make([]uint64, 256)
	for i := range keys {
		keys[i] = c.rng.Uint64()
	}
	c.rnet.Partition([]string{x.peer.Addr}, rest)
	isolated := false
	cut := c.clock.Now()
	// Well past the lease, FailureTimeout and the others' promotion of
	// x's arc.
	for r := 0; r < 50; r++ {
		c.round()
		isolated = isolated || x.rn.Isolated()
		now := c.clock.Now()
		for _, k := range keys {
			if !arc.contains(k) && x.m.Owns(k) {
				t.Fatalf("round %d: cut-off node %s owns %x outside its arc %v (isolated %v)\n%s", r, x.peer.Addr, k, arc.ranges(), x.rn.Isolated(), c.dump())
			}
			var owners []string
			for _, n := range c.live() {
				if n.m.Owns(k) {
					owners = append(owners, n.peer.Addr)
				}
			}
			if len(owners) > 1 {
				t.Fatalf("round %d (%v after the cut): key %x owned by %v\n%s", r, now.Sub(cut), k, owners, c.dump())
			}
		}
		if extra := subtract(claimSpans(x.stats().Claims), arc); !extra.empty() {
			t.Fatalf("round %d: cut-off node %s claims %v outside its arc %v", r, x.peer.Addr, extra.ranges(), arc.ranges())
		}
	}
	if !isolated {
		t.Fatalf("%s was never isolated: %+v", x.peer.Addr, x.rn.State())
	}
	if !x.rn.State().Isolated {
		t.Fatalf("%s rejoined while still cut off: %+v", x.peer.Addr, x.rn.State())
	}
	c.rnet.Heal()
	rounds := c.until(400, "settled after the heal", c.settled)
	t.Logf("rejoined and settled %d rounds after the heal", rounds)
}

// A node that created the ring and never had another member is alone, not
// isolated: it claims and owns the whole ring at once.
func TestLoneCreatedNodeOwnsEverything(t *testing.T) {
	c := newCluster(t, 73)
	x := c.add(0)
	for range 10 {
		c.round()
	}
	if !x.stats().LeaseValid || x.rn.Isolated() {
		t.Fatalf("lone node: lease valid %v, isolated %v", x.stats().LeaseValid, x.rn.Isolated())
	}
	for range 256 {
		if k := c.rng.Uint64(); !x.m.Owns(k) {
			t.Fatalf("lone node does not own %x: claims %v", k, x.stats().Claims)
		}
	}
}
