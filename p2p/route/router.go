package route

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// Ring is what the router needs of the ring: this node's position and
// iterative lookups (ring.Node).
type Ring interface {
	Self() ring.Peer
	Lookup(ctx context.Context, key ring.ID) (owner ring.Peer, hops int, err error)
}

// Transport carries a batch of tasks to a remote owner and brings back its
// answer, which accounts for every task.
type Transport interface {
	Send(ctx context.Context, to ring.Peer, tasks []Task) (Result, error)
}

// RetryLater is implemented by a send's error when the owner refused the
// batch for now (the sender spent its quota there): the owner is still
// the owner, and the tasks wait and go to it again.
type RetryLater interface {
	error
	RetryAfter() time.Duration
}

// Incompatible is implemented by a send's error when the owner cannot
// take this node's tasks until an operator acts (the two compute ring keys
// another way, say): the router warns once per owner.
type Incompatible interface {
	error
	Incompatible() bool
}

// Batch is tasks for one owner.
type Batch struct {
	To    ring.Peer
	Tasks []Task
}

// Delivery sums up routing passes.
type Delivery struct {
	Accepted, Duplicates int
	Rejected             []Rejection
	// Undelivered are the tasks to try again later: the lookup or the
	// send failed, or the owner handed them back as not owned.
	Undelivered []Task
}

func (d *Delivery) add(o Delivery) {
	d.Accepted += o.Accepted
	d.Duplicates += o.Duplicates
	d.Rejected = append(d.Rejected, o.Rejected...)
	d.Undelivered = append(d.Undelivered, o.Undelivered...)
}

// MaxHopsCounted is the largest hop count the router's histogram tells
// apart.
const MaxHopsCounted = 16

// Router is the sending side of routing: lookup(key), then send(task,
// owner), per seed 000. A pass (Route, or Plan and Deliver) delivers tasks
// once, with no retries: what it could not deliver comes back, and the
// caller (a durable outbox in a node, the simulator's queue) tries again
// after Backoff.
type Router struct {
	cfg   Config
	ring  Ring
	owner *Owner // this node's own keys are accepted without the network
	send  Transport
	// receipts is cfg.Receipts with its defaults, nil for no check.
	receipts *ReceiptCheck

	mu    sync.Mutex
	cache map[ring.ID]cachedOwner
	// warned holds the owners an Incompatible error was logged for at
	// warning level: once each, not once per batch.
	warned map[string]bool
	// suspects holds, per owner address, until when its tasks go to its
	// successor (receipts.go).
	suspects map[string]time.Time
	// succs holds owners' successors as found for checking receipts.
	succs map[string]cachedSuccs

	routed     atomic.Int64 // tasks delivered to an owner (new or duplicate)
	passes     atomic.Int64 // routing passes (Route calls)
	batches    atomic.Int64 // their batches
	passNanos  atomic.Int64 // their time, summed
	lookups    atomic.Int64
	lookupHops atomic.Int64
	sendErrors atomic.Int64
	throttled  atomic.Int64 // batches owners refused for now (RetryLater)
	unvouched  atomic.Int64 // acknowledgements without enough receipts
	fallbacks  atomic.Int64 // tasks a suspected owner's successor held for it
	hops       [MaxHopsCounted + 1]atomic.Int64
}

type cachedOwner struct {
	peer    ring.Peer
	expires time.Time
}

// warnedMax bounds the owners remembered as warned about.
const warnedMax = 1024

// NewRouter returns the router that looks owners up on r, hands this
// node's own keys to owner and sends the others over send.
func NewRouter(r Ring, owner *Owner, send Transport, cfg Config) *Router {
	rt := &Router{cfg: cfg.WithDefaults(), ring: r, owner: owner, send: send,
		cache: map[ring.ID]cachedOwner{}, warned: map[string]bool{}, suspects: map[string]time.Time{},
		succs: map[string]cachedSuccs{}}
	if cfg.Receipts != nil {
		c := cfg.Receipts.withDefaults()
		rt.receipts = &c
	}
	return rt
}

// Config returns the router's configuration, defaults filled in.
func (r *Router) Config() Config { return r.cfg }

// Route delivers tasks to their owners once. fromOutbox says that the
// tasks come from a durable outbox, which keeps them until they are
// settled: this node then accepts those it owns without a sync (see
// Owner.Accept).
func (r *Router) Route(ctx context.Context, tasks []Task, fromOutbox bool) Delivery {
	start := r.cfg.Clock.Now()
	batches, d := r.Plan(ctx, tasks)
	for _, b := range batches {
		d.add(r.Deliver(ctx, b, fromOutbox))
	}
	r.passes.Add(1)
	r.batches.Add(int64(len(batches)))
	r.passNanos.Add(int64(r.cfg.Clock.Now().Sub(start)))
	return d
}

// Plan looks up the owner of every task's key and groups the tasks into
// batches by the owner's machine, in the order the machines were first
// met, each at most MaxBatch tasks: a machine's ring positions share one
// owner, so one batch (one round trip, one synced accept) carries the
// tasks of all of them. Each task keeps the position found for it
// (Task.Owner), whose receipts vouch for it; a batch's To is the first
// of them. Tasks whose lookup failed come back undelivered.
func (r *Router) Plan(ctx context.Context, tasks []Task) ([]Batch, Delivery) {
	var d Delivery
	// A machine's positions this node counts as its own (Config.Local)
	// go in a batch of their own: this node's owner takes them.
	type dest struct {
		machine string
		local   bool
	}
	groups := map[dest][]Task{}
	first := map[dest]ring.Peer{}
	var order []dest
	for _, t := range tasks {
		to, err := r.lookup(ctx, ring.ID(t.Key))
		if err != nil {
			r.cfg.Logger.Debug("lookup failed", "url", t.URL, "err", err)
			d.Undelivered = append(d.Undelivered, t)
			continue
		}
		m := dest{to.Machine(), r.local(to)}
		if _, ok := groups[m]; !ok {
			order = append(order, m)
			first[m] = to
		}
		t.Owner = to
		groups[m] = append(groups[m], t)
	}
	var out []Batch
	for _, m := range order {
		g := groups[m]
		for len(g) > 0 {
			n := min(len(g), r.cfg.MaxBatch)
			out = append(out, Batch{To: first[m], Tasks: g[:n:n]})
			g = g[n:]
		}
	}
	return out, d
}

// Deliver hands one batch to its owner: this node's own Owner when the
// batch is for this node (any of its ring positions), else over the
// transport. With receipts checked, the tasks of a suspected position go
// to its successors instead, and each position's acknowledged tasks need
// its own replicas' receipts.
func (r *Router) Deliver(ctx context.Context, b Batch, fromOutbox bool) Delivery {
	var d Delivery
	self := r.local(b.To)
	if !self && r.receipts != nil {
		var send []Task
		for _, p := range byOwner(b, b.Tasks) {
			if r.suspected(p.owner) {
				d.add(r.fallback(ctx, p.owner, p.tasks))
			} else {
				send = append(send, p.tasks...)
			}
		}
		if len(send) == 0 {
			return d
		}
		b.Tasks = send
	}
	var res Result
	var err error
	if self {
		// This node's own: seeds its clients were allowed to submit, and
		// links its crawler found.
		res, err = r.owner.Accept(ctx, b.Tasks, true, fromOutbox)
	} else {
		res, err = r.send.Send(ctx, b.To, b.Tasks)
	}
	if err != nil {
		r.failed(b, err)
		d.Undelivered = append(d.Undelivered, b.Tasks...)
		return d
	}
	d.Rejected = append(d.Rejected, res.Rejected...)
	d.Undelivered = append(d.Undelivered, res.NotOwned...)
	if len(res.NotOwned) > 0 {
		r.forget(owners(b, res.NotOwned)...)
	}
	acked := ackedTasks(b.Tasks, res)
	if !self && r.receipts != nil && res.Accepted+res.Duplicates > 0 {
		// Each position's acknowledged tasks, vouched for by its own
		// replicas; the owner's word alone is not an acceptance
		// (receipts.go).
		var vouched []Task
		for _, p := range byOwner(b, acked) {
			if r.vouchedFresh(ctx, p.owner, p.tasks, res) {
				vouched = append(vouched, p.tasks...)
				continue
			}
			r.unvouched.Add(1)
			r.suspect(p.owner)
			r.cfg.Logger.Debug("acknowledgement not vouched for by the owner's replicas", "to", p.owner.Addr, "tasks", len(p.tasks))
			d.add(r.fallback(ctx, p.owner, p.tasks))
		}
		acked = vouched
	}
	r.routed.Add(int64(len(acked)))
	// The owner counts new and duplicate tasks for the whole batch: when
	// a position's part went to its successors instead, the split of the
	// rest is the nearest the counts allow.
	d.Duplicates += min(res.Duplicates, len(acked))
	d.Accepted += len(acked) - min(res.Duplicates, len(acked))
	return d
}

// owners returns the distinct positions tasks of b were found at, in
// the order met.
func owners(b Batch, tasks []Task) []ring.Peer {
	var out []ring.Peer
	for _, t := range tasks {
		if o := ownerOf(b, t); !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

// ownerOf returns the position t was found at, b.To when it has none.
func ownerOf(b Batch, t Task) ring.Peer {
	if t.Owner.IsZero() {
		return b.To
	}
	return t.Owner
}

// part is the tasks of a batch found at one position.
type part struct {
	owner ring.Peer
	tasks []Task
}

// byOwner splits tasks of b by the position each was found at, in the
// order the positions were met (the simulator replays a run exactly).
func byOwner(b Batch, tasks []Task) []part {
	var out []part
	for _, t := range tasks {
		o := ownerOf(b, t)
		i := slices.IndexFunc(out, func(p part) bool { return p.owner == o })
		if i < 0 {
			i = len(out)
			out = append(out, part{owner: o})
		}
		out[i].tasks = append(out[i].tasks, t)
	}
	return out
}

// local reports whether a batch for p is this node's own: p is Self, or
// one of the ring positions Config.Local names, which share its Owner.
func (r *Router) local(p ring.Peer) bool {
	if r.cfg.Local != nil {
		return r.cfg.Local(p)
	}
	return p == r.ring.Self()
}

// failed notes a batch that did not reach its owner.
func (r *Router) failed(b Batch, err error) {
	log := r.cfg.Logger
	// An owner that refused the batch for now is still the owner.
	if later, ok := errors.AsType[RetryLater](err); ok {
		r.throttled.Add(1)
		log.Debug("owner refused tasks for now", "to", b.To.Addr, "tasks", len(b.Tasks), "retry_after", later.RetryAfter())
		return
	}
	r.sendErrors.Add(1)
	r.forget(append(owners(b, b.Tasks), b.To)...)
	if _, ok := errors.AsType[Incompatible](err); ok && r.firstWarning(b.To.Addr) {
		log.Warn("an owner cannot take this node's tasks: links for its keys wait", "to", b.To.Addr, "err", err)
		return
	}
	log.Debug("send failed", "to", b.To.Addr, "tasks", len(b.Tasks), "err", err)
}

// Owner returns the ring position that holds key, through the router's
// short-lived owner cache (Config.OwnerCacheTTL): a helper's check of a
// sender's claim (SlotView.Owner), an owner's lookup of its helper slots.
func (r *Router) Owner(ctx context.Context, key uint64) (ring.Peer, error) {
	return r.lookup(ctx, ring.ID(key))
}

// lookup finds key's owner, through the short-lived cache.
func (r *Router) lookup(ctx context.Context, key ring.ID) (ring.Peer, error) {
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	c, ok := r.cache[key]
	r.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.peer, nil
	}
	p, hops, err := r.ring.Lookup(ctx, key)
	if err != nil {
		return ring.Peer{}, err
	}
	r.lookups.Add(1)
	r.lookupHops.Add(int64(hops))
	r.hops[min(max(hops, 0), MaxHopsCounted)].Add(1)
	r.mu.Lock()
	if len(r.cache) >= r.cfg.OwnerCacheMax {
		clear(r.cache)
	}
	r.cache[key] = cachedOwner{peer: p, expires: now.Add(r.cfg.OwnerCacheTTL)}
	r.mu.Unlock()
	return p, nil
}

// firstWarning reports whether owner was not warned about yet, and notes
// that it now is.
func (r *Router) firstWarning(owner string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.warned[owner] {
		return false
	}
	if len(r.warned) >= warnedMax {
		clear(r.warned)
	}
	r.warned[owner] = true
	return true
}

// forget drops cached ownership pointing at any of ps, after they failed
// or refused.
func (r *Router) forget(ps ...ring.Peer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, c := range r.cache {
		if slices.Contains(ps, c.peer) {
			delete(r.cache, k)
		}
	}
}

// RouterStats are a router's counts so far.
type RouterStats struct {
	Routed     int64 // tasks delivered to an owner (new or duplicate)
	Lookups    int64 // ring lookups made (cache misses)
	LookupHops int64 // their hops, summed
	SendErrors int64 // batches that did not reach their owner
	Throttled  int64 // batches owners refused for now
	// Unvouched counts acknowledgements whose receipts did not vouch for
	// them (Config.Receipts), Fallbacks the tasks a suspected owner's
	// successor held for it instead.
	Unvouched, Fallbacks int64
	// Hops counts lookups by hop count; the last slot holds
	// MaxHopsCounted and more.
	Hops [MaxHopsCounted + 1]int64
	// Passes counts routing passes (Route), Batches their batches (one
	// per owning machine) and PassTime their time, summed: a page's
	// done mark waits for the pass that settles its links, so long passes
	// are what keep marks with their fetcher alone.
	Passes, Batches int64
	PassTime        time.Duration
}

// Stats returns the router's counts so far.
func (r *Router) Stats() RouterStats {
	s := RouterStats{Routed: r.routed.Load(), Lookups: r.lookups.Load(), LookupHops: r.lookupHops.Load(),
		SendErrors: r.sendErrors.Load(), Throttled: r.throttled.Load(),
		Unvouched: r.unvouched.Load(), Fallbacks: r.fallbacks.Load(),
		Passes: r.passes.Load(), Batches: r.batches.Load(), PassTime: time.Duration(r.passNanos.Load())}
	for i := range s.Hops {
		s.Hops[i] = r.hops[i].Load()
	}
	return s
}
