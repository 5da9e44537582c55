package crawl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// Hot hosts (seed 000 §5). With host keys one node owns every URL of a
// host, and a host with millions of pages is more work than that node
// should do alone. When a host's queue holds Config.HotQueue tasks, its
// owner keeps the control plane (robots.txt, the politeness lease, the page
// budget, URL metadata and every outcome) and hands fetch batches to
// helpers, its successor replicas, through Config.Delegate. The owner holds
// the host's lease for the whole batch and the helper fetches the batch one
// request at a time, keeping Batch.Gap between the end of one request and
// the start of the next, so the host sees exactly the rate it would see
// from the owner. The helper processes the pages (page store, WARC, links
// to their owners) and answers with each task's outcome, which the owner
// records as if it had fetched the task itself.

// Delegator hands fetch batches of hot hosts to helper nodes.
type Delegator interface {
	// Delegate has a helper fetch b and returns what became of its tasks.
	// An error that wraps ErrNoHelper means nothing was sent: the owner
	// fetches the tasks itself. Any other error means the helper may have
	// made requests; the owner fetches every task without a result again.
	Delegate(ctx context.Context, b *Batch) (*BatchResult, error)
}

// ErrNoHelper is the Delegator's answer when no helper can take a batch.
var ErrNoHelper = errors.New("crawl: no helper can take the batch")

// ErrBusy is FetchBatch's answer when it already runs Config.Workers
// batches; nothing was fetched.
var ErrBusy = errors.New("crawl: helper busy")

// MaxDelegateTasks is the most tasks a batch may hold.
const MaxDelegateTasks = 64

// Batch is a run of one host's tasks an owner hands to a helper.
type Batch struct {
	// Host is the host of every task.
	Host string
	// RingKey is the ring key of the host's tasks: the range whose owner
	// sends the batch.
	RingKey uint64
	// Gap is the least time between the end of one request and the start
	// of the next.
	Gap time.Duration
	// Budget bounds the batch: no request starts later than Budget after
	// the helper received it.
	Budget time.Duration
	// Wait is how long the owner waits for the answer. The helper stops
	// any request still running before then, so that none overlaps the
	// owner's next lease on the host.
	Wait time.Duration
	// Tasks are fetched in order.
	Tasks []BatchTask
}

// BatchTask is one task of a Batch with what its owner knows of the URL.
type BatchTask struct {
	Task Task
	// Meta is the owner's metadata of the URL (validators for a
	// conditional request, the content hash that tells a change); HasMeta
	// is false for a URL never fetched.
	Meta    store.URLMeta
	HasMeta bool
}

// BatchResult is what a helper did with a Batch.
type BatchResult struct {
	// Done holds the outcomes of the first len(Done) tasks, in order; the
	// helper did not start the others.
	Done []TaskResult
	// Contacted reports whether any request was made, and SinceLast how
	// long before the answer was built the last one ended.
	Contacted bool
	SinceLast time.Duration
	// RetryAfter, when positive, is how long after the last request the
	// host asked not to be contacted again (a Retry-After header).
	RetryAfter time.Duration
}

// TaskResult is the outcome of one fetched task of a Batch. Its times
// (LastFetch, NextCrawl, a retry's At) are the helper's clock.
type TaskResult struct {
	Outcome Outcome
	// Terminal is set when the task is finished: anything but a retry.
	Terminal bool
}

// Delegation defaults.
const (
	// defaultDelegateBatch is Config.DelegateBatch when 0.
	defaultDelegateBatch = 16
	// defaultDelegateBudget is Config.DelegateBudget when 0: a batch ends
	// within a few seconds, so that a Release of the host's range never
	// waits long for it.
	defaultDelegateBudget = 5 * time.Second
	// delegateSlack is added to Batch.Wait beyond the budget and the last
	// request's timeout, for processing and the network.
	delegateSlack = 5 * time.Second
	// noHelperBackoff is how long an owner fetches hot hosts itself after
	// the Delegator found no helper.
	noHelperBackoff = time.Second
)

// hot reports whether the fetches of host go to helpers now.
func (c *Crawler) hot(host string) bool {
	if c.cfg.Delegate == nil || c.cfg.HotQueue <= 0 || c.cfg.KeyMode != urls.KeyHost {
		return false
	}
	if c.now().UnixNano() < c.noHelperUntil.Load() {
		return false
	}
	return c.frontier.backlog(host, c.cfg.HotQueue)
}

// hotTTL and coldTTL are how long Frontier.backlog trusts a count of a
// host's queue in the store that found it hot, or not: a hot host stays hot
// for a while, and a growing queue is noticed soon.
const (
	hotTTL  = 10 * time.Second
	coldTTL = 250 * time.Millisecond
)

// backlog reports whether at least n tasks of host are queued and not
// handed out. A count that needs the store is reused for hotTTL or
// coldTTL.
func (f *Frontier) backlog(host string, n int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.hosts[host]
	switch {
	case q == nil:
		return false
	case len(q.buf) >= n:
		return true
	case !q.more:
		return false
	}
	now := f.now()
	if now.Before(q.hotUntil) {
		return q.hot
	}
	taken := q.taken
	head, err := f.db.QueueHead(q.key, n, func(e *store.QueueEntry) bool {
		return slices.ContainsFunc(taken, func(t store.QueueEntry) bool { return t.Seq == e.Seq })
	})
	if err != nil {
		f.storeErrs++
		return false
	}
	q.hot = len(head) >= n
	if q.hot {
		q.hotUntil = now.Add(hotTTL)
	} else {
		q.hotUntil = now.Add(coldTTL)
	}
	return q.hot
}

// delegateItem is a task of a batch being built, with what the owner
// looked up for it.
type delegateItem struct {
	f        fetched
	reserved bool
}

// delegate fetches a run of the leased host's tasks, starting with first
// (admitted, reserved when firstReserved), through a helper. It ends the
// lease and reports true, unless first is still to be fetched locally:
// then it returns false with nothing changed.
func (c *Crawler) delegate(ctx context.Context, l *lease, first Task, firstReserved bool) bool {
	n := c.cfg.DelegateBatch
	if n == 0 {
		n = defaultDelegateBatch
	}
	budget := c.cfg.DelegateBudget
	if budget == 0 {
		budget = defaultDelegateBudget
	}
	if gap := c.gap(l.crawlDelay); gap > 0 {
		n = min(n, 1+int(budget/gap))
	}
	if n < 2 {
		return false // a batch of one saves the owner nothing
	}
	var items []delegateItem
	add := func(t Task, reserved bool) {
		f, fresh := c.prepare(t)
		switch {
		case !fresh:
			if reserved {
				c.frontier.Unreserve(l.host)
			}
		default:
			items = append(items, delegateItem{f: f, reserved: reserved})
		}
	}
	add(first, firstReserved)
	for len(items) < n {
		t, more := c.frontier.NextFromHost(l.host)
		if !more {
			break
		}
		origin, pathQuery := urls.SplitOrigin(t.URL)
		rules := c.robots.get(origin, c.now())
		if rules == nil || rules.unavailable && rules.attempt < maxRobotsAttempts || !c.owns(t) {
			// robots.txt of another origin of the host is needed first,
			// or the task is not ours: a local lease sorts it out.
			c.requeue(t)
			break
		}
		l.crawlDelay = max(l.crawlDelay, rules.crawlDelay)
		if ok, reserved := c.admit(t, l.host, pathQuery, rules); ok {
			add(t, reserved)
		}
	}
	if len(items) == 0 {
		c.finish(l)
		return true
	}
	gap := c.gap(l.crawlDelay)
	b := &Batch{
		Host:    l.host,
		RingKey: items[0].f.ringKey,
		Gap:     gap,
		Budget:  budget,
		Wait:    budget + c.cfg.Timeout + delegateSlack,
		Tasks:   make([]BatchTask, len(items)),
	}
	for i, it := range items {
		b.Tasks[i] = BatchTask{Task: it.f.task, Meta: it.f.meta, HasMeta: it.f.hasMeta}
	}
	sent := c.now()
	res, err := c.cfg.Delegate.Delegate(ctx, b)
	recv := c.now()
	if err == nil && len(res.Done) > len(items) {
		err = fmt.Errorf("helper answered %d outcomes for %d tasks", len(res.Done), len(items))
	}
	switch {
	case errors.Is(err, ErrNoHelper):
		// Nothing was sent: fetch locally for a while.
		c.noHelperUntil.Store(recv.Add(noHelperBackoff).UnixNano())
		c.giveBack(l, items)
		c.finish(l)
		return true
	case err != nil:
		// The helper may have made requests up to now; fetch the batch
		// again later, after the usual gap.
		if ctx.Err() == nil {
			c.delegateFails.Add(1)
			c.countError("delegate")
		}
		c.giveBack(l, items)
		l.last = recv
		c.finish(l)
		return true
	}
	var outcomes []Outcome
	var terminal []bool
	var adopted []delegateItem
	for i, r := range res.Done {
		o, term, ok := c.adopt(items[i].f, r)
		if !ok {
			c.countError("delegate")
			c.giveBack(l, items[i:i+1])
			continue
		}
		outcomes, terminal, adopted = append(outcomes, o), append(terminal, term), append(adopted, items[i])
	}
	c.giveBack(l, items[len(res.Done):])
	if res.Contacted || len(res.Done) > 0 {
		last := recv.Add(-res.SinceLast)
		if last.Before(sent) || !res.Contacted {
			last = recv // not credible: assume contact until the answer
		}
		l.last = last
		if res.RetryAfter > 0 {
			l.notBefore = last.Add(min(res.RetryAfter, c.cfg.MaxRetryAfter))
		}
	}
	c.finish(l)
	for i, it := range adopted {
		c.delegated.Add(1)
		c.complete(it.f.task, outcomes[i], terminal[i])
	}
	return true
}

// giveBack puts tasks of a batch back in the queue, with their budget
// reservations, under the lease that took them.
func (c *Crawler) giveBack(l *lease, items []delegateItem) {
	for _, it := range items {
		if it.reserved {
			c.frontier.Unreserve(l.host)
		}
		c.requeue(it.f.task)
	}
}

// adopt checks a helper's outcome for a task and rebuilds it from what the
// owner knows: the task's identity, keys and depth are the owner's, only
// what the fetch found (metadata, times, failure) comes from the helper.
func (c *Crawler) adopt(f fetched, r TaskResult) (o Outcome, terminal, ok bool) {
	t := f.task
	in := r.Outcome
	horizon := c.now().Add(max(c.cfg.MaxRecrawl, c.cfg.MaxRetryAfter, c.cfg.RetryBase<<min(c.cfg.MaxRetries, 20), time.Hour))
	at := in.At
	if at.After(horizon) {
		at = horizon
	}
	if !r.Terminal {
		// A retry: only a reschedule.
		if in.Reschedule == nil || in.Dead != nil || in.Meta != nil {
			return Outcome{}, false, false
		}
		next := t
		next.Attempts = t.Attempts + 1
		return Outcome{Reschedule: &next, At: at}, false, true
	}
	if in.Reschedule != nil {
		o.Reschedule = &Task{URL: t.URL, Depth: t.Depth, Redirects: t.Redirects, Recrawl: true}
		o.At = at
	}
	if in.Dead != nil {
		host, _ := urls.HostOf(t.URL)
		d := *in.Dead
		d.URL, d.RingKey, d.URLHash, d.HostKey = t.URL, f.ringKey, f.urlHash, urls.HostKey(host)
		d.Depth, d.Redirects = t.Depth, t.Redirects
		d.Kind, d.LastError = urls.Truncate(d.Kind, 64), urls.Truncate(d.LastError, 1024)
		o.Dead = &d
	}
	if in.Meta != nil {
		m := *in.Meta
		m.URL = t.URL
		o.Meta = &m
	}
	return o, true, true
}

// FetchBatch fetches a batch for another owner: the helper side of
// delegation. It keeps b.Gap between the end of one request and the start
// of the next, starts none later than b.Budget after it began, and cuts
// any request still running shortly before b.Wait. Pages go to this
// crawler's PageSink and links to its LinkSink; its own frontier is not
// touched. At most Config.Workers batches run at once; past that it
// returns ErrBusy at once. A malformed batch is refused with an error
// before any request.
func (c *Crawler) FetchBatch(ctx context.Context, b *Batch) (*BatchResult, error) {
	if err := c.checkBatch(b); err != nil {
		return nil, fmt.Errorf("fetch batch: %w", err)
	}
	select {
	case c.helpSlots <- struct{}{}:
	default:
		return nil, ErrBusy
	}
	defer func() { <-c.helpSlots }()
	start := c.now()
	margin := min(time.Second, (b.Wait-b.Budget)/2)
	ctx, cancel := context.WithTimeout(ctx, b.Wait-margin)
	defer cancel()
	res := &BatchResult{}
	var last time.Time
	for _, bt := range b.Tasks {
		if !last.IsZero() && !sleepCtx(ctx, last.Add(b.Gap).Sub(c.now())) {
			break
		}
		if c.now().Sub(start) > b.Budget {
			break
		}
		t := bt.Task
		f := fetched{task: t, meta: bt.Meta, hasMeta: bt.HasMeta}
		f.ringKey, f.urlHash = c.keys(t.URL)
		f.resp, f.err = c.get(ctx, t.URL, c.cfg.MaxBodyBytes, conditional(bt.Meta, bt.HasMeta), nil)
		last, res.Contacted = c.now(), true
		if f.err != nil && ctx.Err() != nil {
			break // cut short: the owner fetches it again
		}
		if d := c.retryAfter(f.resp, c.now()); d > 0 {
			f.notBefore = c.now().Add(d)
			res.RetryAfter = d
		}
		o, terminal := c.process(ctx, &f)
		res.Done = append(res.Done, TaskResult{Outcome: o, Terminal: terminal})
		c.helped.Add(1)
		if res.RetryAfter > 0 {
			break // the host asked for a pause: the owner keeps it
		}
	}
	if res.Contacted {
		res.SinceLast = c.now().Sub(last)
	}
	return res, nil
}

// maxBatchWait bounds Batch.Wait, so a hostile owner cannot hold a
// helper's slot for long.
const maxBatchWait = 10 * time.Minute

// checkBatch validates a batch received from another owner.
func (c *Crawler) checkBatch(b *Batch) error {
	switch {
	case b == nil:
		return errors.New("nil batch")
	case len(b.Tasks) == 0 || len(b.Tasks) > MaxDelegateTasks:
		return fmt.Errorf("%d tasks, want 1 to %d", len(b.Tasks), MaxDelegateTasks)
	case b.Gap < 0 || b.Gap > maxBatchWait:
		return fmt.Errorf("gap %v out of range [0, %v]", b.Gap, maxBatchWait)
	case b.Budget <= 0 || b.Wait <= b.Budget || b.Wait > maxBatchWait:
		return fmt.Errorf("budget %v and wait %v: want 0 < budget < wait <= %v", b.Budget, b.Wait, maxBatchWait)
	}
	for i, bt := range b.Tasks {
		t := bt.Task
		norm, err := urls.Normalize(nil, t.URL)
		if err != nil {
			return fmt.Errorf("task %d: %w", i, err)
		}
		host, _ := urls.HostOf(norm)
		switch {
		case norm != t.URL:
			return fmt.Errorf("task %d: URL %q is not normalised", i, urls.Truncate(t.URL, 80))
		case host != b.Host:
			return fmt.Errorf("task %d: host %q, batch host %q", i, host, b.Host)
		case t.Depth < 0 || t.Attempts < 0 || t.Redirects < 0:
			return fmt.Errorf("task %d: negative depth, attempts or redirects", i)
		}
	}
	return nil
}

// sleepCtx waits d (nothing when d <= 0) and reports false if ctx ended
// first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
