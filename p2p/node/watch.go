package node

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// Issue 29's defences on a node: receipts (the shard manager signs with
// the node's identity key, the router checks with the peers' IDs), tasks
// held for a predecessor whose acknowledgement no receipt vouched for
// (holdTasks), and the pages a replica fetches for a predecessor that
// neither fetched nor explained them (watcher).

// watchingApp is the shard.App of the node's position pos with the
// watcher: the position's manager hands it the pending records of a
// predecessor that does not crawl them.
type watchingApp struct {
	*intake
	w   *watcher
	pos int
}

var _ shard.Watcher = watchingApp{}

// Watch implements shard.Watcher.
func (a watchingApp) Watch(ctx context.Context, owner string, recs []shard.Record) {
	a.w.Watch(ctx, a.pos, owner, recs)
}

// Watcher tuning.
const (
	// watchMax bounds the records waiting to be fetched for predecessors.
	watchMax = 100_000
	// watchBudget bounds one batch of a host fetched for a predecessor;
	// the next batch follows at once. A batch's pages are reported done
	// when it ends, so a watcher's budget is also at most a quarter of
	// its WatchTimeout (watchBudgetFor): the owner's next replica, which
	// steps in one WatchTimeout after this one, hears of the first pages
	// before it does.
	watchBudget = 30 * time.Second
	// watchRequest is added to a batch's budget to cut its last request:
	// a request's timeout.
	watchRequest = 35 * time.Second
	// watchBusyPause is the wait after the crawler had no room for a
	// batch.
	watchBusyPause = time.Second
)

// watcher fetches, one host's batch at a time, the pending records its
// shard manager took over from a predecessor that neither fetched nor
// explained them (shard's "Replicas watch progress"), through the
// crawler's helper path (crawl.Crawler.FetchBatch: this node's robots.txt
// and politeness for the host), and reports them done
// (shard.Manager.WatchDone of the position that handed them over). Links
// found go to the outbox, as any.
type watcher struct {
	log   *slog.Logger
	fetch func(ctx context.Context, b *crawl.Batch) (*crawl.BatchResult, error)
	// done reports records fetched to the manager of position pos.
	done func(ctx context.Context, pos int, recs []shard.Record) error
	gap  time.Duration
	// budget bounds one batch (watchBudgetFor).
	budget time.Duration

	mu    sync.Mutex
	hosts map[string][]shard.Record // by host, in arrival order
	// queued holds the records waiting, each with the position whose
	// manager handed it over.
	queued map[shard.RecordID]int
	order  []string // hosts with records, oldest first
	wake   chan struct{}

	fetched atomic.Int64
}

// watchBudgetFor is the budget of a watcher's batch when replicas wait
// watchTimeout (shard.Config.WatchTimeout, 0 for its default) before they
// step in: watchBudget, cut to a quarter of the wait. Without the cut a
// 2 s wait met 30 s batches: the first replica reported nothing until its
// whole batch was fetched, and the second stepped in meanwhile (two
// machines fetching one host's pages, seen in TestAdversaryAckAndDrop at
// 16 positions).
func watchBudgetFor(watchTimeout time.Duration) time.Duration {
	if watchTimeout == 0 {
		watchTimeout = shard.DefaultConfig().WatchTimeout
	}
	if watchTimeout > 0 {
		return min(watchBudget, watchTimeout/4)
	}
	return watchBudget
}

func newWatcher(log *slog.Logger, gap, budget time.Duration, fetch func(context.Context, *crawl.Batch) (*crawl.BatchResult, error)) *watcher {
	return &watcher{log: log, fetch: fetch, gap: gap, budget: budget, hosts: map[string][]shard.Record{},
		queued: map[shard.RecordID]int{}, wake: make(chan struct{}, 1)}
}

// Watch queues recs that position pos's manager hands over (by host, once
// each) for Run.
func (w *watcher) Watch(_ context.Context, pos int, owner string, recs []shard.Record) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, r := range recs {
		id := shard.IDOf(r)
		if _, ok := w.queued[id]; ok || len(w.queued) >= watchMax {
			continue
		}
		host, err := urls.HostOf(r.URL)
		if err != nil || urls.HostKey(host) != r.Key {
			continue // not a host-keyed record: no batch can carry it
		}
		if len(w.hosts[host]) == 0 {
			w.order = append(w.order, host)
		}
		w.hosts[host] = append(w.hosts[host], r)
		w.queued[id] = pos
		n++
	}
	if n > 0 {
		w.log.Info("fetching a predecessor's pending URLs it neither fetched nor explained", "owner", owner, "urls", n)
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// next returns the oldest host's next batch.
func (w *watcher) next() (string, []shard.Record) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.order) > 0 {
		host := w.order[0]
		recs := w.hosts[host]
		if len(recs) == 0 {
			w.order = w.order[1:]
			delete(w.hosts, host)
			continue
		}
		return host, recs[:min(len(recs), crawl.MaxDelegateTasks)]
	}
	return "", nil
}

// byPosition splits recs, all queued, by the position that handed each
// over.
func (w *watcher) byPosition(recs []shard.Record) map[int][]shard.Record {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[int][]shard.Record, 1)
	for _, r := range recs {
		pos := w.queued[shard.IDOf(r)]
		out[pos] = append(out[pos], r)
	}
	return out
}

// finish forgets the records of host that were fetched (the first n of
// its batch) and moves the host to the back of the line.
func (w *watcher) finish(host string, batch []shard.Record, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range batch[:n] {
		delete(w.queued, shard.IDOf(r))
	}
	w.hosts[host] = w.hosts[host][n:]
	if len(w.order) > 0 && w.order[0] == host {
		w.order = append(w.order[1:], host)
	}
}

// Run fetches the queued records until ctx is done.
func (w *watcher) Run(ctx context.Context) {
	for {
		host, batch := w.next()
		if host == "" {
			select {
			case <-ctx.Done():
				return
			case <-w.wake:
			}
			continue
		}
		b := &crawl.Batch{Host: host, RingKey: urls.HostKey(host), Gap: w.gap, Budget: w.budget, Wait: w.budget + watchRequest}
		for _, r := range batch {
			b.Tasks = append(b.Tasks, crawl.BatchTask{Task: frontier.Task{URL: r.URL, Depth: r.Depth, Redirects: r.Redirects}})
		}
		res, err := w.fetch(ctx, b)
		n := 0
		var done []shard.Record
		if err == nil {
			for i, tr := range res.Results {
				if !tr.Finished {
					break
				}
				r := batch[i]
				r.Done = true
				done = append(done, r)
				n = i + 1
			}
		}
		if len(done) > 0 {
			w.fetched.Add(int64(len(done)))
			for pos, recs := range w.byPosition(done) {
				if err := w.done(ctx, pos, recs); err != nil {
					w.log.Debug("report pages fetched for a predecessor", "host", host, "position", pos, "err", err)
				}
			}
		}
		w.finish(host, batch, n)
		switch {
		case errors.Is(err, crawl.ErrBusy) || err == nil && n == 0:
			select {
			case <-ctx.Done():
				return
			case <-time.After(watchBusyPause):
			}
		case err != nil:
			w.log.Warn("fetch a predecessor's pending URLs", "host", host, "err", err)
			w.finish(host, batch[n:], len(batch)-n) // a batch the crawler refuses is dropped
		}
	}
}

// holdTasks answers a sender that asks this node to hold tasks for owner,
// its predecessor, whose acknowledgement no receipt vouched for
// (route.Owner.AcceptFor), within the sender's task quota.
func (n *Node) holdTasks(ctx context.Context, in p2p.Inbound, owner string, tasks []*pb.Task) *pb.TaskBatchResult {
	if ok, after := n.taskQuota.take(in.From, len(tasks)); !ok {
		return &pb.TaskBatchResult{RetryAfterNs: int64(after), Error: "over the task quota"}
	}
	res, err := n.owner.AcceptFor(ctx, decodeTasks(tasks), owner)
	if err != nil {
		return &pb.TaskBatchResult{Error: err.Error()}
	}
	out := &pb.TaskBatchResult{Accepted: uint32(res.Accepted), Duplicates: uint32(res.Duplicates), NotOwned: encodeTasks(res.NotOwned)}
	for _, r := range res.Rejected {
		out.Rejected = append(out.Rejected, &pb.Rejection{Url: r.URL, Reason: r.Reason})
	}
	return out
}

var _ route.FallbackTransport = taskSender{}

// SendFor implements route.FallbackTransport.
func (t taskSender) SendFor(ctx context.Context, to, owner ring.Peer, tasks []route.Task) (route.Result, error) {
	resp, err := t.tasks.SendFor(ctx, to, owner, encodeTasks(tasks))
	if err != nil {
		return route.Result{}, err
	}
	res := route.Result{Accepted: int(resp.Accepted), Duplicates: int(resp.Duplicates), NotOwned: decodeTasks(resp.NotOwned)}
	for _, r := range resp.Rejected {
		res.Rejected = append(res.Rejected, route.Rejection{URL: r.Url, Reason: r.Reason})
	}
	return res, nil
}
