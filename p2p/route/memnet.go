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
// answer that does not account for every task sent. A batch goes to a
// machine (Router.Plan): the tasks of each of its positions (Task.Owner)
// go to that position's owner, within one delivery, as a node's
// positions share one owner; a position no longer registered (or of
// another machine, which Plan never sends) hands its tasks back.
func (t *memTransport) Send(ctx context.Context, to ring.Peer, tasks []Task) (Result, error) {
	t.net.mu.Lock()
	_, ok := t.net.owners[to.Addr]
	parts := byOwner(Batch{To: to}, tasks)
	acceptors := make([]Acceptor, len(parts))
	for i, p := range parts {
		acceptors[i] = t.net.owners[p.owner.Addr]
	}
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
		for i, p := range parts {
			part, acc := p.tasks, acceptors[i]
			if acc == nil || p.owner.Machine() != to.Machine() {
				res.NotOwned = append(res.NotOwned, part...)
				continue
			}
			r, err := acc.Accept(ctx, slices.Clone(part), false, false)
			if err != nil {
				callErr = err
				return
			}
			if got := r.Count(); got != len(part) {
				callErr = fmt.Errorf("owner %s accounted for %d of %d", p.owner.Addr, got, len(part))
				return
			}
			res.Accepted += r.Accepted
			res.Duplicates += r.Duplicates
			res.NotOwned = append(res.NotOwned, r.NotOwned...)
			res.Rejected = append(res.Rejected, r.Rejected...)
			res.Receipts = append(res.Receipts, r.Receipts...)
		}
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

// FetchHandler is the receiving side of a fetch network: a helper's
// handling of one batch from machine from.
type FetchHandler[Req, Rep any] func(ctx context.Context, from string, req Req) (Rep, error)

// MemFetchNet is an in-memory fetch network (FetchTransport) layered on a
// ring MemNet like MemNet: every batch goes through the ring network's
// fault model (crashed peers, partitions, drops, delay). A batch that
// never reached its helper fails with ErrNoHelper; one whose reply was
// lost fails without it (the helper may have fetched). The helper's
// handler runs in the caller's goroutine.
type MemFetchNet[Req, Rep any] struct {
	net *ring.MemNet

	mu      sync.Mutex
	helpers map[string]FetchHandler[Req, Rep]
}

// NewMemFetchNet returns an empty fetch network over ringNet.
func NewMemFetchNet[Req, Rep any](ringNet *ring.MemNet) *MemFetchNet[Req, Rep] {
	return &MemFetchNet[Req, Rep]{net: ringNet, helpers: make(map[string]FetchHandler[Req, Rep])}
}

// Register attaches the helper at p.Addr, replacing any previous one.
func (n *MemFetchNet[Req, Rep]) Register(p ring.Peer, h FetchHandler[Req, Rep]) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.helpers[p.Addr] = h
}

// Unregister detaches the helper at addr.
func (n *MemFetchNet[Req, Rep]) Unregister(addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.helpers, addr)
}

// Transport returns the FetchTransport self sends with.
func (n *MemFetchNet[Req, Rep]) Transport(self ring.Peer) FetchTransport[Req, Rep] {
	return &memFetchTransport[Req, Rep]{net: n, self: self}
}

type memFetchTransport[Req, Rep any] struct {
	net  *MemFetchNet[Req, Rep]
	self ring.Peer
}

// Connected implements FetchTransport: a registered helper the network
// reaches now.
func (t *memFetchTransport[Req, Rep]) Connected(to ring.Peer) bool {
	t.net.mu.Lock()
	_, ok := t.net.helpers[to.Addr]
	t.net.mu.Unlock()
	return ok
}

// Fetch implements FetchTransport.
func (t *memFetchTransport[Req, Rep]) Fetch(ctx context.Context, to ring.Peer, req Req) (Rep, error) {
	var zero Rep
	t.net.mu.Lock()
	h, ok := t.net.helpers[to.Addr]
	t.net.mu.Unlock()
	if !ok {
		return zero, fmt.Errorf("fetch batch %s -> %s: no helper: %w", t.self.Addr, to.Addr, ErrNoHelper)
	}
	var rep Rep
	var callErr error
	called := false
	err := t.net.net.Deliver(ctx, t.self.Addr, to.Addr, func() {
		called = true
		rep, callErr = h(ctx, t.self.Machine(), req)
	})
	switch {
	case err != nil && !called:
		return zero, fmt.Errorf("fetch batch %s -> %s: %w: %w", t.self.Addr, to.Addr, err, ErrNoHelper)
	case err != nil:
		return zero, fmt.Errorf("fetch batch %s -> %s: reply lost: %w", t.self.Addr, to.Addr, err)
	case callErr != nil:
		return zero, fmt.Errorf("fetch batch %s -> %s: %w", t.self.Addr, to.Addr, callErr)
	}
	return rep, nil
}
