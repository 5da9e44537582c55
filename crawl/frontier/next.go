package frontier

import (
	"container/heap"
	"context"
	"slices"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// Choosing the next host: the waiting heap (by next-allowed time), the
// ready heap (by head priority), the schedule's due entries, and the
// in-memory heads of the hosts' queues.

// Next blocks until some host may be contacted, then leases that host with
// its head task. The caller must End the lease (see Lease). Next waits on a
// timer for the earliest next-allowed or due time and is woken early by
// Push and by the end of a lease; it never spins. It returns ctx.Err() when
// ctx ends first, and at once when ctx has ended, even if a host is ready:
// a stopping worker must not take (and put back) tasks forever.
func (f *Frontier) Next(ctx context.Context) (*Lease, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		f.mu.Lock()
		l, readyAt := f.tryNextLocked()
		changed := f.changed
		now := f.now()
		f.mu.Unlock()
		if l != nil {
			return l, nil
		}

		var timerC <-chan time.Time
		if !readyAt.IsZero() {
			d := readyAt.Sub(now)
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d) // Go 1.23+ timers need no drain before Reset
			}
			timerC = timer.C
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		case <-timerC:
		}
	}
}

// TryNext is Next without waiting: it returns a lease if a host is ready
// now, or else the earliest time one will be or a scheduled task falls due
// (zero when there is no such time). Deterministic tests drive the frontier
// through it with a fake clock.
func (f *Frontier) TryNext() (l *Lease, ok bool, readyAt time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, readyAt = f.tryNextLocked()
	return l, l != nil, readyAt
}

func (f *Frontier) tryNextLocked() (*Lease, time.Time) {
	f.maybeSweepLocked()
	now := f.now()
	if !f.nextDue.IsZero() && !f.nextDue.After(now) {
		f.promoteLocked(now)
	}
	for len(f.waiting.items) > 0 && !f.waiting.items[0].nextAllowed.After(now.Add(f.leaseAhead)) {
		q := heap.Pop(&f.waiting).(*hostQueue)
		q.heap = nil
		if f.ensureHeadLocked(q) {
			q.heap = &f.ready
			heap.Push(&f.ready, q)
		} else if q.hasWork() {
			f.scheduleLocked(q) // the read failed: try again later
		}
	}
	for len(f.ready.items) > 0 {
		q := heap.Pop(&f.ready).(*hostQueue)
		q.heap = nil
		if f.fencedLocked(&q.buf[0]) {
			q.held = true // until the fence is lifted
			continue
		}
		q.busy = true
		f.inFlight++
		return f.leaseLocked(q), time.Time{}
	}
	var readyAt time.Time
	if len(f.waiting.items) > 0 {
		readyAt = f.waiting.items[0].nextAllowed.Add(-f.leaseAhead)
	}
	if !f.nextDue.IsZero() && (readyAt.IsZero() || f.nextDue.Before(readyAt)) {
		readyAt = f.nextDue
	}
	return nil, readyAt
}

// scheduleLocked puts an idle host with work into the waiting heap.
func (f *Frontier) scheduleLocked(q *hostQueue) {
	if q.busy || q.heap != nil || q.parked || q.held || !q.hasWork() {
		return
	}
	f.seq++
	q.seq = f.seq
	q.heap = &f.waiting
	heap.Push(&f.waiting, q)
}

// ensureHeadLocked loads the head of q from the store when the in-memory
// part is used up; it reports whether q has a task. A failed read closes
// the host for a second rather than lose its queue.
func (f *Frontier) ensureHeadLocked(q *hostQueue) bool {
	if len(q.buf) > 0 || !q.more {
		return len(q.buf) > 0
	}
	var after *store.QueueEntry
	if q.readKnown {
		after = &q.readTo
	}
	head, err := f.db.QueueHeadAfter(q.key, after, hostBufLen, takenFilter(q.taken, false))
	if err != nil {
		f.storeErrs++
		q.nextAllowed = f.now().Add(time.Second)
		return false
	}
	q.buf = head
	q.more = len(head) == hostBufLen
	if len(head) > 0 {
		q.readTo, q.readKnown = head[len(head)-1], true
	}
	return len(head) > 0
}

// takenFilter is the store filter that skips the entries handed out (taken)
// and, with recrawls set, every recrawl too.
func takenFilter(taken []store.QueueEntry, recrawls bool) func(e *store.QueueEntry) bool {
	return func(e *store.QueueEntry) bool {
		return recrawls && e.Recrawl || slices.ContainsFunc(taken, func(t store.QueueEntry) bool { return t.Seq == e.Seq })
	}
}

// fencedLocked reports whether a Fence holds the entry's ring key.
func (f *Frontier) fencedLocked(e *store.QueueEntry) bool {
	for _, fc := range f.fences {
		if fc.in(e.RingKey) {
			return true
		}
	}
	return false
}

// signalLocked wakes the fences waiting for tasks in flight to end.
func (f *Frontier) signalLocked() {
	if len(f.fences) > 0 {
		close(f.fenceCh)
		f.fenceCh = make(chan struct{})
	}
}

// promoteLocked moves due scheduled entries into their hosts' queues.
func (f *Frontier) promoteLocked(now time.Time) {
	due, err := f.db.PromoteDue(now, promoteBatch)
	if err != nil {
		f.storeErrs++
		f.nextDue = now.Add(time.Second) // try again, without spinning
		return
	}
	for _, e := range due {
		host, err := urls.HostOf(e.URL)
		if err != nil {
			continue // cannot happen: only URLs with a host are queued
		}
		q, err := f.hostLocked(host, e.HostKey)
		if err != nil {
			// The entry is in the queue table: the next Resume (or
			// restart) brings the host into memory. Until then, treat
			// the host as idle.
			f.storeErrs++
			f.orphans[host] = e.HostKey
			continue
		}
		f.insertLocked(q, e)
		if !q.busy && q.heap == nil {
			f.scheduleLocked(q)
		}
	}
	if counts, err := f.db.QueueCounts(); err == nil {
		f.counts = counts
	}
	if len(due) == promoteBatch {
		return // more may be due: promote them on the next call
	}
	if err := f.refreshDueLocked(); err != nil {
		f.storeErrs++
		f.nextDue = now.Add(time.Second)
	}
}

// takeLocked hands out the head entry of q, which must have one.
func (f *Frontier) takeLocked(q *hostQueue) store.QueueEntry {
	e := q.buf[0]
	q.buf = slices.Delete(q.buf, 0, 1)
	q.taken = append(q.taken, e)
	f.taken++
	return e
}
