package crawl

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
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

// mustNext takes the next task and fails unless it is want.
func mustNext(t *testing.T, f *Frontier, want string) {
	t.Helper()
	got, ok, readyAt := f.TryNext()
	if !ok {
		t.Fatalf("TryNext: nothing ready (next at %v), want %s", readyAt, want)
	}
	if got.URL != want {
		t.Fatalf("TryNext = %s, want %s", got.URL, want)
	}
}

// mustWait checks that nothing is ready and the next host opens at readyAt.
func mustWait(t *testing.T, f *Frontier, readyAt time.Time) {
	t.Helper()
	got, ok, at := f.TryNext()
	if ok {
		t.Fatalf("TryNext = %s, want nothing ready", got.URL)
	}
	if !at.Equal(readyAt) {
		t.Fatalf("next ready at %v, want %v", at, readyAt)
	}
}

func TestFrontierOneInFlightPerHost(t *testing.T) {
	clk := newFakeClock()
	f := NewFrontier(0, time.Minute, clk.Now) // no delay: only the lease limits
	if err := f.Push(task("http://a.test/1"), task("http://a.test/2"), task("http://a.test/3")); err != nil {
		t.Fatal(err)
	}
	mustNext(t, f, "http://a.test/1")
	mustWait(t, f, time.Time{}) // a.test is busy, nothing else to do
	if f.InFlight() != 1 || f.Len() != 2 || f.Hosts() != 1 {
		t.Fatalf("InFlight %d Len %d Hosts %d, want 1 2 1", f.InFlight(), f.Len(), f.Hosts())
	}
	f.Done("a.test", clk.Now(), 0)
	mustNext(t, f, "http://a.test/2") // FIFO within the host
}

func TestFrontierDelayFromCompletion(t *testing.T) {
	clk := newFakeClock()
	t0 := clk.Now()
	f := NewFrontier(time.Second, time.Minute, clk.Now)
	f.Push(task("http://a.test/1"), task("http://a.test/2"))
	mustNext(t, f, "http://a.test/1")
	// The request takes 5 s; the delay counts from its end, not its start.
	clk.Advance(5 * time.Second)
	f.Done("a.test", clk.Now(), 0)
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
			f := NewFrontier(time.Second, 10*time.Second, clk.Now)
			f.Push(task("http://a.test/1"), task("http://a.test/2"))
			mustNext(t, f, "http://a.test/1")
			done := clk.Now()
			f.Done("a.test", done, tt.crawlDelay)
			mustWait(t, f, done.Add(tt.wantGap))
			clk.Advance(tt.wantGap)
			mustNext(t, f, "http://a.test/2")
		})
	}
}

func TestFrontierHostsInterleave(t *testing.T) {
	clk := newFakeClock()
	f := NewFrontier(time.Second, time.Minute, clk.Now)
	// One host's backlog must not starve the others.
	f.Push(task("http://a.test/1"), task("http://a.test/2"), task("http://a.test/3"))
	f.Push(task("http://b.test/1"), task("http://b.test/2"))
	f.Push(task("http://c.test/1"))
	mustNext(t, f, "http://a.test/1")
	mustNext(t, f, "http://b.test/1")
	mustNext(t, f, "http://c.test/1")
	mustWait(t, f, time.Time{})
	if f.InFlight() != 3 {
		t.Fatalf("InFlight = %d, want 3 (hosts fetched concurrently)", f.InFlight())
	}
	// b finishes first, then a: b gets its next turn first.
	clk.Advance(100 * time.Millisecond)
	f.Done("b.test", clk.Now(), 0)
	clk.Advance(100 * time.Millisecond)
	f.Done("a.test", clk.Now(), 0)
	f.Done("c.test", clk.Now(), 0) // c has nothing left
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
	f := NewFrontier(time.Second, time.Minute, clk.Now)
	f.Push(task("http://a.test/1"))
	mustNext(t, f, "http://a.test/1")
	f.Done("a.test", clk.Now(), 0)
	mustWait(t, f, time.Time{}) // empty
	// A task arriving after the host drained still waits out the delay.
	f.Push(task("http://a.test/2"))
	mustWait(t, f, clk.Now().Add(time.Second))
}

func TestFrontierLeaseHelpers(t *testing.T) {
	clk := newFakeClock()
	f := NewFrontier(time.Second, time.Minute, clk.Now)
	f.Push(task("http://a.test/1"), task("http://a.test/2"), task("http://a.test/3"))
	mustNext(t, f, "http://a.test/1")

	// NextFromHost continues under the lease without waiting.
	next, ok := f.NextFromHost("a.test")
	if !ok || next.URL != "http://a.test/2" {
		t.Fatalf("NextFromHost = %v, %v", next, ok)
	}
	if _, ok := f.NextFromHost("b.test"); ok {
		t.Fatal("NextFromHost on a host without lease succeeded")
	}
	// Requeue puts it back in front.
	if err := f.Requeue(next); err != nil {
		t.Fatal(err)
	}
	// Release without a request keeps the host ready at once.
	f.Release("a.test")
	mustNext(t, f, "http://a.test/2")

	// Defer keeps the host closed until the given time.
	until := clk.Now().Add(time.Minute)
	f.Defer("a.test", until)
	mustWait(t, f, until)

	if err := f.Requeue(task("http://a.test/9")); err == nil {
		t.Fatal("Requeue without a lease succeeded")
	}
	if err := f.Push(task("not a url")); err == nil {
		t.Fatal("Push of a URL without host succeeded")
	}
}

func TestFrontierSweepsIdleHosts(t *testing.T) {
	clk := newFakeClock()
	f := NewFrontier(time.Millisecond, time.Minute, clk.Now)
	for i := range 3000 {
		host := fmt.Sprintf("h%d.test", i)
		f.Push(task("http://" + host + "/"))
		mustNext(t, f, "http://"+host+"/")
		f.Done(host, clk.Now(), 0)
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
	f := NewFrontier(50*time.Millisecond, time.Minute, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	// Woken by Push.
	got := make(chan Task)
	go func() {
		tk, err := f.Next(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- tk
	}()
	time.Sleep(20 * time.Millisecond)
	f.Push(task("http://a.test/1"), task("http://a.test/2"))
	if tk := <-got; tk.URL != "http://a.test/1" {
		t.Fatalf("Next = %v", tk)
	}

	// Woken by the timer once the delay has passed.
	done := time.Now()
	f.Done("a.test", done, 0)
	tk, err := f.Next(ctx)
	if err != nil || tk.URL != "http://a.test/2" {
		t.Fatalf("Next = %v, %v", tk, err)
	}
	if waited := time.Since(done); waited < 50*time.Millisecond {
		t.Fatalf("Next returned after %v, before the 50ms delay", waited)
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
	f := NewFrontier(delay, time.Minute, nil)
	for i := range perHost {
		for h := range hosts {
			f.Push(task(fmt.Sprintf("http://h%d.test/%d", h, i)))
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
				tk, err := f.Next(ctx)
				if err != nil {
					return
				}
				host, _ := HostOf(tk.URL)
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
				f.Done(host, end, 0)
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
