package shard

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// MemNet is an in-memory network of shard handlers layered on a ring
// MemNet: every call goes through the ring network's fault model, so a
// crashed ring peer is unreachable here too, partitions cut both layers
// alike, and random drops and delay apply. Requests and replies are deep
// copied, as a real network would, so no peer can alias another's state.
// A call runs the target's handler in the caller's goroutine.
type MemNet struct {
	net *ring.MemNet

	mu       sync.Mutex
	handlers map[string]Handler
}

// NewMemNet returns an empty shard network over ringNet.
func NewMemNet(ringNet *ring.MemNet) *MemNet {
	return &MemNet{net: ringNet, handlers: make(map[string]Handler)}
}

// Register attaches the handler for p.Addr, replacing any previous one.
func (n *MemNet) Register(p ring.Peer, h Handler) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.handlers[p.Addr] = h
}

// Unregister detaches the handler at addr; calls to it fail with
// ring.ErrUnreachable.
func (n *MemNet) Unregister(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.handlers, addr)
}

// Transport returns the Transport self uses.
func (n *MemNet) Transport(self ring.Peer) Transport { return &memTransport{net: n, self: self} }

type memTransport struct {
	net  *MemNet
	self ring.Peer
}

var _ Transport = (*memTransport)(nil)

func (t *memTransport) do(ctx context.Context, to ring.Peer, call func(Handler)) error {
	t.net.mu.Lock()
	h, ok := t.net.handlers[to.Addr]
	t.net.mu.Unlock()
	if !ok {
		if err := t.net.net.Reachable(ctx, t.self.Addr, to.Addr); err != nil {
			return err
		}
		return fmt.Errorf("%s -> %s: no shard handler: %w", t.self.Addr, to.Addr, ring.ErrUnreachable)
	}
	return t.net.net.Deliver(ctx, t.self.Addr, to.Addr, func() { call(h) })
}

// Replicate implements Transport.
func (t *memTransport) Replicate(ctx context.Context, to ring.Peer, req *WriteRequest) (*WriteReply, error) {
	in := &WriteRequest{Claims: slices.Clone(req.Claims), Records: slices.Clone(req.Records), Hosts: cloneHosts(req.Hosts),
		Held: slices.Clone(req.Held), WantReceipt: req.WantReceipt, Watched: slices.Clone(req.Watched)}
	var out *WriteReply
	err := t.do(ctx, to, func(h Handler) {
		r := h.HandleReplicate(ctx, t.self, in)
		out = &WriteReply{Rejected: slices.Clone(r.Rejected), StoreError: r.StoreError, Refused: r.Refused, Receipt: slices.Clone(r.Receipt)}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Handoff implements Transport.
func (t *memTransport) Handoff(ctx context.Context, to ring.Peer, req *HandoffRequest) (*HandoffReply, error) {
	in := *req
	in.Records, in.Hosts = slices.Clone(req.Records), cloneHosts(req.Hosts)
	var out HandoffReply
	err := t.do(ctx, to, func(h Handler) { out = *h.HandleHandoff(ctx, t.self, &in) })
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Digest implements Transport.
func (t *memTransport) Digest(ctx context.Context, to ring.Peer, req *DigestRequest) (*DigestReply, error) {
	in := *req
	var out *DigestReply
	err := t.do(ctx, to, func(h Handler) {
		r := h.HandleDigest(ctx, t.self, &in)
		out = &DigestReply{Sums: slices.Clone(r.Sums), Witnessed: slices.Clone(r.Witnessed)}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Pull implements Transport.
func (t *memTransport) Pull(ctx context.Context, to ring.Peer, req *PullRequest) (*PullReply, error) {
	in := *req
	var out PullReply
	err := t.do(ctx, to, func(h Handler) {
		r := h.HandlePull(ctx, t.self, &in)
		out = *r
		out.Records, out.Hosts, out.Epochs = slices.Clone(r.Records), cloneHosts(r.Hosts), slices.Clone(r.Epochs)
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

func cloneHosts(hs []HostState) []HostState {
	if hs == nil {
		return nil
	}
	out := make([]HostState, len(hs))
	for i, h := range hs {
		h.Data = bytes.Clone(h.Data)
		out[i] = h
	}
	return out
}
