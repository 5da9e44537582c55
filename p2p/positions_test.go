package p2p_test

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// Virtual nodes on the wire: one libp2p host serves three ring positions
// through one ring transport, another host one. The four positions form
// one ring over real streams, and every key resolves, from every
// position, to its true successor. Each position is where its peer ID and
// index put it, which any peer checks: a message naming a position of a
// host at another point is refused, and a host speaks only for its own
// positions.
func TestRingPositionsOverLibp2p(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := ring.DefaultConfig()
	cfg.StabilizeInterval = 20 * time.Millisecond
	cfg.FixFingersInterval = 20 * time.Millisecond
	cfg.CheckPredecessorInterval = 50 * time.Millisecond
	a, b := loopbackHost(t), loopbackHost(t)
	if err := a.Connect(ctx, b.Peerstore().PeerInfo(b.ID())); err != nil {
		t.Fatal(err)
	}
	serve := func(h host.Host, positions int) []*ring.Node {
		s := p2p.NewStreams(h, 0, p2p.NoRingWork)
		t.Cleanup(s.Close)
		tr := p2p.NewRingTransport(h, s)
		var nodes []*ring.Node
		var handlers []ring.Handler
		for i := range positions {
			n := ring.NewNode(p2p.RingPeerAt(h.ID(), i), tr, cfg)
			nodes, handlers = append(nodes, n), append(handlers, n)
		}
		tr.Serve(handlers...)
		return nodes
	}
	all := append(serve(a, 3), serve(b, 1)...)
	all[0].Create()
	for _, n := range all[1:] {
		if err := n.Join(ctx, all[0].Self()); err != nil {
			t.Fatalf("%s joins: %v", n.Self(), err)
		}
	}
	for _, n := range all {
		go func() { _ = n.Run(ctx) }()
	}
	var members []ring.Peer
	for _, n := range all {
		members = append(members, n.Self())
		id, i, err := p2p.PositionOf(n.Self())
		if err != nil || n.Self() != p2p.RingPeerAt(id, i) || n.Self().ID != p2p.PositionID(id, i) {
			t.Fatalf("position %v: %v", n.Self(), err)
		}
	}
	slices.SortFunc(members, func(x, y ring.Peer) int { return cmp.Compare(x.ID, y.ID) })
	keys := []ring.ID{0, 1 << 62, 1 << 63, 3 << 62, ^ring.ID(0)}
	for _, m := range members {
		keys = append(keys, m.ID, m.ID+1)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		wrong := ""
		for _, n := range all {
			for _, k := range keys {
				got, _, err := n.Lookup(ctx, k)
				if want := ring.OwnerOf(members, k); err != nil || got != want {
					wrong = n.Self().String() + " looks " + k.String() + " up as " + got.String() + ", want " + want.String()
				}
			}
		}
		if wrong == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(wrong)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// A forged position: b's peer ID with a's third position's point.
	c := p2p.NewStreams(b, 0, p2p.NoRingWork)
	forged := &pb.Peer{RingId: uint64(all[2].Self().ID), PeerId: []byte(b.ID()), Position: 2}
	resp := &pb.RingResponse{}
	if err := c.Call(ctx, a.ID(), protocol.RingID, &pb.RingRequest{Body: &pb.RingRequest_Notify{Notify: &pb.Notify{Candidate: forged}}}, resp); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(resp.Error, "claims ring position") {
		t.Fatalf("a forged position was taken: %q", resp.Error)
	}
	// b speaks for its position 0 but names a's position 1.
	other := &pb.Peer{RingId: uint64(all[1].Self().ID), PeerId: []byte(a.ID()), Position: 1}
	if err := c.Call(ctx, a.ID(), protocol.RingID, &pb.RingRequest{Body: &pb.RingRequest_Notify{Notify: &pb.Notify{Candidate: other}}, ToPosition: 2}, resp); err != nil {
		t.Fatal(err)
	}
	if resp.Error == "" {
		t.Fatal("a notify naming another peer's position was taken")
	}
	// A position a does not have.
	if err := c.Call(ctx, a.ID(), protocol.RingID, &pb.RingRequest{Body: &pb.RingRequest_Ping{Ping: &pb.Ping{}}, ToPosition: 3}, resp); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(resp.Error, "no ring position 3") {
		t.Fatalf("a ping to a missing position: %q", resp.Error)
	}
}
