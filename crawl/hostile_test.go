package crawl

import (
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
)

// TestExtractLinksCap checks the cap on links taken from one page: the
// first distinct references in document order are kept, every later link
// element that is not one of them is counted, and <base> and <meta>
// further down still apply.
func TestExtractLinksCap(t *testing.T) {
	page, _ := url.Parse("http://example.com/dir/")
	var b strings.Builder
	for i := range 10 {
		fmt.Fprintf(&b, `<a href="/p%d">p</a><a href="/p0">again</a><a rel="nofollow" href="/n%d">n</a>`, i, i)
	}
	links := b.String()
	tests := []struct {
		name       string
		html       string
		max        int
		want       []string
		wantCapped int
	}{
		{"under the cap", links, 10, paths("/p", 10), 0},
		{"no cap", links, 0, paths("/p", 10), 0},
		// /p3 to /p9 are dropped; the repeats of the kept /p0 and the
		// nofollow links are not links to begin with.
		{"cap", links, 3, paths("/p", 3), 7},
		{"late base still applies", `<a href="x">x</a><a href="y">y</a><a href="z">z</a><base href="/b/">`, 2,
			[]string{"http://example.com/b/x", "http://example.com/b/y"}, 1},
		{"late meta nofollow still applies", links + `<meta name="robots" content="nofollow">`, 3, nil, 0},
	}
	for _, tt := range tests {
		got, capped, err := ExtractLinks([]byte(tt.html), page, "swarmcrawl", tt.max)
		if err != nil || !slices.Equal(got, tt.want) || capped != tt.wantCapped {
			t.Errorf("%s: links %q, capped %d, err %v; want %q, %d", tt.name, got, capped, err, tt.want, tt.wantCapped)
		}
	}

	// A page made of nothing but links.
	body := hostilePage(1<<20, false)
	total := strings.Count(string(body), "<a ")
	got, capped, err := ExtractLinks(body, page, "swarmcrawl", DefaultConfig().MaxLinksPerPage)
	if err != nil || len(got) != DefaultConfig().MaxLinksPerPage || capped != total-len(got) {
		t.Errorf("1 MiB of links: %d kept, %d capped, err %v; want %d and %d", len(got), capped, err,
			DefaultConfig().MaxLinksPerPage, total-DefaultConfig().MaxLinksPerPage)
	}
}

// paths returns "http://example.com" + prefix + 0..n-1.
func paths(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("http://example.com%s%d", prefix, i))
	}
	return out
}

// TestParseMemoryBounded checks that parsing a page written to exhaust the
// parser allocates in proportion to what is kept, not to the number of
// elements: at most a few times the body in all (the tokeniser's garbage
// included), where a tree of the page costs tens of times the body; and
// that a worker's single pass costs no more than the two it replaced.
// Allocation totals do not depend on timing or on the collector.
func TestParseMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates tens of megabytes")
	}
	body, latin1 := hostilePage(4<<20, false), hostilePage(4<<20, true)
	pageURL, _ := url.Parse("http://hostile.example/")
	// Measured: about 2 (3 under -race), parsePage's links and text
	// together 2.1 (3.7); a tree of the page costs about 40, the links
	// without a cap 25, a whole-page transcoding copy 4.5.
	const perByte = 4 // bytes allocated per body byte, at most
	for _, tt := range []struct {
		name string
		fn   func()
	}{
		{"ExtractLinks", func() { _, _, _ = ExtractLinks(body, pageURL, "swarmcrawl", DefaultConfig().MaxLinksPerPage) }},
		{"ExtractText", func() { ExtractText(body, "text/html") }},
		{"ExtractText latin1", func() { ExtractText(latin1, "text/html") }},
		{"parsePage", func() { parsePage(body, "text/html", pageURL, "swarmcrawl", DefaultConfig().MaxLinksPerPage) }},
	} {
		if got := allocated(tt.fn); got > perByte*uint64(len(body)) {
			t.Errorf("%s of a %.1f MiB link-dense page allocated %.1f MiB, over %d times the body",
				tt.name, float64(len(body))/(1<<20), float64(got)/(1<<20), perByte)
		}
	}
	// The single pass allocates no more than the links-only and the
	// text-only scans it replaced (oracle_test.go) together; for the
	// windows-1252 page, which is still read twice (see parsePage), that
	// is more than perByte under -race.
	for name, page := range map[string][]byte{"ASCII": body, "windows-1252": latin1} {
		got := allocated(func() { parsePage(page, "text/html", pageURL, "swarmcrawl", DefaultConfig().MaxLinksPerPage) })
		was := allocated(func() { _, _, _ = oracleLinks(page, pageURL, "swarmcrawl", DefaultConfig().MaxLinksPerPage) }) +
			allocated(func() { oracleContent(page, "text/html") })
		if got > was {
			t.Errorf("parsePage of the %s page allocated %.1f MiB, the two scans it replaced %.1f MiB", name, float64(got)/(1<<20), float64(was)/(1<<20))
		}
	}
}

// allocated returns the bytes the heap allocated while fn ran.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestMaxLinksPerPage crawls a page of 50 links: the crawler reports the
// first MaxLinksPerPage and counts the rest, or all of them with None.
func TestMaxLinksPerPage(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robotsAllowAll(w, r) {
			return
		}
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			for i := range 50 {
				fmt.Fprintf(w, `<a href="/l%d">%d</a>`, i, i)
			}
		}
	})
	for _, tt := range []struct {
		max, reported, capped int
	}{
		{10, 10, 40},
		{None, 50, 0},
	} {
		rec := newRecorder()
		cfg := testConfig()
		cfg.MaxLinksPerPage = tt.max
		c := newTestCrawler(t, cfg, rec, rec)
		c.Enqueue(frontier.Task{URL: srv.URL + "/"})
		crawlUntilIdle(t, c, 5*time.Second)
		p := rec.page(srv.URL + "/")
		s := c.Stats()
		if p == nil || len(p.Links) != tt.reported || s.LinksReported != int64(tt.reported) || s.LinksCapped != int64(tt.capped) {
			t.Errorf("MaxLinksPerPage %d: page %v, stats %+v; want %d links reported and %d capped",
				tt.max, describe(p), s, tt.reported, tt.capped)
			continue
		}
		if p.Links[0] != srv.URL+"/l0" || p.Links[len(p.Links)-1] != fmt.Sprintf("%s/l%d", srv.URL, tt.reported-1) {
			t.Errorf("MaxLinksPerPage %d: links %q, want the first ones in document order", tt.max, p.Links)
		}
	}
}
