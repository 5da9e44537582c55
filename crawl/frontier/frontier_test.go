package frontier

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// fakeClock is a manually advanced clock for deterministic frontier tests.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func task(u string) Task { return Task{URL: u} }

// newTestFrontier returns a frontier on a fresh store that leases a host
// only once its next request is allowed (no LeaseAhead), so that tests of
// the schedule see each host's next-allowed time as the time it is ready
// (TestFrontierLeaseAhead tests the lease ahead).
func newTestFrontier(t testing.TB, delay, maxCrawlDelay time.Duration, now func() time.Time) *Frontier {
	t.Helper()
	return newConfigFrontier(t, Config{Delay: delay, MaxCrawlDelay: maxCrawlDelay, LeaseAhead: None, Clock: now})
}

// newConfigFrontier returns a frontier with cfg on a fresh store.
func newConfigFrontier(t testing.TB, cfg Config) *Frontier {
	t.Helper()
	f, err := New(openStore(t), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return f
}

// openStore opens a small store in a fresh directory, closed at cleanup.
func openStore(t testing.TB) *store.DB {
	t.Helper()
	return openStoreAt(t, t.TempDir())
}

func openStoreAt(t testing.TB, dir string) *store.DB {
	t.Helper()
	db, err := store.Open(dir, store.Options{BloomExpected: 10_000, CacheBytes: 1 << 20})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// openFrontierAt opens the store in dir and a frontier on it with cfg,
// as a node (re)starting on its data dir does.
func openFrontierAt(t testing.TB, dir string, cfg Config) (*Frontier, *store.DB) {
	t.Helper()
	db := openStoreAt(t, dir)
	f, err := New(db, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f, db
}

// push queues tasks and fails the test on an error.
func push(t testing.TB, f *Frontier, tasks ...Task) {
	t.Helper()
	if _, err := f.Push(tasks...); err != nil {
		t.Fatalf("Push: %v", err)
	}
}

// complete records an empty outcome for a task its lease kept.
func complete(t testing.TB, f *Frontier, u string) {
	t.Helper()
	if err := f.Complete(task(u), Outcome{}); err != nil {
		t.Fatalf("Complete(%s): %v", u, err)
	}
}

// keep takes tk out of l, failing the test if l does not hold it.
func keep(t testing.TB, l *Lease, tk Task) {
	t.Helper()
	if err := l.Keep(tk); err != nil {
		t.Fatalf("Keep: %v", err)
	}
}

// done ends l after a request for its first task that completed at at,
// under a Crawl-delay of crawlDelay, keeping the task for Complete.
func done(t testing.TB, l *Lease, at time.Time, crawlDelay time.Duration) {
	t.Helper()
	l.RaiseCrawlDelay(crawlDelay)
	l.Contacted(at)
	keep(t, l, l.Task())
	l.End()
}

// settle completes l's first task with no request made and ends l.
func settle(t testing.TB, f *Frontier, l *Lease) {
	t.Helper()
	keep(t, l, l.Task())
	complete(t, f, l.Task().URL)
	l.End()
}

// mustNext takes the next lease and fails unless its task is want.
func mustNext(t testing.TB, f *Frontier, want string) *Lease {
	t.Helper()
	l, ok, readyAt := f.TryNext()
	if !ok {
		t.Fatalf("TryNext: nothing ready (next at %v), want %s", readyAt, want)
	}
	if got := l.Task(); got.URL != want {
		t.Fatalf("TryNext = %s, want %s", got.URL, want)
	}
	return l
}

// leaseTask returns l's task, or a zero Task for a nil lease.
func leaseTask(l *Lease) Task {
	if l == nil {
		return Task{}
	}
	return l.Task()
}

// mustWait checks that nothing is ready and the next host opens at readyAt.
func mustWait(t *testing.T, f *Frontier, readyAt time.Time) {
	t.Helper()
	l, ok, at := f.TryNext()
	if ok {
		t.Fatalf("TryNext = %s, want nothing ready", l.Task().URL)
	}
	if !at.Equal(readyAt) {
		t.Fatalf("next ready at %v, want %v", at, readyAt)
	}
}

func TestFrontierOneInFlightPerHost(t *testing.T) {
	clk := newFakeClock()
	f := newTestFrontier(t, None, time.Minute, clk.Now) // no delay: only the lease limits
	push(t, f, task("http://a.test/1"), task("http://a.test/2"), task("http://a.test/3"))
	l := mustNext(t, f, "http://a.test/1")
	mustWait(t, f, time.Time{}) // a.test is busy, nothing else to do
	if f.InFlight() != 1 || f.Len() != 2 || f.Hosts() != 1 {
		t.Fatalf("InFlight %d Len %d Hosts %d, want 1 2 1", f.InFlight(), f.Len(), f.Hosts())
	}
	done(t, l, clk.Now(), 0)
	mustNext(t, f, "http://a.test/2") // FIFO within the host
}

// TestFrontierLeaseAhead checks that a host is leased LeaseAhead before
// its next request is allowed, with that time as the lease's NotBefore, and
// not earlier; and that a host whose turn has come has NotBefore in the
// past (nothing to wait for).
func TestFrontierLeaseAhead(t *testing.T) {
	clk := newFakeClock()
	t0 := clk.Now()
	const ahead = 5 * time.Millisecond
	f := newConfigFrontier(t, Config{Delay: time.Second, MaxCrawlDelay: time.Minute, LeaseAhead: ahead, Clock: clk.Now})
	push(t, f, task("http://a.test/1"), task("http://a.test/2"))
	l := mustNext(t, f, "http://a.test/1")
	if l.NotBefore().After(clk.Now()) {
		t.Fatalf("first lease NotBefore %v, after now %v", l.NotBefore(), clk.Now())
	}
	done(t, l, t0, 0) // answered at t0: the next request may start at t0+1s
	mustWait(t, f, t0.Add(time.Second-ahead))
	clk.Advance(time.Second - ahead - time.Millisecond)
	mustWait(t, f, t0.Add(time.Second-ahead))
	clk.Advance(time.Millisecond)
	l = mustNext(t, f, "http://a.test/2")
	if want := t0.Add(time.Second); !l.NotBefore().Equal(want) {
		t.Fatalf("lease NotBefore %v, want %v (the delay after the answer)", l.NotBefore(), want)
	}
}

func TestFrontierDelayFromCompletion(t *testing.T) {
	clk := newFakeClock()
	t0 := clk.Now()
	f := newTestFrontier(t, time.Second, time.Minute, clk.Now)
	push(t, f, task("http://a.test/1"), task("http://a.test/2"))
	l := mustNext(t, f, "http://a.test/1")
	// The request takes 5 s; the delay counts from its end, not its start.
	clk.Advance(5 * time.Second)
	done(t, l, clk.Now(), 0)
	mustWait(t, f, t0.Add(6*time.Second))
	clk.Advance(999 * time.Millisecond)
	mustWait(t, f, t0.Add(6*time.Second))
	clk.Advance(time.Millisecond)
	mustNext(t, f, "http://a.test/2")
}

func TestFrontierCrawlDelay(t *testing.T) {
	tests := []struct {
		name       string
		crawlDelay time.Duration
		wantGap    time.Duration
	}{
		{"smaller crawl-delay loses", 200 * time.Millisecond, time.Second},
		{"larger crawl-delay wins", 3 * time.Second, 3 * time.Second},
		{"crawl-delay capped", time.Hour, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			f := newTestFrontier(t, time.Second, 10*time.Second, clk.Now)
			push(t, f, task("http://a.test/1"), task("http://a.test/2"))
			l := mustNext(t, f, "http://a.test/1")
			end := clk.Now()
			done(t, l, end, tt.crawlDelay)
			mustWait(t, f, end.Add(tt.wantGap))
			clk.Advance(tt.wantGap)
			mustNext(t, f, "http://a.test/2")
		})
	}
}

func TestFrontierHostsInterleave(t *testing.T) {
	clk := newFakeClock()
	f := newTestFrontier(t, time.Second, time.Minute, clk.Now)
	// One host's backlog must not starve the others.
	push(t, f, task("http://a.test/1"), task("http://a.test/2"), task("http://a.test/3"))
	push(t, f, task("http://b.test/1"), task("http://b.test/2"))
	push(t, f, task("http://c.test/1"))
	la := mustNext(t, f, "http://a.test/1")
	lb := mustNext(t, f, "http://b.test/1")
	lc := mustNext(t, f, "http://c.test/1")
	mustWait(t, f, time.Time{})
	if f.InFlight() != 3 {
		t.Fatalf("InFlight = %d, want 3 (hosts fetched concurrently)", f.InFlight())
	}
	// b finishes first, then a: b gets its next turn first.
	clk.Advance(100 * time.Millisecond)
	done(t, lb, clk.Now(), 0)
	clk.Advance(100 * time.Millisecond)
	done(t, la, clk.Now(), 0)
	done(t, lc, clk.Now(), 0) // c has nothing left
	complete(t, f, "http://c.test/1")
	clk.Advance(2 * time.Second)
	mustNext(t, f, "http://b.test/2")
	mustNext(t, f, "http://a.test/2")
	mustWait(t, f, time.Time{})
	if f.Hosts() != 2 {
		t.Fatalf("Hosts = %d, want 2 (c is done)", f.Hosts())
	}
}

func TestFrontierNewTaskWaitsForIdleHost(t *testing.T) {
	clk := newFakeClock()
	f := newTestFrontier(t, time.Second, time.Minute, clk.Now)
	push(t, f, task("http://a.test/1"))
	l := mustNext(t, f, "http://a.test/1")
	done(t, l, clk.Now(), 0)
	mustWait(t, f, time.Time{}) // empty
	// A task arriving after the host drained still waits out the delay.
	push(t, f, task("http://a.test/2"))
	mustWait(t, f, clk.Now().Add(time.Second))
}

func TestFrontierLeaseHelpers(t *testing.T) {
	clk := newFakeClock()
	f := newTestFrontier(t, time.Second, time.Minute, clk.Now)
	push(t, f, task("http://a.test/1"), task("http://a.test/2"), task("http://a.test/3"))
	l := mustNext(t, f, "http://a.test/1")
	keep(t, l, l.Task()) // taken for good: its outcome is recorded later

	// Next continues under the lease without waiting.
	next, ok := l.Next()
	if !ok || next.URL != "http://a.test/2" {
		t.Fatalf("Lease.Next = %v, %v", next, ok)
	}
	// End puts back what was not kept, in front; without a request the
	// host is ready again at once.
	l.End()
	if _, ok := l.Next(); ok {
		t.Fatal("Next on an ended lease succeeded")
	}
	if err := l.Keep(next); err == nil {
		t.Fatal("Keep on an ended lease succeeded")
	}
	l = mustNext(t, f, "http://a.test/2")

	// DeferUntil keeps the host closed until the given time.
	until := clk.Now().Add(time.Minute)
	l.DeferUntil(until)
	l.End()
	mustWait(t, f, until)

	clk.Advance(time.Minute)
	l = mustNext(t, f, "http://a.test/2")
	if err := l.Keep(task("http://a.test/9")); err == nil {
		t.Fatal("Keep of a task never queued succeeded")
	}
	if err := l.Keep(task("http://a.test/3")); err == nil {
		t.Fatal("Keep of a task not taken under the lease succeeded")
	}
	l.End()
	if _, err := f.Push(task("not a url")); err == nil {
		t.Fatal("Push of a URL without host succeeded")
	}
}

func TestFrontierSweepsIdleHosts(t *testing.T) {
	clk := newFakeClock()
	f := newTestFrontier(t, time.Millisecond, time.Minute, clk.Now)
	for i := range 3000 {
		host := fmt.Sprintf("h%d.test", i)
		push(t, f, task("http://"+host+"/"))
		l := mustNext(t, f, "http://"+host+"/")
		done(t, l, clk.Now(), 0)
		complete(t, f, "http://"+host+"/")
	}
	clk.Advance(time.Second)
	for range 3000 {
		f.TryNext()
	}
	f.mu.Lock()
	n := len(f.hosts)
	f.mu.Unlock()
	if n > 0 {
		t.Fatalf("%d idle hosts kept after their delay passed", n)
	}
}

func TestFrontierNextBlocksAndWakes(t *testing.T) {
	f := newConfigFrontier(t, Config{Delay: 50 * time.Millisecond, MaxCrawlDelay: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// Woken by Push.
	got := make(chan *Lease)
	go func() {
		l, err := f.Next(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(20 * time.Millisecond)
	push(t, f, task("http://a.test/1"), task("http://a.test/2"))
	l := <-got
	if l == nil || l.Task().URL != "http://a.test/1" {
		t.Fatalf("Next = %v", leaseTask(l))
	}

	// Woken by the timer once the delay has passed.
	end := time.Now()
	done(t, l, end, 0)
	l, err := f.Next(ctx)
	if err != nil || l.Task().URL != "http://a.test/2" {
		t.Fatalf("Next = %v, %v", leaseTask(l), err)
	}
	ahead := DefaultConfig().LeaseAhead
	if waited := time.Since(end); waited < 50*time.Millisecond-ahead {
		t.Fatalf("Next returned after %v, more than the lease ahead (%v) before the 50ms delay", waited, ahead)
	}
	if l.NotBefore().Before(end.Add(50 * time.Millisecond)) {
		t.Fatalf("lease NotBefore %v, before the 50ms delay after %v", l.NotBefore(), end)
	}

	// Ends with the context.
	short, cancelShort := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancelShort()
	if _, err := f.Next(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next on an empty frontier = %v, want deadline exceeded", err)
	}
}

// TestFrontierConcurrentPoliteness runs many workers over many hosts on the
// real clock and checks the two invariants: never two leases on one host,
// and never less than the delay between a Done and the next lease.
func TestFrontierConcurrentPoliteness(t *testing.T) {
	const (
		hosts   = 20
		perHost = 8
		delay   = 5 * time.Millisecond
	)
	f := newConfigFrontier(t, Config{Delay: delay, MaxCrawlDelay: time.Minute}) // leased ahead, NotBefore honoured
	for i := range perHost {
		for h := range hosts {
			push(t, f, task(fmt.Sprintf("http://h%d.test/%d", h, i)))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var mu sync.Mutex
	busy := map[string]bool{}
	lastDone := map[string]time.Time{}
	var violations []string
	var wg sync.WaitGroup
	remaining := hosts * perHost
	for range 8 {
		wg.Go(func() {
			for {
				l, err := f.Next(ctx)
				if err != nil {
					return
				}
				tk, host := l.Task(), l.Host()
				time.Sleep(time.Until(l.NotBefore()))
				start := time.Now()
				mu.Lock()
				if busy[host] {
					violations = append(violations, host+": two leases")
				}
				if d, ok := lastDone[host]; ok && start.Sub(d) < delay {
					violations = append(violations, fmt.Sprintf("%s: gap %v", host, start.Sub(d)))
				}
				busy[host] = true
				mu.Unlock()

				time.Sleep(time.Millisecond) // the "request"

				mu.Lock()
				busy[host] = false
				end := time.Now()
				lastDone[host] = end
				remaining--
				if remaining == 0 {
					cancel()
				}
				mu.Unlock()
				l.Contacted(end)
				if err := l.Keep(tk); err != nil {
					t.Error(err)
				}
				l.End()
				if err := f.Complete(tk, Outcome{}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if remaining != 0 {
		t.Fatalf("%d tasks never handed out", remaining)
	}
	for _, v := range violations {
		t.Error(v)
	}
}

// drain takes every ready task from f, completing each, and returns their
// URLs in the order served.
func drain(t *testing.T, f *Frontier, clk *fakeClock) []string {
	t.Helper()
	var out []string
	for {
		l, ok, readyAt := f.TryNext()
		if !ok {
			if readyAt.IsZero() {
				return out
			}
			clk.Advance(readyAt.Sub(clk.Now()))
			continue
		}
		tk := l.Task()
		out = append(out, tk.URL)
		done(t, l, clk.Now(), 0)
		if err := f.Complete(tk, Outcome{}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFrontierPriority checks the front tier: within a host, seeds first,
// then due recrawls and retries, then discovered pages shallower first;
// across ready hosts, the best head goes first.
func TestFrontierPriority(t *testing.T) {
	clk := newFakeClock()
	f := newTestFrontier(t, None, time.Minute, clk.Now)
	push(t, f,
		Task{URL: "http://a.test/d3", Depth: 3},
		Task{URL: "http://a.test/d1", Depth: 1},
		Task{URL: "http://a.test/recrawl", Depth: 5, Recrawl: true},
		Task{URL: "http://a.test/d2", Depth: 2},
		Task{URL: "http://a.test/seed"},
		Task{URL: "http://a.test/d1b", Depth: 1},
		Task{URL: "http://a.test/retry", Depth: 4, Attempts: 1},
	)
	want := []string{"/seed", "/recrawl", "/retry", "/d1", "/d1b", "/d2", "/d3"}
	got := drain(t, f, clk)
	for i := range got {
		got[i] = strings.TrimPrefix(got[i], "http://a.test")
	}
	if !slices.Equal(got, want) {
		t.Errorf("served %v, want %v", got, want)
	}

	// Across hosts: b became ready first, but c's head is a seed.
	push(t, f, Task{URL: "http://b.test/deep", Depth: 6})
	push(t, f, Task{URL: "http://c.test/seed"})
	mustNext(t, f, "http://c.test/seed")
	mustNext(t, f, "http://b.test/deep")
}

// TestFrontierSeedFirstPageAfterRobots: a seeded host whose first lease
// went to robots.txt is, once its gap has passed, served before seeded
// hosts that arrived after it and have not been contacted yet: its first
// page follows its robots.txt instead of queueing behind every other
// seeded host's robots.txt.
func TestFrontierSeedFirstPageAfterRobots(t *testing.T) {
	clk := newFakeClock()
	f := newTestFrontier(t, time.Second, time.Minute, clk.Now)
	push(t, f, Task{URL: "http://a.test/"}, Task{URL: "http://b.test/"}, Task{URL: "http://c.test/"}, Task{URL: "http://d.test/"})
	// Two workers: a and b get robots.txt first, c and d wait for a worker.
	for _, u := range []string{"http://a.test/", "http://b.test/"} {
		l := mustNext(t, f, u)
		l.Contacted(clk.Now()) // robots.txt; the seed page waits for the next turn
		l.End()
	}
	clk.Advance(time.Second)
	for _, u := range []string{"http://a.test/", "http://b.test/", "http://c.test/", "http://d.test/"} {
		defer mustNext(t, f, u).End() // held: a host is leased once at a time
	}
}

// TestFrontierBacklogFirst: when a worker frees up and many hosts are
// ready, a host with a backlog (more queued than its in-memory head) goes
// before hosts with a few shallow pages, though its head is deeper: it is
// the host the crawl's end waits for. Seeds still go first.
func TestFrontierBacklogFirst(t *testing.T) {
	clk := newFakeClock()
	f := newTestFrontier(t, None, time.Minute, clk.Now)
	for i := range 20 {
		push(t, f, Task{URL: fmt.Sprintf("http://small%d.test/p", i), Depth: 1})
	}
	var big []Task
	for i := range hostBufLen + 5 {
		big = append(big, Task{URL: fmt.Sprintf("http://big.test/p%d", i), Depth: 6})
	}
	push(t, f, big...)
	push(t, f, Task{URL: "http://fresh.test/"})
	mustNext(t, f, "http://fresh.test/")
	l := mustNext(t, f, "http://big.test/p0")
	settle(t, f, l)
	// Once its backlog is down to the head, big waits its turn.
	for i := 1; i < hostBufLen; i++ {
		l := mustNext(t, f, fmt.Sprintf("http://big.test/p%d", i))
		settle(t, f, l)
	}
	l, ok, _ := f.TryNext()
	if !ok || !strings.HasPrefix(l.Task().URL, "http://small") {
		t.Errorf("once big.test's backlog is gone, served %q before the shallower hosts", leaseTask(l).URL)
	}
}

// TestFrontierHeadBuffer pushes, in many batches and while draining, more
// tasks per host than the in-memory head holds, and checks that every task
// is served exactly once in (priority, arrival) order.
func TestFrontierHeadBuffer(t *testing.T) {
	clk := newFakeClock()
	f := newTestFrontier(t, None, time.Minute, clk.Now)
	r := rand.New(rand.NewPCG(1, 2))
	type item struct {
		prio, seq int
		url       string
	}
	var model []item
	seq := 0
	pushSome := func(n int) {
		var batch []Task
		for range n {
			d := r.IntN(5)
			seq++
			u := fmt.Sprintf("http://a.test/%d", seq)
			batch = append(batch, Task{URL: u, Depth: d})
			model = append(model, item{Priority(Task{Depth: d}), seq, u})
		}
		push(t, f, batch...)
	}
	var served []string
	for round := range 40 {
		pushSome(1 + r.IntN(3*hostBufLen))
		for range r.IntN(2 * hostBufLen) {
			l, ok, _ := f.TryNext()
			if !ok {
				break
			}
			tk := l.Task()
			// Check it is the best of what the model still holds.
			slices.SortStableFunc(model, func(a, b item) int {
				if a.prio != b.prio {
					return a.prio - b.prio
				}
				return a.seq - b.seq
			})
			if tk.URL != model[0].url {
				t.Fatalf("round %d: served %s, want %s", round, tk.URL, model[0].url)
			}
			model = model[1:]
			served = append(served, tk.URL)
			if r.IntN(4) == 0 {
				// Put back by End and taken again: still the head.
				l.End()
				l = mustNext(t, f, tk.URL)
			}
			done(t, l, clk.Now(), 0)
			if err := f.Complete(tk, Outcome{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	rest := drain(t, f, clk)
	if len(rest) != len(model) {
		t.Fatalf("drained %d tasks, model holds %d", len(rest), len(model))
	}
	if n := f.Counts().Queued; n != 0 {
		t.Fatalf("%d entries left in the store", n)
	}
	if len(served)+len(rest) != seq {
		t.Fatalf("served %d of %d", len(served)+len(rest), seq)
	}
}

// TestFrontierQuietAfterRestart: a frontier on a store an earlier run wrote
// to hands out no host before its delay has passed since it was made (that
// run's last request to the host may have been under way when it ended),
// and one on a new store hands out at once.
func TestFrontierQuietAfterRestart(t *testing.T) {
	const delay = 300 * time.Millisecond
	clk := newFakeClock()
	dir := t.TempDir()
	cfg := Config{Delay: delay, MaxCrawlDelay: time.Minute, LeaseAhead: None, Clock: clk.Now}
	f, db := openFrontierAt(t, dir, cfg)
	push(t, f, task("http://a.test/1"), task("http://a.test/2"))
	mustNext(t, f, "http://a.test/1") // in flight when the run ends
	db.Close()

	clk.Advance(10 * time.Millisecond) // a quick restart
	start := clk.Now()
	f2, db2 := openFrontierAt(t, dir, cfg)
	mustWait(t, f2, start.Add(delay))
	clk.Advance(delay)
	l := mustNext(t, f2, "http://a.test/1")
	if got := l.NotBefore(); !got.Equal(start.Add(delay)) {
		t.Fatalf("first lease after the restart starts at %v, want %v", got, start.Add(delay))
	}
	// The host's robots.txt asks for a longer Crawl-delay: the first
	// request waits for it from the start too.
	l.RaiseCrawlDelay(2 * time.Second)
	if got := l.NotBefore(); !got.Equal(start.Add(2 * time.Second)) {
		t.Fatalf("with a Crawl-delay of 2s, the first request after the restart may start at %v, want %v", got, start.Add(2*time.Second))
	}
	l.End()
	db2.Close()

	// A host that only reaches the queue after the start waits as well.
	clk2 := newFakeClock()
	cfg.Clock = clk2.Now
	f3, _ := openFrontierAt(t, dir, cfg)
	push(t, f3, task("http://b.test/1"))
	mustWait(t, f3, clk2.Now().Add(delay))

	// A new store has no earlier run.
	f4 := newConfigFrontier(t, cfg)
	push(t, f4, task("http://a.test/1"))
	l = mustNext(t, f4, "http://a.test/1")
	l.RaiseCrawlDelay(2 * time.Second)
	if got := l.NotBefore(); got.After(clk2.Now()) {
		t.Fatalf("on a new store, the first request may start at %v, want now (%v)", got, clk2.Now())
	}
}

// TestFrontierCrawlDelayAfterRestart: a host's Crawl-delay, once a lease
// read it, is kept in the host's durable state, and a restarted frontier
// waits it out from its start before it leases the host, before its
// robots.txt is known again; a robots.txt that drops it is kept too.
func TestFrontierCrawlDelayAfterRestart(t *testing.T) {
	const delay = 100 * time.Millisecond
	clk := newFakeClock()
	dir := t.TempDir()
	cfg := Config{Delay: delay, MaxCrawlDelay: time.Minute, LeaseAhead: None, Clock: clk.Now}
	f, db := openFrontierAt(t, dir, cfg)
	push(t, f, task("http://slow.test/1"), task("http://fast.test/1"))
	l := mustNext(t, f, "http://slow.test/1")
	l.RaiseCrawlDelay(2 * time.Second)
	l.End() // the task goes back: the run ends before it is fetched
	l = mustNext(t, f, "http://fast.test/1")
	l.RaiseCrawlDelay(0)
	l.End()
	db.Close()

	restart := func() (*Frontier, *store.DB, time.Time) {
		clk.Advance(10 * time.Millisecond)
		start := clk.Now()
		f, db := openFrontierAt(t, dir, cfg)
		return f, db, start
	}
	f2, db2, start := restart()
	mustWait(t, f2, start.Add(delay))
	clk.Advance(delay)
	l = mustNext(t, f2, "http://fast.test/1")
	mustWait(t, f2, start.Add(2*time.Second))
	clk.Advance(2*time.Second - delay)
	l2 := mustNext(t, f2, "http://slow.test/1")
	// The host's robots.txt no longer asks for a Crawl-delay.
	l2.RaiseCrawlDelay(0)
	l2.End()
	l.End()
	db2.Close()

	f3, db3, start := restart()
	mustWait(t, f3, start.Add(delay))
	db3.Close()
}

// TestFrontierResumesAfterCrash drops a frontier with tasks in flight (no
// shutdown of any kind, as after kill -9) and opens a new one on the same
// store: the in-flight tasks are served again, completed ones are not, and
// scheduled tasks keep their due time.
func TestFrontierResumesAfterCrash(t *testing.T) {
	clk := newFakeClock()
	dir := t.TempDir()
	db := openStoreAt(t, dir)
	f, err := New(db, Config{Delay: None, MaxCrawlDelay: time.Minute, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	var all []Task
	for h := range 5 {
		for i := range 20 {
			all = append(all, Task{URL: fmt.Sprintf("http://h%d.test/%d", h, i), Depth: 1})
		}
	}
	push(t, f, all...)
	completed := map[string]bool{}
	inFlight := map[string]*Lease{}
	for range 5 {
		l, ok, _ := f.TryNext()
		if !ok {
			t.Fatal("nothing ready")
		}
		inFlight[l.Task().URL] = l
	}
	for range 3 {
		for u, l := range inFlight {
			done(t, l, clk.Now(), 0)
			if err := f.Complete(task(u), Outcome{}); err != nil {
				t.Fatal(err)
			}
			delete(inFlight, u)
			completed[u] = true
			break
		}
	}
	// One more task goes to the schedule for later.
	l, _, _ := f.TryNext()
	tk := l.Task()
	done(t, l, clk.Now(), 0)
	retry := tk
	retry.Attempts = 1
	if err := f.Complete(tk, Outcome{Reschedule: &retry, At: clk.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	completed[tk.URL] = true // until due
	db.Close()

	db2 := openStoreAt(t, dir)
	f2, err := New(db2, Config{Delay: None, MaxCrawlDelay: time.Minute, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if f2.Len() != len(all)-len(completed) || f2.Idle() {
		t.Fatalf("restarted frontier: Len %d, want %d; idle %v", f2.Len(), len(all)-len(completed), f2.Idle())
	}
	got := map[string]int{}
	var readyAt time.Time
	for {
		l, ok, at := f2.TryNext()
		if !ok {
			readyAt = at
			break
		}
		tk := l.Task()
		got[tk.URL]++
		done(t, l, clk.Now(), 0)
		if err := f2.Complete(tk, Outcome{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tk := range all {
		want := 1
		if completed[tk.URL] {
			want = 0
		}
		if got[tk.URL] != want {
			t.Errorf("%s served %d times after the restart, want %d (in flight before: %v)", tk.URL, got[tk.URL], want, inFlight[tk.URL] != nil)
		}
	}
	// The retry is still scheduled, due in an hour.
	if !readyAt.Equal(clk.Now().Add(time.Hour)) {
		t.Fatalf("next ready at %v, want the retry's due time %v", readyAt, clk.Now().Add(time.Hour))
	}
	clk.Advance(time.Hour)
	var got2 Task
	l2, ok, _ := f2.TryNext()
	if ok {
		got2 = l2.Task()
	}
	if !ok || got2.URL != retry.URL || got2.Attempts != 1 {
		t.Fatalf("after the due time: %+v %v, want the retry of %s", got2, ok, retry.URL)
	}
}

// TestFrontierSchedule checks that a rescheduled task waits in the store
// until due, then competes in its host's queue with its priority, and that
// Idle ignores recrawls that are not due but not retries.
func TestFrontierSchedule(t *testing.T) {
	clk := newFakeClock()
	f := newTestFrontier(t, None, time.Minute, clk.Now)
	push(t, f, Task{URL: "http://a.test/page", Depth: 3})
	l, _, _ := f.TryNext()
	tk := l.Task()
	done(t, l, clk.Now(), 0)
	recrawl := Task{URL: tk.URL, Depth: tk.Depth, Recrawl: true}
	due := clk.Now().Add(10 * time.Minute)
	if err := f.Complete(tk, Outcome{Reschedule: &recrawl, At: due}); err != nil {
		t.Fatal(err)
	}
	if !f.Idle() || f.Counts().Scheduled != 1 {
		t.Fatalf("idle %v, counts %+v: want idle with one recrawl scheduled", f.Idle(), f.Counts())
	}
	mustWait(t, f, due)
	push(t, f, Task{URL: "http://a.test/new", Depth: 1})
	l = mustNext(t, f, "http://a.test/new")
	done(t, l, clk.Now(), 0)
	complete(t, f, "http://a.test/new")
	push(t, f, Task{URL: "http://a.test/later", Depth: 2})
	clk.Advance(10 * time.Minute)
	// Due now: the recrawl goes before the depth-2 page.
	l, ok, _ := f.TryNext()
	got := leaseTask(l)
	if !ok || got != recrawl {
		t.Fatalf("TryNext = %+v, %v; want the recrawl %+v", got, ok, recrawl)
	}
	done(t, l, clk.Now(), 0)
	retry := got
	retry.Attempts = 1
	if err := f.Complete(got, Outcome{Reschedule: &retry, At: clk.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	l = mustNext(t, f, "http://a.test/later")
	done(t, l, clk.Now(), 0)
	complete(t, f, "http://a.test/later")
	if f.Idle() {
		t.Fatal("idle while a retry waits")
	}
}

// TestFrontierBudgetAndSlowAreDurable checks the per-host page budget and a
// Retry-After closure survive a restart.
func TestFrontierBudgetAndSlowAreDurable(t *testing.T) {
	clk := newFakeClock()
	dir := t.TempDir()
	cfg := Config{Delay: None, MaxCrawlDelay: time.Minute, MaxPagesPerHost: 2, LeaseAhead: None, Clock: clk.Now}
	f, db := openFrontierAt(t, dir, cfg)
	push(t, f, task("http://a.test/1"), task("http://a.test/2"), task("http://a.test/3"))
	for i := range 2 {
		l, ok, _ := f.TryNext()
		if !ok || !l.Reserve(l.Task()) {
			t.Fatalf("page %d: not served or no budget", i)
		}
		tk := l.Task()
		done(t, l, clk.Now(), 0)
		if err := f.Complete(tk, Outcome{}); err != nil {
			t.Fatal(err)
		}
	}
	l := mustNext(t, f, "http://a.test/3")
	if l.Reserve(l.Task()) {
		t.Fatal("third page reserved with a budget of 2")
	}
	until := clk.Now().Add(time.Hour)
	l.SlowUntil(until)
	keep(t, l, l.Task())
	l.End()
	complete(t, f, "http://a.test/3")
	db.Close()

	f2, db2 := openFrontierAt(t, dir, cfg)
	dropped, err := f2.Push(task("http://a.test/4"), task("http://a.test/4r"), task("http://b.test/1"))
	if err != nil || len(dropped) != 2 {
		t.Fatalf("Push after restart: dropped %d, %v; want the 2 a.test tasks dropped", len(dropped), err)
	}
	if _, err := f2.Push(Task{URL: "http://a.test/1", Recrawl: true}); err != nil {
		t.Fatal(err)
	}
	mustNext(t, f2, "http://b.test/1")
	mustWait(t, f2, until) // the Retry-After holds after the restart
	st, _, _ := db2.Host(urls.HostKey("a.test"))
	if st.Fetched != 2 || st.Dropped != 2 || !st.NotBefore.Equal(until) {
		t.Fatalf("host state %+v", st)
	}
}

// TestFrontierMemoryFlat queues many URLs over many hosts and checks that
// the Go heap does not grow with the queue: the queues live in the store.
func TestFrontierMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes 200k URLs")
	}
	f := newTestFrontier(t, time.Second, time.Minute, nil)
	const hosts, total = 1000, 200_000
	heapAt := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var first uint64
	pushed := 0
	for pushed < total {
		batch := make([]Task, 0, 5000)
		for range 5000 {
			batch = append(batch, Task{URL: fmt.Sprintf("http://h%04d.example/some/path/%d", pushed%hosts, pushed), Depth: 1 + pushed%7})
			pushed++
		}
		push(t, f, batch...)
		if pushed == total/10 {
			first = heapAt()
		}
	}
	last := heapAt()
	growth := int64(last) - int64(first)
	t.Logf("heap %d MB at %d queued, %d MB at %d queued", first>>20, total/10, last>>20, total)
	// 180k more entries would take tens of MB in memory; the store's write
	// buffer and the per-host heads are bounded.
	if growth > 12<<20 {
		t.Errorf("heap grew by %d MB while the queue grew from %d to %d", growth>>20, total/10, total)
	}
	if f.Len() != total {
		t.Errorf("Len = %d, want %d", f.Len(), total)
	}
}
