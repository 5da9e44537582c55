package route

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// Acceptor is the receiving side of a task transport: Owner.
type Acceptor interface {
	Accept(ctx context.Context, tasks []Task, seeder, fromOutbox bool) (Result, error)
}

// MemNet is an in-memory task network layered on a ring MemNet, as the
// shard layer's is: every batch goes through the ring network's fault
// model (crashed peers, partitions, random drops of the request or of the
// reply, delay), so a test or the simulator breaks all three layers alike.
// Tasks are copied both ways, as a real network would. A send runs the
// owner's Accept in the caller's goroutine; senders are members, never
// seeders, as over libp2p between peers.
type MemNet struct {
	net *ring.MemNet

	mu     sync.Mutex
	owners map[string]Acceptor
}

// NewMemNet returns an empty task network over ringNet.
func NewMemNet(ringNet *ring.MemNet) *MemNet {
	return &MemNet{net: ringNet, owners: make(map[string]Acceptor)}
}

// Register attaches the owner at p.Addr, replacing any previous one.
func (n *MemNet) Register(p ring.Peer, a Acceptor) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.owners[p.Addr] = a
}

// Unregister detaches the owner at addr; sends to it fail with
// ring.ErrUnreachable.
func (n *MemNet) Unregister(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.owners, addr)
}

// Transport returns the Transport self sends with.
func (n *MemNet) Transport(self ring.Peer) Transport { return &memTransport{net: n, self: self} }

type memTransport struct {
	net  *MemNet
	self ring.Peer
}

// Send implements Transport. Like the libp2p transport, it refuses an
// answer that does not account for every task sent.
func (t *memTransport) Send(ctx context.Context, to ring.Peer, tasks []Task) (Result, error) {
	t.net.mu.Lock()
	a, ok := t.net.owners[to.Addr]
	t.net.mu.Unlock()
	if !ok {
		if err := t.net.net.Reachable(ctx, t.self.Addr, to.Addr); err != nil {
			return Result{}, fmt.Errorf("send %d tasks: %w", len(tasks), err)
		}
		return Result{}, fmt.Errorf("send %d tasks: %s -> %s: no owner: %w", len(tasks), t.self.Addr, to.Addr, ring.ErrUnreachable)
	}
	var res Result
	var callErr error
	err := t.net.net.Deliver(ctx, t.self.Addr, to.Addr, func() {
		res, callErr = a.Accept(ctx, slices.Clone(tasks), false, false)
	})
	if err == nil {
		err = callErr
	}
	if err != nil {
		return Result{}, fmt.Errorf("send %d tasks: %w", len(tasks), err)
	}
	if got := res.Count(); got != len(tasks) {
		return Result{}, fmt.Errorf("send %d tasks: owner %s accounted for %d", len(tasks), to.Addr, got)
	}
	res.NotOwned = slices.Clone(res.NotOwned)
	res.Rejected = slices.Clone(res.Rejected)
	res.Receipts = slices.Clone(res.Receipts)
	return res, nil
}

// HolderAcceptor is the receiving side of a fallback (Owner.AcceptFor).
type HolderAcceptor interface {
	AcceptFor(ctx context.Context, tasks []Task, owner string) (Result, error)
}

var _ FallbackTransport = (*memTransport)(nil)

// SendFor implements FallbackTransport: to holds tasks for owner.
func (t *memTransport) SendFor(ctx context.Context, to, owner ring.Peer, tasks []Task) (Result, error) {
	t.net.mu.Lock()
	a, ok := t.net.owners[to.Addr]
	t.net.mu.Unlock()
	h, isHolder := a.(HolderAcceptor)
	if !ok || !isHolder {
		if err := t.net.net.Reachable(ctx, t.self.Addr, to.Addr); err != nil {
			return Result{}, fmt.Errorf("send %d tasks for %s: %w", len(tasks), owner.Addr, err)
		}
		return Result{}, fmt.Errorf("send %d tasks for %s: %s -> %s: no holder: %w", len(tasks), owner.Addr, t.self.Addr, to.Addr, ring.ErrUnreachable)
	}
	var res Result
	var callErr error
	err := t.net.net.Deliver(ctx, t.self.Addr, to.Addr, func() {
		res, callErr = h.AcceptFor(ctx, slices.Clone(tasks), owner.Addr)
	})
	if err == nil {
		err = callErr
	}
	if err != nil {
		return Result{}, fmt.Errorf("send %d tasks for %s: %w", len(tasks), owner.Addr, err)
	}
	if got := res.Count(); got != len(tasks) {
		return Result{}, fmt.Errorf("send %d tasks for %s: %s accounted for %d", len(tasks), owner.Addr, to.Addr, got)
	}
	res.NotOwned = slices.Clone(res.NotOwned)
	res.Rejected = slices.Clone(res.Rejected)
	return res, nil
}
