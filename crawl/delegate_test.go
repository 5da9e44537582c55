package crawl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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

// directDelegator hands batches straight to a helper crawler in the same
// process. failEvery > 0 makes every failEvery-th batch fail after the
// helper fetched it, as a reply lost on the network would; noHelper makes
// every call answer ErrNoHelper. With restOfGap the helper waits, as
// route.Helper.Serve does, what is left of the gap when the batch arrives
// (Gap less SinceLast) before its first request; without it, nothing.
type directDelegator struct {
	helper    *Crawler
	failEvery int
	noHelper  bool
	restOfGap bool

	calls, failed atomic.Int64
	// turnCame counts the batches sent with the whole gap passed
	// (SinceLast at least Gap).
	turnCame atomic.Int64
}

func (d *directDelegator) Delegate(ctx context.Context, b *Batch) (*BatchResult, error) {
	n := d.calls.Add(1)
	if d.noHelper {
		return nil, fmt.Errorf("no successor: %w", ErrNoHelper)
	}
	if b.SinceLast >= b.Gap {
		d.turnCame.Add(1)
	}
	if d.restOfGap {
		time.Sleep(b.Gap - min(b.SinceLast, b.Gap))
	}
	res, err := d.helper.FetchBatch(ctx, b)
	if errors.Is(err, ErrBusy) {
		return nil, fmt.Errorf("helper: %w", ErrNoHelper)
	}
	if err != nil {
		return nil, err
	}
	if d.failEvery > 0 && n%int64(d.failEvery) == 0 {
		d.failed.Add(1)
		return nil, errors.New("stream reset")
	}
	return res, nil
}

// hotHostWeb is a synthetic web of a few large hosts: most of the crawl is
// hot hosts.
func hotHostWeb(t *testing.T) *synthweb.Web {
	return startSynthWeb(t, synthweb.Config{Seed: 11, Hosts: 3, PagesPerHost: 80, CrossHostFraction: 0.1})
}

// delegatingPair is an owner crawler whose hot hosts go to a helper
// crawler through d. Both report links to the owner's seen set, as a
// swarm routes them to their owner.
func delegatingPair(t *testing.T, w *synthweb.Web, delay time.Duration, d *directDelegator) (owner, helper *Crawler, ring *ringStandIn) {
	t.Helper()
	base := DefaultConfig()
	base.Delay = delay
	base.Workers = 4
	base.MaxDepth = 1000 // see TestCrawlSyntheticWeb
	base.Proxy = w.Proxy()
	ring = &ringStandIn{seen: map[uint64]int{}}

	ocfg := base
	ocfg.UserAgent = "swarmcrawl/0.1 (owner)"
	ocfg.HotQueue = 10
	ocfg.DelegateBatch = 8
	ocfg.Delegate = d
	owner = newTestCrawler(t, ocfg, nil, ring)
	ring.c = owner

	// The helper is the owner's replica, but it takes robots.txt from the
	// host, not from the owner: it fetches it itself.
	hcfg := base
	hcfg.UserAgent = "swarmcrawl/0.1 (helper)"
	helper = newTestCrawler(t, hcfg, nil, ring)
	d.helper = helper
	return owner, helper, ring
}

// checkCrawl asserts what a site operator and a search engine care about:
// every page fetched once, robots.txt obeyed and fetched first, never two
// requests to a host at once nor closer than delay.
func checkCrawl(t *testing.T, w *synthweb.Web, delay time.Duration, maxDups int) {
	t.Helper()
	token := "swarmcrawl"
	truth := w.GroundTruth(token)
	if len(truth) < 150 {
		t.Fatalf("ground truth has only %d URLs", len(truth))
	}
	reportAll(t, "missing", w.Missing(token))
	if d := w.Duplicates(); len(d) > maxDups {
		reportAll(t, "duplicate", d)
	}
	reportAll(t, "robots violation", w.CheckRobots(token))
	reportAll(t, "robots.txt not first", w.CheckRobotsFirst())
	reportAll(t, "politeness violation", w.CheckPoliteness(delay))
	for host, n := range w.MaxInFlightPerHost() {
		if n > 1 {
			t.Errorf("%d requests to %s at once", n, host)
		}
	}
}

// TestDelegateHotHosts crawls a web of large hosts with an owner that
// delegates: the helper fetches most pages, yet each host sees one request
// at a time with the delay between them, the helper fetches each host's
// robots.txt once, itself, before its first page there (it does not take
// the owner's word for it), and the owner holds every fetched URL's
// metadata.
func TestDelegateHotHosts(t *testing.T) {
	w := hotHostWeb(t)
	const delay = 20 * time.Millisecond
	d := &directDelegator{}
	owner, helper, ring := delegatingPair(t, w, delay, d)
	ring.seed(w.Seeds())
	crawlUntilIdle(t, owner, 60*time.Second)
	checkCrawl(t, w, delay, 0)

	byHelper := 0
	robotsByHelper := map[string]int{}
	for _, r := range w.Log() {
		if !strings.Contains(r.UserAgent, "(helper)") {
			continue
		}
		if r.Path == "/robots.txt" {
			robotsByHelper[r.Host]++
			continue
		}
		byHelper++
		if robotsByHelper[r.Host] == 0 {
			t.Errorf("the helper requested %s%s before fetching the host's robots.txt", r.Host, r.Path)
		}
	}
	os, hs := owner.Stats(), helper.Stats()
	if byHelper < len(w.Log())/2 {
		t.Errorf("the helper made %d of %d requests; hot hosts should mostly go to it", byHelper, len(w.Log()))
	}
	for host, n := range robotsByHelper {
		if n > 1 {
			t.Errorf("the helper fetched robots.txt of %s %d times, want once", host, n)
		}
	}
	if os.Delegated != hs.Helped || hs.Helped != int64(byHelper) {
		t.Errorf("owner Delegated %d, helper Helped %d, helper requests %d: want all equal", os.Delegated, hs.Helped, byHelper)
	}
	if os.DelegateFails != 0 || hs.Fetched != hs.Helped {
		t.Errorf("DelegateFails %d, helper Fetched %d (want 0 and Helped)", os.DelegateFails, hs.Fetched)
	}
	for _, u := range w.GroundTruth("swarmcrawl") {
		key, hash := owner.keys(u)
		if m, ok, err := owner.db.URLMeta(key, hash); err != nil || !ok || m.Fetches != 1 {
			t.Errorf("owner's metadata of %s: %+v, %v, %v (want one fetch)", u, m, ok, err)
			break
		}
	}
	if hs.Queued != 0 || os.Scheduled != int64(len(w.GroundTruth("swarmcrawl"))) {
		t.Errorf("helper queue %d (want 0), owner's recrawl schedule %d (want one per page)", hs.Queued, os.Scheduled)
	}
	t.Logf("%d requests, %d by the helper in %d batches; owner %d fetched itself", len(w.Log()), byHelper, d.calls.Load(), os.Fetched)
}

// TestDelegateRestOfGap: a helper that waits only what is left of the gap
// when a batch arrives (Batch.SinceLast) keeps the host's gap from the
// owner's requests and the previous batch's (every page is seeded at once,
// so a host's first leases are hot already), and most batches go out with
// the host's turn come, so their helper does not wait a gap the host has
// already had.
func TestDelegateRestOfGap(t *testing.T) {
	w := hotHostWeb(t)
	const delay = 50 * time.Millisecond
	d := &directDelegator{restOfGap: true}
	owner, _, ring := delegatingPair(t, w, delay, d)
	ring.seed(w.GroundTruth("swarmcrawl"))
	crawlUntilIdle(t, owner, 60*time.Second)
	checkCrawl(t, w, delay, 0)
	if calls, came := d.calls.Load(), d.turnCame.Load(); calls < 4 || came*2 < calls {
		t.Errorf("%d of %d batches sent with the host's turn come (SinceLast >= Gap); want most", came, calls)
	}
}

// TestDelegateLostReplies loses every third reply after the helper
// fetched the batch: nothing is lost, the owner fetches those tasks again
// (the only duplicates), and politeness holds across the failure.
func TestDelegateLostReplies(t *testing.T) {
	w := hotHostWeb(t)
	const delay = 20 * time.Millisecond
	d := &directDelegator{failEvery: 3}
	owner, _, ring := delegatingPair(t, w, delay, d)
	ring.seed(w.Seeds())
	crawlUntilIdle(t, owner, 60*time.Second)
	checkCrawl(t, w, delay, int(d.failed.Load())*8)
	if got, want := owner.Stats().DelegateFails, d.failed.Load(); got != want || want == 0 {
		t.Errorf("DelegateFails = %d, want the %d lost replies (> 0)", got, want)
	}
	if n := len(w.Duplicates()); n == 0 {
		t.Error("no page fetched twice: the lost replies were not lost")
	}
	t.Logf("%d batches, %d replies lost, %d duplicates", d.calls.Load(), d.failed.Load(), len(w.Duplicates()))
}

// TestDelegateNoHelper: with no helper around, an owner fetches its hot
// hosts itself.
func TestDelegateNoHelper(t *testing.T) {
	w := hotHostWeb(t)
	const delay = 10 * time.Millisecond
	d := &directDelegator{noHelper: true}
	owner, helper, ring := delegatingPair(t, w, delay, d)
	ring.seed(w.Seeds())
	crawlUntilIdle(t, owner, 60*time.Second)
	checkCrawl(t, w, delay, 0)
	if s := owner.Stats(); s.Delegated != 0 || helper.Stats().Requests != 0 || s.Fetched != int64(len(w.GroundTruth("swarmcrawl"))) {
		t.Errorf("owner fetched %d, delegated %d; helper requests %d", s.Fetched, s.Delegated, helper.Stats().Requests)
	}
	if d.calls.Load() == 0 {
		t.Error("the owner never asked for a helper")
	}
}

// TestFetchBatchGapBudgetRetryAfter drives a helper directly: it keeps
// the batch's gap between requests, starts none past the budget, and stops
// at a Retry-After, reporting it.
func TestFetchBatchGapBudgetRetryAfter(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<p>hello</p>")
	})
	c := newTestCrawler(t, testConfig(), nil, nil)
	host, _ := urls.HostOf(srv.URL + "/")
	const gap, budget = 40 * time.Millisecond, 200 * time.Millisecond
	batch := func(budget time.Duration, paths ...string) *Batch {
		b := &Batch{Host: host, Gap: gap, Budget: budget, Wait: 5 * time.Second}
		for _, p := range paths {
			b.Tasks = append(b.Tasks, BatchTask{Task: frontier.Task{URL: srv.URL + p}})
		}
		return b
	}
	var paths []string
	for i := range 12 {
		paths = append(paths, fmt.Sprintf("/%d", i+1))
	}
	res, err := c.FetchBatch(context.Background(), batch(budget, paths...))
	if err != nil {
		t.Fatal(err)
	}
	// The helper has no copy of the host's robots.txt: it fetches it
	// first, under the batch's gap. At a 40ms gap, 12 pages need at least
	// 480ms after it: the 200ms budget stops the batch after at most 5
	// pages (fewer on a slow machine).
	all := srv.log()
	if len(all) == 0 || all[0].path != "/robots.txt" || srv.count("/robots.txt") != 1 {
		t.Fatalf("requests %v: want robots.txt once, first", all)
	}
	hits := all[1:]
	if len(res.Results) != len(hits) || len(hits) == 0 || len(hits) > 5 {
		t.Fatalf("%d outcomes, %d page requests: want 1 to 5 within a %v budget at a %v gap", len(res.Results), len(hits), budget, gap)
	}
	for i, g := range gaps(all) {
		if g < gap {
			t.Errorf("requests %d and %d %v apart, under the %v gap", i, i+1, g, gap)
		}
	}
	if late := all[len(all)-1].at.Sub(all[0].at); late > budget+50*time.Millisecond {
		t.Errorf("the last request came %v after the first, past the %v budget", late, budget)
	}
	for i, r := range res.Results {
		if !r.Finished || r.Outcome.Meta == nil || r.Outcome.Meta.Status != 200 || r.Outcome.Meta.URL != srv.URL+fmt.Sprintf("/%d", i+1) {
			t.Errorf("outcome %d: %+v", i, r)
		}
	}
	if !res.Contacted || res.SinceLast < 0 || res.SinceLast > time.Second || res.RetryAfter != 0 {
		t.Errorf("result %+v", res)
	}

	res, err = c.FetchBatch(context.Background(), batch(3*time.Second, "/a", "/busy", "/b"))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Results) != 2 || res.RetryAfter != 7*time.Second || res.Results[1].Finished || res.Results[1].Outcome.Reschedule == nil {
		t.Errorf("after a 503 with Retry-After: %d outcomes, RetryAfter %v, outcome %+v; want a stop after a retry", len(res.Results), res.RetryAfter, res.Results)
	}
	if s := c.Stats(); s.Helped != int64(len(hits)+2) || s.Queued != 0 {
		t.Errorf("Helped %d, Queued %d", s.Helped, s.Queued)
	}
}

// TestFetchBatchRefuses: a malformed batch is refused before any request,
// and a helper with every slot taken answers ErrBusy.
func TestFetchBatchRefuses(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hang" {
			<-release
		}
	})
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	cfg := testConfig()
	cfg.Workers = 1
	c := newTestCrawler(t, cfg, nil, nil)
	host, _ := urls.HostOf(srv.URL + "/")
	good := func() *Batch {
		return &Batch{Host: host, Gap: 0, Budget: time.Second, Wait: 3 * time.Second, Tasks: []BatchTask{{Task: frontier.Task{URL: srv.URL + "/x"}}}}
	}
	cases := map[string]func(b *Batch){
		"no tasks":       func(b *Batch) { b.Tasks = nil },
		"too many tasks": func(b *Batch) { b.Tasks = make([]BatchTask, MaxDelegateTasks+1) },
		"other host":     func(b *Batch) { b.Tasks[0].Task.URL = "http://elsewhere.test/" },
		"not normalised": func(b *Batch) { b.Tasks[0].Task.URL = srv.URL + "/a/../x#frag" },
		"wait <= budget": func(b *Batch) { b.Wait = b.Budget },
		"negative gap":   func(b *Batch) { b.Gap = -time.Second },
		"negative since": func(b *Batch) { b.SinceLast = -time.Second },
		"endless wait":   func(b *Batch) { b.Wait = time.Hour },
		"negative depth": func(b *Batch) { b.Tasks[0].Task.Depth = -1 },
	}
	for name, mutate := range cases {
		b := good()
		mutate(b)
		if _, err := c.FetchBatch(context.Background(), b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if n := len(srv.log()); n != 0 {
		t.Fatalf("%d requests for refused batches", n)
	}

	hang := good()
	hang.Tasks[0].Task.URL = srv.URL + "/hang"
	done := make(chan error, 1)
	go func() {
		_, err := c.FetchBatch(context.Background(), hang)
		done <- err
	}()
	for srv.count("/hang") == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, err := c.FetchBatch(context.Background(), good()); !errors.Is(err, ErrBusy) {
		t.Errorf("second batch with one slot: %v, want ErrBusy", err)
	}
	once.Do(func() { close(release) })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestRebuildOutcome: the owner takes only what the fetch found from a
// helper's outcome; identity, keys and depth stay the owner's, and a retry
// without a reschedule is refused.
func TestRebuildOutcome(t *testing.T) {
	c := newTestCrawler(t, testConfig(), nil, nil)
	task := frontier.Task{URL: "http://a.test/p", Depth: 3, Redirects: 1, Attempts: 1}
	var f fetch
	f.task = task
	f.ringKey, f.urlHash = c.keys(task.URL)
	now := c.now()

	evil := &frontier.Task{URL: "http://evil.test/", Depth: 0, Attempts: 99}
	o, term, ok := c.rebuildOutcome(f, TaskResult{Outcome: frontier.Outcome{Reschedule: evil, At: now.Add(time.Minute)}})
	if !ok || term || o.Reschedule.URL != task.URL || o.Reschedule.Attempts != 2 || o.Reschedule.Depth != 3 || !o.At.Equal(now.Add(time.Minute)) {
		t.Errorf("retry adopted as %+v %+v, terminal %v ok %v", o, o.Reschedule, term, ok)
	}
	if _, _, ok := c.rebuildOutcome(f, TaskResult{}); ok {
		t.Error("a retry without a reschedule was adopted")
	}
	dead := &store.DeadLetter{URL: "http://evil.test/", RingKey: 1, URLHash: 2, Kind: "timeout", Attempts: 4}
	meta := &store.URLMeta{URL: "http://evil.test/", Status: 200, Fetches: 1}
	o, term, ok = c.rebuildOutcome(f, TaskResult{Finished: true, Outcome: frontier.Outcome{Dead: dead, Meta: meta, Reschedule: evil, At: now.Add(1000 * 24 * time.Hour)}})
	switch {
	case !ok || !term:
		t.Fatalf("terminal outcome refused")
	case o.Dead.URL != task.URL || o.Dead.RingKey != f.ringKey || o.Dead.URLHash != f.urlHash || o.Dead.Depth != 3 || o.Dead.Kind != "timeout":
		t.Errorf("dead letter adopted as %+v", o.Dead)
	case o.Meta.URL != task.URL || o.Meta.Status != 200:
		t.Errorf("metadata adopted as %+v", o.Meta)
	case o.Reschedule.URL != task.URL || !o.Reschedule.Recrawl || o.Reschedule.Attempts != 0:
		t.Errorf("recrawl adopted as %+v", o.Reschedule)
	case o.At.After(now.Add(c.cfg.MaxRecrawl + time.Minute)):
		t.Errorf("recrawl at %v, beyond MaxRecrawl", o.At)
	}
}

// TestFetchBatchObeysRobotsAndOwnGap is the attack of a planted owner: a
// batch of 20 URLs of a host whose robots.txt says "Disallow: /", with a
// zero gap. The helper fetches robots.txt itself (it has no copy), makes
// no page request, and reports the tasks dropped. On a host that allows
// everything, a zero gap in the batch still gets the helper's own delay
// between requests.
func TestFetchBatchObeysRobotsAndOwnGap(t *testing.T) {
	disallowAll := true
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			if disallowAll {
				fmt.Fprint(w, "User-agent: *\nDisallow: /\n")
			}
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<p>hello</p>")
	})
	host, _ := urls.HostOf(srv.URL + "/")
	batch := func() *Batch {
		b := &Batch{Host: host, Gap: 0, Budget: 3 * time.Second, Wait: 10 * time.Second}
		for i := range 20 {
			b.Tasks = append(b.Tasks, BatchTask{Task: frontier.Task{URL: fmt.Sprintf("%s/p/%d", srv.URL, i)}})
		}
		return b
	}

	c := newTestCrawler(t, testConfig(), nil, nil)
	res, err := c.FetchBatch(context.Background(), batch())
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.log(); len(got) != 1 || got[0].path != "/robots.txt" {
		t.Fatalf("requests to a host that disallows everything: %v, want robots.txt alone", got)
	}
	if len(res.Results) != 20 {
		t.Fatalf("%d results, want all 20 tasks reported dropped", len(res.Results))
	}
	for i, r := range res.Results {
		if !r.Finished || r.Outcome.Meta != nil || r.Outcome.Reschedule != nil || r.Outcome.Dead != nil {
			t.Errorf("result %d: %+v, want dropped", i, r)
		}
	}

	disallowAll = false
	cfg := testConfig()
	cfg.Delay = 30 * time.Millisecond
	c = newTestCrawler(t, cfg, nil, nil)
	b := batch()
	b.Tasks = b.Tasks[:5]
	if _, err := c.FetchBatch(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	hits := srv.log()[1:] // after the first helper's robots.txt
	if len(hits) != 6 {
		t.Fatalf("%d requests, want robots.txt and 5 pages", len(hits))
	}
	for i, g := range gaps(hits) {
		if g < cfg.Delay {
			t.Errorf("requests %d and %d %v apart: the helper went under its own %v delay", i, i+1, g, cfg.Delay)
		}
	}
}

// TestFetchBatchesOfOneHostShareTheGap: however many batches of one host
// an owner (or an attacker naming itself owner) sends a helper, at once or
// one after the other, the helper never goes under its own gap for the
// host: a second batch while one runs is refused busy, and the next
// batch's first request waits the gap after the previous batch's last.
// (The adversary suite found two batches at once fetching side by side,
// 72 politeness violations: TestAdversaryConcurrentFetchBatches.)
func TestFetchBatchesOfOneHostShareTheGap(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			return
		}
		if r.URL.Path == "/p/0" {
			<-release // hold the first batch inside its first page
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<p>hello</p>")
	})
	host, _ := urls.HostOf(srv.URL + "/")
	batch := func(from, n int) *Batch {
		b := &Batch{Host: host, Gap: 0, Budget: 3 * time.Second, Wait: 10 * time.Second}
		for i := from; i < from+n; i++ {
			b.Tasks = append(b.Tasks, BatchTask{Task: frontier.Task{URL: fmt.Sprintf("%s/p/%d", srv.URL, i)}})
		}
		return b
	}
	cfg := testConfig()
	cfg.Delay = 40 * time.Millisecond
	c := newTestCrawler(t, cfg, nil, nil)

	first := make(chan error, 1)
	go func() {
		_, err := c.FetchBatch(context.Background(), batch(0, 3))
		first <- err
	}()
	// Wait until the first batch is inside its first page, then send a
	// second batch of the same host.
	for i := 0; ; i++ {
		if hits := srv.log(); len(hits) > 0 && hits[len(hits)-1].path == "/p/0" {
			break
		}
		if i > 500 {
			once.Do(func() { close(release) })
			t.Fatal("the first batch never reached its first page")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, err := c.FetchBatch(context.Background(), batch(10, 3))
	once.Do(func() { close(release) })
	if !errors.Is(err, ErrBusy) {
		t.Errorf("a second batch of the host while one runs: err = %v, want ErrBusy", err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// The next batch, right after: its first request waits the gap.
	if _, err := c.FetchBatch(context.Background(), batch(20, 3)); err != nil {
		t.Fatal(err)
	}
	hits := srv.log()
	if len(hits) != 7 {
		t.Fatalf("%d requests, want robots.txt and 6 pages: %v", len(hits), hits)
	}
	for i, g := range gaps(hits) {
		if g < cfg.Delay {
			t.Errorf("requests %s and %s %v apart: the helper went under its own %v delay", hits[i].path, hits[i+1].path, g, cfg.Delay)
		}
	}
}
