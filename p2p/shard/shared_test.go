package shard

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// countingHeartbeats counts the writes that carry claims alone.
type countingHeartbeats struct {
	Transport
	n *atomic.Int64
}

func (t countingHeartbeats) Replicate(ctx context.Context, to ring.Peer, req *WriteRequest) (*WriteReply, error) {
	if len(req.Records)+len(req.Hosts)+len(req.Watched) == 0 {
		t.n.Add(1)
	}
	return t.Transport.Replicate(ctx, to, req)
}

// A Manager of a process with 8 positions (Config.Positions) heartbeats
// its replicas 4 times less often than one of a process with one, never
// lets its lease lapse for it (nor with 16 positions, where the interval
// is held below the lease), and its replicas take over its range as soon
// after it crashes.
func TestSharedHeartbeats(t *testing.T) {
	type outcome struct {
		beats     int64
		lapses    int
		promotion int // rounds from the crash until every key is owned again
	}
	run := func(positions int) outcome {
		c := newCluster(t, 41)
		c.cfg.Positions = positions
		var beats atomic.Int64
		c.wrap = func(_ ring.Peer, tr Transport) Transport { return countingHeartbeats{tr, &beats} }
		c.build(6)
		var out outcome
		beats.Store(0)
		const rounds = 100 // 20 s
		for range rounds {
			c.round()
			for _, n := range c.live() {
				if !n.stats().LeaseValid {
					out.lapses++
				}
			}
		}
		out.beats = beats.Load()
		victim := c.live()[2]
		claims := victim.stats().Claims
		if len(claims) == 0 {
			t.Fatalf("%s claims nothing", victim.peer)
		}
		key := c.keyIn(claims[0].Range)
		c.crash(victim)
		out.promotion = c.until(100, "range of the crashed node owned again", func() error {
			for _, n := range c.live() {
				if n.m.Owns(key) {
					return nil
				}
			}
			return ErrNotOwned
		})
		return out
	}
	one, eight, sixteen := run(1), run(8), run(16)
	t.Logf("20 s of 6 nodes: %d heartbeats with 1 position, %d with 8 (%.2fx); lease lapses %d and %d; range owned again %d and %d rounds after a crash",
		one.beats, eight.beats, float64(one.beats)/float64(max(eight.beats, 1)), one.lapses, eight.lapses, one.promotion, eight.promotion)
	if eight.beats*3 > one.beats {
		t.Errorf("8 positions sent %d heartbeats, not a third of one position's %d", eight.beats, one.beats)
	}
	if eight.lapses > 0 {
		t.Errorf("with 8 positions, leases lapsed %d times in steady state", eight.lapses)
	}
	// With 16, 8 heartbeat intervals would exceed the lease: the
	// interval stops at 4/5 of it.
	t.Logf("16 positions: %d heartbeats, lease lapses %d", sixteen.beats, sixteen.lapses)
	if sixteen.lapses > 0 {
		t.Errorf("with 16 positions, leases lapsed %d times in steady state", sixteen.lapses)
	}
	if eight.promotion > one.promotion+2 {
		t.Errorf("with 8 positions the crashed range was owned again after %d rounds, with one after %d", eight.promotion, one.promotion)
	}
}
