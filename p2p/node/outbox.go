package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/internal/recent"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// outbox holds the tasks this node must deliver to their owners (links
// its crawler found, seeds no owner took at once) until an owner settles
// each: accepts it, reports it a duplicate, or rejects it as malformed. A
// task is written to the store before the crawler forgets the page it came
// from and deleted once settled, so a crash loses no discovered link. The
// router takes due tasks out, delivers them and hands back what it could
// not deliver.
//
// At most memory tasks are held in memory; beyond that the outbox spills:
// new tasks wait in the store only, in order, and are read back as the
// ones in memory are delivered. Nothing is lost and memory stays bounded
// however long owners stay out of reach.
type outbox struct {
	db     *store.DB
	log    *slog.Logger
	memory int // the most tasks held in memory (those the store refused aside)

	// add serialises Add (and Load) from writing to the store to placing
	// the tasks, so that tasks are spilled in the order of their IDs.
	add sync.Mutex
	// refill serialises reading spilled tasks back.
	refill sync.Mutex

	mu         sync.Mutex
	pending    []pending
	delivering int // tasks taken out and not yet settled or handed back
	// live holds the entries in memory not yet settled; pageLinks the
	// entries of each page's links, until someone asks for them
	// (TakeLinks).
	live      map[uint64]struct{}
	pageLinks map[string][]uint64
	// spilled counts the tasks only in the store: exactly its entries
	// from spillFrom on. While there are any, new tasks are spilled too.
	spilled   int
	spillFrom uint64
	wake      chan struct{}

	// recent remembers the URLs settled lately, so that a link already
	// delivered by as short a path is not delivered again (see
	// Discovered).
	recent recentLinks

	// proofs holds the signed statements of the seeds waiting here (nil:
	// none kept): each is stored with its task, and held again when the
	// task is read back.
	proofs *seedProofs
}

// pending is one task waiting for delivery.
type pending struct {
	id        uint64 // outbox entry in the store; 0 if the store refused it
	task      frontier.Task
	attempts  int
	notBefore time.Time
}

var _ crawl.LinkSink = (*outbox)(nil)

// newOutbox returns the outbox of db, holding at most memory tasks in
// memory.
func newOutbox(db *store.DB, log *slog.Logger, memory int) *outbox {
	return &outbox{db: db, log: log, memory: max(memory, 1), wake: make(chan struct{}, 1),
		live: map[uint64]struct{}{}, pageLinks: map[string][]uint64{}, recent: newRecentLinks(recentLinksPerGeneration)}
}

// Load puts the tasks a previous run left undelivered back in the outbox:
// up to its memory bound in memory, the rest spilled.
func (o *outbox) Load() (int, error) {
	o.add.Lock()
	defer o.add.Unlock()
	var loaded []pending
	var spilled int
	var spillFrom uint64
	o.mu.Lock()
	room := o.memory - len(o.pending) - o.delivering
	o.mu.Unlock()
	err := o.db.ScanOutbox(func(e store.OutboxEntry) error {
		if len(loaded) < room && spilled == 0 {
			o.holdProof(e)
			loaded = append(loaded, pending{id: e.ID, task: frontier.Task{URL: e.URL, Depth: e.Depth, Redirects: e.Redirects}, attempts: e.Attempts})
			return nil
		}
		if spilled == 0 {
			spillFrom = e.ID
		}
		spilled++
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("load outbox: %w", err)
	}
	o.mu.Lock()
	o.pending = append(o.pending, loaded...)
	for _, p := range loaded {
		o.live[p.id] = struct{}{}
	}
	if spilled > 0 {
		o.spilled, o.spillFrom = spilled, spillFrom
	}
	o.mu.Unlock()
	if spilled > 0 {
		o.log.Info("outbox spilled: tasks beyond the memory bound wait in the store", "in_memory", len(loaded), "in_store", spilled)
	}
	return len(loaded) + spilled, nil
}

// Discovered implements crawl.LinkSink: links found by this node's crawler
// go through the outbox so fetch workers never wait on the network.
//
// A link that an owner settled lately by as short a path (no greater
// depth, then no more redirects) is dropped here: the owner would call it
// a duplicate, and most links of a page are the same navigation links as
// on its host's other pages. Dropping them spares the store, the router
// and the owner's seen set a round each; a shorter path still goes to the
// owner, which re-opens the URL (see intake).
func (o *outbox) Discovered(_ context.Context, page frontier.Task, links []frontier.Task) {
	links = o.recent.filter(links)
	ids := o.Add(links, 0, time.Now())
	if len(ids) == 0 || page.URL == "" {
		return // no page (a robots.txt's sitemaps): nothing waits for them
	}
	o.mu.Lock()
	o.pageLinks[page.URL] = append(o.pageLinks[page.URL], ids...)
	o.mu.Unlock()
}

// Add records tasks in the durable outbox, due at notBefore after
// attempts failed deliveries, and returns their entries. Beyond the
// outbox's memory bound they wait in the store only. If the store refuses
// them they are still delivered from memory: only the crash protection is
// lost, and the log says so.
func (o *outbox) Add(tasks []frontier.Task, attempts int, notBefore time.Time) []uint64 {
	if len(tasks) == 0 {
		return nil
	}
	entries := make([]store.OutboxEntry, len(tasks))
	for i, t := range tasks {
		entries[i] = store.OutboxEntry{URL: t.URL, Depth: t.Depth, Redirects: t.Redirects, Attempts: attempts}
		if t.Depth == 0 && t.Redirects == 0 && o.proofs != nil {
			if p := o.proofs.get(t.URL); p != "" {
				entries[i].SeedProof = p
			}
		}
	}
	o.add.Lock()
	defer o.add.Unlock()
	if err := o.db.PutOutbox(entries); err != nil {
		o.log.Error("outbox not persisted; links will be lost if the node crashes", "tasks", len(tasks), "err", err)
	}
	var ids []uint64
	o.mu.Lock()
	for i, t := range tasks {
		id := entries[i].ID
		if id != 0 {
			ids = append(ids, id)
		}
		if id != 0 && (o.spilled > 0 || len(o.pending)+o.delivering >= o.memory) {
			if o.spilled == 0 {
				o.spillFrom = id
				o.log.Info("outbox spilled: tasks beyond the memory bound wait in the store", "in_memory", len(o.pending)+o.delivering)
			}
			o.spilled++
			continue
		}
		o.pending = append(o.pending, pending{id: id, task: t, attempts: attempts, notBefore: notBefore})
		if id != 0 {
			o.live[id] = struct{}{}
		}
	}
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
	return ids
}

// TakeLinks returns (and forgets) the outbox entries of the links found on
// page.
func (o *outbox) TakeLinks(page string) []uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	ids := o.pageLinks[page]
	delete(o.pageLinks, page)
	return ids
}

// Settled reports whether every one of the entries ids has been settled
// with an owner (accepted, duplicate or rejected).
func (o *outbox) Settled(ids []uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, id := range ids {
		if _, ok := o.live[id]; ok || o.spilled > 0 && id >= o.spillFrom {
			return false
		}
	}
	return true
}

// Pending is the number of tasks not yet settled with an owner.
func (o *outbox) Pending() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.pending) + o.delivering + o.spilled
}

// Spilled is the number of tasks waiting in the store only.
func (o *outbox) Spilled() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.spilled
}

// InMemory is the number of tasks held in memory.
func (o *outbox) InMemory() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.pending) + o.delivering
}

// errRefillDone stops a store scan once a refill has read enough.
var errRefillDone = errors.New("refill done")

// refillFromStore reads spilled tasks back into memory, in order, once at
// most half of the memory bound is in use.
func (o *outbox) refillFromStore() {
	o.refill.Lock()
	defer o.refill.Unlock()
	o.mu.Lock()
	room := o.memory - len(o.pending) - o.delivering
	from, spilled := o.spillFrom, o.spilled
	o.mu.Unlock()
	if spilled == 0 || room < o.memory/2 {
		return
	}
	var loaded []pending
	err := o.db.ScanOutbox(func(e store.OutboxEntry) error {
		if e.ID < from {
			return nil // in memory, or being delivered
		}
		if len(loaded) == min(room, spilled) {
			return errRefillDone
		}
		o.holdProof(e)
		loaded = append(loaded, pending{id: e.ID, task: frontier.Task{URL: e.URL, Depth: e.Depth, Redirects: e.Redirects}, attempts: e.Attempts})
		return nil
	})
	if err != nil && !errors.Is(err, errRefillDone) {
		o.log.Warn("outbox: reading spilled tasks back failed; trying again later", "err", err)
		return
	}
	if len(loaded) == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, p := range loaded {
		o.live[p.id] = struct{}{}
	}
	o.pending = append(o.pending, loaded...)
	o.spilled -= len(loaded)
	o.spillFrom = loaded[len(loaded)-1].id + 1
}

// holdProof holds the seed statement of an entry read back from the store.
func (o *outbox) holdProof(e store.OutboxEntry) {
	if e.SeedProof != "" && o.proofs != nil && !o.proofs.put(e.URL, e.SeedProof) {
		o.log.Warn("outbox: a seed goes without its signature: too many seeds waiting for their owners", "url", e.URL)
	}
}

// Wake is signalled when tasks are added.
func (o *outbox) Wake() <-chan struct{} { return o.wake }

// takeDue removes up to max due tasks, to be delivered and then handed to
// settle. Spilled tasks are read back first when there is room for them.
func (o *outbox) takeDue(max int) (due []pending, more bool) {
	o.refillFromStore()
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	keep := o.pending[:0]
	for _, p := range o.pending {
		if len(due) < max && !now.Before(p.notBefore) {
			due = append(due, p)
		} else {
			keep = append(keep, p)
		}
	}
	clear(o.pending[len(keep):])
	o.pending = keep
	o.delivering += len(due)
	return due, len(due) == max
}

// settle ends a delivery of due: the tasks in undelivered go back for a
// later attempt (after a backoff), every other one is settled and leaves
// the store.
//
// The URLs in refused (an owner refused them, e.g. as out of its scope)
// are not remembered as delivered: an owner whose scope widens later
// takes them when they come again.
func (o *outbox) settle(due []pending, undelivered []frontier.Task, refused ...string) {
	left := map[string]int{}
	for _, t := range undelivered {
		left[t.URL]++
	}
	skip := make(map[string]bool, len(refused))
	for _, u := range refused {
		skip[u] = true
	}
	var settled []uint64
	var retry, done []pending
	for _, p := range due {
		switch {
		case left[p.task.URL] > 0:
			left[p.task.URL]--
			retry = append(retry, p)
		case p.id != 0:
			settled = append(settled, p.id)
			fallthrough
		default:
			if !skip[p.task.URL] {
				done = append(done, p)
			}
		}
	}
	o.recent.settled(done)
	if len(settled) > 0 {
		if err := o.db.DeleteOutbox(settled); err != nil {
			o.log.Warn("outbox cleanup failed; tasks may be delivered again after a restart", "err", err)
		}
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.delivering -= len(due)
	for _, id := range settled {
		delete(o.live, id)
	}
	for _, p := range retry {
		p.attempts++
		if p.attempts == warnAttempts {
			o.log.Warn("task still undelivered", "url", p.task.URL, "attempts", p.attempts)
		}
		p.notBefore = now.Add(backoff(p.attempts))
		o.pending = append(o.pending, p)
	}
}

// recentLinksPerGeneration bounds the URLs recentLinks remembers: two
// generations of at most this many, about 20 bytes each.
const recentLinksPerGeneration = 1 << 17

// recentLinks remembers, for the URLs settled lately, the shortest path
// (depth, redirects) by which each was delivered, keyed by URL hash. It
// keeps two generations: when the current one is full it becomes the
// previous one and the oldest is forgotten, so memory stays bounded and
// URLs still being linked to stay remembered.
type recentLinks struct {
	mu      sync.Mutex
	ranks   recent.Map[uint64, uint32] // URL hash -> pathRank
	dropped atomic.Int64
}

func newRecentLinks(limit int) recentLinks {
	return recentLinks{ranks: recent.New[uint64, uint32](limit)}
}

// pathRank orders paths: by depth, then by redirects.
func pathRank(t frontier.Task) uint32 {
	return uint32(min(max(t.Depth, 0), 1<<23-1))<<8 | uint32(min(max(t.Redirects, 0), 255))
}

// filter returns the links not delivered lately by as short a path,
// leaving links itself as it was.
func (r *recentLinks) filter(links []frontier.Task) []frontier.Task {
	r.mu.Lock()
	defer r.mu.Unlock()
	var kept []frontier.Task // a copy from the first dropped link on: links is the caller's
	copied := false
	for i, l := range links {
		rank, ok := r.ranks.Get(urls.URLHash(l.URL))
		if ok && rank <= pathRank(l) {
			r.dropped.Add(1)
			if !copied {
				kept, copied = append(make([]frontier.Task, 0, len(links)-1), links[:i]...), true
			}
			continue
		}
		if copied {
			kept = append(kept, l)
		}
	}
	if !copied {
		return links
	}
	return kept
}

// settled remembers delivered tasks.
func (r *recentLinks) settled(tasks []pending) {
	if len(tasks) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range tasks {
		h, rank := urls.URLHash(p.task.URL), pathRank(p.task)
		if old, ok := r.ranks.Current(h); ok && old <= rank {
			continue
		}
		r.ranks.Put(h, rank)
	}
}

// Dropped counts the links Discovered dropped as delivered lately.
func (o *outbox) Dropped() int64 { return o.recent.dropped.Load() }
