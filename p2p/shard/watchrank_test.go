package shard

import (
	"fmt"
	"testing"
	"time"
)

// TestWatchRankFollowsTheRing: a replica that was an owner's first
// successor when its records came, and is its second once a node joined
// between them, waits as the second does: twice WatchTimeout, hearing
// meanwhile of the first's fetches, so it never steps in. Judged when the
// records came, it took itself for the first replica ever after, and
// fetched the owner's pages side by side with the joiner (TestGrowthJoins:
// two nodes requesting one host's pages milliseconds apart).
func TestWatchRankFollowsTheRing(t *testing.T) {
	c := newCluster(t, 24)
	c.cfg.WatchTimeout = 2 * time.Second
	c.build(5)
	owner := c.live()[0]
	old := c.byAddr(owner.rn.Successors()[0].Addr)
	arc := Range{From: owner.rn.Predecessor().ID, To: owner.peer.ID}
	rec := c.record(c.keyIn(arc))
	if err := owner.m.Accept(c.ctx, []Record{rec}); err != nil {
		t.Fatal(err)
	}
	start := c.clock.Now()
	c.round()
	if _, ok := old.st.Record(rec.Key, rec.Hash); !ok {
		t.Fatal("the owner's first replica does not hold its record")
	}
	joiner := c.add(owner.peer.ID + (old.peer.ID-owner.peer.ID)/2)
	c.until(50, "the joiner is the owner's first replica and holds its record", func() error {
		if s := owner.rn.Successors(); len(s) == 0 || s[0] != joiner.peer {
			return fmt.Errorf("owner's successors %v", s)
		}
		if _, ok := joiner.st.Record(rec.Key, rec.Hash); !ok {
			return fmt.Errorf("joiner does not hold the record")
		}
		return nil
	})
	// The owner never fetches: the joiner steps in, reports the fetch,
	// and the old replica, now second, hears of it.
	reported := false
	for c.clock.Now().Sub(start) < 4*c.cfg.WatchTimeout {
		c.round()
		if got := old.app.watchedRecs(); len(got) != 0 {
			t.Fatalf("the owner's second replica (its first when the record came) was handed %d records %v after the accept, the joiner %d",
				len(got), c.clock.Now().Sub(start), len(joiner.app.watchedRecs()))
		}
		if got := joiner.app.watchedRecs(); len(got) > 0 && !reported {
			done := got[0]
			done.Done = true
			if err := joiner.m.WatchDone(c.ctx, []Record{done}); err != nil {
				t.Fatal(err)
			}
			reported = true
		}
	}
	if !reported {
		t.Fatalf("the joiner, the owner's first replica, never stepped in within %v", 4*c.cfg.WatchTimeout)
	}
}
