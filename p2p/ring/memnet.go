package ring

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

var (
	// ErrUnreachable is returned by MemNet transports when the target is
	// crashed, unregistered or on the other side of a partition, or when
	// the caller itself is crashed.
	ErrUnreachable = errors.New("memnet: peer unreachable")
	// ErrDropped is returned by MemNet transports for a randomly dropped
	// call (see SetDropRate).
	ErrDropped = errors.New("memnet: message dropped")
)

// MemNet is an in-memory network of ring nodes with fault hooks, for unit
// tests, other packages' tests and the simulator. A call runs the target's
// handler synchronously in the caller's goroutine, which keeps large
// simulations fast and, without SetDelay, deterministic for a
// single-threaded driver. It is safe for concurrent use.
type MemNet struct {
	calls atomic.Int64

	mu       sync.Mutex
	handlers map[string]Handler
	crashed  map[string]bool
	group    map[string]int // nil when not partitioned
	dropRate float64
	delay    time.Duration
	rng      *rand.Rand
}

// NewMemNet returns an empty network whose random drops come from seed.
func NewMemNet(seed int64) *MemNet {
	return &MemNet{
		handlers: make(map[string]Handler),
		crashed:  make(map[string]bool),
		rng:      rand.New(rand.NewPCG(uint64(seed), 0x5eed)),
	}
}

// Register attaches a node's handler at p.Addr, replacing any previous one.
func (m *MemNet) Register(p Peer, h Handler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.handlers[p.Addr] = h
}

// Unregister detaches the handler at addr, as when a process exits after a
// graceful Leave; calls to it fail with ErrUnreachable.
func (m *MemNet) Unregister(addr string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.handlers, addr)
}

// Transport returns the Transport that self uses; its calls are subject to
// the network's faults.
func (m *MemNet) Transport(self Peer) Transport { return &memTransport{net: m, from: self.Addr} }

// Crash makes addr unreachable: calls to it and calls from it fail. The
// node keeps its in-memory state, so Restore models a process that was
// paused or cut off rather than one that lost its disk.
func (m *MemNet) Crash(addr string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.crashed[addr] = true
}

// Restore undoes Crash.
func (m *MemNet) Restore(addr string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.crashed, addr)
}

// Partition splits the network: only peers in the same group can talk. An
// address named in no group can talk to no one.
func (m *MemNet) Partition(groups ...[]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.group = make(map[string]int)
	for i, g := range groups {
		for _, a := range g {
			m.group[a] = i + 1
		}
	}
}

// Heal removes any partition.
func (m *MemNet) Heal() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.group = nil
}

// SetDropRate makes each call fail with probability p, drawn from the
// seeded generator. Half the drops lose the request and half lose the
// reply after the handler ran, since a real caller cannot tell which.
func (m *MemNet) SetDropRate(p float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropRate = p
}

// SetDelay makes every call wait d of real time before it is delivered,
// giving up early if the caller's context ends.
func (m *MemNet) SetDelay(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.delay = d
}

// Calls reports how many calls have been attempted, for message-cost
// measurements.
func (m *MemNet) Calls() int64 { return m.calls.Load() }

// fate is what the network decided for one call.
type fate int

const (
	deliver fate = iota
	dropRequest
	dropReply
)

// Deliver carries one message of another protocol layered on this network
// (the shard layer's transport, say) from one address to another under the
// same faults as ring calls: crashed callers and targets, partitions, random
// drops and delay. It runs call, in the caller's goroutine, unless the
// request is lost, and returns ErrDropped (wrapped) if the reply is lost
// after call ran, exactly as ring calls do. The target need not have a ring
// handler registered; the layer above keeps its own registry. Deliver does
// not count towards Calls, which measures ring traffic.
func (m *MemNet) Deliver(ctx context.Context, from, to string, call func()) error {
	f, err := m.decide(ctx, from, to, false)
	if err != nil {
		return err
	}
	if call != nil {
		call()
	}
	if f == dropReply {
		return fmt.Errorf("%s -> %s: reply: %w", from, to, ErrDropped)
	}
	return nil
}

// Reachable reports whether a message from one address to another would
// get through right now, applying the same faults as Deliver (a random
// drop of either the request or the reply counts as unreachable). It
// returns nil when the message would be delivered.
func (m *MemNet) Reachable(ctx context.Context, from, to string) error {
	return m.Deliver(ctx, from, to, nil)
}

// route decides the fate of a call from one address to another and returns
// the target's handler.
func (m *MemNet) route(ctx context.Context, from, to string) (Handler, fate, error) {
	m.calls.Add(1)
	m.mu.Lock()
	h, ok := m.handlers[to]
	m.mu.Unlock()
	if !ok {
		// A crashed caller or target is the more useful explanation.
		if _, err := m.decide(ctx, from, to, true); err != nil {
			return nil, 0, err
		}
		return nil, 0, fmt.Errorf("%s -> %s: no such peer: %w", from, to, ErrUnreachable)
	}
	f, err := m.decide(ctx, from, to, false)
	if err != nil {
		return nil, 0, err
	}
	return h, f, nil
}

// decide applies the fault model to one message: crash, partition, random
// drop (drawn from the seeded generator) and delay. With checkOnly it
// reports only crash and partition errors, drawing nothing and not waiting.
func (m *MemNet) decide(ctx context.Context, from, to string, checkOnly bool) (fate, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	var err error
	switch {
	case m.crashed[from]:
		err = fmt.Errorf("%s -> %s: caller crashed: %w", from, to, ErrUnreachable)
	case m.crashed[to]:
		err = fmt.Errorf("%s -> %s: target crashed: %w", from, to, ErrUnreachable)
	case m.group != nil && (m.group[from] == 0 || m.group[from] != m.group[to]):
		err = fmt.Errorf("%s -> %s: partitioned: %w", from, to, ErrUnreachable)
	}
	if err != nil || checkOnly {
		m.mu.Unlock()
		return 0, err
	}
	f := deliver
	if m.dropRate > 0 && m.rng.Float64() < m.dropRate {
		f = dropRequest
		if m.rng.IntN(2) == 0 {
			f = dropReply
		}
	}
	delay := m.delay
	m.mu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%s -> %s: %w", from, to, ctx.Err())
		case <-t.C:
		}
	}
	if f == dropRequest {
		return 0, fmt.Errorf("%s -> %s: request: %w", from, to, ErrDropped)
	}
	return f, nil
}

// memTransport is one node's view of a MemNet.
type memTransport struct {
	net  *MemNet
	from string
}

// do delivers one call: run the handler unless the request is lost, then
// report a lost reply as an error even though the handler ran.
func (t *memTransport) do(ctx context.Context, to Peer, handle func(Handler)) error {
	h, f, err := t.net.route(ctx, t.from, to.Addr)
	if err != nil {
		return err
	}
	handle(h)
	if f == dropReply {
		return fmt.Errorf("%s -> %s: reply: %w", t.from, to.Addr, ErrDropped)
	}
	return nil
}

// FindSuccessorStep implements Transport.
func (t *memTransport) FindSuccessorStep(ctx context.Context, to Peer, key ID) (Step, error) {
	var st Step
	err := t.do(ctx, to, func(h Handler) { st = h.HandleFindSuccessorStep(key) })
	if err != nil {
		return Step{}, err
	}
	return st, nil
}

// Neighbours implements Transport.
func (t *memTransport) Neighbours(ctx context.Context, to Peer) (Neighbours, error) {
	var nb Neighbours
	err := t.do(ctx, to, func(h Handler) { nb = h.HandleNeighbours(t.from) })
	if err != nil {
		return Neighbours{}, err
	}
	return nb, nil
}

// Notify implements Transport.
func (t *memTransport) Notify(ctx context.Context, to Peer, candidate Peer) error {
	var herr error
	if err := t.do(ctx, to, func(h Handler) { herr = h.HandleNotify(t.from, candidate) }); err != nil {
		return err
	}
	return herr
}

// Ping implements Transport.
func (t *memTransport) Ping(ctx context.Context, to Peer) error {
	return t.do(ctx, to, func(h Handler) { h.HandlePing() })
}

// Leave implements Transport.
func (t *memTransport) Leave(ctx context.Context, to Peer, notice LeaveNotice) error {
	var herr error
	if err := t.do(ctx, to, func(h Handler) { herr = h.HandleLeave(t.from, notice) }); err != nil {
		return err
	}
	return herr
}
