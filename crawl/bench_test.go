package crawl

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"runtime/metrics"
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
		if _, _, err := ExtractLinks(body, pageURL, "swarmcrawl", DefaultConfig().MaxLinksPerPage); err != nil {
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
		ring := &ringStandIn{seen: map[uint64]int{}}
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

// trapWeb is the 1,000-host synthetic web of issue 10's acceptance: ten
// hot hosts of 500 to 2,300 reachable pages, 91 hosts with a Crawl-delay
// and 20 trap hosts (calendar, pagination, deep, facets and session).
var trapWeb = synthweb.Config{Seed: 1, Hosts: 1000, HotHosts: 10, HotPages: 1600, TrapHosts: 20, CrawlDelayHosts: 91}

// BenchmarkCrawlTrapWeb crawls trapWeb with the default configuration and
// a 20 ms delay, as an operator would run it, and reports what the crawl
// got right: coverage of the pages within the depth limit of a seed (the
// share fetched, and how many were missed; 5 of the web's reachable pages
// lie beyond the default limit), pages fetched twice, and the fetches
// wasted on traps (and their share of all page fetches). "max-depth-1000"
// lifts the depth limit, so that only trap detection stops the traps.
func BenchmarkCrawlTrapWeb(b *testing.B) {
	w := startSynthWeb(b, trapWeb)
	token := ProductToken(DefaultConfig().UserAgent)
	for _, depth := range []int{DefaultConfig().MaxDepth, 1000} {
		name := "default"
		if depth != DefaultConfig().MaxDepth {
			name = fmt.Sprintf("max-depth-%d", depth)
		}
		b.Run(name, func(b *testing.B) {
			truth := w.Within(token, depth)
			var elapsed time.Duration
			var missing, dups, trap, pages int
			for b.Loop() {
				w.ResetLog()
				cfg := DefaultConfig()
				cfg.Delay = 20 * time.Millisecond
				cfg.MaxDepth = depth
				cfg.Proxy = w.Proxy()
				ring := &ringStandIn{seen: map[uint64]int{}}
				c, err := New(cfg, openStore(b), nil, ring)
				if err != nil {
					b.Fatal(err)
				}
				ring.c = c
				start := time.Now()
				ring.seed(w.Seeds())
				crawlUntilIdle(b, c, 20*time.Minute)
				elapsed += time.Since(start)
				got := map[string]bool{}
				for _, r := range w.Log() {
					got[r.URL] = got[r.URL] || r.Status != 0
				}
				var m []string
				for _, u := range truth {
					if !got[u] {
						m = append(m, u)
					}
				}
				missing += len(m)
				dups += len(w.Duplicates())
				tr, pg := w.TrapRequests()
				trap, pages = trap+tr, pages+pg
				if len(m) > 0 {
					b.Logf("missing %d of %d, such as %q", len(m), len(truth), m[:min(len(m), 5)])
				}
				b.Logf("stats %+v", c.Stats())
			}
			runs := float64(b.N)
			b.ReportMetric(100*(1-float64(missing)/runs/float64(len(truth))), "%coverage")
			b.ReportMetric(float64(missing)/runs, "missing")
			b.ReportMetric(float64(dups)/runs, "duplicates")
			b.ReportMetric(float64(trap)/runs, "trap-fetches")
			b.ReportMetric(100*float64(trap)/float64(pages), "%trap")
			b.ReportMetric(elapsed.Seconds()/runs, "s/crawl")
		})
	}
}

// hostilePage returns an HTML page of size bytes that is nothing but
// distinct links, the shape of a page written to exhaust a crawler's
// parser. With latin1 it declares windows-1252 and every link text holds
// a non-ASCII letter, so that its text has to be transcoded.
func hostilePage(size int, latin1 bool) []byte {
	var buf bytes.Buffer
	buf.Grow(size + 64)
	head, letter := "", ""
	if latin1 {
		head, letter = `<meta charset="windows-1252">`, "\xe9"
	}
	buf.WriteString("<!doctype html><html><head>" + head + "<title>links</title></head><body>\n")
	for i := 0; buf.Len() < size-64; i++ {
		fmt.Fprintf(&buf, "<a href=\"/l/%d\">%s%d</a>\n", i, letter, i)
	}
	buf.WriteString("</body></html>\n")
	return buf.Bytes()
}

// BenchmarkParseHostile parses a 10 MiB link-dense page (about 480,000
// links), the parse's worst case at the default body cap: its links, with
// the default cap and without, its text, and both as a worker takes them
// (parsePage, "page"), as ASCII and as windows-1252, and as ASCII ending
// in "</", which fastTokens leave to the tokeniser, so that the page is
// read twice ("page-fallback"). Besides time
// and allocations it reports peak-MiB: the most the heap grew above its
// level before the parse, sampled while the parse runs.
func BenchmarkParseHostile(b *testing.B) {
	body, latin1 := hostilePage(10<<20, false), hostilePage(10<<20, true)
	fallback := append(hostilePage(10<<20, false), "</"...)
	pageURL, _ := url.Parse("http://hostile.example/")
	for _, bm := range []struct {
		name string
		fn   func()
	}{
		{"links", func() {
			if _, _, err := ExtractLinks(body, pageURL, "swarmcrawl", DefaultConfig().MaxLinksPerPage); err != nil {
				b.Fatal(err)
			}
		}},
		{"links-uncapped", func() {
			if _, _, err := ExtractLinks(body, pageURL, "swarmcrawl", 0); err != nil {
				b.Fatal(err)
			}
		}},
		{"text", func() { ExtractText(body, "text/html") }},
		{"text-latin1", func() { ExtractText(latin1, "text/html") }},
		{"page", func() { parsePage(body, "text/html", pageURL, "swarmcrawl", DefaultConfig().MaxLinksPerPage) }},
		{"page-latin1", func() { parsePage(latin1, "text/html", pageURL, "swarmcrawl", DefaultConfig().MaxLinksPerPage) }},
		{"page-fallback", func() { parsePage(fallback, "text/html", pageURL, "swarmcrawl", DefaultConfig().MaxLinksPerPage) }},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			var peak uint64
			for b.Loop() {
				peak = max(peak, heapGrowth(bm.fn))
			}
			b.ReportMetric(float64(peak)/(1<<20), "peak-MiB")
		})
	}
}

// heapGrowth runs fn and returns the most the heap's object bytes grew
// above their level before it, sampled every 50µs by a goroutine that ends
// with fn.
func heapGrowth(fn func()) uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	base := read()
	stop, done := make(chan struct{}), make(chan uint64)
	go func() {
		var peak uint64
		t := time.NewTicker(50 * time.Microsecond)
		defer t.Stop()
		for {
			peak = max(peak, read())
			select {
			case <-stop:
				done <- peak
				return
			case <-t.C:
			}
		}
	}()
	fn()
	close(stop)
	peak := <-done
	if peak < base {
		return 0
	}
	return peak - base
}

// parseWeb is the synthetic web BenchmarkParsePages parses: pages of
// ordinary, hot and trap hosts.
var parseWeb = synthweb.Config{Seed: 1, Hosts: 40, HotHosts: 1, HotPages: 300, TrapHosts: 2}

// BenchmarkParsePages does to each 200 answer of a synthetic web, in turn,
// what a worker does to a new page: its title, text and fingerprint, and
// its links. One op is one page: ns/op, B/op and allocs/op are per page.
func BenchmarkParsePages(b *testing.B) {
	pages := synthResponses(b, parseWeb)
	var size int64
	for _, p := range pages {
		size += int64(len(p.body))
	}
	b.SetBytes(size / int64(len(pages)))
	b.ReportAllocs()
	b.Logf("%d pages, %d bytes on average", len(pages), size/int64(len(pages)))
	for i := 0; b.Loop(); i++ {
		p := pages[i%len(pages)]
		doc := parsePage(p.body, p.contentType, p.pageURL, "swarmcrawl", DefaultConfig().MaxLinksPerPage)
		if doc.err != nil {
			b.Fatal(doc.err)
		}
		Simhash(doc.main)
	}
}
