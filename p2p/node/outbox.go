package node

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// outbox holds the tasks this node must deliver to their owners (links
// its crawler found, seeds no owner took at once) until an owner settles
// each: accepts it, reports it a duplicate, or rejects it as malformed. A
// task is written to the store before the crawler forgets the page it came
// from and deleted once settled, so a crash loses no discovered link. The
// router takes due tasks out, delivers them and hands back what it could
// not deliver.
type outbox struct {
	db  *store.DB
	log *slog.Logger

	mu         sync.Mutex
	pending    []pending
	delivering int // tasks taken out and not yet settled or handed back
	// live holds the entries not yet settled; pageLinks the entries of
	// each page's links, until someone asks for them (TakeLinks).
	live      map[uint64]struct{}
	pageLinks map[string][]uint64
	wake      chan struct{}
}

// pending is one task waiting for delivery.
type pending struct {
	id        uint64 // outbox entry in the store; 0 if the store refused it
	task      frontier.Task
	attempts  int
	notBefore time.Time
}

var _ crawl.LinkSink = (*outbox)(nil)

func newOutbox(db *store.DB, log *slog.Logger) *outbox {
	return &outbox{db: db, log: log, wake: make(chan struct{}, 1),
		live: map[uint64]struct{}{}, pageLinks: map[string][]uint64{}}
}

// Load puts the tasks a previous run left undelivered back in the outbox.
func (o *outbox) Load() (int, error) {
	var loaded []pending
	err := o.db.ScanOutbox(func(e store.OutboxEntry) error {
		loaded = append(loaded, pending{id: e.ID, task: frontier.Task{URL: e.URL, Depth: e.Depth, Redirects: e.Redirects}, attempts: e.Attempts})
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
	o.mu.Unlock()
	return len(loaded), nil
}

// Discovered implements crawl.LinkSink: links found by this node's crawler
// go through the outbox so fetch workers never wait on the network.
func (o *outbox) Discovered(_ context.Context, page frontier.Task, links []frontier.Task) {
	ids := o.Add(links, 0, time.Now())
	if len(ids) == 0 {
		return
	}
	o.mu.Lock()
	o.pageLinks[page.URL] = append(o.pageLinks[page.URL], ids...)
	o.mu.Unlock()
}

// Add records tasks in the durable outbox, due at notBefore after
// attempts failed deliveries, and returns their entries. If the store
// refuses them they are still delivered from memory: only the crash
// protection is lost, and the log says so.
func (o *outbox) Add(tasks []frontier.Task, attempts int, notBefore time.Time) []uint64 {
	if len(tasks) == 0 {
		return nil
	}
	entries := make([]store.OutboxEntry, len(tasks))
	for i, t := range tasks {
		entries[i] = store.OutboxEntry{URL: t.URL, Depth: t.Depth, Redirects: t.Redirects, Attempts: attempts}
	}
	if err := o.db.PutOutbox(entries); err != nil {
		o.log.Error("outbox not persisted; links will be lost if the node crashes", "tasks", len(tasks), "err", err)
	}
	var ids []uint64
	o.mu.Lock()
	for i, t := range tasks {
		o.pending = append(o.pending, pending{id: entries[i].ID, task: t, attempts: attempts, notBefore: notBefore})
		if id := entries[i].ID; id != 0 {
			o.live[id] = struct{}{}
			ids = append(ids, id)
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
		if _, ok := o.live[id]; ok {
			return false
		}
	}
	return true
}

// Pending is the number of tasks not yet settled with an owner.
func (o *outbox) Pending() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.pending) + o.delivering
}

// Wake is signalled when tasks are added.
func (o *outbox) Wake() <-chan struct{} { return o.wake }

// takeDue removes up to max due tasks, to be delivered and then handed to
// settle.
func (o *outbox) takeDue(max int) (due []pending, more bool) {
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
func (o *outbox) settle(due []pending, undelivered []frontier.Task) {
	left := map[string]int{}
	for _, t := range undelivered {
		left[t.URL]++
	}
	var settled []uint64
	var retry []pending
	for _, p := range due {
		if left[p.task.URL] > 0 {
			left[p.task.URL]--
			retry = append(retry, p)
		} else if p.id != 0 {
			settled = append(settled, p.id)
		}
	}
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
