package node

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/swarmcrawl/swarmcrawl/crawl"
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
// in this node's range and in the crawl's scope, replicates the new ones
// to the successors before acknowledging them (sync-on-accept) and queues
// them.
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
	// scope judges every task before it reaches the seen set (the
	// crawler's, with its seeds: the shard records marked seed).
	scope *crawl.Scope

	// What became of the URLs offered (the metrics' dedupe hit rate).
	accepted, duplicates, rejected atomic.Int64
	// outOfScope counts the tasks refused as out of scope, by reason
	// (indexed by crawl.ScopeReason).
	outOfScope [len(crawl.ScopeReasons)]atomic.Int64
}

// scopeHints say what to change for a task refused for each reason.
var scopeHints = map[crawl.ScopeReason]string{
	crawl.NotSeedHost:      "no seed named its host (--scope seed-hosts)",
	crawl.NotSeedDomain:    "no seed named its registrable domain (--scope seed-domains)",
	crawl.Excluded:         "it matches a --scope-exclude pattern",
	crawl.NotIncluded:      "it matches no --scope-include pattern",
	crawl.UnauthorizedSeed: "a seed for a host out of scope, from a peer that may not seed at its owner (--seed-from)",
}

// refuse counts a task refused as out of scope for r.
func (o *owner) refuse(res *acceptResult, t frontier.Task, r crawl.ScopeReason) {
	for i, x := range crawl.ScopeReasons {
		if x == r {
			o.outOfScope[i].Add(1)
		}
	}
	res.rejected = append(res.rejected, rejection{t.URL, fmt.Sprintf("out of scope (%v): %s", r, scopeHints[r])})
}

// OutOfScope returns the tasks refused as out of scope so far, by reason.
func (o *owner) OutOfScope() map[string]int64 {
	out := make(map[string]int64, len(crawl.ScopeReasons))
	for i, r := range crawl.ScopeReasons {
		out[r.String()] = o.outOfScope[i].Load()
	}
	return out
}

// Accept takes tasks routed to this node. Every task ends up in exactly
// one of accepted, duplicates, notOwned or rejected. seeder says whether
// the sender may seed here (see Node.maySeed): its tasks at depth 0 that
// no redirect led to are seeds, which bring their host (or domain) into a
// scoped crawl's scope; anybody else's are links like any other, judged
// by the scope. fromOutbox says that this node sends the tasks itself,
// from its outbox: their shard records are then written without a sync
// (shard.Manager.AcceptOwn), as the outbox keeps the tasks until the
// router settles them after this returns.
func (o *owner) Accept(ctx context.Context, tasks []frontier.Task, seeder, fromOutbox bool) (res acceptResult, err error) {
	defer func() { o.count(res) }()
	offered := make([]admission, 0, len(tasks))
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
		// The scope, before the seen set: a URL refused now is not
		// remembered, so it is taken if the scope takes it later.
		if r := o.scope.Patterns(u); r != crawl.InScope {
			o.refuse(&res, t, r)
			continue
		}
		seed := t.Depth == 0 && t.Redirects == 0 && seeder
		if !seed {
			switch in, err := o.scope.Seeded(u); {
			case err != nil:
				return res, fmt.Errorf("accept %d tasks: %w", len(tasks), err)
			case !in && t.Depth == 0 && t.Redirects == 0:
				o.refuse(&res, t, crawl.UnauthorizedSeed)
				continue
			case !in && o.scope.Config().Mode == crawl.ScopeSeedDomains:
				o.refuse(&res, t, crawl.NotSeedDomain)
				continue
			case !in:
				o.refuse(&res, t, crawl.NotSeedHost)
				continue
			}
		}
		offered = append(offered, admission{
			seen: store.SeenEntry{Key: key, URLHash: urls.URLHash(u), URL: u, Depth: t.Depth},
			task: frontier.Task{URL: u, Depth: t.Depth, Redirects: t.Redirects},
			seed: seed,
		})
	}
	if len(offered) == 0 {
		return res, nil
	}
	// Sync-on-accept: the replicas hold the new URLs before the sender is
	// told they are accepted. A node that learns here that it is stale, or
	// whose range moved meanwhile, hands the tasks back as not owned, and
	// the sender routes them to the new owner.
	fresh, dups, err := o.intake.Admit(offered, func(fresh []admission) error {
		recs := make([]shard.Record, len(fresh))
		for i, a := range fresh {
			e := a.seen
			recs[i] = shard.Record{Key: e.Key, Hash: e.URLHash, URL: e.URL, Depth: e.Depth, Redirects: a.task.Redirects, Seed: a.seed}
		}
		if fromOutbox {
			return o.shard.AcceptOwn(ctx, recs)
		}
		return o.shard.Accept(ctx, recs)
	})
	res.duplicates = dups
	switch {
	case errors.Is(err, shard.ErrNotOwned) || errors.Is(err, shard.ErrStale):
		for _, a := range fresh {
			res.notOwned = append(res.notOwned, a.task)
		}
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
