package crawl

import (
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/internal/memstat"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// synthPage returns one generated HTML page (about 12 KB) and its URL.
func synthPage(b *testing.B) ([]byte, *url.URL) {
	w, err := synthweb.New(synthweb.Config{Seed: 1, Hosts: 5})
	if err != nil {
		b.Fatal(err)
	}
	for _, u := range w.Pages() {
		req := httptest.NewRequest(http.MethodGet, u, nil)
		rec := httptest.NewRecorder()
		w.Handler().ServeHTTP(rec, req)
		if rec.Code == 200 && IsHTML(rec.Header().Get("Content-Type"), nil) && rec.Body.Len() >= 12000 {
			pu, _ := url.Parse(u)
			return rec.Body.Bytes(), pu
		}
	}
	b.Fatal("no 12 KB HTML page in the synthetic web")
	return nil, nil
}

func BenchmarkParse(b *testing.B) {
	body, pageURL := synthPage(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ExtractLinks(body, pageURL, "swarmcrawl"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCrawlSynthetic crawls a 1,000-host synthetic web with no delay:
// the engine's own throughput over loopback, with the server in the same
// process (its allocations are included in allocs/page).
func BenchmarkCrawlSynthetic(b *testing.B) {
	w := startSynthWeb(b, synthweb.Config{Seed: 1, Hosts: 1000})
	want := len(w.GroundTruth("swarmcrawl"))
	var pages int64
	var elapsed time.Duration
	var mallocs uint64
	for b.Loop() {
		w.ResetLog()
		cfg := DefaultConfig()
		cfg.Delay = 0
		cfg.MaxDepth = 1000 // see TestCrawlSyntheticWeb
		cfg.Proxy = w.Proxy()
		ring := &ringStandIn{seen: map[uint64]bool{}}
		c, err := New(cfg, openStore(b), nil, ring)
		if err != nil {
			b.Fatal(err)
		}
		ring.c = c

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		ring.seed(w.Seeds())
		crawlUntilIdle(b, c, 5*time.Minute)
		elapsed += time.Since(start)
		runtime.ReadMemStats(&after)
		mallocs += after.Mallocs - before.Mallocs

		s := c.Stats()
		if s.Fetched != int64(want) {
			b.Fatalf("fetched %d pages, want %d; stats %+v; missing %q", s.Fetched, want, s, w.Missing("swarmcrawl"))
		}
		pages += s.Fetched
	}
	b.ReportMetric(float64(pages)/elapsed.Seconds(), "pages/s")
	b.ReportMetric(float64(mallocs)/float64(pages), "allocs/page")
}

// BenchmarkFrontierRSS pushes queued URLs over 10,000 hosts into a durable
// frontier and reports the Go heap and the resident memory of the process
// per million queued URLs, at a tenth of the pushes and at the end: flat
// memory shows as a heap that does not grow with the queue. queued=1M runs
// by default; queued=10M only when -bench names it (it writes about 1 GB).
func BenchmarkFrontierRSS(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("queued=%dM", n/1_000_000), func(b *testing.B) {
			if n > 1_000_000 && !strings.Contains(flag.Lookup("test.bench").Value.String(), "10M") {
				b.Skip("run with -bench 'FrontierRSS/queued=10M'")
			}
			for b.Loop() {
				frontierRSS(b, n, 10_000)
			}
		})
	}
}

func frontierRSS(b *testing.B, total, hosts int) {
	db, err := store.Open(b.TempDir(), store.Options{BloomExpected: 1000})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	f, err := NewFrontier(db, time.Second, time.Minute, nil)
	if err != nil {
		b.Fatal(err)
	}
	base := heapInUse()
	var heapTenth, rssTenth uint64
	start := time.Now()
	const batch = 10_000
	tasks := make([]Task, batch)
	for pushed := 0; pushed < total; {
		for i := range tasks {
			tasks[i] = Task{URL: fmt.Sprintf("http://h%05d.example/articles/%d/index.html", pushed%hosts, pushed), Depth: 1 + pushed%5}
			pushed++
		}
		if _, err := f.Push(tasks...); err != nil {
			b.Fatal(err)
		}
		if pushed == total/10 {
			heapTenth, rssTenth = heapInUse(), memstat.ResidentBytes()
		}
	}
	elapsed := time.Since(start)
	heap, rss := heapInUse(), memstat.ResidentBytes()
	if f.Len() != total {
		b.Fatalf("Len = %d, want %d", f.Len(), total)
	}
	// One task per host is served, so every host's head is in memory.
	m := float64(total) / 1e6
	b.ReportMetric(float64(heap-base)/m, "heap-B/M-queued")
	b.ReportMetric(float64(rss)/m, "rss-B/M-queued")
	b.ReportMetric(float64(heapTenth-base)/(1<<20), "heap-MB@10%")
	b.ReportMetric(float64(heap-base)/(1<<20), "heap-MB@100%")
	b.ReportMetric(float64(rssTenth)/(1<<20), "rss-MB@10%")
	b.ReportMetric(float64(rss)/(1<<20), "rss-MB@100%")
	b.ReportMetric(float64(total)/elapsed.Seconds(), "pushes/s")
}

// heapInUse returns the live Go heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkResume measures one Resume, which the node calls every 250ms,
// with 10,000 hosts queued and one of them parked by Config.Owns and still
// not owned: the cost of asking again about the parked hosts.
func BenchmarkResume(b *testing.B) {
	const hosts = 10_000
	c := newTestCrawler(b, testConfig(), nil, nil)
	f := c.frontier
	const parked = "parked.example"
	parkHost(b, f, "http://"+parked+"/")
	tasks := make([]Task, 0, hosts-1)
	for i := range hosts - 1 {
		tasks = append(tasks, Task{URL: fmt.Sprintf("http://h%05d.example/", i)})
	}
	push(b, f, tasks...)
	owns := func(uint64) bool { return false }
	for b.Loop() {
		if err := c.Resume(owns); err != nil {
			b.Fatal(err)
		}
	}
	f.mu.Lock()
	still := f.hosts[parked].parked
	f.mu.Unlock()
	if !still {
		b.Fatal("Resume unparked a host Owns refuses")
	}
}

// parkHost queues u alone, takes it, and parks its host the way the
// crawler does when Config.Owns refuses the task.
func parkHost(tb testing.TB, f *Frontier, u string) {
	tb.Helper()
	push(tb, f, task(u))
	t, ok, _ := f.TryNext()
	if !ok || t.URL != u {
		tb.Fatalf("TryNext = %v, %v; want %s", t.URL, ok, u)
	}
	host, err := urls.HostOf(u)
	if err != nil {
		tb.Fatal(err)
	}
	if err := f.Requeue(t); err != nil {
		tb.Fatal(err)
	}
	f.park(host)
	f.Release(host)
}
