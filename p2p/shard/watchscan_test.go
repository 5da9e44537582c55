package shard

import (
	"context"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// watchedHosts has owner accept one record on each of n hosts of its arc
// and returns them.
func watchedHosts(t *testing.T, c *cluster, owner *testNode, n int) []Record {
	t.Helper()
	arc := Range{From: owner.rn.Predecessor().ID, To: owner.peer.ID}
	var recs []Record
	for range n {
		recs = append(recs, c.record(c.keyIn(arc)))
	}
	if err := owner.m.Accept(c.ctx, recs); err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestFinishedHostLeavesTheWatch: once the owner fetched every page of a
// host, its replica stops watching the host's key. Before, the key stayed
// due for ever and every watch scan (once a second) asked the ring who
// owns it: in a simulated 1,000-machine crawl with delegation, a replica
// watching 16 finished hosts spent its ticks on those lookups, stopped
// renewing its lease, and the ring never settled.
func TestFinishedHostLeavesTheWatch(t *testing.T) {
	c := newCluster(t, 24)
	c.cfg.WatchTimeout = 2 * time.Second
	c.build(5)
	owner := c.live()[0]
	first := c.byAddr(owner.rn.Successors()[0].Addr)
	recs := watchedHosts(t, c, owner, 3)
	c.round()
	if first.stats().Watching != int64(len(recs)) {
		t.Fatalf("first replica watches %d keys, want %d: the test proves nothing", first.stats().Watching, len(recs))
	}
	for i := range recs {
		recs[i].Done = true
	}
	if err := owner.m.Progress(recs, nil); err != nil {
		t.Fatal(err)
	}
	for range 30 { // 6 s, three times the bound
		c.round()
	}
	if n := first.stats().Watching; n != 0 {
		t.Errorf("first replica still watches %d finished hosts", n)
	}
	if n := len(first.app.watchedRecs()); n != 0 {
		t.Errorf("first replica was handed %d records of finished hosts", n)
	}
}

// slowRing is a ring transport whose every lookup step takes step of the
// fake clock, as a network round trip takes real time.
type slowRing struct {
	ring.Transport
	clock *ring.FakeClock
	step  time.Duration
	on    *bool
}

func (s slowRing) FindSuccessorStep(ctx context.Context, to ring.Peer, id ring.ID) (ring.Step, error) {
	if *s.on {
		s.clock.Advance(s.step)
	}
	return s.Transport.FindSuccessorStep(ctx, to, id)
}

// TestWatchScanKeepsTheTickShort: when many of an owner's hosts fall due
// at once, the replica's watch scan asks the ring about them for at most
// a quarter of a heartbeat interval (at least one lookup), leaving the
// rest to later scans, so the tick that renews its lease returns in time.
// Before, one tick asked about every due key in turn: 12 keys, each
// lookup a round trip, held the next heartbeat for seconds.
func TestWatchScanKeepsTheTickShort(t *testing.T) {
	c := newCluster(t, 25)
	c.cfg.WatchTimeout = 2 * time.Second
	slow := false
	c.ringWrap = func(self ring.Peer, tr ring.Transport) ring.Transport {
		return slowRing{Transport: tr, clock: c.clock, step: 100 * time.Millisecond, on: &slow}
	}
	c.build(5)
	owner := c.live()[0]
	first := c.byAddr(owner.rn.Successors()[0].Addr)
	recs := watchedHosts(t, c, owner, 12)
	for range 11 { // 2.2 s: every key is due at the first replica
		c.round()
	}
	longest, handed, ticks := time.Duration(0), 0, 0
	for range 200 {
		ticks++
		c.clock.Advance(roundStep)
		for _, n := range c.live() {
			if n != first {
				n.m.Tick(c.ctx) // the owner's heartbeats: it is alive
			}
		}
		slow = true
		before := c.clock.Now()
		first.m.Tick(c.ctx)
		longest = max(longest, c.clock.Now().Sub(before))
		slow = false
		keys := map[uint64]bool{}
		for _, r := range first.app.watchedRecs() {
			keys[r.Key] = true
		}
		handed = len(keys)
		if handed == len(recs) {
			break
		}
	}
	t.Logf("%d ticks, the longest %v", ticks, longest)
	if handed != len(recs) {
		t.Fatalf("first replica was handed %d of %d records of an idle owner", handed, len(recs))
	}
	if bound := c.cfg.HeartbeatInterval; longest > bound {
		t.Errorf("a tick of the first replica took %v, more than a heartbeat interval (%v)", longest, bound)
	}
}
