package crawl

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
)

// ringStandIn plays the owners of a one-node ring: a seen set that keeps
// the smallest depth of each URL and queues a URL again when a shorter
// path to it arrives, as the node's intake does.
type ringStandIn struct {
	c    *Crawler
	mu   sync.Mutex
	seen map[uint64]int // URL hash -> smallest depth
	// inScope limits the crawl to some hosts (default: the synthetic web).
	inScope func(host string) bool
}

func (r *ringStandIn) Discovered(_ context.Context, _ frontier.Task, links []frontier.Task) {
	var fresh []frontier.Task
	r.mu.Lock()
	for _, l := range links {
		host, _ := urls.HostOf(l.URL)
		if r.inScope == nil && !strings.HasSuffix(host, ".synth.test") || r.inScope != nil && !r.inScope(host) {
			continue
		}
		h := urls.URLHash(l.URL)
		if d, ok := r.seen[h]; !ok || l.Depth < d {
			r.seen[h] = l.Depth
			fresh = append(fresh, l)
		}
	}
	r.mu.Unlock()
	r.c.Enqueue(fresh...) // outside the lock: Enqueue may be slow, and sinks run concurrently
}

func (r *ringStandIn) seed(seeds []string) {
	tasks := make([]frontier.Task, len(seeds))
	for i, u := range seeds {
		tasks[i] = frontier.Task{URL: u}
	}
	r.Discovered(context.Background(), frontier.Task{}, tasks)
}

// countingStore is a PageSink that counts pages by status.
type countingStore struct {
	mu       sync.Mutex
	byStatus map[int]int
	bytes    int
}

func (s *countingStore) StorePage(_ context.Context, p *Page) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byStatus == nil {
		s.byStatus = map[int]int{}
	}
	s.byStatus[p.Status]++
	s.bytes += len(p.Body)
	return nil
}

func startSynthWeb(tb testing.TB, cfg synthweb.Config) *synthweb.Web {
	tb.Helper()
	w, err := synthweb.Start(cfg)
	if err != nil {
		tb.Fatalf("synthweb: %v", err)
	}
	tb.Cleanup(w.Close)
	return w
}

// TestCrawlSyntheticWeb crawls a generated web of 20 hosts end to end and
// checks what a site operator and a search engine would care about: every
// reachable page fetched exactly once, in canonical form, nothing robots.txt
// forbids, and never two requests to one host closer than the delay (or the
// host's Crawl-delay).
func TestCrawlSyntheticWeb(t *testing.T) {
	w := startSynthWeb(t, synthweb.Config{Seed: 3, Hosts: 20, CrawlDelayHosts: 1})
	const delay = 50 * time.Millisecond

	cfg := DefaultConfig()
	cfg.Delay = delay
	cfg.Workers = 8
	// The default depth limit: concurrent workers do not crawl in strict
	// breadth-first order, so a page can first be reached by a path longer
	// than its shortest one, but a shorter path that arrives later re-opens
	// its links (see TestShorterPathReopensLinksCutAtDepth).
	cfg.Proxy = w.Proxy()
	store := &countingStore{}
	ring := &ringStandIn{seen: map[uint64]int{}}
	c := newTestCrawler(t, cfg, store, ring)
	ring.c = c
	token := ProductToken(cfg.UserAgent)

	start := time.Now()
	ring.seed(w.Seeds())
	crawlUntilIdle(t, c, 45*time.Second)
	elapsed := time.Since(start)

	truth := w.GroundTruth(token)
	if len(truth) < 50 {
		t.Fatalf("ground truth has only %d URLs; the synthetic web is too small to prove anything", len(truth))
	}
	reportAll(t, "missing", w.Missing(token))
	reportAll(t, "duplicate", w.Duplicates())
	reportAll(t, "unexpected", w.Unexpected(token))
	reportAll(t, "robots violation", w.CheckRobots(token))
	reportAll(t, "robots.txt not first", w.CheckRobotsFirst())
	reportAll(t, "politeness violation", w.CheckPoliteness(delay))

	s := c.Stats()
	if s.Fetched != int64(len(truth)) {
		t.Errorf("Fetched = %d, want %d (the ground truth)", s.Fetched, len(truth))
	}
	if s.RobotsFetched != 20 {
		t.Errorf("RobotsFetched = %d, want one per host (20)", s.RobotsFetched)
	}
	for kind, n := range s.ErrorsByKind {
		if kind != "http_4xx" { // broken links answer 404 by design
			t.Errorf("%d errors of kind %s", n, kind)
		}
	}
	t.Logf("%d pages from 20 hosts in %v; statuses %v; %d robots-denied; stats %+v",
		len(truth), elapsed.Round(time.Millisecond), store.byStatus, s.RobotsDenied, s)
}

// TestRunStopsWithRequestInFlight: with no delay between requests, a Run
// stopped while a request is in flight returns, the task still queued.
// (Next used to hand the requeued task out again to the stopping worker,
// whose request failed at once, forever.)
func TestRunStopsWithRequestInFlight(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robotsAllowAll(w, r) {
			return
		}
		time.Sleep(50 * time.Millisecond)
		fmt.Fprint(w, "slow")
	})
	cfg := testConfig()
	cfg.Delay = None
	c := newTestCrawler(t, cfg, nil, nil)
	c.Enqueue(frontier.Task{URL: srv.URL + "/page"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	for srv.count("/page") == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Run still running 10s after it was stopped; %d requests so far", len(srv.log()))
	}
	if n := srv.count("/page"); n != 1 {
		t.Errorf("/page requested %d times, want 1", n)
	}
	if s := c.Stats(); s.Queued != 1 {
		t.Errorf("%d tasks queued after the stop, want the interrupted one", s.Queued)
	}
}
