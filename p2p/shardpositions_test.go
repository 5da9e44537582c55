package p2p_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// positionHandler records who each shard request reached, and from whom.
type positionHandler struct {
	name string
	mu   *sync.Mutex
	got  *[]string // "name<-sender addr kind"
}

func (h positionHandler) note(from ring.Peer, kind string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.got = append(*h.got, h.name+"<-"+from.Addr+" "+kind)
}

func (h positionHandler) HandleReplicate(_ context.Context, from ring.Peer, _ *shard.WriteRequest) *shard.WriteReply {
	h.note(from, "replicate")
	return &shard.WriteReply{}
}

func (h positionHandler) HandleHandoff(_ context.Context, from ring.Peer, req *shard.HandoffRequest) *shard.HandoffReply {
	kind := "handoff"
	if req.Reroute {
		kind = "rerouted handoff"
	}
	h.note(from, kind)
	return &shard.HandoffReply{Accepted: true, Epoch: req.Epoch}
}

func (h positionHandler) HandleDigest(_ context.Context, from ring.Peer, req *shard.DigestRequest) *shard.DigestReply {
	h.note(from, "digest")
	return &shard.DigestReply{Sums: make([]uint64, req.Buckets)}
}

func (h positionHandler) HandlePull(_ context.Context, from ring.Peer, _ *shard.PullRequest) *shard.PullReply {
	h.note(from, "pull")
	return &shard.PullReply{}
}

// Shard messages name the positions they are for and from: a node with
// several ring positions serves each with that position's handler, and
// sees the sender as the position it speaks for. Calls between a node's
// own positions are served in process (a libp2p host cannot dial
// itself), and a request for a position the node does not have is
// refused.
func TestShardMessagesNamePositions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, b := loopbackHost(t), loopbackHost(t)
	if err := b.Connect(ctx, a.Peerstore().PeerInfo(a.ID())); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	serve := func(h host.Host, names ...string) *p2p.ShardTransport {
		s := p2p.NewStreams(h, 0, p2p.NoRingWork)
		t.Cleanup(s.Close)
		tr := p2p.NewShardTransport(h, s)
		var hs []shard.Handler
		for _, n := range names {
			hs = append(hs, positionHandler{name: n, mu: &mu, got: &got})
		}
		tr.Serve(hs...)
		return tr
	}
	ta := serve(a, "a0", "a1", "a2")
	tb := serve(b, "b0")
	a1, a2 := p2p.RingPeerAt(a.ID(), 1), p2p.RingPeerAt(a.ID(), 2)
	b0 := p2p.RingPeer(b.ID())

	// b's position 0 replicates to a's position 2, and b's position 3
	// (b may speak for any position of its own) pulls from a's position 1.
	if _, err := tb.Replicate(ctx, a2, &shard.WriteRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Position(3).Pull(ctx, a1, &shard.PullRequest{}); err != nil {
		t.Fatal(err)
	}
	// b sends a's position 1 the done marks of a range it gave up: the
	// reroute flag crosses the wire.
	r := shard.Range{From: 1, To: 2}
	if rep, err := tb.Handoff(ctx, a1, &shard.HandoffRequest{Range: r, Epoch: shard.Epoch{N: 7, Owner: b0.Addr}, Reroute: true}); err != nil || !rep.Accepted {
		t.Fatalf("rerouted handoff: %+v, %v", rep, err)
	}
	// a's position 1 hands a range to a's position 2 and asks a's
	// position 0 for a digest: in process, no stream to itself.
	if rep, err := ta.Position(1).Handoff(ctx, a2, &shard.HandoffRequest{Range: r, Epoch: shard.Epoch{N: 7, Owner: a1.Addr}, Final: true}); err != nil || !rep.Accepted || rep.Epoch.N != 7 {
		t.Fatalf("handoff between positions of one node: %+v, %v", rep, err)
	}
	if rep, err := ta.Position(1).Digest(ctx, p2p.RingPeer(a.ID()), &shard.DigestRequest{Range: r, Buckets: 4}); err != nil || len(rep.Sums) != 4 {
		t.Fatalf("digest between positions of one node: %+v, %v", rep, err)
	}
	// a's position 2 replicates to b.
	if _, err := ta.Position(2).Replicate(ctx, b0, &shard.WriteRequest{}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"a2<-" + b0.Addr + " replicate",
		"a1<-" + p2p.RingPeerAt(b.ID(), 3).Addr + " pull",
		"a1<-" + b0.Addr + " rerouted handoff",
		"a2<-" + a1.Addr + " handoff",
		"a0<-" + a1.Addr + " digest",
		"b0<-" + a2.Addr + " replicate",
	}
	mu.Lock()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("requests reached\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	mu.Unlock()

	// A position a does not have, and a sender position no peer has.
	if _, err := tb.Replicate(ctx, p2p.RingPeerAt(a.ID(), 3), &shard.WriteRequest{}); err == nil || !strings.Contains(err.Error(), "no ring position 3") {
		t.Errorf("a write to a missing position: %v", err)
	}
	c := p2p.NewStreams(b, 0, p2p.NoRingWork)
	resp := &pb.WriteReply{}
	if err := c.Call(ctx, a.ID(), protocol.ReplicateID, &pb.WriteRequest{FromPosition: p2p.MaxPositions}, resp); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(resp.Error, "sender position") {
		t.Errorf("a write from position %d: %q", p2p.MaxPositions, resp.Error)
	}
}
