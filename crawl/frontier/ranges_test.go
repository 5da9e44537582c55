package frontier

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// allQueued returns every entry of the store's queue.
func allQueued(t *testing.T, db *store.DB) []store.QueueEntry {
	t.Helper()
	var keys []uint64
	if err := db.QueueHosts(func(head store.QueueEntry) error {
		keys = append(keys, head.HostKey)
		return nil
	}); err != nil {
		t.Fatalf("QueueHosts: %v", err)
	}
	var out []store.QueueEntry
	for _, k := range keys {
		es, err := db.QueueHead(k, 1<<20, nil)
		if err != nil {
			t.Fatalf("QueueHead: %v", err)
		}
		out = append(out, es...)
	}
	return out
}

// allScheduled returns every entry of the store's schedule.
func allScheduled(t *testing.T, db *store.DB) []store.QueueEntry {
	t.Helper()
	var out []store.QueueEntry
	if err := db.ScanSchedule(func(e store.QueueEntry) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatalf("ScanSchedule: %v", err)
	}
	return out
}

// parkHost queues u alone, takes it, and parks its host the way the
// crawler does when its ownership gate refuses the task.
func parkHost(tb testing.TB, f *Frontier, u string) {
	tb.Helper()
	push(tb, f, task(u))
	l, ok, _ := f.TryNext()
	if !ok || l.Task().URL != u {
		tb.Fatalf("TryNext = %v, %v; want %s", leaseTask(l).URL, ok, u)
	}
	l.Park()
	l.End()
}

// releaseRange releases the ring keys in the way the crawler's Release
// does: fence, wait for the work in flight, drop, lift.
func releaseRange(f *Frontier, in func(uint64) bool) (map[string]bool, error) {
	fc := f.Fence(in)
	defer fc.Lift()
	if err := fc.Wait(context.Background()); err != nil {
		return nil, err
	}
	return fc.Drop()
}

// TestResumeTouchesOnlyParkedHosts: with many hosts queued and one parked,
// Resume asks Owns about the parked host alone and reads no store (it
// works on a closed one); it leaves the host parked while it is not owned
// and brings it back once it is. A host whose queue is in the store but
// not in memory comes back too, in range only.
func TestResumeTouchesOnlyParkedHosts(t *testing.T) {
	db := openStore(t)
	f, err := New(db, Config{Delay: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const parked = "parked.example"
	parkHost(t, f, "http://"+parked+"/")
	var tasks []Task
	for i := range 500 {
		tasks = append(tasks, Task{URL: fmt.Sprintf("http://h%03d.example/", i)})
	}
	push(t, f, tasks...)

	var asked []uint64
	owned := false
	owns := func(k uint64) bool {
		asked = append(asked, k)
		return owned
	}
	for range 3 {
		if err := f.Resume(owns); err != nil {
			t.Fatalf("Resume: %v", err)
		}
	}
	if want := []uint64{urls.HostKey(parked), urls.HostKey(parked), urls.HostKey(parked)}; !slices.Equal(asked, want) {
		t.Fatalf("Resume asked Owns about %d keys (first %x), want the parked host's %x 3 times", len(asked), asked[:min(3, len(asked))], urls.HostKey(parked))
	}
	// Every other host is served; the parked one is not.
	served := 0
	for {
		l, ok, _ := f.TryNext()
		if !ok {
			break
		}
		if l.Host() == parked {
			t.Fatalf("parked host handed out while not owned")
		}
		settle(t, f, l)
		served++
	}
	if served != len(tasks) {
		t.Fatalf("served %d tasks, want %d", served, len(tasks))
	}

	owned = true
	asked = nil
	if err := f.Resume(owns); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if len(asked) != 1 {
		t.Errorf("Resume asked Owns about %d keys, want 1", len(asked))
	}
	settle(t, f, mustNext(t, f, "http://"+parked+"/"))

	// An orphan: queued in the store behind the frontier's back, as when
	// loading the host failed while a scheduled task of its fell due.
	const orphan = "orphan.example"
	e := store.QueueEntry{HostKey: urls.HostKey(orphan), RingKey: urls.HostKey(orphan), URLHash: urls.URLHash("http://" + orphan + "/"), URL: "http://" + orphan + "/"}
	if _, err := db.ApplyQueue(&store.QueueUpdate{Push: []store.QueueEntry{e}}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.orphans[orphan] = urls.HostKey(orphan)
	f.mu.Unlock()
	if err := f.Resume(func(k uint64) bool { return k != urls.HostKey(orphan) }); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if l, ok, _ := f.TryNext(); ok {
		t.Fatalf("TryNext = %s after a Resume that excludes it", l.Task().URL)
	}
	if err := f.Resume(func(uint64) bool { return true }); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	settle(t, f, mustNext(t, f, "http://"+orphan+"/"))

	// Nothing parked, nothing orphaned: Resume does not touch the store.
	parkHost(t, f, "http://"+parked+"/again")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	owned, asked = false, nil
	if err := f.Resume(owns); err != nil {
		t.Errorf("Resume on a closed store with a parked host not owned: %v", err)
	}
	if len(asked) != 1 {
		t.Errorf("Resume asked Owns about %d keys, want 1", len(asked))
	}
}

// TestReleaseUnschedulesInOneWrite: Release deletes the range's schedule
// entries and leaves every other one exactly as it was (same due time and
// sequence number: not promoted and rescheduled), queues nothing, and keeps
// the counters right.
func TestReleaseUnschedulesInOneWrite(t *testing.T) {
	db := openStore(t)
	f, err := New(db, Config{Delay: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// a's entries fall due before and after b's, c's after: the old
	// promote-and-reschedule would have rewritten a's first one.
	for i, s := range []struct {
		url      string
		attempts int
		in       time.Duration
	}{
		{"http://a.example/1", 0, time.Hour},
		{"http://b.example/1", 0, 2 * time.Hour},
		{"http://b.example/2", 1, 3 * time.Hour},
		{"http://a.example/2", 2, 4 * time.Hour},
		{"http://c.example/1", 0, 5 * time.Hour},
	} {
		push(t, f, Task{URL: s.url})
		l := mustNext(t, f, s.url)
		keep(t, l, l.Task())
		next := Task{URL: s.url, Attempts: s.attempts, Recrawl: s.attempts == 0}
		if err := f.Complete(task(s.url), Outcome{Reschedule: &next, At: start.Add(s.in)}); err != nil {
			t.Fatalf("Complete %d: %v", i, err)
		}
		l.End()
	}
	before := allScheduled(t, db)
	if len(before) != 5 {
		t.Fatalf("%d scheduled entries, want 5", len(before))
	}
	b := urls.HostKey("b.example")
	if _, err := releaseRange(f, func(k uint64) bool { return k == b }); err != nil {
		t.Fatalf("Release: %v", err)
	}
	want := slices.DeleteFunc(slices.Clone(before), func(e store.QueueEntry) bool { return e.HostKey == b })
	got := allScheduled(t, db)
	if len(got) != len(want) {
		t.Fatalf("scheduled after Release: %d entries, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].URL != want[i].URL || got[i].Seq != want[i].Seq || !got[i].Due.Equal(want[i].Due) || got[i].Attempts != want[i].Attempts {
			t.Errorf("scheduled entry %d after Release = %s seq %d due %v, want %s seq %d due %v untouched",
				i, got[i].URL, got[i].Seq, got[i].Due, want[i].URL, want[i].Seq, want[i].Due)
		}
	}
	if q := allQueued(t, db); len(q) != 0 {
		t.Errorf("Release queued %d entries, first %s", len(q), q[0].URL)
	}
	counts, err := db.QueueCounts()
	if err != nil {
		t.Fatal(err)
	}
	if wantC := (store.QueueCounts{Scheduled: 3, Retrying: 1}); counts != wantC || f.Counts() != wantC {
		t.Errorf("counts after Release: store %+v, frontier %+v; want %+v", counts, f.Counts(), wantC)
	}
	f.mu.Lock()
	nextDue := f.nextDue
	f.mu.Unlock()
	if !nextDue.Equal(want[0].Due) {
		t.Errorf("next due %v after Release, want %v", nextDue, want[0].Due)
	}
}
