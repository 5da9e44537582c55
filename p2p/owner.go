package p2p

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// acceptResult tells a sender what an owner did with its tasks.
type acceptResult struct {
	accepted   int          // new URLs queued here
	duplicates int          // already in the seen set
	notOwned   []crawl.Task // keys outside this node's range: the sender must look again
	rejected   []rejection  // malformed URLs, refused for good
}

// rejection is a URL refused for good, with the reason.
type rejection struct {
	url, reason string
}

// owner is the receiving side of routing: it deduplicates tasks whose keys
// fall in this node's range against the seen set and queues the new ones.
type owner struct {
	// mu serialises Accept: between checking the seen set and marking it,
	// a concurrent batch with the same URL must not slip through.
	mu sync.Mutex
	// shard says which keys this node may accept (its claims, under a
	// valid lease) and replicates new URLs before they are acknowledged.
	shard   *shard.Manager
	db      *store.DB
	crawler *crawl.Crawler
	keyMode crawl.KeyMode
	// maxDepth refuses tasks deeper than the crawl would follow, so a
	// broken peer cannot push unbounded-depth work.
	maxDepth int
}

// Accept takes tasks routed to this node. Every task ends up in exactly
// one of accepted, duplicates, notOwned or rejected.
func (o *owner) Accept(ctx context.Context, tasks []crawl.Task) (acceptResult, error) {
	var res acceptResult
	entries := make([]store.SeenEntry, 0, len(tasks))
	queued := make([]crawl.Task, 0, len(tasks))
	for _, t := range tasks {
		// Normalise again: the sender may be buggy or hostile, and the
		// seen set is only as good as the canonical form it stores.
		u, err := crawl.Normalize(nil, t.URL)
		if err != nil {
			res.rejected = append(res.rejected, rejection{t.URL, err.Error()})
			continue
		}
		if t.Depth < 0 || t.Depth > o.maxDepth {
			res.rejected = append(res.rejected, rejection{t.URL, fmt.Sprintf("depth %d outside 0..%d", t.Depth, o.maxDepth)})
			continue
		}
		key, err := crawl.TaskKey(u, o.keyMode)
		if err != nil {
			res.rejected = append(res.rejected, rejection{t.URL, err.Error()})
			continue
		}
		if !o.shard.Owns(key) {
			res.notOwned = append(res.notOwned, t)
			continue
		}
		entries = append(entries, store.SeenEntry{Key: key, URLHash: crawl.URLHash(u), URL: u, Depth: t.Depth})
		queued = append(queued, crawl.Task{URL: u, Depth: t.Depth, Redirects: t.Redirects})
	}
	if len(entries) == 0 {
		return res, nil
	}
	// Replicate and queue first, then mark seen. The other order loses URLs
	// to a crash in between: the sender's retry would find them "seen" and
	// they would never be crawled. This order at worst queues a URL twice
	// after a crash, and the queue is durable before the seen set says
	// "seen".
	o.mu.Lock()
	defer o.mu.Unlock()
	var fresh []crawl.Task
	var freshEntries []store.SeenEntry
	inBatch := make(map[[2]uint64]bool, len(entries))
	for i, e := range entries {
		id := [2]uint64{e.Key, e.URLHash}
		seen, err := o.db.Seen(e.Key, e.URLHash)
		if err != nil {
			return res, fmt.Errorf("accept %s: %w", e.URL, err)
		}
		if seen || inBatch[id] {
			res.duplicates++
			continue
		}
		inBatch[id] = true
		fresh = append(fresh, queued[i])
		freshEntries = append(freshEntries, e)
	}
	if len(fresh) == 0 {
		return res, nil
	}
	// Sync-on-accept: the replicas hold the new URLs before the sender is
	// told they are accepted. A node that learns here that it is stale, or
	// whose range moved meanwhile, hands the tasks back as not owned, and
	// the sender routes them to the new owner.
	recs := make([]shard.Record, len(fresh))
	for i, e := range freshEntries {
		recs[i] = shard.Record{Key: e.Key, Hash: e.URLHash, URL: e.URL, Depth: e.Depth, Redirects: fresh[i].Redirects}
	}
	if err := o.shard.Accept(ctx, recs); err != nil {
		if errors.Is(err, shard.ErrNotOwned) || errors.Is(err, shard.ErrStale) {
			res.notOwned = append(res.notOwned, fresh...)
			return res, nil
		}
		return res, fmt.Errorf("accept %d tasks: %w", len(fresh), err)
	}
	o.crawler.Enqueue(fresh...)
	if _, err := o.db.MarkSeen(freshEntries); err != nil {
		return res, fmt.Errorf("accept %d tasks: %w", len(freshEntries), err)
	}
	res.accepted = len(fresh)
	return res, nil
}
