package p2p_test

import (
	"cmp"
	"context"
	"fmt"
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

// Virtual nodes on the wire: one libp2p host serves three ring positions,
// of indexes 0, 1 and 4 (placed positions need not be consecutive),
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
	// serve holds the positions of the indexes idx, which need not be
	// consecutive, as a node's placed positions are not.
	serve := func(h host.Host, idx ...int) []*ring.Node {
		s := p2p.NewStreams(h, 0, p2p.NoRingWork)
		t.Cleanup(s.Close)
		tr := p2p.NewRingTransport(h, s)
		var nodes []*ring.Node
		handlers := make([]ring.Handler, slices.Max(idx)+1)
		for _, i := range idx {
			n := ring.NewNode(p2p.RingPeerAt(h.ID(), i), tr, cfg)
			nodes, handlers[i] = append(nodes, n), n
		}
		tr.Serve(handlers...)
		return nodes
	}
	all := append(serve(a, 0, 1, 4), serve(b, 0)...)
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
	if err := c.Call(ctx, a.ID(), protocol.RingID, &pb.RingRequest{Body: &pb.RingRequest_Notify{Notify: &pb.Notify{Candidate: other}}, ToPosition: 4}, resp); err != nil {
		t.Fatal(err)
	}
	if resp.Error == "" {
		t.Fatal("a notify naming another peer's position was taken")
	}
	// Positions a does not have: between two it holds, and past them.
	for _, i := range []uint32{3, 5} {
		if err := c.Call(ctx, a.ID(), protocol.RingID, &pb.RingRequest{Body: &pb.RingRequest_Ping{Ping: &pb.Ping{}}, ToPosition: i}, resp); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(resp.Error, fmt.Sprintf("no ring position %d", i)) {
			t.Fatalf("a ping to missing position %d: %q", i, resp.Error)
		}
	}
}
