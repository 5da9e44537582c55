package node_test

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/localswarm"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// A stranger whose fresh identity lands in a member's arc, just where it
// would become the member's predecessor and take part of its range, is no
// member of a swarm that asks for ring work: its notify is refused, so the
// member keeps its predecessor, and the members' protocols refuse its
// replicate write before reading it. In a swarm without ring work (today's
// behaviour before the work), the same stranger became the predecessor.
func TestStrangerWithoutRingWorkIsNoMember(t *testing.T) {
	const work p2p.RingWork = 8
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, asked := range []p2p.RingWork{work, p2p.NoRingWork} {
		s, err := localswarm.Start(ctx, localswarm.Options{Nodes: 2, Dir: t.TempDir(), Crawl: noWeb(), RingWork: asked})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.WaitConverged(ctx); err != nil {
			t.Fatal(err)
		}
		target := s.Nodes[0]
		pred, self := target.Ring().Predecessor(), target.Ring().Self()
		stranger := strangerIn(t, pred.ID, self.ID, int(work))
		id := connect(t, stranger, target)
		streams := p2p.NewStreams(stranger, 0, p2p.NoRingWork)
		resp := &pb.RingResponse{}
		candidate := &pb.Peer{RingId: uint64(p2p.RingID(stranger.ID())), PeerId: []byte(stranger.ID())}
		if err := streams.Call(ctx, id, protocol.RingID, &pb.RingRequest{Body: &pb.RingRequest_Notify{Notify: &pb.Notify{Candidate: candidate}}}, resp); err != nil {
			t.Fatal(err)
		}
		after := target.Ring().Predecessor()
		write := streams.Call(ctx, id, protocol.ReplicateID, &pb.WriteRequest{}, &pb.WriteReply{})
		_ = s.Close()
		if asked == p2p.NoRingWork {
			// The control: without ring work the stranger got in.
			if after.Addr != stranger.ID().String() || write != nil {
				t.Fatalf("without ring work: predecessor %s (stranger %s), write %v", after, stranger.ID(), write)
			}
			continue
		}
		if resp.Error == "" || after != pred {
			t.Fatalf("stranger's notify answered %q; predecessor %s, was %s", resp.Error, after, pred)
		}
		if !errors.Is(write, p2p.ErrNoRingWork) {
			t.Fatalf("stranger's replicate write: %v, want %v", write, p2p.ErrNoRingWork)
		}
	}
}

// strangerIn returns a host whose identity lies in (lo, hi) on the ring,
// just where a notify makes it hi's predecessor, and carries less than
// bits of ring work.
func strangerIn(t *testing.T, lo, hi ring.ID, bits int) host.Host {
	t.Helper()
	for range 1 << 16 {
		key, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := peer.IDFromPrivateKey(key)
		if p2p.WorkOf(id) >= bits || !p2p.RingID(id).Between(lo, hi) || p2p.RingID(id) == hi {
			continue
		}
		h, err := libp2p.New(libp2p.Identity(key), libp2p.NoListenAddrs)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		return h
	}
	t.Fatal("no identity in the arc in 65,536 tries")
	return nil
}
