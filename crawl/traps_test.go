package crawl

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
)

// crawlTrapWeb crawls a synthetic web with trap hosts, with no useful
// depth limit (the traps must be stopped by their detection, not by the
// depth), a page budget that bounds a trap that is not detected, and
// robots.txt Crawl-delays capped at the delay (what is fetched does not
// depend on them; a 1 s delay would make a test of seconds slow).
func crawlTrapWeb(t *testing.T, cfg synthweb.Config) (*synthweb.Web, *Crawler) {
	t.Helper()
	w := startSynthWeb(t, cfg)
	c := DefaultConfig()
	c.Delay = 2 * time.Millisecond
	c.MaxDepth = 1000
	c.MaxPagesPerHost = 300
	c.MaxCrawlDelay = c.Delay
	c.MaxRecrawl = None
	c.Proxy = w.Proxy()
	ring := &ringStandIn{seen: map[uint64]int{}}
	cr := newTestCrawler(t, c, nil, ring)
	ring.c = cr
	ring.seed(w.Seeds())
	crawlUntilIdle(t, cr, 2*time.Minute)
	return w, cr
}

// TestTrapHostDetected crawls an 80-host web with one trap host, an
// endless calendar, with no depth limit to speak of: every reachable page
// is fetched once, the calendar is judged a trap with its reason, no
// other host's pattern is, and the calendar costs at most 1.5% of the
// crawl's page fetches (issue 31 asks 2%; 10 of 555, 1.8%, with TrapDates
// and TrapRun at 10; 5 of 550 at 5; 1 of 546 since its first page's
// links to the days before and after judge it).
func TestTrapHostDetected(t *testing.T) {
	w, c := crawlTrapWeb(t, synthweb.Config{Seed: 1, Hosts: 80, TrapHosts: 1})
	token := ProductToken(DefaultConfig().UserAgent)
	reportAll(t, "missing", w.Missing(token))
	reportAll(t, "duplicate", w.Duplicates())
	reportAll(t, "unexpected", w.Unexpected(token))
	trap, pages := w.TrapRequests()
	if trap*1000 > 15*pages {
		t.Errorf("%d trap fetches of %d page fetches, over 1.5%% (the issue asks at most 2%%)", trap, pages)
	}
	s := c.Stats()
	var calendar string
	for _, h := range w.Hosts() {
		if w.TrapKindOf(h) == synthweb.TrapCalendar {
			calendar = h
		}
	}
	if len(s.Traps) == 0 {
		t.Fatalf("no trap judged; stats %+v", s)
	}
	var cut int64
	for _, r := range s.Traps {
		if r.Host != calendar || r.Reason == "" {
			t.Errorf("trap %+v, want only the calendar host %s, with a reason", r, calendar)
		}
		cut += r.Links
	}
	if cut == 0 {
		t.Errorf("traps %+v cut no link", s.Traps)
	}
	t.Logf("%d trap fetches of %d page fetches; traps %+v", trap, pages, s.Traps)
}

// TestTrapKindsDetected: on a dense web with one trap host of each kind
// (40 hosts, 5 of them trap hosts), each endless section stops after a
// handful of fetches, for the reason its kind calls for, the traps cost
// at most 2% of the page fetches (issue 31; 28 of 310, 9%, when each
// signal waited for its threshold; 5 of 287 with calendar navigation,
// counters and chains judged at sight or at the second page), and nothing
// reachable is lost or fetched twice (the session host's ids are stripped
// by normalisation).
func TestTrapKindsDetected(t *testing.T) {
	w, c := crawlTrapWeb(t, synthweb.Config{Seed: 2, Hosts: 40, TrapHosts: 5})
	token := ProductToken(DefaultConfig().UserAgent)
	reportAll(t, "missing", w.Missing(token))
	reportAll(t, "duplicate", w.Duplicates())
	reportAll(t, "unexpected", w.Unexpected(token))
	signals := map[string]map[string]bool{}
	for _, r := range c.Stats().Traps {
		if signals[r.Host] == nil {
			signals[r.Host] = map[string]bool{}
		}
		signals[r.Host][r.Signal] = true
	}
	trapsOf := map[string]int{}
	for _, r := range w.Log() {
		if w.IsTrapURL(r.URL) {
			trapsOf[r.Host]++
		}
	}
	want := map[synthweb.TrapKind][]string{
		synthweb.TrapCalendar:   {"dates", "run"},
		synthweb.TrapPagination: {"run"},
		synthweb.TrapDeep:       {"growth"},
		synthweb.TrapFacets:     {"growth"},
	}
	for _, h := range w.Hosts() {
		kind := w.TrapKindOf(h)
		if kind == synthweb.TrapNone || kind == synthweb.TrapSession {
			if len(signals[h]) > 0 {
				t.Errorf("%s (%s): traps judged %v", h, kind, signals[h])
			}
			continue
		}
		found := false
		for _, sig := range want[kind] {
			found = found || signals[h][sig]
		}
		if !found || trapsOf[h] > 3 {
			t.Errorf("%s (%s): judged %v, %d trap fetches; want one of %v within 3", h, kind, signals[h], trapsOf[h], want[kind])
		}
	}
	trap, pages := w.TrapRequests()
	if trap*1000 > 20*pages {
		t.Errorf("%d trap fetches of %d page fetches, over 2%%", trap, pages)
	}
	t.Logf("%d trap fetches of %d page fetches; by host %v; traps %+v", trap, pages, trapsOf, c.Stats().Traps)
}

// trapWebs are the synthetic webs with trap hosts that the repository's
// tests and benchmarks use (besides those of TestTrapHostDetected and
// TestTrapKindsDetected, and BenchmarkCrawlTrapWeb's 1,000-host web,
// 0.085% there), with their trap fetches of page fetches in
// crawlTrapWeb at the time of writing: each endless section's first page,
// and a pagination's second.
var trapWebs = []struct {
	name string
	cfg  synthweb.Config
}{
	{"dense-3", synthweb.Config{Seed: 3, Hosts: 40, TrapHosts: 5}},                                                        // 5 of 257, 1.95%
	{"dense-4", synthweb.Config{Seed: 4, Hosts: 40, TrapHosts: 5}},                                                        // 5 of 293, 1.71%
	{"synthweb-traps", synthweb.Config{Seed: 1, Hosts: 60, HotHosts: 2, HotPages: 80, TrapHosts: 10, CrawlDelayHosts: 6}}, // 10 of 593, 1.69%
	{"synthweb-hot-traps", synthweb.Config{Seed: 2, Hosts: 60, HotHosts: 2, HotPages: 100, TrapHosts: 5}},                 // 5 of 606, 0.83%
	{"synthweb-serve", synthweb.Config{Seed: 4, Hosts: 40, TrapHosts: 5, HotHosts: 1, HotPages: 60}},                      // 5 of 343, 1.46%
	{"parse", parseWeb}, // 3 of 593, 0.51%
	{"1001-hosts", synthweb.Config{Seed: 5, Hosts: 1001, PagesPerHost: 2, Seeds: 10, PageBytes: 2048, TrapHosts: 5}}, // 5 of 1,878, 0.27%
}

// TestDenseTrapWebs: every synthetic web with trap hosts that the
// repository uses spends at most 2% of its page fetches on traps (issue
// 31) and loses no reachable page. A web denser still, 60 hosts of which
// 10 are trap hosts and none hot, spends 2.2 to 2.6% (seeds 1 to 4: 10 of
// 391, 446, 412, 423): the first pages of its 8 endless sections alone,
// which no signal can spare without skipping a link into a pattern from
// elsewhere, are 1.8 to 2.05%, and its two paginations cost a second page
// each (see docs/architecture.md, "Traps").
func TestDenseTrapWebs(t *testing.T) {
	token := ProductToken(DefaultConfig().UserAgent)
	for _, tw := range trapWebs {
		t.Run(tw.name, func(t *testing.T) {
			w, _ := crawlTrapWeb(t, tw.cfg)
			reportAll(t, "missing", w.Missing(token))
			trap, pages := w.TrapRequests()
			if trap*1000 > 20*pages {
				t.Errorf("%d trap fetches of %d page fetches, over 2%%", trap, pages)
			}
			t.Logf("%d trap fetches of %d page fetches", trap, pages)
		})
	}
}

// TestSessionParameterStripped: a site that puts a session id of a name
// normalisation does not know into every link is served each page once
// under one id; when a second id of the same page shows up with the same
// content the parameter is judged a session id and stripped from the
// host's links, so the site's pages are fetched about once each, not
// once per id.
func TestSessionParameterStripped(t *testing.T) {
	n := 0
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robotsAllowAll(w, r) {
			return
		}
		w.Header().Set("Content-Type", "text/html")
		page := r.URL.Path
		fmt.Fprintf(w, "<html><body><p>the page %s of a site with sessions in its links</p>", page)
		for _, p := range []string{"/", "/a", "/b", "/c", "/d"} {
			n++
			fmt.Fprintf(w, `<a href="%s?visit=%016x">%s</a> `, p, 0xabc0000000000+n, p)
		}
		fmt.Fprint(w, "</body></html>")
	})
	rec := newRecorder()
	cfg := testConfig()
	cfg.Delay = None
	cfg.Workers = 1
	cfg.MaxPagesPerHost = 100
	ring := &ringStandIn{seen: map[uint64]int{}, inScope: func(string) bool { return true }}
	c := newTestCrawler(t, cfg, rec, ring)
	ring.c = c
	ring.seed([]string{srv.URL + "/"})
	crawlUntilIdle(t, c, 10*time.Second)
	byPath := map[string]int{}
	for _, h := range srv.log() {
		if h.path != "/robots.txt" {
			p, _, _ := strings.Cut(h.path, "?")
			byPath[p]++
		}
	}
	total := 0
	for _, k := range byPath {
		total += k
	}
	if len(byPath) != 5 || total > 8 {
		t.Errorf("requests by path %v: want the 5 pages, at most 8 requests", byPath)
	}
	s := c.Stats()
	if len(s.Traps) != 1 || s.Traps[0].Signal != "session" || s.Traps[0].Pattern != "?visit=" {
		t.Errorf("traps %+v, want the session parameter visit", s.Traps)
	}
}

// TestTrapSignals checks the URL features the detector reads.
func TestTrapSignals(t *testing.T) {
	for _, tc := range []struct{ in, shape, dates string }{
		{"/events/2026-01-02", "/events/{date}", "2026-01-02"},
		{"/cal?d=2026-1-2&view=day", "/cal?d={date}&view=day", "2026-1-2"},
		{"/2026/01/02/post-title", "/{date}/post-title", "2026/01/02"},
		{"/archive/20260102.html", "/archive/{date}.html", "20260102"},
		{"/month/2026-12", "/month/{date}", "2026-12"},
		{"/p/12345678", "/p/12345678", ""},     // not a valid date
		{"/p/120260102", "/p/120260102", ""},   // inside a longer number
		{"/p/2026-13-01", "/p/2026-13-01", ""}, // month 13
		{"/p/1", "/p/1", ""},
	} {
		if shape, dates := dateShape(tc.in); shape != tc.shape || dates != tc.dates {
			t.Errorf("dateShape(%q) = %q, %q; want %q, %q", tc.in, shape, dates, tc.shape, tc.dates)
		}
	}
	for _, tc := range []struct {
		from, to string
		level    int
		grows    bool
	}{
		{"/tree/n1/", "/tree/n1/n2/", 3, true},
		{"/shop?f=1", "/shop?f=1&f=2", 3, true},
		{"/", "/a/b/", 2, false},
		{"/a/b/", "/a/c/", 2, false},
		{"/a/", "/a/", 1, false},
	} {
		if level, grows := growth(tc.from, tc.to); level != tc.level || grows != tc.grows {
			t.Errorf("growth(%q, %q) = %d, %v; want %d, %v", tc.from, tc.to, level, grows, tc.level, tc.grows)
		}
		if got := extends(tc.from, tc.to); got != tc.grows {
			t.Errorf("extends(%q, %q) = %v, want %v", tc.from, tc.to, got, tc.grows)
		}
	}
	for _, tc := range []struct {
		from, to string
		want     bool
	}{
		{"/tree/n1/", "/tree/n1/n2/", true},
		{"/shop?f=1", "/shop?f=1&f=2", true},
		{"/shop?f=1&g=2", "/shop?f=1&g=2&g=3", true},
		{"/2026/", "/2026/01/", false},    // a year's months: no letters
		{"/docs/", "/docs/intro/", false}, // another name
		{"/p/n1/", "/p/n1/n1/", false},    // repeated, left to MaxRepeatedSegments
		{"/list?cat=1", "/list?cat=1&page=2", false},
		{"/tree/n1/", "/tree/n1/n2/n3/", false}, // two levels at once
	} {
		if got := counting(tc.from, tc.to); got != tc.want {
			t.Errorf("counting(%q, %q) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
	for _, tc := range []struct {
		from, to string
		want     bool
	}{
		{"/a/", "/a/a/", true},
		{"/x/y", "/x/y/y", true},
		{"/x/y/?q=1", "/x/y/y/", true},
		{"/", "/a/", false},
		{"/a/b/", "/a/b/a/b/", true},
		{"/x/a/b/", "/x/a/b/a/b/", true},
		{"/x/ab/", "/x/ab/b/", false},
		{"/a/b/", "/a/b/ab/", false},
		{"/a/", "/a/a/a/", false}, // two levels at once, left to MaxRepeatedSegments
		{"/a/", "/a/b/", false},
		{"/ab/", "/ab/b/", false},
		{"/b/", "/ab/b/", false},
		{"/a/", "/a/", false},
	} {
		if got := repeating(tc.from, tc.to); got != tc.want {
			t.Errorf("repeating(%q, %q) = %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
	links := func(u ...string) []frontier.Task {
		var ts []frontier.Task
		for _, x := range u {
			ts = append(ts, frontier.Task{URL: "http://h.test" + x})
		}
		return ts
	}
	for _, tc := range []struct {
		page  string
		links []frontier.Task
		want  bool
	}{
		{"/events/2026-01-01", links("/events/2025-12-31", "/events/2026-01-02"), true},
		{"/cal?d=20260301", links("/cal?d=20260228", "/cal?d=20260302", "/"), true},
		{"/m/2026-01", links("/m/2025-12", "/m/2026-02"), true},
		{"/events/2026-01-01", links("/events/2026-01-02", "/events/2026-01-03"), false}, // no day before
		{"/events/2026-01-01", links("/news/2025-12-31", "/events/2026-01-02"), false},   // another shape
		{"/2026/01/", links("/2026/01/01/", "/2026/01/02/"), false},                      // a month's days
	} {
		shape, dates := dateShape(tc.page)
		if got := calendarNav("http://h.test", shape, dates, tc.links); got != tc.want {
			t.Errorf("calendarNav(%s) = %v, want %v", tc.page, got, tc.want)
		}
	}
	for _, pair := range [][2]string{{"/p/1", "/p/22"}, {"/p/1", "/p/a"}, {"/a?page=1", "/a?page=10&x"}, {"/n1/", "/n12/"}, {"/1", "/12x"}, {"", ""}} {
		if got, want := sameNumberShape(pair[0], pair[1]), numberShape(pair[0]) == numberShape(pair[1]); got != want {
			t.Errorf("sameNumberShape(%q, %q) = %v, want %v", pair[0], pair[1], got, want)
		}
	}
	if got := numberShape("/list?cat=12&page=3"); got != "/list?cat=#&page=#" {
		t.Errorf("numberShape = %q", got)
	}
	if key, param, value, ok := tokenParam("/p?x=1&sid2=abcdef0123456789ab"); !ok || key != "/p?x=1" || param != "sid2" || value != "abcdef0123456789ab" {
		t.Errorf("tokenParam = %q %q %q %v", key, param, value, ok)
	}
	if _, _, _, ok := tokenParam("/p?page=12345678901234567"); ok {
		t.Error("a long number taken for a token")
	}
}

// TestTrapDetectorCutsOnlyTheChain: once a date pattern is judged a trap,
// links from its pages to its pages are cut, but links into it from
// another page, from a month's page to its days, and out of it to other
// pages are followed.
func TestTrapDetectorCutsOnlyTheChain(t *testing.T) {
	cfg := DefaultConfig()
	d := newTrapDetector(&cfg)
	day := func(i int) string {
		return "http://h.test/events/" + time.Date(2026, 1, 1+i, 0, 0, 0, 0, time.UTC).Format("2006-01-02")
	}
	follow := func(from string, to ...string) int {
		var ts []frontier.Task
		for _, u := range to {
			ts = append(ts, frontier.Task{URL: u})
		}
		return len(d.filter(from, 0, ts))
	}
	for i := 0; i < cfg.TrapDates; i++ {
		if follow(day(i), day(i+1)) != 1 {
			t.Fatalf("day %d: link cut before the limit", i)
		}
	}
	if follow(day(20), day(21)) != 0 {
		t.Error("the calendar's own links are still followed past the limit")
	}
	if follow("http://h.test/events/2026-01", day(31), day(32)) != 2 {
		t.Error("a month's links to its days were cut")
	}
	if follow("http://h.test/", day(30)) != 1 || follow(day(30), "http://h.test/about", "http://other.test/"+day(1)[len("http://h.test/"):]) != 2 {
		t.Error("a link into the pattern, or out of it, was cut")
	}
	_, links, reports := d.stats()
	if links != 1 || len(reports) != 1 || reports[0].Signal != "dates" || reports[0].Pattern != "/events/{date}" {
		t.Errorf("%d links cut, reports %+v", links, reports)
	}
	host, _ := urls.HostOf(day(0))
	if reports[0].Host != host {
		t.Errorf("report of host %q", reports[0].Host)
	}
}
