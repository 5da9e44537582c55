package frontier

import (
	"container/heap"
	"fmt"
	"slices"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// Writes into the queues: new tasks, dead letters queued again, the
// schedule of URLs taken over from another node, and the outcomes that
// remove tasks from the queue.

// Push writes tasks to their hosts' queues in one batch and returns those
// it dropped: the tasks of a host whose page budget is spent (recrawls
// excepted). A task whose URL has no usable host is reported in the error
// and not queued; the others are.
func (f *Frontier) Push(tasks ...Task) (dropped []Task, err error) {
	return f.push(tasks, nil)
}

// RequeueDeadLetters queues the URLs of dead letters again, with their
// attempts reset, and deletes the dead letters in the same write: each one
// is either still a dead letter or queued again. Like Push, it drops the
// tasks of a host whose page budget is spent.
func (f *Frontier) RequeueDeadLetters(letters []store.DeadLetter) error {
	tasks := make([]Task, len(letters))
	for i, d := range letters {
		tasks[i] = Task{URL: d.URL, Depth: d.Depth, Redirects: d.Redirects}
	}
	_, err := f.push(tasks, letters)
	return err
}

// push is Push deleting the dead letters undead in the same write.
func (f *Frontier) push(tasks []Task, undead []store.DeadLetter) (dropped []Task, err error) {
	var bad []string
	var pushed []Task // tasks[i] of entries[i]
	entries := make([]store.QueueEntry, 0, len(tasks))
	hostOf := make([]string, 0, len(tasks))
	for _, t := range tasks {
		e, host, err := f.entry(t)
		if err != nil {
			bad = append(bad, t.URL)
			continue
		}
		entries = append(entries, e)
		hostOf = append(hostOf, host)
		pushed = append(pushed, t)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	u := &store.QueueUpdate{Undead: undead}
	queues := make([]*hostQueue, 0, len(entries))
	var spent []*hostQueue // hosts whose budget dropped tasks
	for i := range entries {
		q, err := f.hostLocked(hostOf[i], entries[i].HostKey)
		if err != nil {
			return dropped, err
		}
		if f.budget > 0 && q.state.Fetched >= f.budget && !entries[i].Recrawl {
			if !q.stateDirty {
				spent = append(spent, q)
			}
			q.state.Dropped++
			q.stateDirty = true
			dropped = append(dropped, pushed[i])
			continue
		}
		u.Push = append(u.Push, entries[i])
		queues = append(queues, q)
	}
	for _, q := range spent {
		u.Hosts = append(u.Hosts, q.state)
	}
	if err := f.applyLocked(u); err != nil {
		return dropped, err
	}
	for _, q := range spent {
		q.stateDirty = false
	}
	for i, q := range queues {
		if q.parked {
			// A new task of the host: ask the gate again. The store holds
			// the whole queue; its head is read when the host is ready.
			f.setParkedLocked(q, false)
			q.forgetHead()
		}
		f.insertLocked(q, u.Push[i])
		f.scheduleLocked(q)
	}
	if len(queues) > 0 {
		f.broadcastLocked()
	}
	if len(bad) > 0 {
		return dropped, fmt.Errorf("frontier: %d task(s) without a usable host, first %q", len(bad), urls.Truncate(bad[0], 80))
	}
	return dropped, nil
}

// Adopt writes the metadata of URLs another node fetched and schedules
// their recrawls, in one write: what a node needs to take those URLs over.
// A recrawl whose URL has no usable host is left out.
func (f *Frontier) Adopt(meta []store.URLMetaRecord, recrawls []Scheduled) error {
	u := &store.QueueUpdate{URLMeta: meta}
	for _, s := range recrawls {
		e, _, err := f.entry(s.Task)
		if err != nil {
			continue
		}
		e.Due = s.At
		u.Schedule = append(u.Schedule, e)
	}
	if len(u.URLMeta) == 0 && len(u.Schedule) == 0 {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applyLocked(u)
}

// Complete removes a task its lease kept (see Lease.Keep) from the store,
// with the rest of its outcome. It may be called after the lease ended.
func (f *Frontier) Complete(t Task, o Outcome) error {
	host, err := urls.HostOf(t.URL)
	if err != nil {
		return fmt.Errorf("frontier: complete: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.hosts[host]
	i := -1
	if q != nil {
		i = keptIndex(q, t)
	}
	if i < 0 {
		return fmt.Errorf("frontier: complete %q: not kept from a lease", urls.Truncate(t.URL, 80))
	}
	e := q.taken[i]
	// A task handed out is in the store until this removal: no drop
	// touches it (see takenFilter), and nothing else removes queue
	// entries. So the store need not look it up.
	u := &store.QueueUpdate{RemoveKnown: []store.QueueEntry{e}}
	if o.Reschedule != nil {
		next, _, err := f.entry(*o.Reschedule)
		if err != nil {
			return fmt.Errorf("frontier: reschedule: %w", err)
		}
		next.Due = o.At
		u.Schedule = []store.QueueEntry{next}
	}
	if o.Dead != nil {
		u.Dead = []store.DeadLetter{*o.Dead}
	}
	if o.Meta != nil {
		u.URLMeta = []store.URLMetaRecord{{RingKey: e.RingKey, URLHash: e.URLHash, Meta: *o.Meta}}
	}
	if q.stateDirty {
		u.Hosts = []store.HostState{q.state}
		q.stateDirty = false
	}
	if err := f.applyLocked(u); err != nil {
		q.stateDirty = q.stateDirty || len(u.Hosts) > 0
		return err
	}
	q.taken = slices.Delete(q.taken, i, i+1)
	f.taken--
	f.signalLocked()
	return nil
}

// keptIndex finds the entry of a task handed out for q and kept from its
// lease, or -1. The entries the host's current lease still holds are not
// candidates: the same URL may be out twice, and only its holder may settle
// a task of a lease.
func keptIndex(q *hostQueue, t Task) int {
	return slices.IndexFunc(q.taken, func(e store.QueueEntry) bool {
		return e.URL == t.URL && e.Attempts == t.Attempts && e.Recrawl == t.Recrawl &&
			(q.lease == nil || !q.lease.holdsLocked(e.Seq))
	})
}

// applyLocked writes u and takes the new table sizes.
func (f *Frontier) applyLocked(u *store.QueueUpdate) error {
	counts, err := f.db.ApplyQueue(u)
	if err != nil {
		return fmt.Errorf("frontier: %w", err)
	}
	f.counts = counts
	if len(u.Schedule) > 0 {
		for i := range u.Schedule {
			if f.nextDue.IsZero() || u.Schedule[i].Due.Before(f.nextDue) {
				f.nextDue = u.Schedule[i].Due
			}
		}
		f.broadcastLocked()
	}
	return nil
}

// unreadLocked notes that e, in the store, is left out of q's memory: the
// next read of the head starts from the beginning of the queue if the last
// one ended after e.
func (q *hostQueue) unreadLocked(e *store.QueueEntry) {
	if q.readKnown && !q.readTo.Less(e) {
		q.readKnown = false
	}
}

// insertLocked adds an entry that is in the store to the host's in-memory
// head, if it belongs there.
func (f *Frontier) insertLocked(q *hostQueue, e store.QueueEntry) {
	n := len(q.buf)
	if q.more && (n == 0 || !e.Less(&q.buf[n-1])) {
		// Beyond the head: the store has it, a reload will find it (from
		// the start, if the last read ended after it).
		q.unreadLocked(&e)
		return
	}
	i, found := slices.BinarySearchFunc(q.buf, e, func(a, b store.QueueEntry) int {
		switch {
		case a.Less(&b):
			return -1
		case b.Less(&a):
			return 1
		}
		return 0
	})
	if found {
		return
	}
	q.buf = slices.Insert(q.buf, i, e)
	if len(q.buf) > hostBufLen {
		q.unreadLocked(&q.buf[len(q.buf)-1])
		q.buf[len(q.buf)-1] = store.QueueEntry{}
		q.buf = q.buf[:len(q.buf)-1]
		q.more = true
	}
	if i == 0 && q.heap == &f.ready {
		heap.Fix(&f.ready, q.index)
	}
}
