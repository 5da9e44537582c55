package p2p

import (
	"bytes"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	ma "github.com/multiformats/go-multiaddr"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/internal/fuzzcorpus"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// fuzzHost is the part of a libp2p host the ring transport's decoding
// uses, its identity and its peerstore, without a network.
type fuzzHost struct {
	host.Host // nil: any other use panics
	id        peer.ID
	ps        *fuzzPeerstore
}

func (h *fuzzHost) ID() peer.ID                    { return h.id }
func (h *fuzzHost) Peerstore() peerstore.Peerstore { return h.ps }
func (h *fuzzHost) Addrs() []ma.Multiaddr          { return nil }

// fuzzPeerstore records the addresses a ring message makes the host learn.
type fuzzPeerstore struct {
	peerstore.Peerstore // nil: any other use panics
	added               []learned
}

type learned struct {
	id    peer.ID
	addrs []ma.Multiaddr
	ttl   time.Duration
}

func (p *fuzzPeerstore) AddAddrs(id peer.ID, addrs []ma.Multiaddr, ttl time.Duration) {
	p.added = append(p.added, learned{id, addrs, ttl})
}

func (p *fuzzPeerstore) Addrs(peer.ID) []ma.Multiaddr { return nil }

// fuzzRingHandler answers ring RPCs with fixed peers and records the
// peers the transport hands it.
type fuzzRingHandler struct {
	peers  []ring.Peer
	got    []ring.Peer // every peer of a notify or leave
	calls  int
	method string
}

func (h *fuzzRingHandler) HandleFindSuccessorStep(ring.ID) ring.Step {
	h.calls, h.method = h.calls+1, "step"
	return ring.Step{Found: true, Next: h.peers[0], Successors: h.peers}
}

func (h *fuzzRingHandler) HandleNeighbours(string) ring.Neighbours {
	h.calls, h.method = h.calls+1, "neighbours"
	return ring.Neighbours{Predecessor: h.peers[1], Successors: h.peers}
}

func (h *fuzzRingHandler) HandleNotify(_ string, c ring.Peer) error {
	h.calls, h.method = h.calls+1, "notify"
	h.got = append(h.got, c)
	return nil
}

func (h *fuzzRingHandler) HandlePing() { h.calls, h.method = h.calls+1, "ping" }

func (h *fuzzRingHandler) HandleLeave(_ string, n ring.LeaveNotice) error {
	h.calls, h.method = h.calls+1, "leave"
	h.got = append(h.got, n.Leaving, n.Predecessor)
	h.got = append(h.got, n.Successors...)
	return nil
}

// fuzzPeers returns n peer IDs of deterministic Ed25519 keys.
func fuzzPeers(tb testing.TB, n int) []peer.ID {
	tb.Helper()
	out := make([]peer.ID, n)
	for i := range out {
		_, pub, err := crypto.GenerateEd25519Key(bytes.NewReader(bytes.Repeat([]byte{byte(i + 1)}, 64)))
		if err != nil {
			tb.Fatal(err)
		}
		if out[i], err = peer.IDFromPublicKey(pub); err != nil {
			tb.Fatal(err)
		}
	}
	return out
}

// wirePeer is a peer as a ring message carries it.
func wirePeer(id peer.ID, addrs ...string) *pb.Peer {
	p := &pb.Peer{RingId: uint64(RingID(id)), PeerId: []byte(id)}
	for _, a := range addrs {
		p.Addrs = append(p.Addrs, ma.StringCast(a).Bytes())
	}
	return p
}

// FuzzRingMessages decodes arbitrary bytes as a RingRequest (even kind),
// served by RingTransport.serve, or a RingResponse (odd kind), read as the
// transport's client side reads a step or neighbours. Every peer that
// reaches the ring must be one a peer ID names at the ring position that
// ID gives (docs/protocol.md, Peer): a message naming another position is
// refused. A request is answered with exactly one of error or the body its
// RPC calls for; notify and leave reach the handler only with valid, named
// peers. At most 16 addresses of a peer are learned, never the host's own,
// and none go into the peerstore (see learnedAddrs).
func FuzzRingMessages(f *testing.F) {
	ids := fuzzPeers(f, 3)
	self := ids[2]
	msgs := map[string]proto.Message{
		"find-successor": &pb.RingRequest{Body: &pb.RingRequest_FindSuccessorStep{FindSuccessorStep: &pb.FindSuccessorStep{Key: 42}}},
		"get-neighbours": &pb.RingRequest{Body: &pb.RingRequest_GetNeighbours{GetNeighbours: &pb.GetNeighbours{}}},
		"notify": &pb.RingRequest{Body: &pb.RingRequest_Notify{Notify: &pb.Notify{
			Candidate: wirePeer(ids[0], "/ip4/127.0.0.1/tcp/4001", "/ip6/::1/udp/4001/quic-v1")}}},
		"ping": &pb.RingRequest{Body: &pb.RingRequest_Ping{Ping: &pb.Ping{}}},
		"leave": &pb.RingRequest{Body: &pb.RingRequest_Leave{Leave: &pb.Leave{
			Leaving: wirePeer(ids[0], "/ip4/10.0.0.1/tcp/1"), Predecessor: wirePeer(ids[1]),
			Successors: []*pb.Peer{wirePeer(ids[1], "/dns4/a.test/tcp/4001"), wirePeer(self, "/ip4/127.0.0.1/tcp/2")}}}},
		"notify-forged-position": &pb.RingRequest{Body: &pb.RingRequest_Notify{Notify: &pb.Notify{
			Candidate: &pb.Peer{RingId: 1, PeerId: []byte(ids[0])}}}},
		"step": &pb.RingResponse{Body: &pb.RingResponse_Step{Step: &pb.StepResult{Found: true,
			Next: wirePeer(ids[0], "/ip4/127.0.0.1/tcp/4001"), Successors: []*pb.Peer{wirePeer(ids[1]), wirePeer(ids[0])}}}},
		"neighbours": &pb.RingResponse{Body: &pb.RingResponse_Neighbours{Neighbours: &pb.Neighbours{
			Predecessor: wirePeer(ids[1]), Successors: []*pb.Peer{wirePeer(ids[0], "/ip4/1.2.3.4/tcp/5")}}}},
		"ack":   &pb.RingResponse{Body: &pb.RingResponse_Ack{Ack: &pb.Ack{}}},
		"error": &pb.RingResponse{Error: "notify: bad candidate"},
	}
	seeds := map[string][]any{}
	for name, m := range msgs {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		kind := uint8(0) // a request
		if _, ok := m.(*pb.RingResponse); ok {
			kind = 1
		}
		f.Add(kind, b)
		seeds[name] = []any{kind, b}
	}
	fuzzcorpus.Write(f, func() map[string][]any { return seeds })

	valid := func(t *testing.T, p ring.Peer) {
		t.Helper()
		id, i, err := PositionOf(p)
		if err != nil || p != RingPeerAt(id, i) {
			t.Fatalf("peer %v reached the ring: %v (id gives %s)", p, err, PositionID(id, i))
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		ps := &fuzzPeerstore{}
		h := &fuzzHost{id: self, ps: ps}
		book := newLearnedAddrs(maxLearnedPeers)
		tr := &RingTransport{host: h, streams: &Streams{host: h, learned: book, work: NoRingWork}}
		if kind%2 == 0 {
			var req pb.RingRequest
			if proto.Unmarshal(body, &req) != nil {
				return
			}
			h := &fuzzRingHandler{peers: []ring.Peer{RingPeer(ids[0]), RingPeer(ids[1])}}
			resp := tr.serve([]ring.Handler{h}, ids[0], &req)
			want := map[string]string{"step": "step", "neighbours": "neighbours", "notify": "ack", "ping": "ack", "leave": "ack"}[h.method]
			switch got := resp.ProtoReflect().WhichOneof(resp.ProtoReflect().Descriptor().Oneofs().Get(0)); {
			case (resp.Error == "") == (got == nil):
				t.Fatalf("response with error %q and body %v", resp.Error, got)
			case resp.Error != "" && h.calls != 0:
				t.Fatalf("request %v refused (%s) after the handler's %s", &req, resp.Error, h.method)
			case resp.Error == "" && (h.calls != 1 || string(got.Name()) != want):
				t.Fatalf("request %v: %d handler calls (%s), answered with %s", &req, h.calls, h.method, got.Name())
			}
			for _, p := range h.got[:min(len(h.got), 1)] {
				if p.IsZero() {
					t.Fatalf("%s reached the handler without its peer", h.method)
				}
			}
			for _, p := range h.got {
				if !p.IsZero() {
					valid(t, p)
				}
			}
			if h.method == "leave" {
				for _, p := range h.got[2:] {
					if p.IsZero() {
						t.Fatal("a leave notice lists an empty successor")
					}
				}
			}
		} else {
			var resp pb.RingResponse
			if proto.Unmarshal(body, &resp) != nil {
				return
			}
			if st := resp.GetStep(); st != nil {
				next, err := tr.decodePeer(st.Next)
				if err == nil && !next.IsZero() {
					valid(t, next)
				}
				succs, err := tr.decodePeers(st.Successors)
				checkDecodedPeers(t, succs, err, st.Successors, valid)
			}
			if nb := resp.GetNeighbours(); nb != nil {
				pred, err := tr.decodePeer(nb.Predecessor)
				if err == nil && !pred.IsZero() {
					valid(t, pred)
				}
				if (err == nil) && nb.Predecessor != nil && pred.IsZero() {
					t.Fatalf("predecessor %v decoded as none", nb.Predecessor)
				}
				succs, err := tr.decodePeers(nb.Successors)
				checkDecodedPeers(t, succs, err, nb.Successors, valid)
			}
		}
		if len(ps.added) > 0 {
			t.Fatalf("a ring message put addresses of %s in the peerstore", ps.added[0].id)
		}
		for id, el := range book.peers {
			if e := el.Value.(*learnedEntry); id == self || len(e.addrs) > maxAddrsPerPeer {
				t.Fatalf("learned %d addresses of %s (self %s)", len(e.addrs), id, self)
			}
		}
	})
}

// checkDecodedPeers checks what decodePeers made of a list: on success,
// every listed peer, each valid, and none of the absent ones.
func checkDecodedPeers(t *testing.T, got []ring.Peer, err error, in []*pb.Peer, valid func(*testing.T, ring.Peer)) {
	t.Helper()
	if err != nil {
		return
	}
	present := 0
	for _, p := range in {
		if p != nil {
			present++
		}
	}
	if len(got) != present {
		t.Fatalf("%d peers decoded from a list of %d", len(got), present)
	}
	for _, p := range got {
		if p.IsZero() {
			t.Fatal("an empty peer in a decoded list")
		}
		valid(t, p)
	}
}
