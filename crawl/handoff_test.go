package crawl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// runCrawler runs c in the background until the test ends (or stop is
// called) and waits for Run to return.
func runCrawler(t *testing.T, c *Crawler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitUntil polls cond until it holds, failing the test after timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// answeredURLs is the set of URLs (robots.txt excluded) that got an answer.
func answeredURLs(w *synthweb.Web) map[string]bool {
	set := map[string]bool{}
	for _, r := range w.Log() {
		if r.Path != "/robots.txt" && r.Status != 0 {
			set[r.URL] = true
		}
	}
	return set
}

// requestsTo returns the logged requests to host, robots.txt included.
func requestsTo(w *synthweb.Web, host string) []synthweb.Request {
	var out []synthweb.Request
	for _, r := range w.Log() {
		if r.Host == host {
			out = append(out, r)
		}
	}
	return out
}

// allQueued returns every entry of the store's queue.
func allQueued(t *testing.T, db *store.DB) []store.QueueEntry {
	t.Helper()
	var keys []uint64
	if err := db.QueueHosts(func(head store.QueueEntry) error {
		keys = append(keys, head.HostKey)
		return nil
	}); err != nil {
		t.Fatalf("QueueHosts: %v", err)
	}
	var out []store.QueueEntry
	for _, k := range keys {
		es, err := db.QueueHead(k, 1<<20, nil)
		if err != nil {
			t.Fatalf("QueueHead: %v", err)
		}
		out = append(out, es...)
	}
	return out
}

// allScheduled returns every entry of the store's schedule.
func allScheduled(t *testing.T, db *store.DB) []store.QueueEntry {
	t.Helper()
	var out []store.QueueEntry
	if err := db.ScanSchedule(func(e store.QueueEntry) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatalf("ScanSchedule: %v", err)
	}
	return out
}

// TestOwnsGateParksUnownedHosts: while Config.Owns refuses half the hosts,
// the server sees no request at all to them, robots.txt included, their
// tasks stay queued untouched, and the gate is asked once per host rather
// than spun on. Once they are owned again, Resume crawls them completely
// and politely.
func TestOwnsGateParksUnownedHosts(t *testing.T) {
	w := startSynthWeb(t, synthweb.Config{Seed: 5, Hosts: 8, Seeds: 8, PagesPerHost: 4, CrossHostFraction: -1})
	cfg := testConfig()
	cfg.Proxy = w.Proxy()
	cfg.MaxDepth = 1000
	token := ProductToken(cfg.UserAgent)

	hosts := w.Hosts()
	var owned sync.Map // host key -> bool
	unowned := map[string]bool{}
	for i, h := range hosts {
		owned.Store(urls.HostKey(h), i%2 == 0)
		if i%2 == 1 {
			unowned[h] = true
		}
	}
	var callsMu sync.Mutex
	calls := map[uint64]int{}
	cfg.Owns = func(k uint64) bool {
		callsMu.Lock()
		calls[k]++
		spinning := calls[k] > 1000
		callsMu.Unlock()
		v, _ := owned.Load(k)
		// A crawler spinning on a refused host would never let Run
		// return; give in, so that the test fails instead of hanging.
		return v == true || spinning
	}
	callsTo := func(host string) int {
		callsMu.Lock()
		defer callsMu.Unlock()
		return calls[urls.HostKey(host)]
	}

	db := openStore(t)
	ring := &ringStandIn{seen: map[uint64]int{}}
	c, err := New(cfg, db, nil, ring)
	if err != nil {
		t.Fatal(err)
	}
	ring.c = c
	ring.seed(w.Seeds())
	runCrawler(t, c)

	var ownedTruth []string
	for _, u := range w.GroundTruth(token) {
		if h, _ := urls.HostOf(u); !unowned[h] {
			ownedTruth = append(ownedTruth, u)
		}
	}
	waitUntil(t, 20*time.Second, "the owned hosts to be crawled", func() bool {
		got := answeredURLs(w)
		for _, u := range ownedTruth {
			if !got[u] {
				return false
			}
		}
		return true
	})
	waitUntil(t, 5*time.Second, "the gate to be asked about every unowned host", func() bool {
		for h := range unowned {
			if callsTo(h) == 0 {
				return false
			}
		}
		return true
	})
	for h := range unowned {
		if reqs := requestsTo(w, h); len(reqs) > 0 {
			t.Errorf("%d requests to unowned host %s, first %s", len(reqs), h, reqs[0].Path)
		}
		// One seed task each, enqueued once: one question, no spinning.
		if n := callsTo(h); n != 1 {
			t.Errorf("Owns asked %d times about parked host %s, want 1", n, h)
		}
		q, err := db.QueueHead(urls.HostKey(h), 10, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(q) != 1 || q[0].URL != "http://"+h+"/" || q[0].Attempts != 0 {
			t.Errorf("queue of parked host %s = %+v, want its untouched seed", h, q)
		}
	}

	// A new task of a parked host brings it back for one more question.
	var probe string
	for h := range unowned {
		probe = h
		break
	}
	c.Enqueue(frontier.Task{URL: "http://" + probe + "/probe", Depth: 1})
	waitUntil(t, 5*time.Second, "the gate to be asked about the new task", func() bool { return callsTo(probe) == 2 })
	if reqs := requestsTo(w, probe); len(reqs) > 0 {
		t.Errorf("request to unowned host %s after Enqueue: %s", probe, reqs[0].Path)
	}

	// Owned again: Resume crawls them.
	for _, h := range hosts {
		owned.Store(urls.HostKey(h), true)
	}
	if err := c.Resume(func(uint64) bool { return true }); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	waitUntil(t, 20*time.Second, "the crawl to finish after Resume", func() bool {
		return c.Idle() && len(w.Missing(token)) == 0
	})
	reportAll(t, "duplicate", w.Duplicates())
	reportAll(t, "robots.txt not first", w.CheckRobotsFirst())
	reportAll(t, "robots violation", w.CheckRobots(token))
	reportAll(t, "politeness violation", w.CheckPoliteness(cfg.Delay))
}

// TestReleaseWaitsForInFlightFetch: Release of a host whose page is being
// fetched returns only once that page is fetched and stored, while other
// hosts keep being crawled; it leaves no queue or schedule entry of the
// range (and those of other hosts as they were), no host of the range is
// contacted again (not even one enqueued meanwhile), the snapshot carries
// the politeness delay and robots.txt, and hosts enqueued afterwards are
// crawled.
func TestReleaseWaitsForInFlightFetch(t *testing.T) {
	w := startSynthWeb(t, synthweb.Config{Seed: 7, Hosts: 6, Seeds: 6, PagesPerHost: 6, Cases: true, Latency: 5 * time.Millisecond})
	cfg := testConfig()
	cfg.Proxy = w.Proxy()
	cfg.Delay = 50 * time.Millisecond
	cfg.Timeout = 10 * time.Second // the slow page answers after 3 s
	cfg.MaxDepth = 1000
	slow := w.CaseHost("slow")
	slowKey := urls.HostKey(slow)
	gzip := w.CaseHost("gzip")
	// deflate is released too; its task arrives while Release waits.
	deflate := w.CaseHost("deflate")
	// Only a Release in progress asks in, and only once its fence is up:
	// the calls tell the test when that is.
	var asked atomic.Int64
	in := func(k uint64) bool {
		asked.Add(1)
		return k == slowKey || k == urls.HostKey(deflate)
	}

	db := openStore(t)
	rec := newRecorder()
	ring := &ringStandIn{seen: map[uint64]int{}, inScope: func(h string) bool {
		return strings.HasPrefix(h, "h0") || h == gzip
	}}
	c, err := New(cfg, db, rec, ring)
	if err != nil {
		t.Fatal(err)
	}
	ring.c = c
	slow1 := "http://" + slow + "/slow/1"
	c.Enqueue(frontier.Task{URL: slow1, Depth: 1})
	runCrawler(t, c)

	var slowReq synthweb.Request
	waitUntil(t, 10*time.Second, "the slow page to be requested", func() bool {
		for _, r := range requestsTo(w, slow) {
			if r.Path == "/slow/1" {
				slowReq = r
				return true
			}
		}
		return false
	})
	// More work of the host to release, and of others to keep crawling.
	c.Enqueue(frontier.Task{URL: "http://" + slow + "/p/1", Depth: 1}, frontier.Task{URL: "http://" + slow + "/slow/2", Depth: 1})
	ring.seed(w.Seeds()[:6])

	// Bounded by its context, Release gives up and changes nothing.
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = c.ReleaseRange(short, in)
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Release with a 50ms deadline during a 3s fetch = %v, want the deadline", err)
	}
	if q, err := db.QueueHead(slowKey, 10, nil); err != nil || len(q) != 3 {
		t.Errorf("queue of %s after a Release that gave up = %d entries (%v), want all 3", slow, len(q), err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	enqueued := make(chan struct{})
	before := asked.Load()
	go func() {
		defer close(enqueued)
		for asked.Load() == before && ctx.Err() == nil {
			time.Sleep(time.Millisecond) // until the Release below has its fence up
		}
		c.Enqueue(frontier.Task{URL: "http://" + deflate + "/"})
	}()
	snaps, err := c.ReleaseRange(ctx, in)
	released := time.Now()
	<-enqueued
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	if rec.page(slow1) == nil {
		t.Fatalf("Release returned before the in-flight page %s was stored", slow1)
	}
	if released.Sub(slowReq.Time) < synthweb.SlowPageDelay {
		t.Errorf("Release returned %v after the slow request began, before its answer", released.Sub(slowReq.Time))
	}
	others := 0
	for _, r := range w.Log() {
		if strings.HasPrefix(r.Host, "h0") && r.Time.After(slowReq.Time) && r.Time.Before(released) {
			others++
		}
	}
	if others == 0 {
		t.Error("no other host was crawled while Release waited")
	}

	for _, e := range allQueued(t, db) {
		if in(e.HostKey) {
			t.Errorf("queue entry of the released host left: %s", e.URL)
		}
		if e.Recrawl {
			t.Errorf("recrawl %s queued early by Release", e.URL)
		}
	}
	for _, e := range allScheduled(t, db) {
		if in(e.HostKey) {
			t.Errorf("schedule entry of the released host left: %s", e.URL)
		}
	}

	var snap *HostSnapshot
	for i := range snaps {
		if snaps[i].Host == slow {
			snap = &snaps[i]
		} else {
			t.Errorf("unexpected snapshot of %s (only %s was contacted)", snaps[i].Host, slow)
		}
	}
	if snap == nil {
		t.Fatalf("no snapshot of %s in %+v", slow, snaps)
	}
	if answeredAt := slowReq.Time.Add(synthweb.SlowPageDelay); !snap.NotBefore.After(answeredAt) {
		t.Errorf("snapshot NotBefore %v is not after the slow answer (%v)", snap.NotBefore, answeredAt)
	}
	if status, body := w.RobotsTxt(slow); snap.RobotsStatus != status || string(snap.Robots) != body || snap.Origin != "http://"+slow {
		t.Errorf("snapshot robots.txt = %d %q from %q, want %d %q", snap.RobotsStatus, snap.Robots, snap.Origin, status, body)
	}

	// A host enqueued now is crawled; the released one is not touched.
	ring.seed([]string{"http://" + gzip + "/"})
	waitUntil(t, 20*time.Second, "the crawl to finish", c.Idle)
	if rec.page("http://"+gzip+"/p/2") == nil {
		t.Errorf("host enqueued after Release not crawled: pages %v", rec.pageURLs())
	}
	var paths []string
	for _, r := range requestsTo(w, slow) {
		paths = append(paths, r.Path)
	}
	if !slices.Equal(paths, []string{"/robots.txt", "/slow/1"}) {
		t.Errorf("requests to the released host = %v, want only robots.txt and the page in flight", paths)
	}
	if reqs := requestsTo(w, deflate); len(reqs) > 0 {
		t.Errorf("%d requests to %s, enqueued into the range while it was being released", len(reqs), deflate)
	}
	if s := c.Stats(); s.Queued != 0 || s.InFlight != 0 {
		t.Errorf("after the crawl: %d queued, %d in flight", s.Queued, s.InFlight)
	}
	reportAll(t, "politeness violation", w.CheckPoliteness(cfg.Delay))
}

// TestReleaseURLKeyMode: in URL-key mode Release removes exactly the queue
// and schedule entries whose own ring key is in the range, whatever their
// host, and the crawl then fetches exactly the others.
func TestReleaseURLKeyMode(t *testing.T) {
	w := startSynthWeb(t, synthweb.Config{Seed: 9, Hosts: 4, PagesPerHost: 12})
	cfg := testConfig()
	cfg.Proxy = w.Proxy()
	cfg.KeyMode = urls.KeyURL
	db := openStore(t)
	c, err := New(cfg, db, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pages := w.Pages()
	if len(pages) < 30 {
		t.Fatalf("only %d pages", len(pages))
	}
	first, second := pages[:15], pages[15:30]
	tasks := func(list []string) []frontier.Task {
		out := make([]frontier.Task, len(list))
		for i, u := range list {
			out[i] = frontier.Task{URL: u, Depth: 1}
		}
		return out
	}
	in := func(k uint64) bool { return k%2 == 0 }
	keyIn := func(u string) bool {
		k, _ := urls.TaskKey(u, urls.KeyURL)
		return in(k)
	}
	// The first URLs are fetched (and scheduled for a recrawl), the others
	// only queued.
	c.Enqueue(tasks(first)...)
	crawlUntilIdle(t, c, 20*time.Second)
	c.Enqueue(tasks(second)...)

	if _, err := c.ReleaseRange(context.Background(), in); err != nil {
		t.Fatalf("Release: %v", err)
	}
	var wantQueued, wantScheduled []string
	for _, u := range second {
		if !keyIn(u) {
			wantQueued = append(wantQueued, u)
		}
	}
	for _, u := range first {
		if !keyIn(u) {
			wantScheduled = append(wantScheduled, u)
		}
	}
	if len(wantQueued) == 0 || len(wantQueued) == len(second) || len(wantScheduled) == 0 {
		t.Fatalf("the range splits the URLs badly: %d of %d queued kept", len(wantQueued), len(second))
	}
	var queued, scheduled []string
	for _, e := range allQueued(t, db) {
		queued = append(queued, e.URL)
	}
	horizon := time.Now().Add(cfg.MinRecrawl / 2)
	for _, e := range allScheduled(t, db) {
		scheduled = append(scheduled, e.URL)
		if e.Due.Before(horizon) {
			t.Errorf("recrawl of %s rescheduled at %v, earlier than planned", e.URL, e.Due)
		}
	}
	slices.Sort(queued)
	slices.Sort(scheduled)
	if !slices.Equal(queued, wantQueued) {
		t.Errorf("queued after Release = %v, want %v", queued, wantQueued)
	}
	if !slices.Equal(scheduled, wantScheduled) {
		t.Errorf("scheduled after Release = %v, want %v", scheduled, wantScheduled)
	}

	w.ResetLog()
	crawlUntilIdle(t, c, 20*time.Second)
	got := answeredURLs(w)
	var fetched []string
	for u := range got {
		fetched = append(fetched, u)
	}
	slices.Sort(fetched)
	if !slices.Equal(fetched, wantQueued) {
		t.Errorf("fetched after Release = %v, want %v", fetched, wantQueued)
	}
}

// TestRestoreUsesSnapshot: a crawler given another crawler's snapshot of a
// host fetches its pages without asking for robots.txt again and not
// before the snapshot's NotBefore, and obeys the handed-over rules; with a
// snapshot older than RobotsTTL it fetches robots.txt first.
func TestRestoreUsesSnapshot(t *testing.T) {
	w := startSynthWeb(t, synthweb.Config{Seed: 11, Hosts: 6, PagesPerHost: 6, CrossHostFraction: -1})
	cfg := testConfig()
	cfg.Proxy = w.Proxy()
	cfg.MaxDepth = 1000
	token := ProductToken(cfg.UserAgent)
	var host string
	for _, h := range w.Hosts() {
		if status, body := w.RobotsTxt(h); status == 200 && strings.Contains(body, "Disallow") {
			host = h
			break
		}
	}
	if host == "" {
		t.Fatal("no host with a robots.txt disallowing something")
	}
	var truth []string
	for _, u := range w.GroundTruth(token) {
		if h, _ := urls.HostOf(u); h == host {
			truth = append(truth, u)
		}
	}

	// The previous owner crawls the host.
	a, err := New(cfg, openStore(t), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.Enqueue(frontier.Task{URL: "http://" + host + "/"}) // the root is enough: robots.txt comes first
	crawlUntilIdle(t, a, 20*time.Second)
	snaps := a.Snapshots(func(k uint64) bool { return k == urls.HostKey(host) })
	if len(snaps) != 1 || snaps[0].RobotsStatus != 200 {
		t.Fatalf("snapshots of %s = %+v, want one with its robots.txt", host, snaps)
	}
	handed := snaps[0]
	if err := handed.Check(); err != nil {
		t.Fatal(err)
	}

	restored := func(t *testing.T, age time.Duration) (*synthweb.Web, time.Time) {
		s := handed
		s.Robots = slices.Clone(handed.Robots)
		s.RobotsFetched = s.RobotsFetched.Add(-age)
		s.NotBefore = time.Now().Add(700 * time.Millisecond)
		w.ResetLog()
		ring := &ringStandIn{seen: map[uint64]int{}, inScope: func(h string) bool { return h == host }}
		b, err := New(cfg, openStore(t), nil, ring)
		if err != nil {
			t.Fatal(err)
		}
		ring.c = b
		b.Restore([]HostSnapshot{s})
		ring.seed([]string{"http://" + host + "/"})
		crawlUntilIdle(t, b, 20*time.Second)
		got := answeredURLs(w)
		for _, u := range truth {
			if !got[u] {
				t.Errorf("not fetched after Restore: %s", u)
			}
		}
		reportAll(t, "robots violation", w.CheckRobots(token))
		reportAll(t, "politeness violation", w.CheckPoliteness(cfg.Delay))
		return w, s.NotBefore
	}

	t.Run("fresh", func(t *testing.T) {
		w, notBefore := restored(t, 0)
		log := w.Log()
		if len(log) == 0 {
			t.Fatal("nothing requested")
		}
		if log[0].Time.Before(notBefore) {
			t.Errorf("first request %s at %v, before NotBefore %v", log[0].Path, log[0].Time, notBefore)
		}
		for _, r := range log {
			if r.Path == "/robots.txt" {
				t.Errorf("robots.txt fetched again at %v despite the snapshot", r.Time)
			}
		}
	})
	t.Run("expired", func(t *testing.T) {
		w, notBefore := restored(t, cfg.RobotsTTL+time.Minute)
		log := w.Log()
		if len(log) == 0 || log[0].Path != "/robots.txt" {
			t.Fatalf("with an expired snapshot robots.txt must come first; log starts %+v", log[:min(1, len(log))])
		}
		if log[0].Time.Before(notBefore) {
			t.Errorf("robots.txt requested at %v, before NotBefore %v", log[0].Time, notBefore)
		}
		robots := 0
		for _, r := range log {
			if r.Path == "/robots.txt" {
				robots++
			}
		}
		if robots != 1 {
			t.Errorf("robots.txt fetched %d times, want 1", robots)
		}
	})
}

// TestOnFinishedOncePerFinishedTask: over a crawl with pages that fail for
// good, a robots-disallowed redirect target, redirects and plain pages,
// OnFinished hears of every task exactly once, with its keys, whatever the
// number of attempts; Crawled then tells crawled URLs from others.
func TestOnFinishedOncePerFinishedTask(t *testing.T) {
	w := startSynthWeb(t, synthweb.Config{Seed: 13, Hosts: 2, Cases: true})
	cfg := testConfig()
	cfg.Proxy = w.Proxy()
	dead, redirects, gzip := w.CaseHost("dead"), w.CaseHost("redirects"), w.CaseHost("gzip")

	var mu sync.Mutex
	doneN := map[string]int{}
	var badKeys []string
	cfg.OnFinished = func(task frontier.Task, ringKey, urlHash uint64, _ *store.URLMeta) {
		mu.Lock()
		defer mu.Unlock()
		doneN[task.URL]++
		if k, _ := urls.TaskKey(task.URL, cfg.KeyMode); k != ringKey || urlHash != urls.URLHash(task.URL) {
			badKeys = append(badKeys, task.URL)
		}
	}
	ring := &ringStandIn{seen: map[uint64]int{}, inScope: func(h string) bool {
		return h == dead || h == redirects || h == gzip
	}}
	c := newTestCrawler(t, cfg, nil, ring)
	ring.c = c
	deadURLs := []string{"http://" + dead + "/", "http://" + dead + "/p/1", "http://" + dead + "/p/2"}
	ring.seed(append(slices.Clone(deadURLs), "http://"+redirects+"/to-blocked", "http://"+gzip+"/"))
	crawlUntilIdle(t, c, 30*time.Second)

	blocked := "http://" + redirects + "/blocked/1"
	var tasks []string
	ring.mu.Lock()
	n := len(ring.seen)
	ring.mu.Unlock()
	mu.Lock()
	for u, k := range doneN {
		tasks = append(tasks, u)
		if k != 1 {
			t.Errorf("OnFinished called %d times for %s", k, u)
		}
	}
	reportAll(t, "wrong keys in OnFinished", badKeys)
	mu.Unlock()
	if len(tasks) != n {
		t.Errorf("OnFinished heard of %d tasks, %d were enqueued: %v", len(tasks), n, tasks)
	}
	for _, u := range append(slices.Clone(deadURLs), blocked, "http://"+redirects+"/to-blocked", "http://"+gzip+"/p/1") {
		if !slices.Contains(tasks, u) {
			t.Errorf("no OnFinished for %s", u)
		}
	}
	// The dead pages were tried MaxRetries+1 times, the blocked one never.
	tries := map[string]int{}
	for _, r := range w.Log() {
		tries[r.URL]++
	}
	for _, u := range deadURLs {
		if tries[u] != cfg.MaxRetries+1 {
			t.Errorf("%s requested %d times, want %d", u, tries[u], cfg.MaxRetries+1)
		}
	}
	if tries[blocked] != 0 {
		t.Errorf("robots-disallowed %s requested", blocked)
	}
	if s := c.Stats(); s.DeadLetters != int64(len(deadURLs)) || s.RobotsDenied != 1 {
		t.Errorf("stats: %d dead letters, %d robots-denied; want %d and 1", s.DeadLetters, s.RobotsDenied, len(deadURLs))
	}

	for u, want := range map[string]bool{
		deadURLs[1]:                           true, // dead letter
		"http://" + gzip + "/p/1":             true, // fetched
		"http://" + redirects + "/to-blocked": true,
		blocked:                               false, // dropped without a request
		"http://" + gzip + "/never":           false,
	} {
		k, _ := urls.TaskKey(u, cfg.KeyMode)
		got, err := c.Crawled(k, urls.URLHash(u))
		if err != nil {
			t.Fatalf("Crawled(%s): %v", u, err)
		}
		if got != want {
			t.Errorf("Crawled(%s) = %v, want %v", u, got, want)
		}
	}
	// A dead letter moved back into the queue is no longer Crawled.
	if n, err := c.RequeueDeadLetters(func(d store.DeadLetter) bool { return d.URL == deadURLs[1] }); err != nil || n != 1 {
		t.Fatalf("RequeueDeadLetters = %d, %v", n, err)
	}
	k, _ := urls.TaskKey(deadURLs[1], cfg.KeyMode)
	if got, err := c.Crawled(k, urls.URLHash(deadURLs[1])); err != nil || got {
		t.Errorf("Crawled(%s) after requeue = %v, %v; want false", deadURLs[1], got, err)
	}
}

// TestHostSnapshotCheck: Check passes the snapshots a crawler hands over
// (robots.txt 2xx, empty, 404, none) and refuses those that do not fit
// together, which Restore then skips: a key that is not the host's, a
// robots.txt origin of another host or with a path, a body or an origin
// without a status, a status out of range, a body above the robots.txt cap,
// an empty or overlong host.
func TestHostSnapshotCheck(t *testing.T) {
	host := "www.example.org"
	full := HostSnapshot{
		Host: host, Key: urls.HostKey(host),
		NotBefore:     time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC),
		Robots:        []byte("User-agent: *\nDisallow: /private/\nCrawl-delay: 2\n"),
		RobotsStatus:  200,
		RobotsFetched: time.Date(2026, 2, 28, 8, 30, 0, 1, time.UTC),
		Origin:        "https://" + host,
	}
	for name, s := range map[string]HostSnapshot{
		"full":         full,
		"no robots":    {Host: host, Key: urls.HostKey(host), NotBefore: full.NotBefore},
		"empty robots": {Host: host, Key: urls.HostKey(host), Robots: []byte{}, RobotsStatus: 200, RobotsFetched: full.RobotsFetched, Origin: "http://" + host + ":8080"},
		"404":          {Host: host, Key: urls.HostKey(host), RobotsStatus: 404, RobotsFetched: full.RobotsFetched, Origin: "http://" + host},
	} {
		if err := s.Check(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	long := strings.Repeat("a", 256)
	for name, mutate := range map[string]func(s *HostSnapshot){
		"wrong key":            func(s *HostSnapshot) { s.Key++ },
		"origin of other host": func(s *HostSnapshot) { s.Origin = "https://other.example.org" },
		"origin with a path":   func(s *HostSnapshot) { s.Origin = "https://" + host + "/robots.txt" },
		"body without status":  func(s *HostSnapshot) { s.RobotsStatus = 0 },
		"origin without status": func(s *HostSnapshot) {
			s.RobotsStatus, s.Robots = 0, nil
		},
		"status without origin": func(s *HostSnapshot) { s.Origin = "" },
		"status 1000":           func(s *HostSnapshot) { s.RobotsStatus = 1000 },
		"status 42":             func(s *HostSnapshot) { s.RobotsStatus = 42 },
		"huge robots":           func(s *HostSnapshot) { s.Robots = make([]byte, maxRobotsBytes+1) },
		"no host":               func(s *HostSnapshot) { s.Host, s.Key, s.Origin = "", urls.HostKey(""), "" },
		"long host": func(s *HostSnapshot) {
			s.Host, s.Key, s.Origin = long, urls.HostKey(long), "https://"+long
		},
	} {
		s := full
		mutate(&s)
		if err := s.Check(); err == nil {
			t.Errorf("%s: accepted %+v", name, s)
		}
	}
}

// TestOnFinishedForEnqueueDrops: tasks Enqueue drops for good (traps, a spent
// page budget) are reported as done too, so their owner stops offering
// them.
func TestOnFinishedForEnqueueDrops(t *testing.T) {
	cfg := testConfig()
	cfg.MaxPagesPerHost = 1
	var done atomic.Int64
	var finished sync.Map
	cfg.OnFinished = func(task frontier.Task, _, _ uint64, _ *store.URLMeta) {
		done.Add(1)
		finished.Store(task.URL, true)
	}
	db := openStore(t)
	c, err := New(cfg, db, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	trap := "http://a.example/x/x/x/x/x"
	c.Enqueue(frontier.Task{URL: trap})
	if _, ok := finished.Load(trap); !ok || done.Load() != 1 {
		t.Fatalf("trap dropped by Enqueue: OnFinished calls %d, want 1 for it", done.Load())
	}
	// A spent budget: the host state says one page was fetched.
	if err := db.PutHost(store.HostState{HostKey: urls.HostKey("b.example"), Host: "b.example", Fetched: 1}); err != nil {
		t.Fatal(err)
	}
	c.Enqueue(frontier.Task{URL: "http://b.example/1"}, frontier.Task{URL: "http://b.example/2"})
	if done.Load() != 3 {
		t.Errorf("OnFinished calls = %d after dropping two tasks of a spent host, want 3", done.Load())
	}
	if s := c.Stats(); s.Queued != 0 {
		t.Errorf("%d tasks queued", s.Queued)
	}
}

// TestCrawledReadsDeadLettersFromStore: Crawled sees a dead letter however
// it reached the store (here written behind the crawler's back, after a
// first Crawled), and stops seeing it once deleted.
func TestCrawledReadsDeadLettersFromStore(t *testing.T) {
	db := openStore(t)
	c, err := New(testConfig(), db, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	u := "http://dead.example/p"
	k, h := urls.HostKey("dead.example"), urls.URLHash(u)
	fetched := func() bool {
		t.Helper()
		got, err := c.Crawled(k, h)
		if err != nil {
			t.Fatalf("Fetched: %v", err)
		}
		return got
	}
	if fetched() {
		t.Fatal("Crawled before any record")
	}
	if err := db.PutDeadLetter(store.DeadLetter{URL: u, RingKey: k, URLHash: h, HostKey: k, Attempts: 3, Kind: "timeout"}); err != nil {
		t.Fatal(err)
	}
	if !fetched() {
		t.Error("dead letter written to the store not seen by Crawled")
	}
	if got, err := c.Crawled(k, h+1); err != nil || got {
		t.Errorf("Crawled of another URL of the host = %v, %v; want false", got, err)
	}
	if err := db.DeleteDeadLetter(k, h); err != nil {
		t.Fatal(err)
	}
	if fetched() {
		t.Error("deleted dead letter still seen by Crawled")
	}
	db.Close()
	if _, err := c.Crawled(k, h); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Crawled on a closed store: %v, want ErrClosed", err)
	}
}

// TestOwnsCheckedBeforeRequestIsWritten: ownership lost after the crawler
// decided to fetch, while it waited for a connection (or was paused), stops
// the request before it is written. The page stays queued, its host is
// parked, and once owned again it is fetched exactly once.
func TestOwnsCheckedBeforeRequestIsWritten(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\nAllow: /\n")
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<p>page</p>")
	})
	var owned atomic.Bool
	owned.Store(true)
	var dials atomic.Int32
	dialer := &net.Dialer{}
	cfg := testConfig()
	cfg.Owns = func(uint64) bool { return owned.Load() }
	cfg.Transport = &http.Transport{
		DisableKeepAlives: true, // every request dials
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dials.Add(1) == 2 {
				owned.Store(false) // lost while the page's connection was being set up
			}
			return dialer.DialContext(ctx, network, addr)
		},
	}
	c := newTestCrawler(t, cfg, nil, nil)
	page := srv.URL + "/page"
	c.Enqueue(frontier.Task{URL: page})
	stop := runCrawler(t, c)
	defer stop()
	waitUntil(t, 10*time.Second, "the page's connection", func() bool { return dials.Load() >= 2 })
	waitUntil(t, 10*time.Second, "the host to be parked", func() bool { return c.Stats().InFlight == 0 })
	if n := srv.count("/page"); n != 0 {
		t.Fatalf("the page was requested %d times after ownership was lost", n)
	}
	if s := c.Stats(); s.Requests != 1 || s.Queued != 1 {
		t.Errorf("Requests %d (want 1: robots.txt), Queued %d (want the page)", s.Requests, s.Queued)
	}
	owned.Store(true)
	if err := c.Resume(func(uint64) bool { return true }); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the page once owned again", func() bool { return c.Idle() })
	if n := srv.count("/page"); n != 1 {
		t.Errorf("the page was requested %d times, want once", n)
	}
}

// TestAdoptRecrawlsOnSchedule: a new owner that adopts a URL another node
// fetched recrawls it when that fetch said, conditionally with its
// validators, while an older copy of the metadata never overrides what
// the node knows itself.
func TestAdoptRecrawlsOnSchedule(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("If-None-Match") == `"v1"` {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<p>stable</p>")
	})
	cfg := testConfig()
	cfg.MinRecrawl, cfg.MaxRecrawl = 300*time.Millisecond, time.Hour
	page := srv.URL + "/p"

	// The first owner fetches the page once.
	first := newTestCrawler(t, cfg, nil, nil)
	first.Enqueue(frontier.Task{URL: page, Depth: 2})
	stop := runCrawler(t, first)
	waitUntil(t, 10*time.Second, "the first fetch", func() bool { return first.Stats().Fetched == 1 })
	stop()
	key, hash := first.keys(page)
	meta, ok := first.urlMeta(key, hash)
	if !ok || meta.ETag != `"v1"` || meta.NextCrawl.IsZero() {
		t.Fatalf("first owner's metadata: %+v, %v", meta, ok)
	}

	// The next owner adopts it: nothing happens before NextCrawl, then a
	// conditional recrawl.
	next := newTestCrawler(t, cfg, nil, nil)
	if err := next.Adopt([]Adopted{{Task: frontier.Task{URL: page, Depth: 2}, Meta: meta}}); err != nil {
		t.Fatal(err)
	}
	if s := next.Stats(); s.Scheduled != 1 || s.Queued != 0 {
		t.Fatalf("after Adopt: scheduled %d, queued %d; want one recrawl scheduled", s.Scheduled, s.Queued)
	}
	defer runCrawler(t, next)()
	waitUntil(t, 10*time.Second, "the recrawl", func() bool { return srv.count("/p") == 2 })
	hits := srv.log()
	last := hits[len(hits)-1]
	if last.at.Before(meta.NextCrawl.Add(-5 * time.Millisecond)) {
		t.Errorf("recrawled at %v, before its NextCrawl %v", last.at, meta.NextCrawl)
	}
	waitUntil(t, 10*time.Second, "the recrawl's outcome", func() bool {
		m, _ := next.urlMeta(key, hash)
		return m.Fetches == 2
	})
	m, _ := next.urlMeta(key, hash)
	if m.Status != http.StatusNotModified || m.ETag != `"v1"` || !m.NextCrawl.After(meta.NextCrawl) {
		t.Errorf("after the recrawl: %+v; want a 304 and a later NextCrawl", m)
	}

	// An older copy does not override the newer local one.
	if err := next.Adopt([]Adopted{{Task: frontier.Task{URL: page}, Meta: meta}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := next.urlMeta(key, hash); got.Fetches != 2 {
		t.Errorf("an older adopted copy replaced the local metadata: %+v", got)
	}
}

// TestTakeFreshSnapshots: the hosts whose robots.txt was fetched come out
// once, with the robots.txt, for the replicas; then nothing until another
// robots.txt is fetched.
func TestTakeFreshSnapshots(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n")
			return
		}
		fmt.Fprint(w, "ok")
	})
	c := newTestCrawler(t, testConfig(), nil, nil)
	if got := c.TakeFreshSnapshots(); len(got) != 0 {
		t.Fatalf("before any fetch: %+v", got)
	}
	c.Enqueue(frontier.Task{URL: srv.URL + "/a"}, frontier.Task{URL: srv.URL + "/b"})
	stop := runCrawler(t, c)
	waitUntil(t, 10*time.Second, "the pages", func() bool { return srv.count("/a")+srv.count("/b") == 2 })
	stop()
	host, _ := urls.HostOf(srv.URL + "/")
	got := c.TakeFreshSnapshots()
	if len(got) != 1 || got[0].Host != host || got[0].RobotsStatus != 200 || !strings.Contains(string(got[0].Robots), "Disallow: /private/") {
		t.Fatalf("fresh snapshots: %+v, want the robots.txt of %s", got, host)
	}
	if again := c.TakeFreshSnapshots(); len(again) != 0 {
		t.Errorf("taken twice: %+v", again)
	}
}

// TestDomainKeySnapshots: with domain keys a host's politeness state
// travels under its domain's key, the ring key of all its URLs, so that
// it goes with the range that holds the host: Snapshots and ReleaseRange
// find it by that key and not by the host key.
func TestDomainKeySnapshots(t *testing.T) {
	w := startSynthWeb(t, synthweb.Config{Seed: 11, Hosts: 3, PagesPerHost: 4, CrossHostFraction: -1})
	cfg := testConfig()
	cfg.Proxy = w.Proxy()
	cfg.KeyMode = urls.KeyDomain
	host := w.Hosts()[0]
	domainKey, hostKey := urls.DomainKey(host), urls.HostKey(host)
	if domainKey == hostKey {
		t.Fatalf("%s: its domain key is its host key", host)
	}
	c := newTestCrawler(t, cfg, nil, nil)
	c.Enqueue(frontier.Task{URL: "http://" + host + "/"})
	crawlUntilIdle(t, c, 20*time.Second)
	if snaps := c.Snapshots(func(k uint64) bool { return k == hostKey }); len(snaps) != 0 {
		t.Errorf("snapshots under the host key with domain keys: %+v", snaps)
	}
	snaps := c.Snapshots(func(k uint64) bool { return k == domainKey })
	if len(snaps) != 1 || snaps[0].Host != host || snaps[0].Key != domainKey || snaps[0].Check() != nil {
		t.Fatalf("snapshots under %s's domain key: %+v, want its own, keyed by the domain", host, snaps)
	}
	c.Enqueue(frontier.Task{URL: "http://" + host + "/later"})
	released, err := c.ReleaseRange(context.Background(), func(k uint64) bool { return k == domainKey })
	if err != nil {
		t.Fatal(err)
	}
	if len(released) != 1 || released[0].Key != domainKey {
		t.Errorf("released %+v, want %s's state under its domain key", released, host)
	}
	if n := c.Stats().Queued; n != 0 {
		t.Errorf("%d tasks queued after the domain's range was released", n)
	}
}
