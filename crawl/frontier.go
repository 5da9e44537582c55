package crawl

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"time"
)

// Frontier is the politeness scheduler of one node: a FIFO back queue per
// host and a ready-heap of hosts ordered by the time each may next be
// contacted.
//
// A host has at most one request in flight: Next hands out a task only for a
// host that is not busy and whose next-allowed time has passed, and marks it
// busy until Done. Done sets the next-allowed time from the moment the
// request completed, so the gap the server sees between the end of one
// request and the start of the next is never shorter than the delay, however
// long the request took.
//
// Within a host tasks are served first in, first out. The crawl reaches
// pages in discovery order, which is close to breadth-first and so already
// favours shallow pages; a priority tier (by depth or score) can be added in
// front of the host queues without changing this API.
//
// The methods are the whole contract the crawler relies on (Push, Next,
// TryNext, NextFromHost, Requeue, Done, Defer, Release and the counters), so a
// durable implementation can take this one's place.
type Frontier struct {
	delay         time.Duration
	maxCrawlDelay time.Duration
	now           func() time.Time

	mu       sync.Mutex
	hosts    map[string]*hostQueue
	ready    readyHeap
	changed  chan struct{} // closed and replaced whenever a host may have become ready
	seq      uint64        // ready-heap tie-breaker: equal times are served in arrival order
	queued   int
	inFlight int
	active   int // hosts with queued or in-flight tasks
	ops      int // operations since the last sweep of idle hosts
}

// hostQueue is the back queue and politeness state of one host.
type hostQueue struct {
	host        string
	tasks       []Task
	head        int // tasks[head:] are pending; the prefix is reclaimed lazily
	nextAllowed time.Time
	busy        bool
	seq         uint64
	index       int // position in the ready-heap, -1 when not in it
}

func (q *hostQueue) len() int { return len(q.tasks) - q.head }

// NewFrontier returns an empty in-memory frontier that keeps at least delay
// between requests to one host, or the host's Crawl-delay when larger, capped
// at maxCrawlDelay. now may be nil for time.Now.
func NewFrontier(delay, maxCrawlDelay time.Duration, now func() time.Time) *Frontier {
	if now == nil {
		now = time.Now
	}
	return &Frontier{
		delay:         delay,
		maxCrawlDelay: maxCrawlDelay,
		now:           now,
		hosts:         make(map[string]*hostQueue),
		changed:       make(chan struct{}),
	}
}

// Push appends tasks to their hosts' queues. A task whose URL has no usable
// host is returned in the error and not queued; the others are.
func (f *Frontier) Push(tasks ...Task) error {
	var bad []string
	f.mu.Lock()
	defer f.mu.Unlock()
	woke := false
	for _, t := range tasks {
		host, err := HostOf(t.URL)
		if err != nil {
			bad = append(bad, t.URL)
			continue
		}
		q := f.hosts[host]
		if q == nil {
			q = &hostQueue{host: host, index: -1}
			f.hosts[host] = q
		}
		if q.len() == 0 && !q.busy {
			f.active++
		}
		q.tasks = append(q.tasks, t)
		f.queued++
		if !q.busy && q.index < 0 {
			f.seq++
			q.seq = f.seq
			heap.Push(&f.ready, q)
			woke = true
		}
	}
	if woke {
		f.broadcastLocked()
	}
	if len(bad) > 0 {
		return fmt.Errorf("frontier: %d task(s) without a usable host, first %q", len(bad), truncate(bad[0], 80))
	}
	return nil
}

// Next blocks until some host may be contacted, then takes the head task of
// that host and marks the host busy. The caller must end the lease with Done
// (a request was made) or Release (none was). Next waits on a timer for the
// earliest next-allowed time and is woken early by Push and Done; it never
// spins. It returns ctx.Err() when ctx ends first.
func (f *Frontier) Next(ctx context.Context) (Task, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
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
// now, or else the earliest time one will be (zero when no host has work
// that is not in flight). Deterministic tests drive the frontier through it
// with a fake clock.
func (f *Frontier) TryNext() (t Task, ok bool, readyAt time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tryNextLocked()
}

func (f *Frontier) tryNextLocked() (Task, bool, time.Time) {
	f.maybeSweepLocked()
	if len(f.ready) == 0 {
		return Task{}, false, time.Time{}
	}
	q := f.ready[0]
	if q.nextAllowed.After(f.now()) {
		return Task{}, false, q.nextAllowed
	}
	heap.Pop(&f.ready)
	q.busy = true
	f.inFlight++
	return f.popLocked(q), true, time.Time{}
}

// popLocked removes the head task of q, which must not be empty.
func (f *Frontier) popLocked(q *hostQueue) Task {
	t := q.tasks[q.head]
	q.tasks[q.head] = Task{} // let the URL string be collected
	q.head++
	if q.head == len(q.tasks) {
		q.tasks, q.head = q.tasks[:0], 0
	} else if q.head > 32 && q.head*2 > len(q.tasks) {
		// Reclaim the consumed prefix once it dominates the slice.
		n := copy(q.tasks, q.tasks[q.head:])
		clear(q.tasks[n:])
		q.tasks, q.head = q.tasks[:n], 0
	}
	f.queued--
	return t
}

// NextFromHost takes the next task of a host whose lease the caller holds,
// without waiting. It lets a worker skip tasks that need no request, such as
// those robots.txt forbids, without paying the host's delay for each one.
func (f *Frontier) NextFromHost(host string) (Task, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.hosts[host]
	if q == nil || !q.busy || q.len() == 0 {
		return Task{}, false
	}
	return f.popLocked(q), true
}

// Requeue puts a task taken under the caller's lease back at the head of its
// host's queue, for example because robots.txt had to be fetched first or
// the crawl was stopped mid-request. Call it before Done or Release.
func (f *Frontier) Requeue(t Task) error {
	host, err := HostOf(t.URL)
	if err != nil {
		return fmt.Errorf("frontier: requeue: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.hosts[host]
	if q == nil || !q.busy {
		return fmt.Errorf("frontier: requeue %q: host %s is not leased", truncate(t.URL, 80), host)
	}
	if q.head > 0 {
		q.head--
		q.tasks[q.head] = t
	} else {
		q.tasks = append(q.tasks, Task{})
		copy(q.tasks[1:], q.tasks)
		q.tasks[0] = t
	}
	f.queued++
	return nil
}

// Done ends the lease on host after a request to it that completed at
// completedAt. The host may be contacted again after the larger of the
// frontier's delay and crawlDelay (the robots.txt Crawl-delay, capped).
func (f *Frontier) Done(host string, completedAt time.Time, crawlDelay time.Duration) {
	f.release(host, completedAt.Add(f.Gap(crawlDelay)))
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
	f.release(host, until)
}

// Release ends the lease on host when no request was made under it; the
// host keeps the next-allowed time of its last real request.
func (f *Frontier) Release(host string) {
	f.release(host, time.Time{})
}

func (f *Frontier) release(host string, nextAllowed time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.hosts[host]
	if q == nil || !q.busy {
		return // not leased: a caller bug, but harmless to the schedule
	}
	q.busy = false
	f.inFlight--
	if nextAllowed.After(q.nextAllowed) {
		q.nextAllowed = nextAllowed
	}
	if q.len() == 0 {
		f.active--
		return // kept until its delay passes, so a new push still waits
	}
	f.seq++
	q.seq = f.seq
	heap.Push(&f.ready, q)
	f.broadcastLocked()
}

// broadcastLocked wakes every waiting Next so each re-evaluates the heap.
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
		if !q.busy && q.len() == 0 && !q.nextAllowed.After(now) {
			delete(f.hosts, h)
		}
	}
}

// Len returns the number of queued tasks, not counting those in flight.
func (f *Frontier) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queued
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
	return f.active
}

// readyHeap orders idle hosts with pending tasks by next-allowed time, then
// by when they became ready, so hosts interleave fairly.
type readyHeap []*hostQueue

func (h readyHeap) Len() int { return len(h) }
func (h readyHeap) Less(i, j int) bool {
	if !h[i].nextAllowed.Equal(h[j].nextAllowed) {
		return h[i].nextAllowed.Before(h[j].nextAllowed)
	}
	return h[i].seq < h[j].seq
}
func (h readyHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *readyHeap) Push(x any) {
	q := x.(*hostQueue)
	q.index = len(*h)
	*h = append(*h, q)
}
func (h *readyHeap) Pop() any {
	old := *h
	q := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	q.index = -1
	return q
}
