package node

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol"
)

// Router tuning.
const (
	ownerCacheTTL = 5 * time.Second
	ownerCacheMax = 100_000
	routeChunk    = 5_000 // tasks taken from the outbox per pass
	// routeGather is how long the router lets new links gather before it
	// delivers them: a few ms, small beside any politeness gap.
	routeGather     = 5 * time.Millisecond
	retryBackoffMin = 100 * time.Millisecond
	retryBackoffMax = 10 * time.Second
	warnAttempts    = 10
)

// sendFunc delivers tasks to a remote owner.
type sendFunc func(ctx context.Context, to ring.Peer, tasks []frontier.Task) (acceptResult, error)

// router is the sending side: lookup(key) then send(task, owner), per seed
// 000. It delivers the outbox: tasks it cannot deliver yet go back there
// and are retried with backoff.
type router struct {
	ring    *ring.Node
	owner   *owner // this node's own keys are accepted without the network
	send    sendFunc
	outbox  *outbox
	keyMode urls.KeyMode
	log     *slog.Logger

	mu    sync.Mutex
	cache map[ring.ID]cachedOwner
	// keyModeWarned holds the owners a key mode mismatch was logged for
	// at warning level: once each, not once per batch.
	keyModeWarned map[string]bool

	routed     atomic.Int64 // tasks delivered to an owner (new or duplicate)
	lookups    atomic.Int64
	lookupHops atomic.Int64
	sendErrors atomic.Int64
	throttled  atomic.Int64 // batches owners refused for now (quota)
	// hops counts lookups by their hop count, the last slot holding
	// maxHopsCounted and more (the metrics' lookup hops histogram).
	hops [maxHopsCounted + 1]atomic.Int64
}

// maxHopsCounted is the largest hop count the histogram tells apart.
const maxHopsCounted = 16

type cachedOwner struct {
	peer    ring.Peer
	expires time.Time
}

func newRouter(r *ring.Node, o *owner, send sendFunc, out *outbox, mode urls.KeyMode, log *slog.Logger) *router {
	return &router{ring: r, owner: o, send: send, outbox: out, keyMode: mode, log: log,
		cache: map[ring.ID]cachedOwner{}}
}

// routeResult sums up one routing pass.
type routeResult struct {
	acceptResult
	undelivered []frontier.Task // lookup or send failed, or the owner moved
}

// Route delivers tasks to their owners once: no retries. Tasks it could
// not deliver come back in undelivered. fromOutbox says that the tasks
// come from the outbox, which keeps them until they are settled: this
// node then accepts those it owns without a sync (see owner.Accept).
func (r *router) Route(ctx context.Context, tasks []frontier.Task, fromOutbox bool) routeResult {
	var res routeResult
	groups := map[ring.Peer][]frontier.Task{}
	var order []ring.Peer
	for _, t := range tasks {
		key, err := urls.TaskKey(t.URL, r.keyMode)
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
				// This node's own: seeds its clients were allowed to
				// submit (Seed), and links its crawler found (the outbox).
				ar, err = r.owner.Accept(ctx, chunk, true, fromOutbox)
			} else {
				ar, err = r.send(ctx, to, chunk)
			}
			if err != nil {
				// An owner that refused the batch for now (this node
				// spent its quota there) is still the owner: the tasks
				// wait in the outbox and go to it again.
				if later, ok := errors.AsType[*p2p.RetryLater](err); ok {
					r.throttled.Add(1)
					r.log.Debug("owner refused tasks for now", "to", to.Addr, "tasks", len(chunk), "retry_after", later.After)
				} else {
					r.sendErrors.Add(1)
					r.forget(to)
					if _, ok := errors.AsType[*p2p.KeyModeError](err); ok && r.firstKeyModeWarning(to.Addr) {
						r.log.Warn("an owner computes ring keys another way: links for its keys wait in the outbox", "to", to.Addr, "err", err)
					} else {
						r.log.Debug("send failed", "to", to.Addr, "tasks", len(chunk), "err", err)
					}
				}
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
	r.hops[min(max(hops, 0), maxHopsCounted)].Add(1)
	r.mu.Lock()
	if len(r.cache) >= ownerCacheMax {
		clear(r.cache)
	}
	r.cache[key] = cachedOwner{peer: p, expires: now.Add(ownerCacheTTL)}
	r.mu.Unlock()
	return p, nil
}

// firstKeyModeWarning reports whether a key mode mismatch with owner has
// not been logged as a warning yet, and notes that it now is.
func (r *router) firstKeyModeWarning(owner string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.keyModeWarned[owner] {
		return false
	}
	if r.keyModeWarned == nil || len(r.keyModeWarned) >= keyModeWarnedMax {
		r.keyModeWarned = make(map[string]bool)
	}
	r.keyModeWarned[owner] = true
	return true
}

// keyModeWarnedMax bounds the owners remembered as warned about.
const keyModeWarnedMax = 1024

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
func (r *router) Defer(tasks []frontier.Task, attempts int) {
	r.outbox.Add(tasks, attempts, time.Now().Add(backoff(attempts)))
}

// Run delivers the outbox until ctx is done.
func (r *router) Run(ctx context.Context) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.outbox.Wake():
			// Links arrive a page at a time. Waiting a moment delivers
			// them in fewer, larger batches: an owner makes one synced
			// write per batch it accepts.
			if r.outbox.InMemory() < routeChunk {
				select {
				case <-ctx.Done():
					return
				case <-time.After(routeGather):
				}
			}
		case <-tick.C:
		}
		for ctx.Err() == nil {
			due, more := r.outbox.takeDue(routeChunk)
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

func (r *router) deliver(ctx context.Context, due []pending) {
	tasks := make([]frontier.Task, len(due))
	for i, p := range due {
		tasks[i] = p.task
	}
	res := r.Route(ctx, tasks, true)
	refused := make([]string, len(res.rejected))
	for i, rj := range res.rejected {
		r.log.Debug("task rejected", "url", rj.url, "reason", rj.reason)
		refused[i] = rj.url
	}
	r.outbox.settle(due, res.undelivered, refused...)
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
