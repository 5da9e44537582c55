package shard

import (
	"context"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// gated is a transport whose writes from one node wait at a gate: the
// test sees the heartbeat on its way before it lets it through.
type gated struct {
	Transport
	self    ring.Peer
	from    string
	arrived chan struct{}
	open    chan struct{}
}

func (g gated) Replicate(ctx context.Context, to ring.Peer, req *WriteRequest) (*WriteReply, error) {
	if g.self.Addr == g.from && len(req.Records) > 0 {
		select {
		case g.arrived <- struct{}{}:
		default:
		}
		<-g.open
	}
	return g.Transport.Replicate(ctx, to, req)
}

// TestUnsentProgress: a done mark handed to the manager counts as unsent,
// with the time its URL was finished, while it waits for a heartbeat and
// while the heartbeat carrying it is on its way (a node killed then loses
// it), and no longer once the replicas stored it. A status that forgot
// the heartbeat on its way would tell a test waiting for the marks to be
// safe that they are while no replica holds them.
func TestUnsentProgress(t *testing.T) {
	c := newCluster(t, 5)
	var victim string
	arrived, open := make(chan struct{}, 1), make(chan struct{})
	c.wrap = func(self ring.Peer, tr Transport) Transport {
		return gated{Transport: tr, self: self, from: victim, arrived: arrived, open: open}
	}
	victim = "n00"
	c.build(4)
	owner := c.byAddr(victim)
	key := uint64(owner.peer.ID)
	if !owner.m.Owns(key) {
		t.Fatalf("%s does not own its own ID:\n%s", victim, c.dump())
	}
	if st := owner.m.Stats(); st.Unsent != 0 || !st.UnsentSince.IsZero() {
		t.Fatalf("before any progress: unsent %d since %v, want none", st.Unsent, st.UnsentSince)
	}
	done := c.record(key)
	done.Done = true
	finished := c.clock.Now().Add(-3 * time.Second)
	if err := owner.m.ProgressSince([]Record{done}, nil, finished); err != nil {
		t.Fatal(err)
	}
	later := c.record(key)
	later.Done = true
	if err := owner.m.ProgressSince([]Record{later}, nil, c.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if st := owner.m.Stats(); st.Unsent != 2 || !st.UnsentSince.Equal(finished) {
		t.Fatalf("waiting for a heartbeat: unsent %d since %v, want 2 since %v", st.Unsent, st.UnsentSince, finished)
	}
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		owner.m.Tick(c.ctx)
	}()
	<-arrived
	if st := owner.m.Stats(); st.Unsent != 2 || !st.UnsentSince.Equal(finished) {
		t.Errorf("heartbeat on its way: unsent %d since %v, want 2 since %v", st.Unsent, st.UnsentSince, finished)
	}
	close(open)
	<-ticked
	if st := owner.m.Stats(); st.Unsent != 0 || !st.UnsentSince.IsZero() {
		t.Errorf("after the heartbeat: unsent %d since %v, want none", st.Unsent, st.UnsentSince)
	}
	held := 0
	for _, n := range c.live() {
		if n == owner {
			continue
		}
		if r, ok := n.st.Record(done.Key, done.Hash); ok && r.Done {
			held++
		}
	}
	if held != c.cfg.Replicas {
		t.Errorf("%d replicas hold the done mark after the heartbeat, want %d", held, c.cfg.Replicas)
	}
}
