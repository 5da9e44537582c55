package crawl

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

// slowSink is a PageSink that takes its time over every page, as a busy
// store or a slow disk would.
type slowSink struct {
	*recorder
	d time.Duration
}

func (s slowSink) StorePage(ctx context.Context, p *Page) error {
	time.Sleep(s.d)
	return s.recorder.StorePage(ctx, p)
}

// chainServer serves n pages, each linking the next (/p/0 -> /p/1 -> ...),
// so a host's next URL is known only once its previous page was processed,
// or, with all set, a root /p/0 linking every page.
func chainServer(t *testing.T, n int, all bool, h func(w http.ResponseWriter, r *http.Request)) *logServer {
	return newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		if h != nil {
			h(w, r)
		}
		var i int
		if _, err := fmt.Sscanf(r.URL.Path, "/p/%d", &i); err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html><body><p>page %d</p>", i)
		switch {
		case all && i == 0:
			for j := 1; j < n; j++ {
				fmt.Fprintf(w, `<a href="/p/%d">%d</a>`, j, j)
			}
		case !all && i+1 < n:
			fmt.Fprintf(w, `<a href="/p/%d">next</a>`, i+1)
		}
		fmt.Fprint(w, "</body></html>")
	})
}

// pageGaps returns the time between consecutive page requests (robots.txt
// left out) a server saw.
func pageGaps(s *logServer) []time.Duration {
	var pages []hit
	for _, h := range s.log() {
		if h.path != "/robots.txt" {
			pages = append(pages, h)
		}
	}
	return gaps(pages)
}

func median(ds []time.Duration) time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// TestWorkAfterFetchDoesNotDelayHost checks issue 10's pipelining: what a
// worker does with a page after fetching it (here a page sink that takes
// 100ms a page) does not hold the page's host, whose next request goes out
// its delay (20ms) after the previous one. Were the sink on the host's
// path, every gap would be over 100ms.
func TestWorkAfterFetchDoesNotDelayHost(t *testing.T) {
	const n = 25
	srv := chainServer(t, n, true, nil)
	rec := newRecorder()
	cfg := testConfig()
	cfg.Delay = 20 * time.Millisecond
	cfg.Workers = 8
	links := &ringStandIn{seen: map[uint64]int{}, inScope: func(string) bool { return true }}
	c := newTestCrawler(t, cfg, slowSink{rec, 100 * time.Millisecond}, links)
	links.c = c
	links.seed([]string{srv.URL + "/p/0"})
	crawlUntilIdle(t, c, 30*time.Second)
	g := pageGaps(srv)
	if len(g) != n-1 {
		t.Fatalf("%d page requests, want %d", len(g)+1, n)
	}
	// The gaps after the first page wait for its links (the sink runs
	// before they are reported); the rest are paced by the delay alone.
	if m := median(g[1:]); m > 60*time.Millisecond {
		t.Fatalf("median gap between requests to the host %v with a 20ms delay and a 100ms sink: the sink holds the host", m)
	}
	for i, d := range g {
		if d < cfg.Delay {
			t.Errorf("gap %d: %v, under the 20ms delay", i, d)
		}
	}
}

// TestGapRunsFromTheAnswer checks that the politeness gap runs from the
// moment a host answered (its response headers arrived), not from the end
// of a slow body: a server that answers at once and then takes 150ms over
// each body sees the next request 100ms (the delay) after answering, i.e.
// about 150ms after the previous one, not 250ms. It never sees two
// requests at once.
func TestGapRunsFromTheAnswer(t *testing.T) {
	const n = 8
	srv := chainServer(t, n, true, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(150 * time.Millisecond)
	})
	cfg := testConfig()
	cfg.Delay = 100 * time.Millisecond
	links := &ringStandIn{seen: map[uint64]int{}, inScope: func(string) bool { return true }}
	c := newTestCrawler(t, cfg, newRecorder(), links)
	links.c = c
	links.seed([]string{srv.URL + "/p/0"})
	crawlUntilIdle(t, c, 30*time.Second)
	g := pageGaps(srv)
	if len(g) != n-1 {
		t.Fatalf("%d page requests, want %d", len(g)+1, n)
	}
	for i, d := range g {
		if d < 150*time.Millisecond {
			t.Errorf("gap %d: %v: a request while the previous body was being sent, or under the delay", i, d)
		}
	}
	if m := median(g); m >= 240*time.Millisecond {
		t.Fatalf("median gap %v: the 100ms delay ran from the end of the 150ms body, not from the answer", m)
	}
}
