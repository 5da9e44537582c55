package crawl

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
)

// TestShorterPathReopensLinksCutAtDepth: a chain /a → /b → /c → /d, with
// MaxDepth 3. The long path arrives first: /a at depth 2, so /b (depth 3)
// is fetched but its links are cut. The crawler is restarted on its store,
// then the short path arrives: /a at depth 0. The owner (the ring
// stand-in) queues /a again; the crawler follows its kept links from depth
// 0 without fetching it again, which makes /b shallower, whose kept links
// take the crawl on to /c (depth 2) and /d (depth 3): every page within 3
// links of the seed is fetched, each exactly once.
func TestShorterPathReopensLinksCutAtDepth(t *testing.T) {
	next := map[string]string{"/a": "/b", "/b": "/c", "/c": "/d", "/d": "/e"}
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robotsAllowAll(w, r) {
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><body><p>page %s</p><a href="%s">next</a></body></html>`, r.URL.Path, next[r.URL.Path])
	})
	cfg := testConfig()
	cfg.Delay = None
	cfg.MaxDepth = 3
	dir := t.TempDir()
	ring := &ringStandIn{seen: map[uint64]int{}, inScope: func(string) bool { return true }}
	db := openStoreAt(t, dir)
	c, err := New(cfg, db, nil, ring)
	if err != nil {
		t.Fatal(err)
	}
	ring.c = c
	ring.Discovered(context.Background(), frontier.Task{}, []frontier.Task{{URL: srv.URL + "/a", Depth: 2}})
	crawlUntilIdle(t, c, 10*time.Second)
	if n := srv.count("/c"); n != 0 || c.Stats().DepthCut != 1 {
		t.Fatalf("long path: /c fetched %d times, stats %+v; want /b's links cut at depth 3", n, c.Stats())
	}
	db.Close()

	db = openStoreAt(t, dir)
	c, err = New(cfg, db, nil, ring)
	if err != nil {
		t.Fatal(err)
	}
	ring.mu.Lock()
	ring.c = c
	ring.mu.Unlock()
	ring.Discovered(context.Background(), frontier.Task{}, []frontier.Task{{URL: srv.URL + "/a", Depth: 0}})
	crawlUntilIdle(t, c, 10*time.Second)
	for path, want := range map[string]int{"/a": 1, "/b": 1, "/c": 1, "/d": 1, "/e": 0} {
		if n := srv.count(path); n != want {
			t.Errorf("%s fetched %d times, want %d", path, n, want)
		}
	}
	if s := c.Stats(); s.Reopened != 2 || s.Refetched != 0 {
		t.Errorf("stats %+v, want /a and /b re-opened without a request", s)
	}
}

// TestMaxDepthMeansWithinDepth crawls a synthetic web with a small depth
// limit and many workers, so that pages are often reached first by a path
// longer than their shortest: exactly the pages within MaxDepth links of a
// seed are fetched, each once.
func TestMaxDepthMeansWithinDepth(t *testing.T) {
	w := startSynthWeb(t, synthweb.Config{Seed: 4, Hosts: 20, PagesPerHost: 20, CrossHostFraction: 0.6})
	cfg := DefaultConfig()
	cfg.Delay = 10 * time.Millisecond
	cfg.MaxDepth = 3
	cfg.Proxy = w.Proxy()
	ring := &ringStandIn{seen: map[uint64]int{}}
	c := newTestCrawler(t, cfg, nil, ring)
	ring.c = c
	ring.seed(w.Seeds())
	crawlUntilIdle(t, c, 60*time.Second)
	token := ProductToken(cfg.UserAgent)
	want := map[string]bool{}
	for _, u := range w.Within(token, cfg.MaxDepth) {
		want[u] = true
	}
	got := map[string]bool{}
	for _, r := range w.Log() {
		if r.Path != "/robots.txt" {
			got[r.URL] = true
		}
	}
	var missing, beyond []string
	for u := range want {
		if !got[u] {
			missing = append(missing, u)
		}
	}
	for u := range got {
		if !want[u] {
			beyond = append(beyond, u)
		}
	}
	reportAll(t, "missing", missing)
	reportAll(t, "beyond the depth", beyond)
	reportAll(t, "duplicate", w.Duplicates())
	s := c.Stats()
	t.Logf("%d pages within depth %d; %d re-opened, %d cut at the depth", len(want), cfg.MaxDepth, s.Reopened, s.DepthCut)
}
