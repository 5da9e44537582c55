package shard

import (
	"fmt"
	"testing"
	"time"
)

// TestHeldRecordsReachTheOwner: records a replica holds for its
// predecessor (a sender could not get the owner's acknowledgement
// vouched for) reach the owner's queue at the replica's next tick, a new
// one and one the replica held already while pending, not at the owner's
// next anti-entropy round. That round comes every SyncInterval, 80 s at
// 16 positions, past the replica's 1-minute watch: the replica then took
// the pages over and fetched them beside the owner (TestGrowthJoins: a
// page reached no owner's queue until its replica's watch ran out).
func TestHeldRecordsReachTheOwner(t *testing.T) {
	c := newCluster(t, 25)
	c.cfg.SyncInterval = 2 * time.Minute // 600 rounds: never within the test
	c.build(4)
	owner := c.live()[0]
	replica := c.byAddr(owner.rn.Successors()[0].Addr)
	arc := Range{From: owner.rn.Predecessor().ID, To: owner.peer.ID}
	// One the replica holds already, pending (as from a write whose
	// acknowledgement the sender could not get vouched for), and a new one.
	known := c.record(c.keyIn(arc))
	if err := replica.st.PutRecords([]Record{known}); err != nil {
		t.Fatal(err)
	}
	fresh := c.record(c.keyIn(arc))
	held, took, dups, err := replica.m.HoldFor(owner.peer.Addr, []Record{known, fresh})
	if err != nil {
		t.Fatal(err)
	}
	if !held[0] || !held[1] || took != 1 || dups != 1 {
		t.Fatalf("HoldFor: held %v, took %d, dups %d; want both held, 1 taken, 1 held already", held, took, dups)
	}
	c.until(3, "the held records in the owner's queue", func() error {
		for _, r := range []Record{known, fresh} {
			if !owner.app.queued(IDOf(r)) {
				return fmt.Errorf("owner has not queued %x/%x", r.Key, r.Hash)
			}
		}
		return nil
	})
	if st := replica.stats(); st.HeldForwarded != 2 {
		t.Errorf("replica forwarded %d held records, want 2", st.HeldForwarded)
	}
}
