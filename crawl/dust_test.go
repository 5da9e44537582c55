package crawl

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
)

// crawlDustWeb crawls a synthetic web with DUST and look-alike hosts, with
// the DUST rules on or off, and returns the web and the crawler.
func crawlDustWeb(tb testing.TB, cfg synthweb.Config, rules bool) (*synthweb.Web, *Crawler) {
	tb.Helper()
	w := startSynthWeb(tb, cfg)
	c := DefaultConfig()
	c.Delay = 2 * time.Millisecond
	c.MaxRecrawl = None
	c.Proxy = w.Proxy()
	ring := &ringStandIn{seen: map[uint64]int{}}
	cr := newTestCrawler(tb, c, nil, ring)
	if !rules {
		cr.dust = nil
	}
	ring.c = cr
	ring.seed(w.Seeds())
	crawlUntilIdle(tb, cr, 2*time.Minute)
	return w, cr
}

// dustOutcome counts a DUST crawl's variant fetches and page fetches, the
// reachable pages fetched under no form and the look-alikes not fetched.
func dustOutcome(w *synthweb.Web) (variant, pages int, lost, lookalikes []string) {
	variant, pages = w.DustRequests()
	got := w.FetchedPages()
	for _, u := range w.Within(ProductToken(DefaultConfig().UserAgent), DefaultConfig().MaxDepth) {
		if !got[u] {
			lost = append(lost, u)
		}
	}
	for _, u := range w.Lookalikes(ProductToken(DefaultConfig().UserAgent), DefaultConfig().MaxDepth) {
		if !got[u] {
			lookalikes = append(lookalikes, u)
		}
	}
	return variant, pages, lost, lookalikes
}

// dustWeb has 6 hosts of 40 pages on average that answer default
// documents, trailing slashes and idle parameters with the page's body, and
// 3 whose variants are look-alikes, pages of their own.
var dustWeb = synthweb.Config{Seed: 3, Hosts: 60, PagesPerHost: 40, DustHosts: 6, LookalikeHosts: 3}

// TestDustRules: the rules learned from fetched pairs, and the hints they
// give other hosts, keep variant fetches to at most 2% of page fetches on
// dustWeb (without them 198 of 2,160, 9.2%; with per-host rules of two
// pairs each about 120 of 2,100, 5.8%; with hints about 24 of 2,006,
// 1.2%: the first host learns each kind of rule, the others one probe
// each), lose no reachable page, fetch every look-alike, and show their
// evidence in Stats.
func TestDustRules(t *testing.T) {
	w, c := crawlDustWeb(t, dustWeb, true)
	variant, pages, lost, look := dustOutcome(w)
	reportAll(t, "lost", lost)
	reportAll(t, "look-alike not fetched", look)
	if variant*1000 > 20*pages {
		t.Errorf("%d variant fetches of %d page fetches, over 2%%", variant, pages)
	}
	s := c.Stats()
	if s.DustRules == 0 || len(s.Dust) == 0 {
		t.Fatalf("no rule learned: %+v", s.Dust)
	}
	for _, r := range s.Dust {
		if len(r.Evidence) == 0 || r.Evidence[0].Variant == r.Evidence[0].Twin {
			t.Fatalf("rule %+v without evidence", r)
		}
		if _, ok := w.VariantOf(r.Evidence[0].Variant); !ok {
			t.Errorf("rule %+v learned from %s, not a DUST variant", r, r.Evidence[0].Variant)
		}
	}
	if s.DustHinted == 0 || s.DustHinted > s.DustRewrites {
		t.Errorf("%d links rewritten by hints of %d rewritten", s.DustHinted, s.DustRewrites)
	}
	t.Logf("%d variant fetches of %d page fetches; %d look-alikes; rules %d, rewrites %d (%d by hints), dropped %d",
		variant, pages, len(w.Lookalikes(ProductToken(DefaultConfig().UserAgent), DefaultConfig().MaxDepth)), s.DustRules, s.DustRewrites, s.DustHinted, s.DustDropped)
}

// BenchmarkCrawlDustWeb crawls a 1,000-host web with 20 DUST hosts and 10
// look-alike hosts, with the rules and without, and reports the share of
// page fetches spent on variants, the reachable pages lost and the
// look-alikes not fetched.
func BenchmarkCrawlDustWeb(b *testing.B) {
	cfg := synthweb.Config{Seed: 1, Hosts: 1000, DustHosts: 20, LookalikeHosts: 10}
	for _, rules := range []bool{true, false} {
		name := "rules"
		if !rules {
			name = "no-rules"
		}
		b.Run(name, func(b *testing.B) {
			var variant, pages, lost, look int
			for b.Loop() {
				w, _ := crawlDustWeb(b, cfg, rules)
				v, p, l, lk := dustOutcome(w)
				variant, pages, lost, look = variant+v, pages+p, lost+len(l), look+len(lk)
			}
			runs := float64(b.N)
			b.ReportMetric(100*float64(variant)/float64(max(pages, 1)), "%variant")
			b.ReportMetric(float64(variant)/runs, "variant-fetches")
			b.ReportMetric(float64(pages)/runs, "page-fetches")
			b.ReportMetric(float64(lost)/runs, "lost")
			b.ReportMetric(float64(look)/runs, "lookalikes-missed")
		})
	}
}

// TestDustRuleContradicted: a rule learned from agreeing pairs rewrites
// the host's links; a later pair that differs drops it, links
// are then left as they are, and the rule is not learned again; another
// host's links are never touched; and a host that serves ever new URLs
// keeps at most dustMaxURLs digests.
func TestDustRuleContradicted(t *testing.T) {
	cfg := DefaultConfig()
	d := newDustRules(&cfg)
	d.page("http://a.test/p/1", 11)
	d.page("http://a.test/p/1?ref=x", 11)
	d.page("http://a.test/p/2?ref=y", 22)
	d.page("http://a.test/p/2", 22)
	links := []frontier.Task{{URL: "http://a.test/p/3?ref=z"}, {URL: "http://b.test/p/3?ref=z"}, {URL: "http://a.test/p/3"}}
	got := d.rewrite(append([]frontier.Task(nil), links...))
	if len(got) != 2 || got[0].URL != "http://a.test/p/3" || got[1].URL != "http://b.test/p/3?ref=z" {
		t.Fatalf("rewrite with the rule: %+v", got)
	}
	if active, _, _, _, rules := d.stats(); active != 1 || len(rules) != 1 || len(rules[0].Evidence) != 2 {
		t.Fatalf("stats: %d active, %+v", active, rules)
	}
	d.page("http://a.test/p/4", 44)
	d.page("http://a.test/p/4?ref=w", 45) // a look-alike
	got = d.rewrite(append([]frontier.Task(nil), links...))
	if len(got) != 3 || got[0].URL != links[2].URL || got[1].URL != links[0].URL {
		t.Fatalf("rewrite after a contradiction: %+v, want the links as they are, possible variants last", got)
	}
	d.page("http://a.test/p/5", 55)
	d.page("http://a.test/p/5?ref=v", 55)
	d.page("http://a.test/p/6", 66)
	d.page("http://a.test/p/6?ref=u", 66)
	if active, _, _, dropped, _ := d.stats(); active != 0 || dropped != 1 {
		t.Fatalf("after more agreeing pairs: %d active, %d dropped; want 0 and 1", active, dropped)
	}
	for i := range 2 * dustMaxURLs {
		d.page("http://c.test/x/"+strconv.Itoa(i), uint64(i+1))
	}
	if n := len(d.hosts["http://c.test"].digests); n > dustMaxURLs {
		t.Errorf("%d digests kept for one host, want at most %d", n, dustMaxURLs)
	}
}

// TestDustHints: a rule active on one host is a hint on another: a
// variant queued on a host without rules is rewritten to its twin, and
// once the twin is fetched the variant comes back as the host's probe. A
// probe that agrees lets the hints rewrite the host's variants; one that
// disagrees (a look-alike) brings back every variant the hints rewrote on
// the host, and the host takes no hint from then on: no page is lost to a
// wrong hint.
func TestDustHints(t *testing.T) {
	cfg := DefaultConfig()
	d := newDustRules(&cfg)
	d.page("http://a.test/p/1", 11)
	d.page("http://a.test/p/1?ref=x", 11)
	task := func(u string) frontier.Task { return frontier.Task{URL: u, Depth: 2} }
	rewritten := func(u, want string) {
		t.Helper()
		got, ok := d.twinOf(task(u))
		if want == "" && ok || want != "" && (!ok || got.URL != want || got.Depth != 2) {
			t.Fatalf("twinOf(%s) = %s, %v; want %q", u, got.URL, ok, want)
		}
	}
	again := func(want ...string) {
		t.Helper()
		links, tasks := d.restored()
		var got []string
		for _, l := range append(links, tasks...) {
			got = append(got, l.URL)
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("queued again %q, want %q", got, want)
		}
	}

	// A host whose variants are twins: one probe, then hints hold.
	rewritten("http://b.test/p/1?ref=y", "http://b.test/p/1")
	again()
	d.page("http://b.test/p/1", 21)
	again("http://b.test/p/1?ref=y")
	rewritten("http://b.test/p/1?ref=y", "") // the probe itself is fetched
	d.page("http://b.test/p/1?ref=y", 21)
	rewritten("http://b.test/p/2?ref=z", "http://b.test/p/2")
	again()

	// A host of look-alikes: the probe differs, the hinted variants come
	// back, and no more hints apply.
	rewritten("http://c.test/p/1?ref=y", "http://c.test/p/1")
	rewritten("http://c.test/p/2?ref=y", "http://c.test/p/2")
	d.page("http://c.test/p/1", 31)
	again("http://c.test/p/1?ref=y")
	d.page("http://c.test/p/1?ref=y", 32)
	again("http://c.test/p/2?ref=y")
	rewritten("http://c.test/p/3?ref=y", "")
	if _, _, hinted, _, _ := d.stats(); hinted != 3 {
		t.Errorf("%d links rewritten by hints, want 3", hinted)
	}
	if d.hints["param ref"] != 2 {
		t.Errorf("hint counted on %d hosts, want 2 (a.test and b.test)", d.hints["param ref"])
	}
}
