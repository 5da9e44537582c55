package node

import (
	"context"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
)

// routeGather is how long the delivery loop lets new links gather before it
// delivers them: a few ms, small beside any politeness gap.
const routeGather = 5 * time.Millisecond

// routeChunk bounds the tasks taken from the outbox per pass.
const routeChunk = 5_000

// linkRouter delivers this node's tasks (links its crawler found, seeds
// its clients submitted) through the routing layer's Router, and keeps
// what it could not deliver in the durable outbox, retried with backoff.
type linkRouter struct {
	router *route.Router
	outbox *outbox
	rules  urlRules
	// proofs holds the signed statements of seeds on their way, shared
	// with the outbox, which stores each with its task.
	proofs *seedProofs
}

// routeResult sums up one routing pass in the crawl engine's terms.
type routeResult struct {
	accepted, duplicates int
	rejected             []route.Rejection
	undelivered          []frontier.Task
}

// Route delivers tasks to their owners once: no retries. Tasks it could
// not deliver come back in undelivered. fromOutbox says that the tasks
// come from the outbox, which keeps them until they are settled.
func (r *linkRouter) Route(ctx context.Context, tasks []frontier.Task, fromOutbox bool) routeResult {
	var res routeResult
	keyed := make([]route.Task, 0, len(tasks))
	var seeds []string
	for _, t := range tasks {
		rt, err := route.NewTask(r.rules, t.URL, t.Depth, t.Redirects)
		if err != nil {
			res.rejected = append(res.rejected, route.Rejection{URL: t.URL, Reason: err.Error()})
			continue
		}
		if t.Depth == 0 && t.Redirects == 0 {
			if rt.SeedProof = r.proofs.get(t.URL); rt.SeedProof != "" {
				seeds = append(seeds, t.URL)
			}
		}
		keyed = append(keyed, rt)
	}
	d := r.router.Route(ctx, keyed, fromOutbox)
	res.accepted, res.duplicates = d.Accepted, d.Duplicates
	res.rejected = append(res.rejected, d.Rejected...)
	res.undelivered = frontierTasks(d.Undelivered)
	if len(seeds) > 0 {
		// The seeds settled with their owners need their statements no more.
		left := map[string]bool{}
		for _, t := range d.Undelivered {
			left[t.URL] = true
		}
		r.proofs.drop(slices.DeleteFunc(seeds, func(u string) bool { return left[u] }))
	}
	return res
}

// frontierTasks returns the crawl engine's tasks for routed ones.
func frontierTasks(ts []route.Task) []frontier.Task {
	if len(ts) == 0 {
		return nil
	}
	out := make([]frontier.Task, len(ts))
	for i, t := range ts {
		out[i] = frontier.Task{URL: t.URL, Depth: t.Depth, Redirects: t.Redirects}
	}
	return out
}

// Defer puts tasks in the outbox for the delivery loop, after attempts
// failed deliveries.
func (r *linkRouter) Defer(tasks []frontier.Task, attempts int) {
	r.outbox.Add(tasks, attempts, time.Now().Add(backoff(attempts)))
}

// backoff is the routing layer's retry backoff, with full jitter.
func backoff(attempts int) time.Duration {
	return route.DefaultConfig().Backoff(attempts, rand.Int64N)
}

// warnAttempts is the failed deliveries after which the outbox logs a task
// it still cannot deliver.
const warnAttempts = 10

// Run delivers the outbox until ctx is done.
func (r *linkRouter) Run(ctx context.Context) {
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

func (r *linkRouter) deliver(ctx context.Context, due []pending) {
	tasks := make([]frontier.Task, len(due))
	for i, p := range due {
		tasks[i] = p.task
	}
	res := r.Route(ctx, tasks, true)
	refused := make([]string, len(res.rejected))
	for i, rj := range res.rejected {
		r.router.Config().Logger.Debug("task rejected", "url", rj.URL, "reason", rj.Reason)
		refused[i] = rj.URL
	}
	r.outbox.settle(due, res.undelivered, refused...)
}
