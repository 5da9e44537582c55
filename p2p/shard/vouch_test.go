package shard

import (
	"errors"
	"math"
	"testing"
)

var errNotYet = errors.New("not yet")

// Vouch answers from the epoch table alone: the highest epoch seen at the
// key names the owner; a key nothing is known of has no owner to vouch for
// (a stranger naming itself cannot have a batch fetched). It looks at the
// one key asked about, including at the edges of the space.
func TestVouchPointLookup(t *testing.T) {
	c := newCluster(t, 21)
	n := c.add(0) // never ticked: an empty table
	if n.m.Vouch(12345, "anyone") {
		t.Fatal("an empty table vouched for a stranger")
	}
	n.m.mu.Lock()
	n.m.table.raise(Range{From: 100, To: 200}, Epoch{N: 3, Owner: "a"})
	n.m.table.raise(Range{From: 150, To: 160}, Epoch{N: 5, Owner: "b"})
	n.m.table.raise(Range{From: math.MaxUint64 - 10, To: 5}, Epoch{N: 2, Owner: "w"})
	n.m.mu.Unlock()
	for _, tc := range []struct {
		key   uint64
		owner string
		want  bool
	}{
		{101, "a", true}, {101, "b", false}, {200, "a", true},
		{150, "a", true}, {151, "a", false}, {151, "b", true}, {160, "b", true}, {161, "a", true}, {161, "z", false},
		{100, "a", false}, {100, "z", false}, {201, "z", false}, // outside every entry: nothing known
		{0, "w", true}, {0, "a", false}, {math.MaxUint64, "w", true}, {math.MaxUint64, "a", false},
		{5, "w", true}, {6, "a", false},
	} {
		if got := n.m.Vouch(tc.key, tc.owner); got != tc.want {
			t.Errorf("Vouch(%d, %q) = %v, want %v", tc.key, tc.owner, got, tc.want)
		}
	}
}

// A replica vouches for the owner whose claim it replicates; once the
// owner crashes and the replica promotes itself, the old owner is fenced:
// nobody who has seen the new epoch vouches for it any more.
func TestVouchFollowsOwnership(t *testing.T) {
	c := newCluster(t, 22)
	c.serial = true
	c.build(4)
	owner := c.nodes[1]
	claim := ownerClaim(t, owner)
	key := c.keyIn(claim.Range)
	succ := c.successor(owner)
	other := c.successor(succ)
	if !succ.m.Vouch(key, owner.peer.Addr) {
		t.Fatalf("replica %s does not vouch for owner %s of %d (table %v)", succ.peer.Addr, owner.peer.Addr, key, succ.tableAt(key))
	}
	if succ.m.Vouch(key, other.peer.Addr) {
		t.Fatalf("replica vouches for %s, which does not own %d", other.peer.Addr, key)
	}
	if !owner.m.Vouch(key, owner.peer.Addr) {
		t.Fatal("owner does not vouch for itself")
	}

	c.crash(owner)
	c.until(100, "promotion", func() error {
		if succ.m.Owns(key) {
			return nil
		}
		return errNotYet
	})
	if succ.m.Vouch(key, owner.peer.Addr) {
		t.Fatalf("new owner still vouches for the crashed owner (table %v)", succ.tableAt(key))
	}
	if !succ.m.Vouch(key, succ.peer.Addr) {
		t.Fatalf("new owner does not vouch for itself (table %v)", succ.tableAt(key))
	}
	c.until(50, "new epoch replicated", func() error {
		if other.m.Vouch(key, succ.peer.Addr) && !other.m.Vouch(key, owner.peer.Addr) {
			return nil
		}
		return errNotYet
	})
}
