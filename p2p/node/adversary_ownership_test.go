package node_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// wholeRing is a claim of the whole ring (from = to) at epoch n by owner.
func wholeRing(at uint64, n uint64, owner peer.ID) *pb.Claim {
	return &pb.Claim{Range: &pb.ShardRange{From: at, To: at}, Epoch: &pb.Epoch{N: n, Owner: owner.String()}}
}

// ownsSomething reports whether n holds a claim under a valid lease.
func ownsSomething(n *node.Node) bool {
	st := n.Status().Shard
	return len(st.Claims) > 0 && st.LeaseValid
}

// TestAdversaryForgedClaims: "One replicate WriteRequest per node claiming
// the whole ring at epoch 2^64-1 was accepted by every node: within 5 s
// every node had no claims and no lease, and no page was fetched in the
// next 30 s. The poisoned table is saved to the store." The stranger, and
// a hostile member, send every honest node whole-ring claims: at 2^64-1,
// at the current epoch (the clock in ms), and a member's naming the
// stranger as owner. Every write is refused, every honest node keeps its
// claims and lease, and the crawl completes.
// Before issue 9: "node 0 lost its claims or lease after the forged
// claims", and no write was refused.
func TestAdversaryForgedClaims(t *testing.T) {
	a := startAdversary(t, advOptions{HostileMember: true})
	a.seed()
	now := uint64(time.Now().UnixMilli())
	stranger, member := a.stranger.ID(), a.member.ID()
	at := func(id peer.ID) uint64 { return uint64(p2p.RingID(id)) }
	for i, n := range a.honest {
		for _, tc := range []struct {
			name string
			h    func() error
		}{
			{"stranger at 2^64-1", func() error {
				return a.send(a.stranger, n, protocol.ReplicateID,
					&pb.WriteRequest{Claims: []*pb.Claim{wholeRing(at(stranger), math.MaxUint64, stranger)}}, refusedReply(t, i, "stranger at 2^64-1"))
			}},
			{"stranger at the clock", func() error {
				return a.send(a.stranger, n, protocol.ReplicateID,
					&pb.WriteRequest{Claims: []*pb.Claim{wholeRing(at(stranger), now+1000, stranger)}}, refusedReply(t, i, "stranger at the clock"))
			}},
			{"member at the clock", func() error {
				return a.send(a.member.Host(), n, protocol.ReplicateID,
					&pb.WriteRequest{Claims: []*pb.Claim{wholeRing(at(member), now+1000, member)}}, refusedReply(t, i, "member at the clock"))
			}},
			{"member naming the stranger", func() error {
				return a.send(a.member.Host(), n, protocol.ReplicateID,
					&pb.WriteRequest{Claims: []*pb.Claim{wholeRing(at(member), now+1000, stranger)}}, refusedReply(t, i, "member naming the stranger"))
			}},
		} {
			if err := tc.h(); err != nil {
				t.Fatalf("%s to node %d: %v", tc.name, i, err)
			}
		}
	}
	// The issue saw every node lose its claims within 5 s, and its lease
	// for good: watch as long. A node's lease is valid when every one of
	// its 16 positions' is, and under a loaded race detector one of them
	// may lapse for a heartbeat (the test failed so, before the forged
	// claims could matter, 4 runs in 8 on a loaded machine): the claims
	// must stay throughout, the lease must hold at the end, within the
	// failure timeout (5 s; the lease is 3.5 s of it).
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		for i, n := range a.honest {
			if len(n.Status().Shard.Claims) == 0 {
				t.Fatalf("node %d lost its claims after the forged claims: %+v", i, n.Status().Shard)
			}
		}
	}
	for i, n := range a.honest {
		for end := time.Now().Add(5 * time.Second); !ownsSomething(n); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("node %d lost its claims or lease after the forged claims: %+v", i, n.Status().Shard)
			}
		}
	}
	a.check()
}

// refusedReply returns a WriteReply that, once filled in, must say the
// write was refused.
func refusedReply(t *testing.T, node int, what string) *pb.WriteReply {
	r := &pb.WriteReply{}
	t.Cleanup(func() {
		if r.Refused == "" && r.Error == "" {
			t.Errorf("%s to node %d: the write was not refused (rejected %v)", what, node, r.Rejected)
		}
	})
	return r
}

// TestAdversaryForgedLeave: "A forged ring Leave naming another peer made
// node 0 adopt the attacker as successor." The stranger tells node 0 that
// its successor left, naming itself as the successor to splice in, and
// proposes a third peer as node 0's predecessor. Both are refused, node
// 0's neighbours stay, and the crawl completes.
// Before issue 9: "leave of the successor answered \"\", want a refusal"
// (the notice was taken; stabilization dropped the stranger again only
// because it serves no ring protocol).
func TestAdversaryForgedLeave(t *testing.T) {
	a := startAdversary(t, advOptions{})
	a.seed()
	victim := a.honest[0]
	succ, pred := victim.Ring().Successors()[0], victim.Ring().Predecessor()
	// A neighbour may be any position of a node (virtual nodes: "ID/i"),
	// so the peer goes on the wire as the ring transport puts it: peer
	// ID, position index and the ring ID they give.
	peerOf := func(rp ring.Peer) *pb.Peer {
		id, i, err := p2p.PositionOf(rp)
		if err != nil {
			t.Fatal(err)
		}
		return &pb.Peer{RingId: uint64(rp.ID), PeerId: []byte(id), Position: uint32(i)}
	}
	self := &pb.Peer{RingId: uint64(p2p.RingID(a.stranger.ID())), PeerId: []byte(a.stranger.ID())}
	for _, tc := range []struct {
		name string
		req  *pb.RingRequest
	}{
		{"leave of the successor", &pb.RingRequest{Body: &pb.RingRequest_Leave{Leave: &pb.Leave{
			Leaving: peerOf(succ), Predecessor: peerOf(victim.Ring().Self()), Successors: []*pb.Peer{self}}}}},
		{"notify naming another", &pb.RingRequest{Body: &pb.RingRequest_Notify{Notify: &pb.Notify{Candidate: peerOf(a.honest[1].Ring().Self())}}}},
	} {
		resp := &pb.RingResponse{}
		if err := a.send(a.stranger, victim, protocol.RingID, tc.req, resp); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !strings.Contains(resp.Error, "other than its sender") {
			t.Errorf("%s answered %q, want a refusal", tc.name, resp.Error)
		}
	}
	if got := victim.Ring().Successors()[0]; got != succ {
		t.Fatalf("node 0's successor became %s (was %s)", got, succ)
	}
	if got := victim.Ring().Predecessor(); got != pred {
		t.Fatalf("node 0's predecessor became %s (was %s)", got, pred)
	}
	a.check()
}
