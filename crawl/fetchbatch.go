package crawl

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
)

// The helper side of delegation: fetching a batch another owner sent.

// FetchBatch fetches a batch for another owner: the helper side of
// delegation. The helper answers for its own politeness too: it checks
// every URL against the host's robots.txt as it fetched it itself (cached,
// or fetched under the batch's pacing) and drops what robots.txt disallows,
// and it keeps between the end of one request and the start of the next
// the larger of b.Gap and its own gap for the host (its Delay, or the
// host's Crawl-delay). It starts no request later than b.Budget after it
// began, and cuts any request still running shortly before b.Wait. Pages
// go to this crawler's PageSink and links to its LinkSink; its own
// frontier is not touched. At most Config.Workers batches run at once;
// past that it returns ErrBusy at once. A malformed batch, and one with a
// task out of this crawler's scope (judged by its own configuration and
// its replica copy of the owner's seeds), is refused with an error before
// any request.
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
	last, ok := c.helping.begin(b.Host)
	if !ok {
		return nil, ErrBusy // a batch of this host is running here already
	}
	p := &batchPace{c: c, host: b.Host, floor: b.Gap, last: last, before: last}
	defer func() { c.helping.end(b.Host, p.last, c.now()) }()
	start := c.now()
	margin := min(time.Second, (b.Wait-b.Budget)/2)
	ctx, cancel := context.WithTimeout(ctx, b.Wait-margin)
	defer cancel()
	res := &BatchResult{}
	for _, bt := range b.Tasks {
		if !p.mayStart(start, b.Budget) {
			break
		}
		t := bt.Task
		origin, pathQuery := urls.SplitOrigin(t.URL)
		// robots.txt as this node knows it, never the owner's word for it:
		// a hostile owner could replicate rules that allow everything.
		rules := c.robots.get(origin, c.now())
		if rules == nil {
			var err error
			if rules, err = c.fetchRobots(ctx, p, nil, origin); err != nil {
				break // cut short: the owner fetches the rest again
			}
		}
		p.RaiseCrawlDelay(rules.crawlDelay)
		if rules.unavailable && rules.attempt < maxRobotsAttempts || !p.retryAfter.IsZero() {
			break // robots.txt unavailable for now, or the host asked for a pause
		}
		if !rules.allowed(pathQuery) {
			// The owner's robots.txt said otherwise, or it is stale: this
			// node does not make the request.
			c.robotsDenied.Add(1)
			res.Results = append(res.Results, TaskResult{Finished: true})
			continue
		}
		if !p.mayStart(start, b.Budget) {
			break
		}
		f := fetch{task: t, meta: bt.Meta, hasMeta: bt.HasMeta}
		f.ringKey, f.urlHash = c.keys(t.URL)
		f.resp, f.err = c.request(ctx, p, nil, t.URL, c.cfg.MaxBodyBytes, conditional(bt.Meta, bt.HasMeta))
		if f.err != nil && ctx.Err() != nil {
			break // cut short: the owner fetches it again
		}
		if d := c.retryAfter(f.resp, c.now()); d > 0 {
			f.notBefore = c.now().Add(d)
			p.SlowUntil(f.notBefore)
			res.RetryAfter = d
		}
		o, finished := c.process(ctx, &f)
		res.Results = append(res.Results, TaskResult{Outcome: o, Finished: finished})
		c.helped.Add(1)
		if !p.retryAfter.IsZero() {
			break // the host asked for a pause: the owner keeps it
		}
	}
	if last := p.Last(); !last.IsZero() && !last.Equal(p.before) {
		res.Contacted = true
		res.SinceLast = c.now().Sub(last)
		if res.RetryAfter == 0 && !p.retryAfter.IsZero() {
			// A Retry-After on robots.txt: how long after the last request.
			res.RetryAfter = max(p.retryAfter.Sub(last), 0)
		}
	}
	return res, nil
}

// batchPace paces the requests of one batch to its host: the gap after
// each is the larger of the owner's (floor) and this crawler's own for the
// host, and a Retry-After ends the batch.
type batchPace struct {
	c     *Crawler
	host  string
	floor time.Duration
	// last is the start of the latest request to the host, this batch's
	// or (before its first) the previous batch's: before.
	last, before time.Time
	crawlDelay   time.Duration
	retryAfter   time.Time
}

var _ pace = (*batchPace)(nil)

func (p *batchPace) Host() string                    { return p.host }
func (p *batchPace) NotBefore() time.Time            { return time.Time{} } // the batch's gap runs from last
func (p *batchPace) Last() time.Time                 { return p.last }
func (p *batchPace) Contacted(at time.Time)          { p.last = at }
func (p *batchPace) RaiseCrawlDelay(d time.Duration) { p.crawlDelay = max(p.crawlDelay, d) }
func (p *batchPace) SlowUntil(t time.Time)           { p.retryAfter = t }

// Gap is the pause after each request of the batch.
func (p *batchPace) Gap() time.Duration {
	return max(p.floor, p.c.frontier.Gap(p.crawlDelay))
}

// mayStart reports whether the next request, which waits the gap after the
// last one, would still start within budget of start.
func (p *batchPace) mayStart(start time.Time, budget time.Duration) bool {
	next := p.c.now()
	if !p.last.IsZero() {
		next = latest(next, p.last.Add(p.Gap()))
	}
	return next.Sub(start) <= budget
}

// latest returns the later of two times.
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
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
	case b.SinceLast < 0:
		return fmt.Errorf("since last request %v: want >= 0", b.SinceLast)
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
		switch r, err := c.scope.Check(norm); {
		case err != nil:
			return fmt.Errorf("task %d: %w", i, err)
		case r != InScope:
			return fmt.Errorf("task %d: %s is out of this helper's scope (%v)", i, urls.Truncate(norm, 80), r)
		}
	}
	return nil
}

// helpHosts is what a helper remembers of the hosts it fetched batches
// for: which have a batch running, and when each was last contacted, so
// that batches of one host, whoever sends them and however many at once,
// never go under the helper's own gap. Entries older than
// helpMemory are forgotten once the map holds more than
// maxHelpHosts.
type helpHosts struct {
	mu      sync.Mutex
	running map[string]bool
	last    map[string]time.Time
}

const (
	// helpMemory is how long a host's last contact is kept: longer than
	// any gap a helper keeps (its Crawl-delay cap is far below).
	helpMemory = 15 * time.Minute
	// maxHelpHosts is the number of remembered hosts above which old
	// entries are dropped.
	maxHelpHosts = 4096
)

// begin marks a batch of host as running and returns when the host was
// last contacted; false if a batch of host is running already.
func (h *helpHosts) begin(host string) (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running[host] {
		return time.Time{}, false
	}
	if h.running == nil {
		h.running, h.last = make(map[string]bool), make(map[string]time.Time)
	}
	h.running[host] = true
	return h.last[host], true
}

// end records the batch's last contact with host and lets the next batch
// of host begin.
func (h *helpHosts) end(host string, last, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.running, host)
	if !last.IsZero() {
		h.last[host] = last
	}
	if len(h.last) > maxHelpHosts {
		for k, t := range h.last {
			if now.Sub(t) > helpMemory && !h.running[k] {
				delete(h.last, k)
			}
		}
	}
}
