package frontier

import (
	"fmt"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
)

// TestLeaseEndPutsBackUnsettledTasks: a lease ended without any explicit
// settlement puts every task it took back at the head of its host's queue,
// in order, gives back every budget reservation it made, and leaves the
// host ready at once (no request was made); a kept task stays out with its
// reservation until Complete. This is the cleanup every exit of the crawl
// loop relies on.
func TestLeaseEndPutsBackUnsettledTasks(t *testing.T) {
	clk := newFakeClock()
	f := newConfigFrontier(t, Config{Delay: time.Second, MaxPagesPerHost: 2, Clock: clk.Now})
	push(t, f, task("http://a.test/1"), task("http://a.test/2"), task("http://a.test/3"), task("http://a.test/4"))
	fetched := func() int64 {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.hosts["a.test"].state.Fetched
	}

	l := mustNext(t, f, "http://a.test/1")
	second, ok := l.Next()
	if !ok || second.URL != "http://a.test/2" {
		t.Fatalf("Lease.Next = %v, %v; want a.test/2", second, ok)
	}
	third, ok := l.Next()
	if !ok || third.URL != "http://a.test/3" {
		t.Fatalf("Lease.Next = %v, %v; want a.test/3", third, ok)
	}
	if !l.Reserve(l.Task()) || !l.Reserve(second) {
		t.Fatal("reservations refused within a budget of 2")
	}
	if l.Reserve(third) || fetched() != 2 {
		t.Fatalf("third reservation accepted with a budget of 2 (fetched %d)", fetched())
	}
	if f.Len() != 1 || f.InFlight() != 1 {
		t.Fatalf("under the lease: Len %d, InFlight %d; want 1 and 1", f.Len(), f.InFlight())
	}
	l.End()
	l.End() // idempotent: nothing is put back twice

	if f.Len() != 4 || f.InFlight() != 0 || fetched() != 0 {
		t.Fatalf("after End: Len %d, InFlight %d, budget used %d; want 4, 0, 0", f.Len(), f.InFlight(), fetched())
	}
	if n := f.Counts().Queued; n != 4 {
		t.Fatalf("%d entries in the store, want all 4", n)
	}
	// The same tasks in the same order, ready at once, with the whole
	// budget again.
	l = mustNext(t, f, "http://a.test/1")
	if next, ok := l.Next(); !ok || next != second {
		t.Fatalf("after End: Lease.Next = %v, %v; want %v first again", next, ok, second)
	}
	if !l.Reserve(l.Task()) || !l.Reserve(second) {
		t.Fatal("reservations given back at End refused")
	}
	// A kept task stays out of the queue with its reservation.
	keep(t, l, l.Task())
	l.End()
	if f.Len() != 3 || fetched() != 1 {
		t.Fatalf("after End with a/1 kept: Len %d, budget used %d; want 3 and 1", f.Len(), fetched())
	}
	l = mustNext(t, f, "http://a.test/2")
	l.End()
	complete(t, f, "http://a.test/1")
	if n := f.Counts().Queued; n != 3 {
		t.Fatalf("%d entries in the store after a/1 completed, want 3", n)
	}
	st, _, err := f.db.Host(urls.HostKey("a.test"))
	if err != nil || st.Fetched != 1 {
		t.Fatalf("stored host state %+v, %v; want the kept page's reservation alone", st, err)
	}
}

// TestCompleteSettlesKeptTasksOnly: Complete refuses a task its lease
// still holds (only the holder may settle it, by keeping it) and accepts
// it once kept, during or after the lease.
func TestCompleteSettlesKeptTasksOnly(t *testing.T) {
	clk := newFakeClock()
	f := newTestFrontier(t, None, time.Minute, clk.Now)
	push(t, f, task("http://a.test/1"), task("http://a.test/2"))
	l := mustNext(t, f, "http://a.test/1")
	if err := f.Complete(l.Task(), Outcome{}); err == nil {
		t.Fatal("Complete of a task its lease still holds succeeded")
	}
	keep(t, l, l.Task())
	if err := l.Keep(l.Task()); err == nil {
		t.Fatal("a task kept twice")
	}
	complete(t, f, "http://a.test/1") // during the lease
	next, _ := l.Next()
	keep(t, l, next)
	l.End()
	complete(t, f, next.URL) // after it
	if n := f.Counts().Queued; n != 0 || !f.Idle() {
		t.Fatalf("%d entries left, idle %v", n, f.Idle())
	}
}

// TestLeaseEqualTasks: a URL queued twice gives a lease two equal tasks;
// each is reserved, kept and put back on its own, so no reservation is
// lost or counted twice.
func TestLeaseEqualTasks(t *testing.T) {
	clk := newFakeClock()
	f := newConfigFrontier(t, Config{Delay: None, MaxPagesPerHost: 3, Clock: clk.Now})
	push(t, f, task("http://a.test/1"), task("http://a.test/1"))
	l := mustNext(t, f, "http://a.test/1")
	twin, ok := l.Next()
	if !ok || twin != l.Task() {
		t.Fatalf("Lease.Next = %v, %v; want the second copy", twin, ok)
	}
	reserved := 0
	for range 3 {
		if l.Reserve(twin) {
			reserved++
		}
	}
	if reserved != 2 {
		t.Fatalf("%d reservations for two equal tasks, want 2", reserved)
	}
	keep(t, l, twin)
	l.End()
	f.mu.Lock()
	fetched := f.hosts["a.test"].state.Fetched
	f.mu.Unlock()
	if f.Len() != 1 || fetched != 1 {
		t.Fatalf("after End with one copy kept: Len %d, budget used %d; want 1 and 1", f.Len(), fetched)
	}
	complete(t, f, "http://a.test/1")
	settle(t, f, mustNext(t, f, "http://a.test/1"))
	if n := f.Counts().Queued; n != 0 {
		t.Fatalf("%d entries left", n)
	}
}

// TestQueuedCountExactThroughDropsAndCompletes: the frontier removes the
// tasks it handed out without the store looking them up, which is exact
// only while they are in the store until then. A budget drop of the host's
// queue leaves them (and recrawls) alone; completing them, a URL queued
// twice included, leaves a Queued count equal to what the queue table
// holds, in memory and after a reopen.
func TestQueuedCountExactThroughDropsAndCompletes(t *testing.T) {
	dir := t.TempDir()
	db := openStoreAt(t, dir)
	f, err := New(db, Config{Delay: None, LeaseAhead: None})
	if err != nil {
		t.Fatal(err)
	}
	tasks := []Task{task("http://a.test/0"), task("http://a.test/1"), task("http://a.test/1")}
	for i := 2; i < 30; i++ {
		tasks = append(tasks, Task{URL: fmt.Sprintf("http://a.test/%d", i), Depth: 1})
	}
	tasks = append(tasks, Task{URL: "http://a.test/recrawl", Depth: 1, Recrawl: true})
	push(t, f, tasks...)
	l := mustNext(t, f, "http://a.test/0")
	kept := []Task{l.Task()}
	for range 2 {
		next, ok := l.Next()
		if !ok {
			t.Fatal("Lease.Next: nothing")
		}
		kept = append(kept, next)
	}
	if kept[1] != kept[2] {
		t.Fatalf("tasks taken %v, want the URL queued twice as the 2nd and 3rd", kept)
	}
	for _, k := range kept {
		keep(t, l, k)
	}
	n, err := l.DropQueue(nil)
	if err != nil || n != len(tasks)-4 {
		t.Fatalf("DropQueue = %d, %v; want %d (all but the 3 kept and the recrawl)", n, err, len(tasks)-4)
	}
	l.End()
	if q := f.Counts().Queued; q != 4 || len(allQueued(t, db)) != 4 {
		t.Fatalf("after the drop: %d counted, %d in the table; want 4", q, len(allQueued(t, db)))
	}
	for _, k := range kept {
		if err := f.Complete(k, Outcome{}); err != nil {
			t.Fatalf("Complete(%s): %v", k.URL, err)
		}
	}
	if err := f.Complete(kept[0], Outcome{}); err == nil {
		t.Fatal("a task completed twice")
	}
	left := allQueued(t, db)
	if q := f.Counts().Queued; q != 1 || len(left) != 1 || !left[0].Recrawl {
		t.Fatalf("after completing the kept tasks: %d counted, table %+v; want the recrawl alone", q, left)
	}
	db.Close()
	db = openStoreAt(t, dir)
	if c, err := db.QueueCounts(); err != nil || c.Queued != 1 {
		t.Fatalf("counts after reopen %+v, %v; want 1 queued", c, err)
	}
}
