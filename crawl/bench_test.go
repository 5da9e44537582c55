package crawl

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
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
		cfg.Delay = None
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
