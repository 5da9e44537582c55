package crawl

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// TestDeadLetterRequeue checks that a page failing with 5xx is retried
// MaxRetries times with growing backoff, then kept as a dead letter with
// its attempts and last error, and that RequeueDeadLetters puts it back
// with its attempts reset once the server is healthy again.
func TestDeadLetterRequeue(t *testing.T) {
	var healthy atomic.Bool
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robotsAllowAll(w, r) {
			return
		}
		if !healthy.Load() && r.URL.Path != "/ok" {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "<p>fine</p>")
	})
	rec := newRecorder()
	cfg := testConfig()
	cfg.Delay = None
	cfg.RetryBase = 20 * time.Millisecond
	c := newTestCrawler(t, cfg, rec, nil)
	c.Enqueue(frontier.Task{URL: srv.URL + "/a", Depth: 2}, frontier.Task{URL: srv.URL + "/b"}, frontier.Task{URL: srv.URL + "/ok"})
	crawlUntilIdle(t, c, 10*time.Second)

	dead := deadLetters(t, c)
	if len(dead) != 2 {
		t.Fatalf("dead letters %v, want /a and /b", dead)
	}
	d := dead[srv.URL+"/a"]
	if d.Attempts != 4 || d.Kind != "http_5xx" || !strings.Contains(d.LastError, "503") || d.Depth != 2 || d.At.IsZero() {
		t.Errorf("dead letter %+v", d)
	}
	// The retries back off: each wait is random below 20ms·2^n, so the last
	// of 3 waits is usually the longest; at least they are not all zero.
	var at []time.Time
	for _, h := range srv.log() {
		if h.path == "/a" {
			at = append(at, h.at)
		}
	}
	if len(at) != 4 || at[3].Sub(at[0]) < 5*time.Millisecond {
		t.Errorf("/a requested at %v, want 4 attempts spread by the backoff", at)
	}
	if p := rec.page(srv.URL + "/a"); p == nil || p.Status != 503 || p.Task.Attempts != 3 {
		t.Errorf("final answer of /a %+v, want the last 503 stored", p)
	}
	if s := c.Stats(); s.DeadLetters != 2 || s.Retries != 6 || c.db.DeadLetterCount() != 2 {
		t.Errorf("stats %+v, store count %d", s, c.db.DeadLetterCount())
	}

	healthy.Store(true)
	n, err := c.RequeueDeadLetters(func(d store.DeadLetter) bool { return strings.HasSuffix(d.URL, "/a") })
	if err != nil || n != 1 {
		t.Fatalf("RequeueDeadLetters = %d, %v; want 1", n, err)
	}
	if got := deadLetters(t, c); len(got) != 1 {
		t.Errorf("dead letters after requeueing /a: %v", got)
	}
	crawlUntilIdle(t, c, 5*time.Second)
	p := rec.page(srv.URL + "/a")
	if p == nil || p.Status != 200 || p.Task.Attempts != 0 || p.Task.Depth != 2 {
		t.Errorf("requeued /a: %+v, want 200 at depth 2 with attempts reset", p)
	}
	if srv.count("/a") != 5 || srv.count("/b") != 4 {
		t.Errorf("requests: /a %d, /b %d; want 5 and 4", srv.count("/a"), srv.count("/b"))
	}
	if n, err := c.RequeueDeadLetters(nil); err != nil || n != 1 {
		t.Errorf("RequeueDeadLetters(nil) = %d, %v; want the remaining one", n, err)
	}
	crawlUntilIdle(t, c, 5*time.Second)
	if c.db.DeadLetterCount() != 0 || c.Stats().DeadLetters != 0 {
		t.Errorf("dead letters left: %d", c.db.DeadLetterCount())
	}
}

// TestRetryAfterSlowsHost checks that a 429 with Retry-After keeps every
// request to the host, robots.txt and other pages included, until it has
// passed, and that the page is fetched afterwards.
func TestRetryAfterSlowsHost(t *testing.T) {
	var limited atomic.Bool
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robotsAllowAll(w, r) {
			return
		}
		if r.URL.Path == "/limited" && !limited.Swap(true) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
			return
		}
		fmt.Fprint(w, "ok")
	})
	rec := newRecorder()
	cfg := testConfig()
	cfg.Delay = None
	c := newTestCrawler(t, cfg, rec, nil)
	c.Enqueue(frontier.Task{URL: srv.URL + "/limited"}, frontier.Task{URL: srv.URL + "/other1"}, frontier.Task{URL: srv.URL + "/other2"})
	crawlUntilIdle(t, c, 10*time.Second)

	log := srv.log()
	var at429 time.Time
	for i, h := range log {
		if h.path == "/limited" && at429.IsZero() {
			at429 = h.at
			continue
		}
		if !at429.IsZero() && h.at.Sub(at429) < time.Second {
			t.Errorf("request %d (%s) %v after the 429 with Retry-After: 1", i, h.path, h.at.Sub(at429))
		}
	}
	if p := rec.page(srv.URL + "/limited"); p == nil || p.Status != 200 {
		t.Errorf("limited page %+v, want fetched after the wait", p)
	}
	if st, _, _ := c.db.Host(urls.HostKey("127.0.0.1")); st.NotBefore.Sub(at429) < 900*time.Millisecond {
		t.Errorf("host state %+v: Retry-After not kept in the store", st)
	}
	if s := c.Stats(); s.Retries != 1 || s.ErrorsByKind["http_4xx"] != 1 {
		t.Errorf("stats %+v", s)
	}
}

// TestPrivateAddressesRefused checks that direct connections go through the
// crawler's Dialer: with the default dial policy a loopback server is never
// contacted, and the refusals are counted as "blocked_address".
func TestPrivateAddressesRefused(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "secret") })
	cfg := testConfig()
	cfg.Dial = DefaultDialConfig()
	c := newTestCrawler(t, cfg, nil, nil)
	c.robotsRetry = 10 * time.Millisecond
	c.Enqueue(frontier.Task{URL: srv.URL + "/admin"})
	crawlUntilIdle(t, c, 5*time.Second)
	if n := len(srv.log()); n != 0 {
		t.Errorf("loopback server got %d requests", n)
	}
	s := c.Stats()
	if s.ErrorsByKind["blocked_address"] == 0 || s.Dial.Blocked == 0 || s.Fetched != 0 {
		t.Errorf("stats %+v, want blocked_address errors and no page", s)
	}
}

// TestPageBudget checks that a host's page budget caps the pages fetched,
// drops the rest of its queue in one go, counts the drops, and still holds
// after a restart on the same store.
func TestPageBudget(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robotsAllowAll(w, r) {
			return
		}
		fmt.Fprint(w, "page")
	})
	cfg := testConfig()
	cfg.Delay = None
	cfg.MaxPagesPerHost = 3
	dir := t.TempDir()
	db := openStoreAt(t, dir)
	c, err := New(cfg, db, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		c.Enqueue(frontier.Task{URL: fmt.Sprintf("%s/p%d", srv.URL, i), Depth: 1})
	}
	crawlUntilIdle(t, c, 5*time.Second)
	pages := len(srv.log()) - srv.count("/robots.txt")
	if pages != 3 || c.Stats().BudgetDropped != 7 {
		t.Errorf("%d pages fetched, %d dropped; want 3 and 7", pages, c.Stats().BudgetDropped)
	}
	db.Close()

	db2 := openStoreAt(t, dir)
	c2, err := New(cfg, db2, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c2.Enqueue(frontier.Task{URL: srv.URL + "/late", Depth: 1})
	crawlUntilIdle(t, c2, 5*time.Second)
	if srv.count("/late") != 0 || c2.Stats().BudgetDropped != 1 {
		t.Errorf("after a restart: /late fetched %d times, %d dropped", srv.count("/late"), c2.Stats().BudgetDropped)
	}
}

// TestDefaultPageBudget checks that a crawler with no budget configured
// has one, DefaultConfig's, and that None turns it off: a host that has
// had one page fewer than the budget fetched (a trap crawled for a day)
// gets one more, and its other tasks are dropped.
func TestDefaultPageBudget(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robotsAllowAll(w, r) {
			return
		}
		fmt.Fprint(w, "page")
	})
	host, _ := urls.HostOf(srv.URL + "/")
	budget := DefaultConfig().MaxPagesPerHost
	if budget <= 0 {
		t.Fatalf("DefaultConfig().MaxPagesPerHost = %d, want a budget", budget)
	}
	for _, tt := range []struct {
		name           string
		max            int
		pages, dropped int
	}{
		{"default", 0, 1, 2},
		{"None", None, 3, 0},
	} {
		cfg := testConfig()
		cfg.Delay = None
		cfg.MaxPagesPerHost = tt.max
		db := openStore(t)
		if err := db.PutHost(store.HostState{HostKey: urls.HostKey(host), Host: host, Fetched: int64(budget - 1)}); err != nil {
			t.Fatal(err)
		}
		c, err := New(cfg, db, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		before := len(srv.log()) - srv.count("/robots.txt")
		for i := range 3 {
			c.Enqueue(frontier.Task{URL: fmt.Sprintf("%s/%s/%d", srv.URL, tt.name, i), Depth: 1})
		}
		crawlUntilIdle(t, c, 5*time.Second)
		pages := len(srv.log()) - srv.count("/robots.txt") - before
		if pages != tt.pages || c.Stats().BudgetDropped != int64(tt.dropped) {
			t.Errorf("%s: %d pages fetched, %d dropped; want %d and %d", tt.name, pages, c.Stats().BudgetDropped, tt.pages, tt.dropped)
		}
	}
}

// TestTrapURLsRefused checks the repeated-segment limit on queued and
// discovered URLs.
func TestTrapURLsRefused(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robotsAllowAll(w, r) {
			return
		}
		w.Header().Set("Content-Type", "text/html")
		// Each page links one level deeper under a repeated segment.
		fmt.Fprint(w, `<a href="a/">deeper</a> <a href="/ok">ok</a>`)
	})
	rec := newRecorder()
	cfg := testConfig()
	cfg.Delay = None
	cfg.NearDupDistance = None // the pages are alike on purpose
	cfg.TrapGrowth = None      // which would cut /a/ to /a/a/ at sight
	ring := &ringStandIn{seen: map[uint64]int{}, inScope: func(string) bool { return true }}
	c := newTestCrawler(t, cfg, rec, ring)
	ring.c = c
	c.Enqueue(frontier.Task{URL: srv.URL + "/x/x/x/x/"})
	ring.seed([]string{srv.URL + "/a/"})
	crawlUntilIdle(t, c, 5*time.Second)
	for _, p := range []string{"/a/", "/a/a/", "/a/a/a/", "/ok"} {
		if srv.count(p) != 1 {
			t.Errorf("%s fetched %d times, want 1", p, srv.count(p))
		}
	}
	if n := srv.count("/a/a/a/a/") + srv.count("/x/x/x/x/"); n != 0 {
		t.Errorf("trap URLs fetched %d times", n)
	}
	if s := c.Stats(); s.ErrorsByKind["trap"] < 2 {
		t.Errorf("stats %+v, want the trap URLs counted", s)
	}
}

// TestNearDuplicateLinksFollowed checks the content wiring: a page's
// title and text are extracted and fingerprinted, and a page whose text is
// within NearDupDistance of an earlier page's is flagged, but its links
// are reported all the same: a near-copy can link pages the original does
// not (here /next/copy), and coverage must not depend on a heuristic.
func TestNearDuplicateLinksFollowed(t *testing.T) {
	text := strings.Repeat("the quick brown fox jumps over the lazy dog while the crawler reads every word ", 20)
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robotsAllowAll(w, r) {
			return
		}
		w.Header().Set("Content-Type", "text/html")
		body := text
		switch r.URL.Path {
		case "/copy":
			body = strings.Replace(text, "lazy", "sleepy", 1)
		case "/other":
			body = "a completely different page about gardening, tomatoes and the weather in spring"
		}
		fmt.Fprintf(w, `<html><head><title>Page %s</title><script>var hidden = 1;</script></head><body><p>%s</p><a href="/next%s">next</a></body></html>`,
			r.URL.Path, body, r.URL.Path)
	})
	rec := newRecorder()
	cfg := testConfig()
	cfg.Delay = None
	c := newTestCrawler(t, cfg, rec, rec)
	c.Enqueue(frontier.Task{URL: srv.URL + "/original"}, frontier.Task{URL: srv.URL + "/copy"}, frontier.Task{URL: srv.URL + "/other"})
	crawlUntilIdle(t, c, 5*time.Second)

	orig, cp, other := rec.page(srv.URL+"/original"), rec.page(srv.URL+"/copy"), rec.page(srv.URL+"/other")
	if orig == nil || cp == nil || other == nil {
		t.Fatalf("pages %v %v %v", orig, cp, other)
	}
	if orig.Title != "Page /original" || !strings.HasPrefix(orig.Text, "the quick brown fox") || strings.Contains(orig.Text, "hidden") || orig.Simhash == 0 {
		t.Errorf("original: title %q, text %.40q, simhash %x", orig.Title, orig.Text, orig.Simhash)
	}
	// Workers may process the two copies in either order: whichever comes
	// second is the near-duplicate.
	if cp.NearDuplicateOf == "" {
		orig, cp = cp, orig
	}
	if cp.NearDuplicateOf != orig.Task.URL || orig.NearDuplicateOf != "" || SimhashDistance(cp.Simhash, orig.Simhash) > cfg.NearDupDistance {
		t.Errorf("near-duplicates: %s of %q, %s of %q, distance %d", cp.Task.URL, cp.NearDuplicateOf,
			orig.Task.URL, orig.NearDuplicateOf, SimhashDistance(cp.Simhash, orig.Simhash))
	}
	if want := srv.URL + "/next" + strings.TrimPrefix(cp.Task.URL, srv.URL); !slices.Equal(cp.Links, []string{want}) ||
		len(rec.links[cp.Task.URL]) != 1 {
		t.Errorf("links of the near-duplicate: %v, want %s reported", rec.links[cp.Task.URL], want)
	}
	if other.NearDuplicateOf != "" || len(rec.links[orig.Task.URL]) != 1 || len(rec.links[other.Task.URL]) != 1 {
		t.Errorf("original/other: near-dup %q, links %v %v", other.NearDuplicateOf, rec.links[orig.Task.URL], rec.links[other.Task.URL])
	}
	ringKey, urlHash := c.keys(orig.Task.URL)
	if m, ok := c.urlMeta(ringKey, urlHash); !ok || m.Fingerprint != orig.Simhash {
		t.Errorf("fingerprint not kept in the URL metadata: %+v", m)
	}
	if c.Stats().NearDups != 1 {
		t.Errorf("stats %+v", c.Stats())
	}
}

// TestShortPagesAreNeverNearDuplicates: pages with almost no text (an app
// shell, a login wall) share a fingerprint, but each keeps its links: they
// may be the only way into the site.
func TestShortPagesAreNeverNearDuplicates(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robotsAllowAll(w, r) {
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><body><p>Loading, please wait</p><a href="/in%s">enter</a></body></html>`, r.URL.Path)
	})
	rec := newRecorder()
	cfg := testConfig()
	cfg.Delay = None
	cfg.MaxDepth = 1
	c := newTestCrawler(t, cfg, rec, rec)
	c.Enqueue(frontier.Task{URL: srv.URL + "/a"}, frontier.Task{URL: srv.URL + "/b"})
	crawlUntilIdle(t, c, 5*time.Second)
	for _, u := range []string{srv.URL + "/a", srv.URL + "/b"} {
		p := rec.page(u)
		if p == nil {
			t.Fatalf("%s not fetched", u)
		}
		if p.NearDuplicateOf != "" || len(rec.links[u]) != 1 {
			t.Errorf("%s: near-duplicate of %q, links %v; want its own link reported", u, p.NearDuplicateOf, rec.links[u])
		}
	}
}
