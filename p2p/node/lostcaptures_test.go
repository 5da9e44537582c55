package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/store"
)

// lostWorld is a lost-capture watch over a real store, with holders whose
// presence, a clock and the owned keys the test sets, and a requeue that
// records what it is asked.
type lostWorld struct {
	t   testing.TB
	db  *store.DB
	l   *lostCaptures
	now time.Time

	mu       sync.Mutex
	present  map[string]bool
	notOwned map[uint64]bool
	queued   []string
}

const lostTestGrace = 10 * time.Second

func newLostWorld(t testing.TB) *lostWorld {
	db, err := store.Open(t.TempDir(), store.Options{BloomExpected: 1000, CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	w := &lostWorld{t: t, db: db, now: time.Unix(1_000_000, 0), present: map[string]bool{}, notOwned: map[uint64]bool{}}
	w.l = &lostCaptures{
		grace: lostTestGrace, self: "self", log: slog.New(slog.NewTextHandler(io.Discard, nil)), db: db,
		now: func() time.Time { return w.now },
		present: func(_ context.Context, h string) bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.present[h]
		},
		owns:   func(k uint64) bool { return !w.notOwned[k] },
		claims: func() string { return "claims" },
		requeue: func(lost []lostURL, gone func(string) bool) ([]lostURL, error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			for _, u := range lost {
				w.queued = append(w.queued, u.url)
			}
			return lost, nil
		},
	}
	return w
}

// put writes a shard record of url under key, done or not, whose
// metadata (fetched at version seconds) names captures by holders.
func (w *lostWorld) put(key uint64, url string, done bool, version int64, holders ...string) {
	m := store.URLMeta{URL: url, Status: 200, LastFetch: time.Unix(version, 0)}
	for i, h := range holders {
		m.Captures = append(m.Captures, store.Capture{Holder: h, RecordID: fmt.Sprintf("<urn:uuid:%s-%d>", url, i),
			Digest: "sha1:AAAA", Time: time.Unix(version, 0)})
	}
	meta, ver, err := recordState(m)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := w.db.PutShardRecords([]store.ShardRecord{{Key: key, URLHash: key * 7, URL: url, Done: done, Meta: meta, MetaVersion: ver}}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *lostWorld) setPresent(h string, p bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.present[h] = p
}

// run ticks the watch every step for d of the fake clock.
func (w *lostWorld) run(d, step time.Duration) {
	for end := w.now.Add(d); !w.now.After(end); w.now = w.now.Add(step) {
		w.l.tick(context.Background())
	}
}

func (w *lostWorld) takeQueued() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.queued
	w.queued = nil
	slices.Sort(q)
	return q
}

// TestLostCapturesQueuedOnceAfterGrace: once a holder has been gone for the
// grace period, the URLs this node owns whose every capture a gone holder
// held are queued again, each once however many scans follow; a URL with a
// capture held by a present peer or by this node, one it does not own and
// one not done yet are not. Once a URL's done mark names a present
// holder's capture (its refetch), it is no longer pending.
func TestLostCapturesQueuedOnceAfterGrace(t *testing.T) {
	w := newLostWorld(t)
	w.setPresent("B", true)
	w.put(1, "http://a.test/only-A", true, 100, "A")
	w.put(2, "http://a.test/A-and-gone-C", true, 100, "A", "C")
	w.put(3, "http://a.test/A-and-present-B", true, 100, "A", "B")
	w.put(4, "http://a.test/A-and-self", true, 100, "self", "A")
	w.put(5, "http://a.test/not-owned", true, 100, "A")
	w.put(6, "http://a.test/not-done", false, 100, "A")
	w.put(7, "http://a.test/B-only", true, 100, "B")
	w.notOwned[5] = true

	w.run(lostTestGrace-2*time.Second, time.Second)
	if q := w.takeQueued(); len(q) > 0 {
		t.Fatalf("queued %v before the grace period ended", q)
	}
	if s := w.l.Status(); s.Holders != 3 || s.Suspect != 2 || s.Gone != 0 {
		t.Fatalf("status within the grace: %+v, want 3 holders watched, A and C suspect", s)
	}
	w.run(5*time.Second, time.Second)
	want := []string{"http://a.test/A-and-gone-C", "http://a.test/only-A"}
	if q := w.takeQueued(); !slices.Equal(q, want) {
		t.Fatalf("queued %v after the grace, want %v", q, want)
	}
	// Many more scans (one a grace period at least): nothing is queued
	// twice while its fetch is pending.
	w.run(5*lostTestGrace, time.Second)
	if q := w.takeQueued(); len(q) > 0 {
		t.Fatalf("queued %v again", q)
	}
	if s := w.l.Status(); s.Requeued != 2 || s.Pending != 2 || s.Gone != 2 || s.Scans < 5 {
		t.Fatalf("status: %+v, want 2 requeued and pending, A and C gone, scans every grace period", s)
	}
	// The refetch: a newer done mark with this node's capture.
	w.put(1, "http://a.test/only-A", true, 200, "self")
	w.run(lostTestGrace, time.Second)
	if s := w.l.Status(); s.Pending != 1 || s.Requeued != 2 {
		t.Fatalf("after one refetch: %+v, want 1 pending", s)
	}
	if q := w.takeQueued(); len(q) > 0 {
		t.Fatalf("queued %v after the refetch", q)
	}
}

// TestLostCapturesHolderBackCostsNothing: a holder that answers again
// before the grace period ends restarts its clock, however often it goes
// away: nothing is queued.
func TestLostCapturesHolderBackCostsNothing(t *testing.T) {
	w := newLostWorld(t)
	w.put(1, "http://a.test/only-A", true, 100, "A")
	w.run(time.Second, time.Second) // the first scan finds A
	for range 5 {
		w.run(lostTestGrace-3*time.Second, time.Second) // gone nearly the whole grace
		w.setPresent("A", true)
		w.run(time.Second, time.Second)
		w.setPresent("A", false)
	}
	if q := w.takeQueued(); len(q) > 0 {
		t.Fatalf("queued %v for a holder that kept coming back", q)
	}
	if s := w.l.Status(); s.Gone != 0 || s.Requeued != 0 {
		t.Fatalf("status: %+v, want nothing gone or requeued", s)
	}
}

// BenchmarkLostScan measures one scan of the lost-capture watch over
// 10,000 done marks with captures (what a scan costs a node per record it
// holds); nothing is gone, so nothing is queued.
func BenchmarkLostScan(b *testing.B) {
	w := newLostWorld(b)
	const n = 10_000
	recs := make([]store.ShardRecord, 0, n)
	for i := range n {
		m := store.URLMeta{URL: fmt.Sprintf("http://h%d.test/p%d", i%50, i), Status: 200, LastFetch: time.Unix(100, 0),
			Captures: []store.Capture{{Holder: fmt.Sprintf("holder-%d", i%5), RecordID: fmt.Sprintf("<urn:uuid:%d>", i), Digest: "sha1:AAAA", Time: time.Unix(100, 0)}}}
		meta, ver, err := recordState(m)
		if err != nil {
			b.Fatal(err)
		}
		recs = append(recs, store.ShardRecord{Key: uint64(i % 50), URLHash: uint64(i), URL: m.URL, Done: true, Meta: meta, MetaVersion: ver})
	}
	if err := w.db.PutShardRecords(recs); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := w.l.scan(context.Background(), map[string]bool{}, "claims"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
}

// TestLostCapturesRetryBacksOff: a URL queued again whose fetch never
// replaces the lost capture (its task dropped, or its site gone too) is
// queued once more after an hour, then after two, four...: not once a
// scan, and not never.
func TestLostCapturesRetryBacksOff(t *testing.T) {
	w := newLostWorld(t)
	w.put(1, "http://a.test/only-A", true, 100, "A")
	w.run(2*lostTestGrace, time.Second)
	if q := w.takeQueued(); len(q) != 1 {
		t.Fatalf("queued %v after the grace, want the URL once", q)
	}
	var at []time.Duration
	start := w.now
	for end := start.Add(8 * time.Hour); w.now.Before(end); w.now = w.now.Add(time.Minute) {
		w.l.tick(context.Background())
		if q := w.takeQueued(); len(q) > 0 {
			at = append(at, w.now.Sub(start).Round(time.Hour))
		}
	}
	if want := []time.Duration{time.Hour, 3 * time.Hour, 7 * time.Hour}; !slices.Equal(at, want) {
		t.Fatalf("queued again at %v, want %v", at, want)
	}
}
