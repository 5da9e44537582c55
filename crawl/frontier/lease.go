package frontier

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// Lease is a holder's hold on one host, from Next or TryNext to End: the
// host's single request slot. It hands out the host's tasks (Task, Next)
// and records what the holder did with them and with the host, so that
// End alone cleans up, whatever the holder's path:
//
//   - a task taken under the lease is the lease's until the holder Keeps
//     it (a request was made, or it was dropped, and the holder records
//     its outcome with Frontier.Complete); End puts back every task not
//     kept, at the head of its host's queue;
//   - a page budget reservation (Reserve) of a task that is not kept is
//     given back at End;
//   - End sets the host's next turn from the last request under the lease
//     (Contacted), its Crawl-delay (RaiseCrawlDelay), a Retry-After
//     (SlowUntil, durable), a deferral (DeferUntil) or nothing at all (no
//     request: the host keeps the next-allowed time of its last one), and
//     parks the host when the ownership gate refused it (Park).
//
// A Lease belongs to one goroutine; only Frontier.Complete may be called
// from others.
type Lease struct {
	f     *Frontier
	q     *hostQueue
	first Task
	// notBefore is the host's next-allowed time when it was leased: up to
	// Config.LeaseAhead after that.
	notBefore time.Time

	// What End makes of the host; set by the holder alone.
	last       time.Time // when the last request was answered; zero before the first
	crawlDelay time.Duration
	// crawlDelayKnown is set once the holder read the host's robots.txt
	// rules (RaiseCrawlDelay): End then keeps crawlDelay in the host's
	// durable state.
	crawlDelayKnown bool
	slowUntil       time.Time // a Retry-After: the host stays closed until then, durably
	deferUntil      time.Time
	deferred        bool
	parked          bool

	// Guarded by f.mu: Frontier.Complete reads them.
	items []leaseItem // tasks taken under the lease, in order
	ended bool
}

// leaseItem is a task taken under a lease.
type leaseItem struct {
	seq      uint64 // its queue entry's sequence number
	task     Task
	reserved bool // counted against the page budget
	kept     bool // settled by the holder: End leaves it alone
}

// leaseLocked leases q, which must have a head and have been marked busy,
// with its head task.
func (f *Frontier) leaseLocked(q *hostQueue) *Lease {
	e := f.takeLocked(q)
	l := &Lease{f: f, q: q, first: taskOf(&e), notBefore: q.nextAllowed}
	l.items = []leaseItem{{seq: e.Seq, task: l.first}}
	q.lease = l
	return l
}

// NotBefore is when the first request under the lease may start: the
// host's next-allowed time, which the frontier leases up to
// Config.LeaseAhead ahead of. On a store an earlier run wrote to, it is
// also not before the lease's gap (RaiseCrawlDelay raises it) has passed
// since this run started: that run may have contacted the host right
// before it ended, and when is not kept.
func (l *Lease) NotBefore() time.Time {
	if l.f.reopened.IsZero() {
		return l.notBefore
	}
	return latest(l.notBefore, l.f.reopened.Add(l.Gap()))
}

// Host returns the leased host: a lowercase hostname without port.
func (l *Lease) Host() string { return l.q.host }

// Task returns the task the lease was handed out with, the host's head
// when it was leased.
func (l *Lease) Task() Task { return l.first }

// Next takes the leased host's next task without waiting. It lets the
// holder skip tasks that need no request, such as those robots.txt
// forbids, without paying the host's delay for each one. It reports false
// when the host has nothing more now, when the lease has ended, and when a
// Fence holds the next task (the host comes back once it is lifted).
func (l *Lease) Next() (Task, bool) {
	f := l.f
	f.mu.Lock()
	defer f.mu.Unlock()
	q := l.q
	if l.ended || !f.ensureHeadLocked(q) {
		return Task{}, false
	}
	if f.fencedLocked(&q.buf[0]) {
		q.held = true // the lease ends without it
		return Task{}, false
	}
	e := f.takeLocked(q)
	t := taskOf(&e)
	l.items = append(l.items, leaseItem{seq: e.Seq, task: t})
	return t, true
}

// errNotHeld is the error of Keep and Reserve for a task the lease does
// not hold.
var errNotHeld = errors.New("not a task the lease holds")

// Keep takes t out of the lease: its holder records t's outcome with
// Frontier.Complete, now or after End, and End neither puts it back nor
// gives back its budget reservation. It fails for a task the lease does
// not hold (never taken under it, or kept already).
func (l *Lease) Keep(t Task) error {
	f := l.f
	f.mu.Lock()
	defer f.mu.Unlock()
	it := l.heldLocked(t, false)
	if it == nil {
		return fmt.Errorf("frontier: keep %q: %w", urls.Truncate(t.URL, 80), errNotHeld)
	}
	it.kept = true
	return nil
}

// Reserve counts t, a first fetch of a new page, against its host's page
// budget; it reports false, counting nothing, when the budget is spent or
// t is not a task the lease holds (and has not reserved yet). The reservation stays if t is kept, and
// is given back at End otherwise, when no request was made for it after
// all.
func (l *Lease) Reserve(t Task) bool {
	f := l.f
	f.mu.Lock()
	defer f.mu.Unlock()
	it := l.heldLocked(t, true)
	if it == nil || f.budget > 0 && l.q.state.Fetched >= f.budget {
		return false
	}
	l.q.state.Fetched++
	l.q.stateDirty = true
	it.reserved = true
	return true
}

// heldLocked returns the item of a task the lease holds and has not kept,
// one not reserved yet when unreserved is set, or nil (also once the lease
// has ended). Equal tasks, a URL queued twice, are interchangeable.
func (l *Lease) heldLocked(t Task, unreserved bool) *leaseItem {
	if l.ended {
		return nil
	}
	for i := range l.items {
		it := &l.items[i]
		if !it.kept && it.task == t && !(unreserved && it.reserved) {
			return it
		}
	}
	return nil
}

// holdsLocked reports whether the queue entry seq is a task of the lease
// that it has not kept.
func (l *Lease) holdsLocked(seq uint64) bool {
	return slices.ContainsFunc(l.items, func(it leaseItem) bool { return it.seq == seq && !it.kept })
}

// TakenTwice reports whether another task for the same URL as t is out of
// the host's queue and not completed: the URL was queued twice, and the
// other copy is being fetched or was kept by an earlier lease.
func (l *Lease) TakenTwice(t Task) bool {
	f := l.f
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for i := range l.q.taken {
		if l.q.taken[i].URL == t.URL {
			n++
		}
	}
	return n > 1
}

// DropQueue removes every queued task of the leased host except recrawls,
// for a host whose page budget is spent, and returns how many it removed.
// It calls dropped, if not nil, with each task it removed, outside the
// frontier's lock, batch by batch. Tasks handed out are not touched.
func (l *Lease) DropQueue(dropped func(Task)) (int, error) {
	n := 0
	for {
		batch, err := l.dropHead()
		n += len(batch)
		if dropped != nil {
			for i := range batch {
				dropped(taskOf(&batch[i]))
			}
		}
		if err != nil || len(batch) == 0 {
			return n, err
		}
	}
}

// dropBatch is how many queue entries one write removes when a host's or
// a key range's queue is dropped.
const dropBatch = 1024

// dropHead removes up to dropBatch queued entries of the leased host,
// recrawls and those handed out excepted, and returns them.
func (l *Lease) dropHead() ([]store.QueueEntry, error) {
	f, q := l.f, l.q
	f.mu.Lock()
	defer f.mu.Unlock()
	if l.ended {
		return nil, fmt.Errorf("frontier: drop queue of host %s: lease ended", q.host)
	}
	batch, err := f.db.QueueHead(q.key, dropBatch, takenFilter(q.taken, true))
	if err == nil && len(batch) > 0 {
		var counts store.QueueCounts
		// Just read under the lock that every removal from the queue
		// takes: the entries are there, the store need not look them up.
		if counts, err = f.db.ApplyQueue(&store.QueueUpdate{RemoveKnown: batch}); err == nil {
			f.counts = counts
		}
	}
	if err != nil {
		return nil, fmt.Errorf("frontier: drop queue of host %s: %w", q.host, err)
	}
	q.forgetHead() // recrawls may remain
	q.state.Dropped += int64(len(batch))
	q.stateDirty = true
	return batch, nil
}

// Contacted records that the host answered a request under the lease at
// at (its response headers arrived; for a request that failed, when it
// failed): the host's next request waits the gap from there.
func (l *Lease) Contacted(at time.Time) { l.last = at }

// Last returns when the last request under the lease was answered, or
// zero when none was made.
func (l *Lease) Last() time.Time { return l.last }

// RaiseCrawlDelay raises the host's Crawl-delay for the gap after this
// lease's requests to d, if d is larger (the frontier caps it; see Gap).
// The holder calls it with the Crawl-delay of the host's robots.txt rules
// whenever it reads them, 0 included: End keeps the value in the host's
// durable state, so that a restarted run knows it before it has the
// host's robots.txt again (see NotBefore).
func (l *Lease) RaiseCrawlDelay(d time.Duration) {
	l.crawlDelay = max(l.crawlDelay, d)
	l.crawlDelayKnown = true
}

// Gap is the pause after each request under the lease: the frontier's
// delay, or the host's Crawl-delay so far when larger.
func (l *Lease) Gap() time.Duration { return l.f.Gap(l.crawlDelay) }

// SlowUntil keeps the host closed until t at least, durably, so that a
// restarted node honours it too: how a server's Retry-After slows the whole
// host. A later call replaces an earlier one.
func (l *Lease) SlowUntil(t time.Time) { l.slowUntil = t }

// DeferUntil keeps the host closed until t at least, for example while its
// robots.txt is unavailable; a Retry-After beyond t wins. Unlike SlowUntil
// it is not kept in the store.
func (l *Lease) DeferUntil(t time.Time) { l.deferred, l.deferUntil = true, t }

// Park takes the host out of the scheduler at End, its queue left in the
// store and its head forgotten, until Resume or a Push brings it back: the
// ownership gate refused its task.
func (l *Lease) Park() { l.parked = true }

// End ends the lease: it puts back, at the head of the host's queue, every
// task taken under the lease and not kept, gives back their budget
// reservations, parks the host if asked, and frees the host for its next
// turn: not before the gap after the last request (when one was made), a
// deferral or a Retry-After, whichever is latest. Calling it again does
// nothing.
func (l *Lease) End() {
	f, q := l.f, l.q
	f.mu.Lock()
	defer f.mu.Unlock()
	if l.ended {
		return
	}
	l.ended = true
	for _, it := range l.items {
		if it.kept {
			continue
		}
		if it.reserved && q.state.Fetched > 0 {
			q.state.Fetched--
			q.stateDirty = true
		}
		f.putBackLocked(q, it.seq)
	}
	if l.parked {
		f.parkLocked(q)
	}
	if l.crawlDelayKnown && l.crawlDelay != q.state.CrawlDelay {
		// Written now, not with the host's next completion: a run that
		// ends before that must still leave the Crawl-delay to the next.
		q.state.CrawlDelay = l.crawlDelay
		q.stateDirty = true
		if err := f.applyLocked(&store.QueueUpdate{Hosts: []store.HostState{q.state}}); err == nil {
			q.stateDirty = false
		} // else written with the host's next completion
	}
	q.lease = nil
	if !l.last.IsZero() {
		q.contacted = true
	}
	until, persist := l.nextAllowed()
	f.freeLocked(q, until, persist)
}

// nextAllowed is when the host may be contacted again after the lease,
// and whether that time must survive a restart (a Retry-After). Zero means
// no constraint of this lease's: no request was made.
func (l *Lease) nextAllowed() (time.Time, bool) {
	var afterGap time.Time
	if !l.last.IsZero() {
		afterGap = l.last.Add(l.Gap())
	}
	switch {
	case l.deferred && !l.slowUntil.After(l.deferUntil):
		return latest(l.deferUntil, afterGap), false
	case !l.slowUntil.IsZero():
		return latest(l.slowUntil, afterGap), true
	}
	return afterGap, false
}

// latest returns the later of two times.
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// putBackLocked returns the taken entry seq of q to the head of its queue.
func (f *Frontier) putBackLocked(q *hostQueue, seq uint64) {
	i := slices.IndexFunc(q.taken, func(e store.QueueEntry) bool { return e.Seq == seq })
	if i < 0 {
		return // cannot happen: only Complete removes taken entries, and only kept ones
	}
	e := q.taken[i]
	q.taken = slices.Delete(q.taken, i, i+1)
	f.taken--
	f.insertLocked(q, e)
}

// freeLocked frees a leased host: it may be contacted again once
// nextAllowed has passed (zero: its earlier time stands), durably when
// persist is set.
func (f *Frontier) freeLocked(q *hostQueue, nextAllowed time.Time, persist bool) {
	q.busy = false
	f.inFlight--
	f.signalLocked()
	if nextAllowed.After(q.nextAllowed) {
		q.nextAllowed = nextAllowed
	}
	if persist && nextAllowed.After(q.state.NotBefore) {
		q.state.NotBefore = nextAllowed
		q.stateDirty = true
	}
	if !q.hasWork() {
		return // kept until its delay passes, so a new push still waits
	}
	f.scheduleLocked(q)
	f.broadcastLocked()
}
