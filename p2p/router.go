package p2p

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// Router tuning.
const (
	ownerCacheTTL   = 5 * time.Second
	ownerCacheMax   = 100_000
	routeChunk      = 5_000 // tasks taken from the outbox per pass
	retryBackoffMin = 100 * time.Millisecond
	retryBackoffMax = 10 * time.Second
	warnAttempts    = 10
)

// sendFunc delivers tasks to a remote owner.
type sendFunc func(ctx context.Context, to ring.Peer, tasks []crawl.Task) (acceptResult, error)

// router is the sending side: lookup(key) then send(task, owner), per seed
// 000. Tasks it cannot deliver yet wait in an outbox and are retried with
// backoff; a task leaves the outbox only once an owner has accepted it,
// reported it a duplicate, or rejected it as malformed.
type router struct {
	ring    *ring.Node
	owner   *owner
	send    sendFunc
	keyMode crawl.KeyMode
	log     *slog.Logger
	// db keeps the outbox durable: a task is written there before the
	// crawler forgets the page it came from and deleted once an owner has
	// settled it, so a crash loses no discovered link.
	db *store.DB

	mu         sync.Mutex
	outbox     []pending
	delivering int // tasks taken from the outbox and not yet settled
	// live holds the outbox entries not yet settled; pageLinks the entries
	// of each page's links, until the node asks for them (TakeLinks).
	live      map[uint64]struct{}
	pageLinks map[string][]uint64
	cache     map[ring.ID]cachedOwner
	wake      chan struct{}

	routed     atomic.Int64 // tasks delivered to an owner (new or duplicate)
	lookups    atomic.Int64
	lookupHops atomic.Int64
	sendErrors atomic.Int64
}

type pending struct {
	id        uint64 // outbox entry in the store
	task      crawl.Task
	attempts  int
	notBefore time.Time
}

type cachedOwner struct {
	peer    ring.Peer
	expires time.Time
}

func newRouter(r *ring.Node, o *owner, db *store.DB, send sendFunc, mode crawl.KeyMode, log *slog.Logger) *router {
	return &router{ring: r, owner: o, db: db, send: send, keyMode: mode, log: log,
		cache: map[ring.ID]cachedOwner{}, wake: make(chan struct{}, 1),
		live: map[uint64]struct{}{}, pageLinks: map[string][]uint64{}}
}

// Load puts the tasks a previous run left undelivered back in the outbox.
func (r *router) Load() (int, error) {
	var loaded []pending
	err := r.db.ScanOutbox(func(e store.OutboxEntry) error {
		loaded = append(loaded, pending{id: e.ID, task: crawl.Task{URL: e.URL, Depth: e.Depth, Redirects: e.Redirects}, attempts: e.Attempts})
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("load outbox: %w", err)
	}
	r.mu.Lock()
	r.outbox = append(r.outbox, loaded...)
	for _, p := range loaded {
		r.live[p.id] = struct{}{}
	}
	r.mu.Unlock()
	return len(loaded), nil
}

// routeResult sums up one routing pass.
type routeResult struct {
	acceptResult
	undelivered []crawl.Task // lookup or send failed, or the owner moved
}

// Route delivers tasks to their owners once: no retries. Tasks it could
// not deliver come back in undelivered.
func (r *router) Route(ctx context.Context, tasks []crawl.Task) routeResult {
	var res routeResult
	groups := map[ring.Peer][]crawl.Task{}
	var order []ring.Peer
	for _, t := range tasks {
		key, err := crawl.TaskKey(t.URL, r.keyMode)
		if err != nil {
			res.rejected = append(res.rejected, rejection{t.URL, err.Error()})
			continue
		}
		to, err := r.lookup(ctx, ring.ID(key))
		if err != nil {
			r.log.Debug("lookup failed", "url", t.URL, "err", err)
			res.undelivered = append(res.undelivered, t)
			continue
		}
		if _, ok := groups[to]; !ok {
			order = append(order, to)
		}
		groups[to] = append(groups[to], t)
	}
	self := r.ring.Self()
	for _, to := range order {
		group := groups[to]
		for len(group) > 0 {
			n := min(len(group), protocol.MaxBatchTasks)
			chunk := group[:n]
			group = group[n:]
			var ar acceptResult
			var err error
			if to == self {
				ar, err = r.owner.Accept(ctx, chunk)
			} else {
				ar, err = r.send(ctx, to, chunk)
			}
			if err != nil {
				r.sendErrors.Add(1)
				r.forget(to)
				r.log.Debug("send failed", "to", to.Addr, "tasks", len(chunk), "err", err)
				res.undelivered = append(res.undelivered, chunk...)
				continue
			}
			if len(ar.notOwned) > 0 {
				r.forget(to)
			}
			r.routed.Add(int64(ar.accepted + ar.duplicates))
			res.accepted += ar.accepted
			res.duplicates += ar.duplicates
			res.rejected = append(res.rejected, ar.rejected...)
			res.undelivered = append(res.undelivered, ar.notOwned...)
		}
	}
	return res
}

// lookup finds key's owner, through a short-lived cache: consecutive links
// mostly point to the same few hosts, and a stale entry costs only a
// not-owned answer and a second lookup.
func (r *router) lookup(ctx context.Context, key ring.ID) (ring.Peer, error) {
	now := time.Now()
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
	r.mu.Lock()
	if len(r.cache) >= ownerCacheMax {
		clear(r.cache)
	}
	r.cache[key] = cachedOwner{peer: p, expires: now.Add(ownerCacheTTL)}
	r.mu.Unlock()
	return p, nil
}

// forget drops cached ownership pointing at p, after p failed or refused.
func (r *router) forget(p ring.Peer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, c := range r.cache {
		if c.peer == p {
			delete(r.cache, k)
		}
	}
}

// Defer puts tasks in the outbox for the delivery loop, after attempts
// failed deliveries.
func (r *router) Defer(tasks []crawl.Task, attempts int) {
	r.add(tasks, attempts, time.Now().Add(backoff(attempts)))
}

// Discovered implements crawl.LinkSink: links found by this node's crawler
// go through the outbox so fetch workers never wait on the network.
func (r *router) Discovered(_ context.Context, page crawl.Task, links []crawl.Task) {
	ids := r.add(links, 0, time.Now())
	if len(ids) == 0 {
		return
	}
	r.mu.Lock()
	r.pageLinks[page.URL] = append(r.pageLinks[page.URL], ids...)
	r.mu.Unlock()
}

// TakeLinks returns (and forgets) the outbox entries of the links found on
// page.
func (r *router) TakeLinks(page string) []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := r.pageLinks[page]
	delete(r.pageLinks, page)
	return ids
}

// Settled reports whether every one of the outbox entries ids has been
// settled with an owner (accepted, duplicate or rejected).
func (r *router) Settled(ids []uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		if _, ok := r.live[id]; ok {
			return false
		}
	}
	return true
}

// add records tasks in the durable outbox and queues them for delivery.
// If the store refuses them they are still delivered from memory: only
// the crash protection is lost, and the log says so.
func (r *router) add(tasks []crawl.Task, attempts int, notBefore time.Time) []uint64 {
	if len(tasks) == 0 {
		return nil
	}
	entries := make([]store.OutboxEntry, len(tasks))
	for i, t := range tasks {
		entries[i] = store.OutboxEntry{URL: t.URL, Depth: t.Depth, Redirects: t.Redirects, Attempts: attempts}
	}
	if err := r.db.PutOutbox(entries); err != nil {
		r.log.Error("outbox not persisted; links will be lost if the node crashes", "tasks", len(tasks), "err", err)
	}
	var ids []uint64
	r.mu.Lock()
	for i, t := range tasks {
		r.outbox = append(r.outbox, pending{id: entries[i].ID, task: t, attempts: attempts, notBefore: notBefore})
		if id := entries[i].ID; id != 0 {
			r.live[id] = struct{}{}
			ids = append(ids, id)
		}
	}
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return ids
}

// Pending is the number of tasks not yet settled with an owner.
func (r *router) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.outbox) + r.delivering
}

// Run delivers the outbox until ctx is done.
func (r *router) Run(ctx context.Context) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-tick.C:
		}
		for ctx.Err() == nil {
			due, more := r.takeDue(routeChunk)
			if len(due) == 0 {
				break
			}
			r.deliver(ctx, due)
			if !more {
				break
			}
		}
	}
}

// takeDue removes up to max due tasks from the outbox.
func (r *router) takeDue(max int) (due []pending, more bool) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	keep := r.outbox[:0]
	for _, p := range r.outbox {
		if len(due) < max && !now.Before(p.notBefore) {
			due = append(due, p)
		} else {
			keep = append(keep, p)
		}
	}
	clear(r.outbox[len(keep):])
	r.outbox = keep
	r.delivering += len(due)
	return due, len(due) == max
}

func (r *router) deliver(ctx context.Context, due []pending) {
	tasks := make([]crawl.Task, len(due))
	for i, p := range due {
		tasks[i] = p.task
	}
	res := r.Route(ctx, tasks)
	for _, rj := range res.rejected {
		r.log.Debug("task rejected", "url", rj.url, "reason", rj.reason)
	}
	// Match undelivered tasks back to their outbox entries; everything
	// else is settled (accepted, duplicate or rejected) and leaves the store.
	left := map[string]int{}
	for _, t := range res.undelivered {
		left[t.URL]++
	}
	var settled []uint64
	var retry []pending
	for _, p := range due {
		if left[p.task.URL] > 0 {
			left[p.task.URL]--
			retry = append(retry, p)
		} else if p.id != 0 {
			settled = append(settled, p.id)
		}
	}
	if len(settled) > 0 {
		if err := r.db.DeleteOutbox(settled); err != nil {
			r.log.Warn("outbox cleanup failed; tasks may be delivered again after a restart", "err", err)
		}
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delivering -= len(due)
	for _, id := range settled {
		delete(r.live, id)
	}
	for _, p := range retry {
		p.attempts++
		if p.attempts == warnAttempts {
			r.log.Warn("task still undelivered", "url", p.task.URL, "attempts", p.attempts)
		}
		p.notBefore = now.Add(backoff(p.attempts))
		r.outbox = append(r.outbox, p)
	}
}

// backoff is exponential with full jitter, so many nodes retrying a dead
// owner do not come back in lockstep.
func backoff(attempts int) time.Duration {
	if attempts <= 0 {
		return 0
	}
	d := retryBackoffMin << min(attempts-1, 16)
	if d > retryBackoffMax {
		d = retryBackoffMax
	}
	return d/2 + rand.N(d/2+1)
}
