package shard

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// missing is a transport whose writes from one node to another fail
// (mode "error") or are refused (mode "refused", as a replica that does
// not yet hold the sender where it sits in the ring refuses them) while
// on is set; it counts the digests that node asks of the other.
type missing struct {
	Transport
	self string
	*missed
}

// missed is what the missing transports of a cluster share.
type missed struct {
	from, to string // set before on
	mode     string
	on       atomic.Bool
	digests  atomic.Int64
}

func (w missing) Replicate(ctx context.Context, to ring.Peer, req *WriteRequest) (*WriteReply, error) {
	if !w.on.Load() || w.self != w.from || to.Addr != w.to {
		return w.Transport.Replicate(ctx, to, req)
	}
	if w.mode == "error" {
		return nil, errors.New("stream reset")
	}
	return &WriteReply{Refused: "sender not in the ring at its ID"}, nil
}

func (w missing) Digest(ctx context.Context, to ring.Peer, req *DigestRequest) (*DigestReply, error) {
	if w.on.Load() && w.self == w.from && to.Addr == w.to {
		w.digests.Add(1)
	}
	return w.Transport.Digest(ctx, to, req)
}

// TestMissedWriteResyncsSoon: a replica that missed a write (the
// heartbeat carrying a Done mark failed, or the replica refused it) gets
// the mark within seconds of taking writes again, not at the next
// anti-entropy round a SyncInterval later. A replica without the mark
// watches the page as pending and, WatchTimeout on, fetches it again
// (TestGrowthJoins saw pages fetched twice that way, with 16 positions
// stretching the interval to 80 s, beyond the 60 s watch). While the
// replica keeps missing writes, the early rounds back off.
func TestMissedWriteResyncsSoon(t *testing.T) {
	for _, mode := range []string{"error", "refused"} {
		t.Run(mode, func(t *testing.T) {
			c := newCluster(t, 11)
			c.cfg.SyncInterval = 2 * time.Minute // 600 rounds
			f := &missed{mode: mode}
			c.wrap = func(self ring.Peer, tr Transport) Transport {
				return missing{Transport: tr, self: self.Addr, missed: f}
			}
			c.build(4)
			owner := c.byAddr("n00")
			key := uint64(owner.peer.ID)
			replica := owner.rn.Successors()[0]
			f.from, f.to = owner.peer.Addr, replica.Addr
			rec := c.record(key)
			if err := owner.m.Accept(c.ctx, []Record{rec}); err != nil {
				t.Fatal(err)
			}
			c.round()
			rn := c.byAddr(replica.Addr)
			if r, ok := rn.st.Record(rec.Key, rec.Hash); !ok || r.Done {
				t.Fatalf("replica %s after the accept: record held %v, done %v; want held, pending", replica, ok, r.Done)
			}

			f.on.Store(true)
			done := rec
			done.Done = true
			if err := owner.m.Progress([]Record{done}, nil); err != nil {
				t.Fatal(err)
			}

			for range 60 { // 12 s of missed writes
				c.round()
			}
			if r, _ := rn.st.Record(rec.Key, rec.Hash); r.Done {
				t.Fatalf("the replica got the done mark while its writes %s", mode)
			}
			// 0.5 s, then 1, 2, 4 and 8 s apart: 4 rounds in 12 s, where
			// one every Lease/2 made 19.
			if n := f.digests.Load(); n > 8 {
				t.Errorf("%d anti-entropy rounds with a replica missing every write for 12 s; want at most 8 (backing off)", n)
			}

			f.on.Store(false)
			rounds := c.until(40, "the done mark at the replica", func() error {
				if r, _ := rn.st.Record(rec.Key, rec.Hash); !r.Done {
					return fmt.Errorf("replica %s holds the record pending", replica)
				}
				return nil
			})
			t.Logf("%s: done mark at the replica %v after it took writes again", mode, time.Duration(rounds)*roundStep)
		})
	}
}
