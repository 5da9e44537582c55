package crawl

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// Environment of the child process of TestCrawlSurvivesKill9.
const (
	envCrashDir   = "SWARMCRAWL_CRASH_DIR"
	envCrashProxy = "SWARMCRAWL_CRASH_PROXY"
	envCrashSeeds = "SWARMCRAWL_CRASH_SEEDS"
)

// durableRing plays the owner for a single crawler, as ringStandIn does,
// but with the store's seen set, so that it survives a crash. It queues a
// URL before marking it seen: a crash in between makes it queued twice at
// worst, never lost.
type durableRing struct {
	c  *Crawler
	db *store.DB
	mu sync.Mutex
}

func (r *durableRing) Discovered(_ context.Context, _ frontier.Task, links []frontier.Task) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var fresh []frontier.Task
	var entries []store.SeenEntry
	for _, l := range links {
		host, _ := urls.HostOf(l.URL)
		if !strings.HasSuffix(host, ".synth.test") {
			continue
		}
		key, urlHash := r.c.keys(l.URL)
		if seen, err := r.db.Seen(key, urlHash); err != nil || seen {
			continue
		}
		fresh = append(fresh, l)
		entries = append(entries, store.SeenEntry{Key: key, URLHash: urlHash, URL: l.URL, Depth: l.Depth})
	}
	r.c.Enqueue(fresh...)
	r.db.MarkSeen(entries)
}

func crashConfig(proxy func(*http.Request) (*url.URL, error)) Config {
	cfg := DefaultConfig()
	cfg.Delay = 20 * time.Millisecond
	cfg.Workers = 8
	cfg.MaxDepth = 1000 // see TestCrawlSyntheticWeb
	cfg.Proxy = proxy
	return cfg
}

// TestCrawlSurvivesKill9 crawls the synthetic web in a child process, kills
// it with SIGKILL halfway, and finishes the crawl in this process on the
// same store: every ground-truth page is fetched, and only pages that were
// in flight at the kill may be fetched twice.
func TestCrawlSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	w := startSynthWeb(t, synthweb.Config{Seed: 7, Hosts: 15})
	token := ProductToken(DefaultUserAgent)
	truth := w.GroundTruth(token)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), envCrashDir+"="+dir, envCrashProxy+"="+w.URL(), envCrashSeeds+"="+strings.Join(w.Seeds(), " "))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for w.Requested() < len(truth)/2 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child fetched %d of %d pages in 30s", w.Requested(), len(truth))
		}
		time.Sleep(time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	before := w.Requested()

	db := openStoreAt(t, dir)
	ring := &durableRing{db: db}
	cfg := crashConfig(w.Proxy())
	c, err := New(cfg, db, nil, ring)
	if err != nil {
		t.Fatal(err)
	}
	ring.c = c
	if c.Idle() {
		t.Fatal("restarted crawler has nothing to do")
	}
	crawlUntilIdle(t, c, 60*time.Second)
	t.Logf("killed after %d of %d pages; restarted crawler fetched %d", before, len(truth), c.Stats().Fetched)
	if m := w.Missing(token); len(m) > 0 {
		t.Errorf("%d pages never fetched after the kill, e.g. %v", len(m), m[:min(5, len(m))])
	}
	if d := w.Duplicates(); len(d) > cfg.Workers {
		t.Errorf("%d pages fetched twice, more than the %d that can be in flight: %v", len(d), cfg.Workers, d)
	}
	for _, v := range w.CheckRobots(token) {
		t.Errorf("robots: %s", v)
	}
}

// TestCrashChild is the child process of TestCrawlSurvivesKill9; it only
// runs there.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(envCrashDir)
	if dir == "" {
		t.Skip("child process of TestCrawlSurvivesKill9")
	}
	proxy, err := url.Parse(os.Getenv(envCrashProxy))
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(dir, store.Options{BloomExpected: 10_000, CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	ring := &durableRing{db: db}
	c, err := New(crashConfig(http.ProxyURL(proxy)), db, nil, ring)
	if err != nil {
		t.Fatal(err)
	}
	ring.c = c
	var seeds []frontier.Task
	for _, u := range strings.Fields(os.Getenv(envCrashSeeds)) {
		seeds = append(seeds, frontier.Task{URL: u})
	}
	ring.Discovered(context.Background(), frontier.Task{}, seeds)
	// Crawl until killed; give up after a minute should the parent be gone.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c.Run(ctx)
	os.Exit(3)
}
