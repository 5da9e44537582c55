package crawl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// Hot hosts (seed 000 §5). With host keys one node owns every URL of a
// host, and a host with millions of pages is more work than that node
// should do alone. When a host's queue holds Config.HotQueue tasks, its
// owner keeps the control plane (robots.txt, the politeness lease, the page
// budget, URL metadata and every outcome) and hands fetch batches to
// a helper (the p2p layer picks it: a less loaded node) through
// Config.Delegate. The owner holds
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

// MaxDelegateTasks is the most tasks a batch may hold: the wire's cap on
// a fetch batch (protocol.MaxFetchTasks).
const MaxDelegateTasks = protocol.MaxFetchTasks

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
	// SinceLast is how long before the owner sent the batch the host's
	// last request ended, as far as the owner knows: the helper's first
	// request waits Gap less SinceLast after the batch arrived (zero: a
	// full gap). The owner sends a batch once the host's turn has come,
	// so it is at least Gap unless the lease contacted the host before
	// the batch went.
	SinceLast time.Duration
	// Tasks are fetched in order.
	Tasks []BatchTask
}

// BatchTask is one task of a Batch with what its owner knows of the URL.
type BatchTask struct {
	Task frontier.Task
	// Meta is the owner's metadata of the URL (validators for a
	// conditional request, the content hash that tells a change); HasMeta
	// is false for a URL never fetched.
	Meta    store.URLMeta
	HasMeta bool
}

// BatchResult is what a helper did with a Batch.
type BatchResult struct {
	// Results holds the outcomes of the first len(Results) tasks, in order; the
	// helper did not start the others.
	Results []TaskResult
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
	Outcome frontier.Outcome
	// Finished is set when the task is finished: anything but a retry.
	Finished bool
}

// Delegation timing.
const (
	// delegateSlack is added to Batch.Wait beyond the budget and the last
	// request's timeout, for processing and the network.
	delegateSlack = 5 * time.Second
	// noHelperBackoff is how long an owner fetches hot hosts itself after
	// the Delegator found no helper.
	noHelperBackoff = time.Second
)

// hot reports whether the fetches of the leased host go to helpers now.
func (c *Crawler) hot(l *frontier.Lease) bool {
	if c.cfg.Delegate == nil || c.cfg.HotQueue <= 0 || c.cfg.KeyMode != urls.KeyHost {
		return false
	}
	if c.now().UnixNano() < c.noHelperUntil.Load() {
		return false
	}
	return l.Backlog(c.cfg.HotQueue)
}

// delegate fetches a run of the leased host's tasks, starting with first
// (admitted with v), through a helper, and reports true; the tasks it leaves
// unsettled (not sent, not fetched, refused) go back to the queue when the
// lease ends. It reports false with nothing changed when first is better
// fetched locally.
func (c *Crawler) delegate(ctx context.Context, l *frontier.Lease, first frontier.Task, v verdict) bool {
	n, budget := c.cfg.DelegateBatch, c.cfg.DelegateBudget
	if gap := l.Gap(); gap > 0 {
		n = min(n, 1+int(budget/gap))
	}
	if n < 2 {
		return false // a batch of one saves the owner nothing
	}
	items := c.batchTasks(ctx, l, first, v, n)
	if len(items) == 0 {
		return true
	}
	b := c.newBatch(l, items, budget)
	// The helper starts at once: not before the host's turn (the lease
	// may have come a little ahead of it).
	if d := l.NotBefore().Sub(c.now()); d > 0 && !sleepCtx(ctx, d) {
		return true // stopping: End puts the batch back
	}
	sent := c.now()
	b.SinceLast = b.Gap // the host's turn has come
	if last := l.Last(); !last.IsZero() {
		// The lease contacted the host already (admission does not
		// today): the gap runs from there.
		b.SinceLast = max(sent.Sub(last), 0)
	}
	res, err := c.cfg.Delegate.Delegate(ctx, b)
	recv := c.now()
	if err == nil && len(res.Results) > len(items) {
		err = fmt.Errorf("helper answered %d outcomes for %d tasks", len(res.Results), len(items))
	}
	switch {
	case errors.Is(err, ErrNoHelper):
		// Nothing was sent: fetch locally for a while.
		c.noHelperUntil.Store(recv.Add(noHelperBackoff).UnixNano())
		return true
	case err != nil:
		// The helper may have made requests up to now; fetch the batch
		// again later, after the usual gap.
		if ctx.Err() == nil {
			c.delegateFails.Add(1)
			c.countError("delegate")
		}
		l.Contacted(recv)
		return true
	}
	outcomes := c.keepOutcomes(l, items, res)
	if res.Contacted || len(res.Results) > 0 {
		last := recv.Add(-res.SinceLast)
		if last.Before(sent) || !res.Contacted {
			last = recv // not credible: assume contact until the answer
		}
		l.Contacted(last)
		if res.RetryAfter > 0 {
			l.SlowUntil(last.Add(min(res.RetryAfter, c.cfg.MaxRetryAfter)))
		}
	}
	l.End() // before recording: a slow store must not hold the host
	for _, d := range outcomes {
		c.delegated.Add(1)
		c.record(d.task, d.outcome, d.finished)
	}
	return true
}

// batchTasks takes the tasks of a batch under l: first (admitted with v)
// and up to n-1 more of the host's tasks that admission lets through, with
// what the owner knows of each URL. Stale recrawls are dropped on the way.
func (c *Crawler) batchTasks(ctx context.Context, l *frontier.Lease, first frontier.Task, v verdict, n int) []fetch {
	var items []fetch
	add := func(t frontier.Task, v verdict) {
		if f, fresh := c.prepare(l, t, v); fresh {
			items = append(items, f)
		}
	}
	add(first, v)
	for len(items) < n {
		next, more := l.Next()
		if !more {
			break
		}
		t, v := c.admit(ctx, l, next, forBatch)
		if v != fetchNow && v != fetchFirst {
			break
		}
		add(t, v)
	}
	return items
}

// newBatch builds the batch of items under l's politeness.
func (c *Crawler) newBatch(l *frontier.Lease, items []fetch, budget time.Duration) *Batch {
	b := &Batch{
		Host:    l.Host(),
		RingKey: items[0].ringKey,
		Gap:     l.Gap(),
		Budget:  budget,
		Wait:    budget + c.cfg.Timeout + delegateSlack,
		Tasks:   make([]BatchTask, len(items)),
	}
	for i, it := range items {
		b.Tasks[i] = BatchTask{Task: it.task, Meta: it.meta, HasMeta: it.hasMeta}
	}
	return b
}

// delegatedOutcome is a helper's outcome for a task, rebuilt by the owner.
type delegatedOutcome struct {
	task     frontier.Task
	outcome  frontier.Outcome
	finished bool
}

// keepOutcomes rebuilds the helper's outcomes and keeps their tasks from
// the lease, to be recorded once it ended. A task whose outcome does not
// fit is left in the lease, which puts it back.
func (c *Crawler) keepOutcomes(l *frontier.Lease, items []fetch, res *BatchResult) []delegatedOutcome {
	var out []delegatedOutcome
	for i, r := range res.Results {
		o, finished, ok := c.rebuildOutcome(items[i], r)
		if !ok {
			c.countError("delegate")
			continue
		}
		if c.keep(l, items[i].task) {
			out = append(out, delegatedOutcome{task: items[i].task, outcome: o, finished: finished})
		}
	}
	return out
}

// rebuildOutcome checks a helper's outcome for a task and rebuilds it from
// what the owner knows: the task's identity, keys and depth are the
// owner's, only what the fetch found (metadata, times, failure) comes from
// the helper.
func (c *Crawler) rebuildOutcome(f fetch, r TaskResult) (o frontier.Outcome, finished, ok bool) {
	t := f.task
	in := r.Outcome
	horizon := c.now().Add(max(c.cfg.MaxRecrawl, c.cfg.MaxRetryAfter, c.cfg.RetryBase<<min(c.cfg.MaxRetries, 20), time.Hour))
	at := in.At
	if at.After(horizon) {
		at = horizon
	}
	if !r.Finished {
		// A retry: only a reschedule.
		if in.Reschedule == nil || in.Dead != nil || in.Meta != nil {
			return frontier.Outcome{}, false, false
		}
		next := t
		next.Attempts = t.Attempts + 1
		return frontier.Outcome{Reschedule: &next, At: at}, false, true
	}
	if in.Reschedule != nil {
		o.Reschedule = &frontier.Task{URL: t.URL, Depth: t.Depth, Redirects: t.Redirects, Recrawl: true}
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
