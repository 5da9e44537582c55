package crawl

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// fakeClock is a manually advanced clock for deterministic tests.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// hit is one request a test server saw.
type hit struct {
	path string // path plus query
	ua   string
	at   time.Time
}

// logServer is an httptest server that records every request's arrival.
type logServer struct {
	*httptest.Server
	mu   sync.Mutex
	hits []hit
}

func newLogServer(t *testing.T, h http.HandlerFunc) *logServer {
	t.Helper()
	s := &logServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits = append(s.hits, hit{path: r.URL.RequestURI(), ua: r.UserAgent(), at: time.Now()})
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *logServer) log() []hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]hit(nil), s.hits...)
}

func (s *logServer) count(path string) int {
	n := 0
	for _, h := range s.log() {
		if h.path == path {
			n++
		}
	}
	return n
}

// recorder is a PageSink and LinkSink that keeps everything it is given.
type recorder struct {
	mu    sync.Mutex
	pages map[string]*Page // by Task.URL
	links map[string][]frontier.Task
}

func newRecorder() *recorder {
	return &recorder{pages: map[string]*Page{}, links: map[string][]frontier.Task{}}
}

func (r *recorder) StorePage(_ context.Context, p *Page) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pages[p.Task.URL] = p
	return nil
}

func (r *recorder) Discovered(_ context.Context, from frontier.Task, links []frontier.Task) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.links[from.URL] = append(r.links[from.URL], links...)
}

func (r *recorder) page(u string) *Page {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pages[u]
}

func (r *recorder) allPages() []*Page {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*Page, 0, len(r.pages))
	for _, p := range r.pages {
		out = append(out, p)
	}
	return out
}

func (r *recorder) pageURLs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for u := range r.pages {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

// testConfig is a fast, polite configuration for loopback servers, which
// the default dial policy would refuse as private addresses.
func testConfig() Config {
	cfg := DefaultConfig()
	cfg.UserAgent = "ExampleBot/1.0 (+http://bot.example/about)"
	cfg.Delay = 10 * time.Millisecond
	cfg.Workers = 4
	cfg.Timeout = 5 * time.Second
	cfg.Proxy = NoProxy
	cfg.Dial.AllowPrivate = true
	cfg.RetryBase = 10 * time.Millisecond
	return cfg
}

// openStore opens a small store in a fresh directory, closed at cleanup.
func openStore(t testing.TB) *store.DB {
	t.Helper()
	return openStoreAt(t, t.TempDir())
}

func openStoreAt(t testing.TB, dir string) *store.DB {
	t.Helper()
	db, err := store.Open(dir, store.Options{BloomExpected: 10_000, CacheBytes: 1 << 20})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newTestCrawler(t testing.TB, cfg Config, pages PageSink, links LinkSink) *Crawler {
	t.Helper()
	c, err := New(cfg, openStore(t), pages, links)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// crawlUntilIdle runs c until it is idle (or timeout passes, which fails the
// test) and returns after Run has returned.
func crawlUntilIdle(t testing.TB, c *Crawler, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	deadline := time.Now().Add(timeout)
	for !c.Idle() {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("crawler not idle after %v: %+v", timeout, c.Stats())
		}
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// gaps returns the time between consecutive hits.
func gaps(hits []hit) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(hits); i++ {
		out = append(out, hits[i].at.Sub(hits[i-1].at))
	}
	return out
}

// reportAll fails t with each problem of one kind (the first ten, then a
// count), so a test shows what went wrong rather than just how much.
func reportAll(t *testing.T, what string, list []string) {
	t.Helper()
	for i, s := range list {
		if i == 10 {
			t.Errorf("%s: ... and %d more", what, len(list)-10)
			break
		}
		t.Errorf("%s: %s", what, s)
	}
}
