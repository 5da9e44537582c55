package crawl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
)

// The helper side of delegation: fetching a batch another owner sent.

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
		f := fetch{task: t, meta: bt.Meta, hasMeta: bt.HasMeta}
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
		o, finished := c.process(ctx, &f)
		res.Results = append(res.Results, TaskResult{Outcome: o, Finished: finished})
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
