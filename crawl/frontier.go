package crawl

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// hostBufLen is how many head entries of a host's queue are kept in memory.
// Memory is this times the number of hosts with work, whatever the length
// of their queues; a larger buffer only saves disk reads.
const hostBufLen = 8

// promoteBatch is how many due entries of the schedule are moved into the
// queue in one write.
const promoteBatch = 1024

// Frontier is the durable politeness scheduler of one node. Its queues live
// in the store (see store/queue.go): a back queue per host ordered by
// (priority, sequence), and a schedule of delayed tasks (retries, recrawls)
// ordered by due time. Only a few head entries and the politeness state of
// each host with work are kept in memory, so memory stays flat however long
// the queues grow.
//
// Priority is the front tier: within a host, seeds (depth 0) are served
// first, then recrawls and retries that are due, then discovered pages,
// shallower first (see Priority). Across hosts, a host is ready once its
// next-allowed time has passed, and among ready hosts the one whose head has
// the best priority goes first, ties in the order the hosts became ready.
//
// A host has at most one request in flight: Next hands out a task only for a
// host that is not busy and whose next-allowed time has passed, and marks it
// busy until Done. Done sets the next-allowed time from the moment the
// request completed, so the gap the server sees between the end of one
// request and the start of the next is never shorter than the delay, however
// long the request took.
//
// A task handed out stays in the store until Complete records what became
// of it (fetched, dropped, rescheduled, dead-lettered), so a node that
// crashes serves its in-flight tasks again when it restarts on the same
// store. Delayed tasks move from the schedule into their host's queue when
// they are due.
type Frontier struct {
	db            *store.DB
	delay         time.Duration
	maxCrawlDelay time.Duration
	now           func() time.Time
	// keyMode computes ring keys for the per-URL tables; budget is the
	// per-host page budget (0 = unlimited). Set by the Crawler.
	keyMode urls.KeyMode
	budget  int64

	mu        sync.Mutex
	hosts     map[string]*hostQueue
	waiting   hostHeap // idle hosts with work, by next-allowed time
	ready     hostHeap // idle hosts whose time has come, by head priority
	changed   chan struct{}
	seq       uint64 // heap tie-breaker: equal keys are served in arrival order
	counts    store.QueueCounts
	taken     int // entries handed out and not yet completed or requeued
	inFlight  int // leased hosts
	nextDue   time.Time
	ops       int // operations since the last sweep of idle hosts
	storeErrs int // failed reads of the store, see StoreErrors

	// parked are the hosts whose hostQueue.parked is set, by name: all
	// Resume has to look at. orphans are the hosts (name to host key)
	// whose queue may be in the store while they are not in memory:
	// loading a host's state failed when a scheduled task of its moved
	// into the queue, or a Release in URL-key mode kept entries of a host
	// not in memory. Resume brings them into memory.
	parked  map[string]*hostQueue
	orphans map[string]uint64

	// fences are the ring key sets of the Releases in progress: no entry
	// whose ring key one of them holds is handed out. fenceCh is closed
	// (and replaced) whenever a task or lease ends while there are fences,
	// to wake the Releases waiting for their tasks in flight.
	fences  []*fence
	fenceCh chan struct{}
}

// fence is the ring key set of one Release in progress.
type fence struct {
	in func(ringKey uint64) bool
}

// hostQueue is the in-memory part of one host's back queue and its
// politeness state.
type hostQueue struct {
	host string
	key  uint64
	// buf holds the first entries of the host's queue in the store, minus
	// those taken, in order; more is set when the store may hold entries
	// beyond them.
	buf   []store.QueueEntry
	more  bool
	taken []store.QueueEntry // handed out, still in the store

	nextAllowed time.Time
	busy        bool
	seq         uint64
	index       int // position in its heap, -1 when in none
	heap        *hostHeap

	state      store.HostState // budget and Retry-After, persisted
	stateDirty bool

	// parked is set when Config.Owns refused one of the host's tasks: the
	// host stays out of the heaps, its queue in the store, until Resume or
	// a Push brings it back; Frontier.parked lists it meanwhile (see
	// setParkedLocked). held is set while a Release fences its head
	// task; the end of the Release brings it back.
	parked, held bool

	// hot caches Frontier.backlog's answer for the host until hotUntil:
	// counting a long queue in the store on every lease would cost more
	// than the answer changes.
	hot      bool
	hotUntil time.Time
}

func (q *hostQueue) hasWork() bool { return len(q.buf) > 0 || q.more }

// Priority is the queue priority of a task, smaller first: seeds 0, due
// recrawls and retries 1, discovered pages 1+depth (at most
// store.MaxPriority).
func Priority(t Task) int {
	switch {
	case t.Recrawl || t.Attempts > 0:
		return 1
	case t.Depth <= 0:
		return 0
	}
	return min(1+t.Depth, store.MaxPriority)
}

// NewFrontier returns the frontier kept in db, resuming the queues stored
// there: tasks that were in flight when the last process stopped are
// queued again. It keeps at least delay between requests to one host, or
// the host's Crawl-delay when larger, capped at maxCrawlDelay. now may be
// nil for time.Now.
func NewFrontier(db *store.DB, delay, maxCrawlDelay time.Duration, now func() time.Time) (*Frontier, error) {
	if db == nil {
		return nil, errors.New("frontier: nil store")
	}
	if now == nil {
		now = time.Now
	}
	f := &Frontier{
		db:            db,
		delay:         delay,
		maxCrawlDelay: maxCrawlDelay,
		now:           now,
		hosts:         make(map[string]*hostQueue),
		parked:        make(map[string]*hostQueue),
		orphans:       make(map[string]uint64),
		changed:       make(chan struct{}),
		fenceCh:       make(chan struct{}),
	}
	f.waiting.less = func(a, b *hostQueue) bool {
		if !a.nextAllowed.Equal(b.nextAllowed) {
			return a.nextAllowed.Before(b.nextAllowed)
		}
		return a.seq < b.seq
	}
	f.ready.less = func(a, b *hostQueue) bool {
		if a.buf[0].Priority != b.buf[0].Priority {
			return a.buf[0].Priority < b.buf[0].Priority
		}
		return a.seq < b.seq
	}
	if err := f.load(); err != nil {
		return nil, err
	}
	return f, nil
}

// load rebuilds the in-memory state from the store.
func (f *Frontier) load() error {
	counts, err := f.db.QueueCounts()
	if err != nil {
		return fmt.Errorf("frontier: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts = counts
	err = f.db.QueueHosts(func(head store.QueueEntry) error {
		host, err := urls.HostOf(head.URL)
		if err != nil {
			return fmt.Errorf("frontier: queued url %q: %w", urls.Truncate(head.URL, 80), err)
		}
		q, err := f.hostLocked(host, head.HostKey)
		if err != nil {
			return err
		}
		q.buf = append(q.buf, head)
		q.more = true
		f.scheduleLocked(q)
		return nil
	})
	if err != nil {
		return fmt.Errorf("frontier: resume queue: %w", err)
	}
	return f.refreshDueLocked()
}

// hostLocked returns the queue of host, creating it (and loading its
// durable state) when it is not in memory.
func (f *Frontier) hostLocked(host string, key uint64) (*hostQueue, error) {
	if q := f.hosts[host]; q != nil {
		return q, nil
	}
	st, _, err := f.db.Host(key)
	if err != nil {
		return nil, fmt.Errorf("frontier: host %s: %w", host, err)
	}
	st.HostKey, st.Host = key, host
	q := &hostQueue{host: host, key: key, index: -1, state: st, nextAllowed: st.NotBefore}
	f.hosts[host] = q
	return q, nil
}

// refreshDueLocked reads the due time of the earliest scheduled entry.
func (f *Frontier) refreshDueLocked() error {
	due, ok, err := f.db.NextDue()
	if err != nil {
		return fmt.Errorf("frontier: %w", err)
	}
	f.nextDue = time.Time{}
	if ok {
		f.nextDue = due
	}
	return nil
}

// entry builds the queue entry of a task.
func (f *Frontier) entry(t Task) (store.QueueEntry, string, error) {
	host, err := urls.HostOf(t.URL)
	if err != nil {
		return store.QueueEntry{}, "", err
	}
	hostKey := urls.HostKey(host)
	ring := hostKey // the same hash in the default host-key mode
	if f.keyMode != urls.KeyHost {
		if ring, err = urls.TaskKey(t.URL, f.keyMode); err != nil {
			return store.QueueEntry{}, "", err
		}
	}
	return store.QueueEntry{
		HostKey: hostKey, RingKey: ring, URLHash: urls.URLHash(t.URL), URL: t.URL,
		Depth: t.Depth, Priority: Priority(t), Attempts: t.Attempts, Redirects: t.Redirects, Recrawl: t.Recrawl,
	}, host, nil
}

func taskOf(e *store.QueueEntry) Task {
	return Task{URL: e.URL, Depth: e.Depth, Attempts: e.Attempts, Redirects: e.Redirects, Recrawl: e.Recrawl}
}

// Push writes tasks to their hosts' queues in one batch. Tasks of a host
// whose page budget is spent are dropped (recrawls excepted) and counted in
// the result. A task whose URL has no usable host is reported in the error
// and not queued; the others are.
func (f *Frontier) Push(tasks ...Task) (dropped int, err error) {
	d, err := f.push(tasks, nil)
	return len(d), err
}

// push is Push returning the tasks it dropped; it also deletes the dead
// letters undead in the same write.
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
			// A new task of the host: ask Owns again. The store holds
			// the whole queue; its head is read when the host is ready.
			f.setParkedLocked(q, false)
			q.buf, q.more = nil, true
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

// insertLocked adds an entry that is in the store to the host's in-memory
// head, if it belongs there.
func (f *Frontier) insertLocked(q *hostQueue, e store.QueueEntry) {
	n := len(q.buf)
	if q.more && (n == 0 || !e.Less(&q.buf[n-1])) {
		return // beyond the head: the store has it, a reload will find it
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
		q.buf[len(q.buf)-1] = store.QueueEntry{}
		q.buf = q.buf[:len(q.buf)-1]
		q.more = true
	}
	if i == 0 && q.heap == &f.ready {
		heap.Fix(&f.ready, q.index)
	}
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
	taken := q.taken
	head, err := f.db.QueueHead(q.key, hostBufLen, func(e *store.QueueEntry) bool {
		return slices.ContainsFunc(taken, func(t store.QueueEntry) bool { return t.Seq == e.Seq })
	})
	if err != nil {
		f.storeErrs++
		q.nextAllowed = f.now().Add(time.Second)
		return false
	}
	q.buf = head
	q.more = len(head) == hostBufLen
	return len(head) > 0
}

// Next blocks until some host may be contacted, then takes the head task of
// that host and marks the host busy. The caller must end the lease with Done
// (a request was made) or Release (none was), and the task with Complete or
// Requeue. Next waits on a timer for the earliest next-allowed or due time
// and is woken early by Push and Done; it never spins. It returns ctx.Err()
// when ctx ends first, and at once when ctx has ended, even if a task is
// ready: a stopping worker must not take (and put back) tasks forever.
func (f *Frontier) Next(ctx context.Context) (Task, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return Task{}, err
		}
		f.mu.Lock()
		t, ok, readyAt := f.tryNextLocked()
		changed := f.changed
		now := f.now()
		f.mu.Unlock()
		if ok {
			return t, nil
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
			return Task{}, ctx.Err()
		case <-changed:
		case <-timerC:
		}
	}
}

// TryNext is Next without waiting: it returns the task if a host is ready
// now, or else the earliest time one will be or a scheduled task falls due
// (zero when there is no such time). Deterministic tests drive the frontier
// through it with a fake clock.
func (f *Frontier) TryNext() (t Task, ok bool, readyAt time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tryNextLocked()
}

func (f *Frontier) tryNextLocked() (Task, bool, time.Time) {
	f.maybeSweepLocked()
	now := f.now()
	if !f.nextDue.IsZero() && !f.nextDue.After(now) {
		f.promoteLocked(now)
	}
	for len(f.waiting.items) > 0 && !f.waiting.items[0].nextAllowed.After(now) {
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
			q.held = true // until the Release ends
			continue
		}
		q.busy = true
		f.inFlight++
		return f.takeLocked(q), true, time.Time{}
	}
	var readyAt time.Time
	if len(f.waiting.items) > 0 {
		readyAt = f.waiting.items[0].nextAllowed
	}
	if !f.nextDue.IsZero() && (readyAt.IsZero() || f.nextDue.Before(readyAt)) {
		readyAt = f.nextDue
	}
	return Task{}, false, readyAt
}

// fencedLocked reports whether a Release in progress holds the entry's
// ring key.
func (f *Frontier) fencedLocked(e *store.QueueEntry) bool {
	for _, fc := range f.fences {
		if fc.in(e.RingKey) {
			return true
		}
	}
	return false
}

// signalLocked wakes the Releases waiting for tasks in flight to end.
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

// takeLocked hands out the head task of q, which must have one.
func (f *Frontier) takeLocked(q *hostQueue) Task {
	e := q.buf[0]
	q.buf = slices.Delete(q.buf, 0, 1)
	q.taken = append(q.taken, e)
	f.taken++
	return taskOf(&e)
}

// NextFromHost takes the next task of a host whose lease the caller holds,
// without waiting. It lets a worker skip tasks that need no request, such as
// those robots.txt forbids, without paying the host's delay for each one.
func (f *Frontier) NextFromHost(host string) (Task, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.hosts[host]
	if q == nil || !q.busy || !f.ensureHeadLocked(q) {
		return Task{}, false
	}
	if f.fencedLocked(&q.buf[0]) {
		q.held = true // the lease ends without it
		return Task{}, false
	}
	return f.takeLocked(q), true
}

// takenIndex finds the entry of a task handed out for q, or -1.
func takenIndex(q *hostQueue, t Task) int {
	return slices.IndexFunc(q.taken, func(e store.QueueEntry) bool {
		return e.URL == t.URL && e.Attempts == t.Attempts && e.Recrawl == t.Recrawl
	})
}

// TakenTwice reports whether another task for the same URL as t has been
// handed out and not completed: the URL was queued twice.
func (f *Frontier) TakenTwice(t Task) bool {
	host, err := urls.HostOf(t.URL)
	if err != nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.hosts[host]
	if q == nil {
		return false
	}
	n := 0
	for i := range q.taken {
		if q.taken[i].URL == t.URL {
			n++
		}
	}
	return n > 1
}

// Requeue puts a task taken under the caller's lease back at the head of its
// host's queue, for example because robots.txt had to be fetched first or
// the crawl was stopped mid-request. Call it before Done or Release.
func (f *Frontier) Requeue(t Task) error {
	host, err := urls.HostOf(t.URL)
	if err != nil {
		return fmt.Errorf("frontier: requeue: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.hosts[host]
	if q == nil || !q.busy {
		return fmt.Errorf("frontier: requeue %q: host %s is not leased", urls.Truncate(t.URL, 80), host)
	}
	i := takenIndex(q, t)
	if i < 0 {
		return fmt.Errorf("frontier: requeue %q: not taken from the frontier", urls.Truncate(t.URL, 80))
	}
	e := q.taken[i]
	q.taken = slices.Delete(q.taken, i, i+1)
	f.taken--
	f.insertLocked(q, e)
	f.signalLocked()
	return nil
}

// Outcome is what became of a task a worker is done with; Complete records
// it in one atomic write together with the task's removal from the queue.
type Outcome struct {
	// Reschedule, when set, goes into the schedule at At: a retry or a
	// recrawl of the task.
	Reschedule *Task
	At         time.Time
	// Dead, when set, is stored as a dead letter.
	Dead *store.DeadLetter
	// Meta, when set, is stored as the URL's metadata.
	Meta *store.URLMeta
}

// Complete removes a task handed out by Next or NextFromHost from the
// store, with the rest of its outcome. It may be called after the lease on
// the host has ended.
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
		i = takenIndex(q, t)
	}
	if i < 0 {
		return fmt.Errorf("frontier: complete %q: not taken from the frontier", urls.Truncate(t.URL, 80))
	}
	e := q.taken[i]
	u := &store.QueueUpdate{Remove: []store.QueueEntry{e}}
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

// Reserve counts a first fetch of a new page against its host's page
// budget; it reports false, counting nothing, when the budget is spent.
// Unreserve gives the reservation back when no request was made after all.
func (f *Frontier) Reserve(host string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.hosts[host]
	if q == nil {
		return true // cannot happen under a lease
	}
	if f.budget > 0 && q.state.Fetched >= f.budget {
		return false
	}
	q.state.Fetched++
	q.stateDirty = true
	return true
}

// Unreserve undoes a Reserve.
func (f *Frontier) Unreserve(host string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if q := f.hosts[host]; q != nil && q.state.Fetched > 0 {
		q.state.Fetched--
		q.stateDirty = true
	}
}

// DropHost removes every queued task of a leased host except recrawls, for
// a host whose page budget is spent, and returns how many it removed.
func (f *Frontier) DropHost(host string) (int, error) {
	return f.dropHost(host, nil)
}

// dropHost is DropHost calling dropped, if not nil, with each task it
// removed, outside the lock, batch by batch.
func (f *Frontier) dropHost(host string, dropped func(Task)) (int, error) {
	n := 0
	for {
		batch, err := f.dropHostBatch(host)
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

// dropHostBatch removes up to dropBatch queued entries of a leased host,
// recrawls and those handed out excepted, and returns them.
func (f *Frontier) dropHostBatch(host string) ([]store.QueueEntry, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.hosts[host]
	if q == nil || !q.busy {
		return nil, fmt.Errorf("frontier: drop host %s: not leased", host)
	}
	taken := q.taken
	batch, err := f.db.QueueHead(q.key, dropBatch, func(e *store.QueueEntry) bool {
		return e.Recrawl || slices.ContainsFunc(taken, func(t store.QueueEntry) bool { return t.Seq == e.Seq })
	})
	if err == nil && len(batch) > 0 {
		var counts store.QueueCounts
		if counts, err = f.db.ApplyQueue(&store.QueueUpdate{Remove: batch}); err == nil {
			f.counts = counts
		}
	}
	if err != nil {
		return nil, fmt.Errorf("frontier: drop host %s: %w", host, err)
	}
	q.buf, q.more = nil, true // recrawls may remain
	q.state.Dropped += int64(len(batch))
	q.stateDirty = true
	return batch, nil
}

// dropBatch is how many queue entries one write removes when a host's or
// a key range's queue is dropped.
const dropBatch = 1024

// Done ends the lease on host after a request to it that completed at
// completedAt. The host may be contacted again after the larger of the
// frontier's delay and crawlDelay (the robots.txt Crawl-delay, capped).
func (f *Frontier) Done(host string, completedAt time.Time, crawlDelay time.Duration) {
	f.release(host, completedAt.Add(f.Gap(crawlDelay)), false)
}

// Gap is the pause the frontier enforces after a request to a host whose
// robots.txt asks for crawlDelay: the larger of the frontier's delay and
// crawlDelay capped at the maximum.
func (f *Frontier) Gap(crawlDelay time.Duration) time.Duration {
	return max(f.delay, min(crawlDelay, f.maxCrawlDelay))
}

// Defer ends the lease on host without a request and keeps the host closed
// until the given time, for example while its robots.txt is unavailable.
func (f *Frontier) Defer(host string, until time.Time) {
	f.release(host, until, false)
}

// Slow ends the lease on host and keeps it closed until the given time,
// durably: a restarted node honours it too. It is how a server's
// Retry-After slows the whole host.
func (f *Frontier) Slow(host string, until time.Time) {
	f.release(host, until, true)
}

// Release ends the lease on host when no request was made under it; the
// host keeps the next-allowed time of its last real request.
func (f *Frontier) Release(host string) {
	f.release(host, time.Time{}, false)
}

func (f *Frontier) release(host string, nextAllowed time.Time, persist bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.hosts[host]
	if q == nil || !q.busy {
		return // not leased: a caller bug, but harmless to the schedule
	}
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

// broadcastLocked wakes every waiting Next so each re-evaluates the heaps.
func (f *Frontier) broadcastLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// maybeSweepLocked forgets idle hosts whose delay has passed, so the map
// does not grow with every host ever crawled. Sweeping once per len(hosts)
// operations keeps the cost amortised constant.
func (f *Frontier) maybeSweepLocked() {
	f.ops++
	if f.ops < len(f.hosts) || f.ops < 1024 {
		return
	}
	f.ops = 0
	now := f.now()
	for h, q := range f.hosts {
		if !q.busy && !q.hasWork() && len(q.taken) == 0 && !q.stateDirty && !q.nextAllowed.After(now) {
			delete(f.hosts, h)
		}
	}
}

// StoreErrors returns how many reads of the store failed while choosing
// tasks. Such a failure delays a host or a due task by a second; it loses
// nothing, since every task stays in the store.
func (f *Frontier) StoreErrors() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.storeErrs
}

// Len returns the number of queued tasks, not counting those handed out.
func (f *Frontier) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return max(0, int(f.counts.Queued)-f.taken)
}

// Counts returns the sizes of the durable tables, in-flight tasks included
// in Queued.
func (f *Frontier) Counts() store.QueueCounts {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts
}

// Idle reports whether nothing is queued or handed out and no retry is
// waiting in the schedule; recrawls that are not yet due do not count.
func (f *Frontier) Idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.counts.Queued > 0 || f.counts.Retrying > 0 {
		return false
	}
	return f.nextDue.IsZero() || f.nextDue.After(f.now())
}

// InFlight returns the number of leased hosts, which is the number of
// requests in progress.
func (f *Frontier) InFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inFlight
}

// Hosts returns the number of hosts with queued or in-flight tasks.
func (f *Frontier) Hosts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, q := range f.hosts {
		if q.busy || q.hasWork() || len(q.taken) > 0 {
			n++
		}
	}
	return n
}

// hostHeap is a heap of hosts under one of two orders (waiting: by
// next-allowed time; ready: by head priority).
type hostHeap struct {
	items []*hostQueue
	less  func(a, b *hostQueue) bool
}

func (h *hostHeap) Len() int           { return len(h.items) }
func (h *hostHeap) Less(i, j int) bool { return h.less(h.items[i], h.items[j]) }
func (h *hostHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.items[i].index = i
	h.items[j].index = j
}
func (h *hostHeap) Push(x any) {
	q := x.(*hostQueue)
	q.index = len(h.items)
	h.items = append(h.items, q)
}
func (h *hostHeap) Pop() any {
	old := h.items
	q := old[len(old)-1]
	old[len(old)-1] = nil
	h.items = old[:len(old)-1]
	q.index = -1
	return q
}
