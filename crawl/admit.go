package crawl

import (
	"context"
	"errors"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
)

// Admission: whether a task taken under a host's lease is fetched now. It
// is the owner's control plane, the same for a page the crawl loop fetches
// and for a task it adds to a batch a helper fetches: the ownership gate,
// the scope, robots.txt, the page budget.

// admitter says who admits tasks under a lease, which decides what
// admission may do beyond looking.
type admitter int

const (
	// forCrawl admits the task the crawl loop is about to fetch: it may
	// fetch robots.txt under the lease, and a task that has to wait decides
	// how the lease ends (the host parked when not owned, deferred while
	// its robots.txt is unavailable).
	forCrawl admitter = iota
	// forBatch admits more tasks into a batch for a helper: it makes no
	// request and leaves the lease's end as it is. The first task that has
	// to wait ends the batch; a later lease of the crawl loop sorts it out.
	forBatch
)

// verdict is admission's decision on one task.
type verdict int

const (
	fetchNow   verdict = iota // admitted: fetch it under this lease (a recrawl or a retry)
	fetchFirst                // admitted, and the store held no metadata of the URL: its first fetch
	dropped                   // finished without a request; look at the next task
	later                     // left in the lease, which puts it back at End
	reopenNow                 // a page fetched before: see reopen
)

// admit decides whether t, taken under l, is fetched now, and moves on to
// the lease's next task each time one is dropped without a request. It
// returns the task to fetch with fetchNow (a recrawl or a retry) or
// fetchFirst (a first fetch, counted against its host's page budget), or a
// task for a page fetched before with reopenNow (only for the crawl loop);
// it returns later when there is none now: the host has nothing more, or a
// task has to wait for a later lease.
func (c *Crawler) admit(ctx context.Context, l *frontier.Lease, t frontier.Task, who admitter) (frontier.Task, verdict) {
	for {
		switch v := c.admitOne(ctx, l, t, who); v {
		case fetchNow, fetchFirst, reopenNow:
			return t, v
		case later:
			return frontier.Task{}, later
		}
		// Dropping needed no request: look at the host's next task at once.
		next, more := l.Next()
		if !more {
			return frontier.Task{}, later
		}
		t = next
	}
}

// admitOne is admission's decision on one task.
func (c *Crawler) admitOne(ctx context.Context, l *frontier.Lease, t frontier.Task, who admitter) verdict {
	if !c.owns(t) {
		// Not ours (any more): no request at all, robots.txt included.
		if who == forCrawl {
			l.Park()
		}
		return later
	}
	// Out of scope: no request at all, robots.txt included. The owner
	// judged the URL when it arrived; this catches what reached the queue
	// otherwise (records a peer handed over, a scope narrowed since).
	switch r, err := c.scope.Check(t.URL); {
	case err != nil:
		c.countError("store")
		if who == forCrawl {
			l.DeferUntil(c.now().Add(scopeRetry))
		}
		return later
	case r != InScope:
		c.scopeDropped.Add(1)
		c.drop(l, t)
		return dropped
	}
	origin, pathQuery := urls.SplitOrigin(t.URL)
	rules := c.robots.get(origin, c.now())
	if rules == nil {
		if who == forBatch {
			return later // robots.txt first, which a batch does not fetch
		}
		// robots.txt first, through the same politeness slot.
		var err error
		if rules, err = c.fetchRobots(ctx, l, c.gate(t), origin); err != nil {
			if errors.Is(err, errNotOwned) {
				l.Park()
			}
			return later // or ctx ended
		}
		c.discoverSitemaps(ctx, origin, rules, t)
	}
	l.RaiseCrawlDelay(rules.crawlDelay)
	switch {
	case rules.unavailable && rules.attempt < maxRobotsAttempts:
		// No usable robots.txt yet: hold the host until the retry rather
		// than drop work because of a passing outage.
		if who == forCrawl {
			l.DeferUntil(rules.expires)
		}
		return later
	case !rules.allowed(pathQuery):
		// Disallowed (or robots.txt unavailable too often): drop it.
		c.robotsDenied.Add(1)
		c.drop(l, t)
		return dropped
	case !l.Last().IsZero():
		// robots.txt was fetched under this lease: the page waits for the
		// host's next turn instead of holding a worker.
		return later
	case t.Recrawl || t.Attempts > 0:
		return fetchNow // counted against the budget at its first attempt
	case l.TakenTwice(t):
		// The URL was queued again (at a shallower depth) and the other
		// copy is being fetched: this one waits for its outcome, after
		// which it is a page fetched before.
		if who == forCrawl {
			l.DeferUntil(c.now().Add(max(l.Gap(), copyWait)))
		}
		return later
	case c.fetchedBefore(t):
		if who == forBatch {
			return later // the crawl loop re-opens it, without a request
		}
		return reopenNow
	case c.sessionCopy(t):
		c.countError("trap")
		c.drop(l, t)
		return dropped
	case c.dustVariant(ctx, t):
		c.countError("dust")
		c.drop(l, t)
		return dropped
	case l.Reserve(t):
		return fetchFirst
	}
	// The host's page budget is spent: drop its queue, recrawls excepted,
	// in one go.
	n, err := l.DropQueue(func(d frontier.Task) { c.reportFinished(d, nil) })
	if err != nil {
		c.countError("store")
	}
	c.budgetDropped.Add(int64(n) + 1)
	c.drop(l, t)
	return dropped
}

// copyWait is the least a task waits while another copy of its URL is
// being fetched.
const copyWait = 50 * time.Millisecond

// scopeRetry is how long a host waits when the store could not say
// whether its task is in scope.
const scopeRetry = time.Second

// fetchedBefore reports whether the store holds metadata of t's URL: it
// was fetched, here or (adopted with its range) by another node.
func (c *Crawler) fetchedBefore(t frontier.Task) bool {
	_, ok := c.urlMeta(c.keys(t.URL))
	return ok
}

// sessionCopy reports whether t's URL carries a session id judged for its
// host and the page it names, without it, was fetched already: a copy
// queued before the parameter was judged.
func (c *Crawler) sessionCopy(t frontier.Task) bool {
	s, fetched, ok := c.traps.sessionCopy(t.URL)
	return ok && (fetched || c.fetchedBefore(frontier.Task{URL: s}))
}
