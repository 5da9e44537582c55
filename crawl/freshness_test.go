package crawl

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
)

// pageLog is a PageSink that keeps every page it is given, in order.
type pageLog struct {
	mu    sync.Mutex
	pages []*Page
}

func (l *pageLog) StorePage(_ context.Context, p *Page) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pages = append(l.pages, p)
	return nil
}

// of returns the pages of one URL, in fetch order.
func (l *pageLog) of(u string) []*Page {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*Page
	for _, p := range l.pages {
		if p.Task.URL == u {
			out = append(out, p)
		}
	}
	return out
}

// linkCounter is a LinkSink that counts reports per page and passes them
// on.
type linkCounter struct {
	next LinkSink
	mu   sync.Mutex
	n    map[string]int
}

func (l *linkCounter) Discovered(ctx context.Context, from frontier.Task, links []frontier.Task) {
	l.mu.Lock()
	l.n[from.URL]++
	l.mu.Unlock()
	l.next.Discovered(ctx, from, links)
}

func (l *linkCounter) count(u string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[u]
}

// runFor runs c for d and stops it.
func runFor(t *testing.T, c *Crawler, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestRecrawlFreshness crawls the fresh case host, whose /change/N pages
// change every ChangePeriod and whose / and /static/N pages never do, with
// recrawling on. Unchanged pages are asked for conditionally, answered 304
// (no body), reported as NotModified, and recrawled ever less often; their
// links are reported once. Changing pages are fetched again with their new
// content. Every recrawl keeps the host's politeness.
func TestRecrawlFreshness(t *testing.T) {
	w := startSynthWeb(t, synthweb.Config{Seed: 1, Hosts: 1, Cases: true, ChangePeriod: 400 * time.Millisecond})
	fresh := w.CaseHost("fresh")
	root := "http://" + fresh + "/"
	cfg := DefaultConfig()
	cfg.Delay = 20 * time.Millisecond
	cfg.MinRecrawl = 150 * time.Millisecond
	cfg.MaxRecrawl = 1200 * time.Millisecond
	cfg.Proxy = w.Proxy()
	pages := &pageLog{}
	ring := &ringStandIn{seen: map[uint64]int{}, inScope: func(h string) bool { return h == fresh }}
	links := &linkCounter{next: ring, n: map[string]int{}}
	c := newTestCrawler(t, cfg, pages, links)
	ring.c = c
	ring.seed([]string{root})
	runFor(t, c, 5*time.Second) // the schedule needs ~1.1s; the rest is slack for a loaded machine
	s := c.Stats()
	t.Logf("stats %+v", s)

	for _, path := range []string{"/", "/static/1", "/static/2"} {
		u := "http://" + fresh + path
		got := pages.of(u)
		if len(got) < 4 {
			t.Fatalf("%s fetched %d times in 5s, want at least 4 (150, 300, 600 ms apart)", path, len(got))
		}
		if got[0].Status != 200 || got[0].NotModified || got[0].Request.Get("If-None-Match") != "" {
			t.Errorf("%s first fetch: status %d, conditional %q", path, got[0].Status, got[0].Request.Get("If-None-Match"))
		}
		for i, p := range got[1:] {
			if p.Status != 304 || !p.NotModified || len(p.Body) != 0 || p.Request.Get("If-None-Match") != got[0].Header.Get("ETag") ||
				p.Request.Get("If-Modified-Since") != got[0].Header.Get("Last-Modified") {
				t.Errorf("%s recrawl %d: status %d, not modified %v, %d body bytes, sent If-None-Match %q If-Modified-Since %q",
					path, i+1, p.Status, p.NotModified, len(p.Body), p.Request.Get("If-None-Match"), p.Request.Get("If-Modified-Since"))
			}
			if !p.Task.Recrawl {
				t.Errorf("%s refetch %d not marked as a recrawl", path, i+1)
			}
		}
		// Unchanged: the interval doubles each time (up to the maximum), and
		// a recrawl never comes before its interval has passed.
		for i := 1; i < len(got); i++ {
			interval := min(cfg.MinRecrawl<<(i-1), cfg.MaxRecrawl)
			if gap := got[i].FetchedAt.Sub(got[i-1].FetchedAt); gap < interval {
				t.Errorf("%s: recrawl %d came %v after the previous fetch, want at least %v", path, i, gap, interval)
			}
		}
		ringKey, urlHash := c.keys(u)
		m, ok := c.urlMeta(ringKey, urlHash)
		if !ok || m.Changes != 0 || m.Fetches != len(got) || m.Interval < 600*time.Millisecond || m.ETag == "" {
			t.Errorf("%s metadata %+v (found %v)", path, m, ok)
		}
	}
	// The root's links were reported once, not on every 304.
	if n := links.count(root); n != 1 {
		t.Errorf("root's links reported %d times, want once", n)
	}

	// Changing pages: refetched with 200 when they changed.
	changedFetches := 0
	for _, path := range []string{"/change/1", "/change/2"} {
		u := "http://" + fresh + path
		got := pages.of(u)
		for i := 1; i < len(got); i++ {
			if got[i].Status == 200 {
				changedFetches++
				if string(got[i].Body) == string(got[i-1].Body) && got[i-1].Status == 200 {
					t.Errorf("%s: 200 with the same body as before", path)
				}
			}
		}
		ringKey, urlHash := c.keys(u)
		if m, _ := c.urlMeta(ringKey, urlHash); m.Changes == 0 {
			t.Errorf("%s metadata %+v: no change recorded", path, m)
		}
	}
	if changedFetches == 0 || s.Changed == 0 || s.NotModified == 0 || s.Recrawls == 0 {
		t.Errorf("%d changed refetches; stats %+v", changedFetches, s)
	}
	for _, v := range w.CheckPoliteness(cfg.Delay) {
		t.Errorf("politeness: %s", v)
	}
	for h, n := range w.MaxInFlightPerHost() {
		if n != 1 {
			t.Errorf("%s: %d requests at once", h, n)
		}
	}
	if s.Scheduled == 0 {
		t.Error("no recrawl scheduled in the store")
	}
}

// TestRecrawlChainsDeduplicated queues one URL twice with recrawling on:
// each copy would schedule its own recrawls, but a recrawl that finds the
// URL fetched since it was scheduled is dropped, so the URL is fetched once
// per interval, not twice.
func TestRecrawlChainsDeduplicated(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robotsAllowAll(w, r) {
			return
		}
		fmt.Fprint(w, "same")
	})
	cfg := testConfig()
	cfg.Delay = None
	cfg.MinRecrawl = 100 * time.Millisecond
	cfg.MaxRecrawl = 100 * time.Millisecond
	c := newTestCrawler(t, cfg, nil, nil)
	c.Enqueue(frontier.Task{URL: srv.URL + "/page"})
	c.Enqueue(frontier.Task{URL: srv.URL + "/page"})
	runFor(t, c, time.Second)
	if n := srv.count("/page"); n < 6 || n > 13 {
		t.Errorf("/page fetched %d times in 1s with a 100ms recrawl interval, want about 10", n)
	}
	if s := c.Stats(); s.Scheduled != 1 {
		t.Errorf("%d recrawls scheduled, want 1", s.Scheduled)
	}
}
