package p2p

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// RingTransport carries ring RPCs over libp2p streams. It implements
// ring.Transport. Peers travel with their multiaddrs, so a node can dial
// successors and fingers it has only heard of.
type RingTransport struct {
	host    host.Host
	streams *Streams
	// local holds the handlers of this node's positions once Serve ran:
	// a call from one of its positions to another is served in process
	// (a libp2p host cannot dial itself).
	local atomic.Pointer[[]ring.Handler]
}

var _ ring.Transport = (*RingTransport)(nil)

// NewRingTransport returns the ring transport of h.
func NewRingTransport(h host.Host, s *Streams) *RingTransport {
	return &RingTransport{host: h, streams: s}
}

// Serve answers ring RPCs for the node's ring positions: hs[i] is
// position i (RingPeerAt), nil where the node holds no position i, hs[0]
// the position its peer ID gives. A request goes to the position it names
// (RingRequest.to_position); one naming a position the node does not have
// is refused.
func (t *RingTransport) Serve(hs ...ring.Handler) {
	if len(hs) == 0 || len(hs) > MaxPositions {
		panic(fmt.Sprintf("ring transport: %d positions, want 1 to %d", len(hs), MaxPositions))
	}
	t.local.Store(&hs)
	t.streams.Handle(protocol.RingID,
		func() proto.Message { return &pb.RingRequest{} },
		func(_ context.Context, in Inbound, m proto.Message) proto.Message {
			return t.serve(hs, in.From, m.(*pb.RingRequest))
		})
}

func (t *RingTransport) serve(hs []ring.Handler, sender peer.ID, req *pb.RingRequest) *pb.RingResponse {
	fail := func(err error) *pb.RingResponse { return &pb.RingResponse{Error: err.Error()} }
	ack := &pb.RingResponse{Body: &pb.RingResponse_Ack{Ack: &pb.Ack{}}}
	if req.ToPosition >= uint32(len(hs)) || hs[req.ToPosition] == nil {
		return fail(fmt.Errorf("no ring position %d here", req.ToPosition))
	}
	if req.FromPosition >= MaxPositions {
		return fail(fmt.Errorf("sender position %d: at most %d", req.FromPosition, MaxPositions-1))
	}
	h := hs[req.ToPosition]
	// The sender speaks for one of its own positions: a notify or a leave
	// names that position, never another peer's.
	from := RingPeerAt(sender, int(req.FromPosition)).Addr
	switch b := req.Body.(type) {
	case *pb.RingRequest_FindSuccessorStep:
		if b.FindSuccessorStep == nil {
			return fail(errors.New("find successor step: empty"))
		}
		st := h.HandleFindSuccessorStep(ring.ID(b.FindSuccessorStep.Key))
		return &pb.RingResponse{Body: &pb.RingResponse_Step{Step: &pb.StepResult{
			Found: st.Found, Next: t.encodePeer(st.Next), Successors: t.encodePeers(st.Successors),
		}}}
	case *pb.RingRequest_GetNeighbours:
		nb := h.HandleNeighbours(from)
		return &pb.RingResponse{Body: &pb.RingResponse_Neighbours{Neighbours: &pb.Neighbours{
			Predecessor: t.encodePeer(nb.Predecessor), Successors: t.encodePeers(nb.Successors),
		}}}
	case *pb.RingRequest_Notify:
		cand, err := t.decodePeer(b.Notify.GetCandidate())
		if err != nil || cand.IsZero() {
			return fail(fmt.Errorf("notify: bad candidate: %v", err))
		}
		if err := h.HandleNotify(from, cand); err != nil {
			return fail(err)
		}
		return ack
	case *pb.RingRequest_Ping:
		h.HandlePing()
		return ack
	case *pb.RingRequest_Leave:
		notice, err := t.decodeLeave(b.Leave)
		if err != nil {
			return fail(err)
		}
		if err := h.HandleLeave(from, notice); err != nil {
			return fail(err)
		}
		return ack
	default:
		return fail(errors.New("unknown ring request"))
	}
}

func (t *RingTransport) call(ctx context.Context, to ring.Peer, req *pb.RingRequest) (*pb.RingResponse, error) {
	id, i, err := PositionOf(to)
	if err != nil {
		return nil, err
	}
	req.ToPosition = uint32(i)
	if id == t.host.ID() {
		// One of this node's positions calls another: served here, with
		// the checks a remote call gets, but no stream.
		hs := t.local.Load()
		if hs == nil {
			return nil, fmt.Errorf("ring position %s: %w", to, ErrNotDelivered)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		resp := t.serve(*hs, id, req)
		if resp.Error != "" {
			return nil, fmt.Errorf("ring position %s: %s", to, resp.Error)
		}
		return resp, nil
	}
	resp := &pb.RingResponse{}
	if err := t.streams.Call(ctx, id, protocol.RingID, req, resp); err != nil {
		return nil, err
	}
	if resp.Error != "" {
		return nil, fmt.Errorf("ring peer %s: %s", ShortID(id), resp.Error)
	}
	return resp, nil
}

// FindSuccessorStep implements ring.Transport.
func (t *RingTransport) FindSuccessorStep(ctx context.Context, to ring.Peer, key ring.ID) (ring.Step, error) {
	resp, err := t.call(ctx, to, &pb.RingRequest{Body: &pb.RingRequest_FindSuccessorStep{
		FindSuccessorStep: &pb.FindSuccessorStep{Key: uint64(key)}}})
	if err != nil {
		return ring.Step{}, err
	}
	st := resp.GetStep()
	if st == nil {
		return ring.Step{}, errors.New("find successor step: response has no step")
	}
	next, err := t.decodePeer(st.Next)
	if err != nil || next.IsZero() {
		return ring.Step{}, fmt.Errorf("find successor step: bad next hop: %v", err)
	}
	succs, err := t.decodePeers(st.Successors)
	if err != nil {
		return ring.Step{}, fmt.Errorf("find successor step: %w", err)
	}
	return ring.Step{Found: st.Found, Next: next, Successors: succs}, nil
}

// Neighbours implements ring.Transport.
func (t *RingTransport) Neighbours(ctx context.Context, to ring.Peer) (ring.Neighbours, error) {
	resp, err := t.call(ctx, to, &pb.RingRequest{Body: &pb.RingRequest_GetNeighbours{GetNeighbours: &pb.GetNeighbours{}}})
	if err != nil {
		return ring.Neighbours{}, err
	}
	nb := resp.GetNeighbours()
	if nb == nil {
		return ring.Neighbours{}, errors.New("neighbours: response has no neighbours")
	}
	pred, err := t.decodePeer(nb.Predecessor)
	if err != nil {
		return ring.Neighbours{}, fmt.Errorf("neighbours: predecessor: %w", err)
	}
	succs, err := t.decodePeers(nb.Successors)
	if err != nil {
		return ring.Neighbours{}, fmt.Errorf("neighbours: %w", err)
	}
	return ring.Neighbours{Predecessor: pred, Successors: succs}, nil
}

// Notify implements ring.Transport: candidate is one of this node's
// positions, and the request says which.
func (t *RingTransport) Notify(ctx context.Context, to ring.Peer, candidate ring.Peer) error {
	_, err := t.call(ctx, to, &pb.RingRequest{Body: &pb.RingRequest_Notify{Notify: &pb.Notify{Candidate: t.encodePeer(candidate)}},
		FromPosition: positionIndex(candidate)})
	return err
}

// positionIndex is the index of one of this node's positions, 0 if p is
// not one.
func positionIndex(p ring.Peer) uint32 {
	_, i, err := PositionOf(p)
	if err != nil {
		return 0
	}
	return uint32(i)
}

// Ping implements ring.Transport.
func (t *RingTransport) Ping(ctx context.Context, to ring.Peer) error {
	_, err := t.call(ctx, to, &pb.RingRequest{Body: &pb.RingRequest_Ping{Ping: &pb.Ping{}}})
	return err
}

// Leave implements ring.Transport.
func (t *RingTransport) Leave(ctx context.Context, to ring.Peer, n ring.LeaveNotice) error {
	_, err := t.call(ctx, to, &pb.RingRequest{Body: &pb.RingRequest_Leave{Leave: &pb.Leave{
		Leaving: t.encodePeer(n.Leaving), Predecessor: t.encodePeer(n.Predecessor), Successors: t.encodePeers(n.Successors),
	}}, FromPosition: positionIndex(n.Leaving)})
	return err
}

func (t *RingTransport) decodeLeave(l *pb.Leave) (ring.LeaveNotice, error) {
	if l == nil {
		return ring.LeaveNotice{}, errors.New("leave: empty")
	}
	leaving, err := t.decodePeer(l.Leaving)
	if err != nil || leaving.IsZero() {
		return ring.LeaveNotice{}, fmt.Errorf("leave: bad leaving peer: %v", err)
	}
	pred, err := t.decodePeer(l.Predecessor)
	if err != nil {
		return ring.LeaveNotice{}, fmt.Errorf("leave: predecessor: %w", err)
	}
	succs, err := t.decodePeers(l.Successors)
	if err != nil {
		return ring.LeaveNotice{}, fmt.Errorf("leave: %w", err)
	}
	return ring.LeaveNotice{Leaving: leaving, Predecessor: pred, Successors: succs}, nil
}

// encodePeer puts a ring peer on the wire with the addresses this host
// knows for it. The zero peer encodes as nil.
func (t *RingTransport) encodePeer(p ring.Peer) *pb.Peer {
	if p.IsZero() {
		return nil
	}
	id, i, err := PositionOf(p)
	if err != nil {
		return nil
	}
	var addrs []ma.Multiaddr
	if id == t.host.ID() {
		addrs = t.host.Addrs()
	} else {
		addrs = t.streams.addrsOf(id)
	}
	out := &pb.Peer{RingId: uint64(p.ID), PeerId: []byte(id), Position: uint32(i)}
	for i, a := range addrs {
		if i == maxAddrsPerPeer {
			break
		}
		out.Addrs = append(out.Addrs, a.Bytes())
	}
	return out
}

func (t *RingTransport) encodePeers(ps []ring.Peer) []*pb.Peer {
	out := make([]*pb.Peer, 0, len(ps))
	for _, p := range ps {
		if e := t.encodePeer(p); e != nil {
			out = append(out, e)
		}
	}
	return out
}

// decodePeer checks a peer from the wire and records its addresses (in
// the Streams' book of learned addresses, not the peerstore). The
// ring position must be the one derived from the peer ID: a message that
// claims another position is refused, so no node can place itself (or
// anyone else) at a chosen point of the ring. A peer whose identity lacks
// the swarm's ring work is no member: refused alone (ErrNoRingWork), left
// out of a list (decodePeers).
func (t *RingTransport) decodePeer(p *pb.Peer) (ring.Peer, error) {
	if p == nil {
		return ring.Peer{}, nil
	}
	id, err := peer.IDFromBytes(p.PeerId)
	if err != nil {
		return ring.Peer{}, fmt.Errorf("peer id: %w", err)
	}
	if p.Position >= MaxPositions {
		return ring.Peer{}, fmt.Errorf("peer %s: position %d, at most %d", ShortID(id), p.Position, MaxPositions-1)
	}
	rp := RingPeerAt(id, int(p.Position))
	if uint64(rp.ID) != p.RingId {
		return ring.Peer{}, fmt.Errorf("peer %s claims ring position %016x, its id gives %s", ShortID(id), p.RingId, rp.ID)
	}
	if !t.streams.work.Admits(id) {
		return ring.Peer{}, fmt.Errorf("peer %s: %w (%d bits, the swarm asks %d)", ShortID(id), ErrNoRingWork, WorkOf(id), t.streams.work.Bits())
	}
	if id != t.host.ID() && len(p.Addrs) > 0 {
		addrs := make([]ma.Multiaddr, 0, len(p.Addrs))
		for i, raw := range p.Addrs {
			if i == maxAddrsPerPeer {
				break
			}
			if a, err := ma.NewMultiaddrBytes(raw); err == nil {
				addrs = append(addrs, a)
			}
		}
		t.streams.learned.learn(id, addrs, time.Now())
	}
	return rp, nil
}

func (t *RingTransport) decodePeers(ps []*pb.Peer) ([]ring.Peer, error) {
	out := make([]ring.Peer, 0, len(ps))
	for _, p := range ps {
		rp, err := t.decodePeer(p)
		if errors.Is(err, ErrNoRingWork) {
			continue // not a member: left out of the list
		}
		if err != nil {
			return nil, err
		}
		if !rp.IsZero() {
			out = append(out, rp)
		}
	}
	return out, nil
}
