package node

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// acceptResult tells a sender what an owner did with its tasks.
type acceptResult struct {
	accepted   int             // new URLs queued here
	duplicates int             // already in the seen set
	notOwned   []frontier.Task // keys outside this node's range: the sender must look again
	rejected   []rejection     // malformed URLs, refused for good
}

// rejection is a URL refused for good, with the reason.
type rejection struct {
	url, reason string
}

// owner is the receiving side of routing: it takes tasks whose keys fall
// in this node's range, replicates the new ones to the successors before
// acknowledging them (sync-on-accept) and queues them.
type owner struct {
	// own says which keys this node may accept now; shard replicates the
	// new URLs; intake deduplicates and queues them.
	own     *shard.Ownership
	shard   *shard.Manager
	intake  *intake
	keyMode urls.KeyMode
	// maxDepth refuses tasks deeper than the crawl would follow, so a
	// broken peer cannot push unbounded-depth work.
	maxDepth int

	// What became of the URLs offered (the metrics' dedupe hit rate).
	accepted, duplicates, rejected atomic.Int64
}

// Accept takes tasks routed to this node. Every task ends up in exactly
// one of accepted, duplicates, notOwned or rejected.
func (o *owner) Accept(ctx context.Context, tasks []frontier.Task) (res acceptResult, err error) {
	defer func() { o.count(res) }()
	entries := make([]store.SeenEntry, 0, len(tasks))
	queued := make([]frontier.Task, 0, len(tasks))
	for _, t := range tasks {
		// Normalise again: the sender may be buggy or hostile, and the
		// seen set is only as good as the canonical form it stores.
		u, err := urls.Normalize(nil, t.URL)
		if err != nil {
			res.rejected = append(res.rejected, rejection{t.URL, err.Error()})
			continue
		}
		if t.Depth < 0 || t.Depth > o.maxDepth {
			res.rejected = append(res.rejected, rejection{t.URL, fmt.Sprintf("depth %d outside 0..%d", t.Depth, o.maxDepth)})
			continue
		}
		key, err := urls.TaskKey(u, o.keyMode)
		if err != nil {
			res.rejected = append(res.rejected, rejection{t.URL, err.Error()})
			continue
		}
		if !o.own.Owns(key) {
			res.notOwned = append(res.notOwned, t)
			continue
		}
		entries = append(entries, store.SeenEntry{Key: key, URLHash: urls.URLHash(u), URL: u, Depth: t.Depth})
		queued = append(queued, frontier.Task{URL: u, Depth: t.Depth, Redirects: t.Redirects})
	}
	if len(entries) == 0 {
		return res, nil
	}
	// Sync-on-accept: the replicas hold the new URLs before the sender is
	// told they are accepted. A node that learns here that it is stale, or
	// whose range moved meanwhile, hands the tasks back as not owned, and
	// the sender routes them to the new owner.
	fresh, dups, err := o.intake.Admit(entries, queued, func(fresh []frontier.Task, seen []store.SeenEntry) error {
		recs := make([]shard.Record, len(fresh))
		for i, e := range seen {
			recs[i] = shard.Record{Key: e.Key, Hash: e.URLHash, URL: e.URL, Depth: e.Depth, Redirects: fresh[i].Redirects}
		}
		return o.shard.Accept(ctx, recs)
	})
	res.duplicates = dups
	switch {
	case errors.Is(err, shard.ErrNotOwned) || errors.Is(err, shard.ErrStale):
		res.notOwned = append(res.notOwned, fresh...)
		return res, nil
	case err != nil:
		return res, fmt.Errorf("accept %d tasks: %w", len(fresh), err)
	}
	res.accepted = len(fresh)
	return res, nil
}

// count adds an Accept's outcome to the owner's counters.
func (o *owner) count(res acceptResult) {
	o.accepted.Add(int64(res.accepted))
	o.duplicates.Add(int64(res.duplicates))
	o.rejected.Add(int64(len(res.rejected)))
}
