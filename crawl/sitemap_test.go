package crawl

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/internal/fuzzcorpus"
)

func gzipped(s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	zw.Close()
	return b.Bytes()
}

func urlset(entries ...string) string {
	return `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">` + strings.Join(entries, "") + `</urlset>`
}

func TestParseSitemap(t *testing.T) {
	when := time.Date(2026, 11, 1, 12, 30, 0, 0, time.UTC)
	many := make([]string, maxSitemapURLs+10)
	for i := range many {
		many[i] = fmt.Sprintf("<url><loc>http://a.test/%d</loc></url>", i)
	}
	for _, tc := range []struct {
		name    string
		body    []byte
		index   bool
		locs    []string
		lastmod []time.Time
		notOne  bool
	}{
		{name: "urlset", body: []byte(urlset(
			"<url><loc> http://a.test/1 </loc><lastmod>2026-11-01T12:30:00Z</lastmod></url>",
			"<url><loc>http://a.test/2</loc><lastmod>2026-11-01</lastmod><priority>0.5</priority></url>",
			"<url><lastmod>2026-11-01</lastmod></url>", // no loc: skipped
			"<url><loc>http://a.test/3</loc><lastmod>yesterday</lastmod></url>")),
			locs:    []string{"http://a.test/1", "http://a.test/2", "http://a.test/3"},
			lastmod: []time.Time{when, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), {}}},
		{name: "index, gzip", index: true, body: gzipped(`<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<sitemap><loc>http://a.test/s1.xml.gz</loc></sitemap><sitemap><loc>http://a.test/s2.xml</loc></sitemap></sitemapindex>`),
			locs: []string{"http://a.test/s1.xml.gz", "http://a.test/s2.xml"}},
		{name: "cut short keeps what it read", body: []byte(urlset("<url><loc>http://a.test/1</loc></url>", "<url><loc>http://a.test/2</loc></url>")[:strings.LastIndex(urlset("<url><loc>http://a.test/1</loc></url>", "<url><loc>http://a.test/2</loc></url>"), "a.test/2")]),
			locs: []string{"http://a.test/1"}},
		{name: "capped at the protocol's 50,000", body: []byte(urlset(many...))},
		{name: "RSS is not a sitemap", body: []byte(`<rss><channel><item><link>http://a.test/1</link></item></channel></rss>`), notOne: true},
		{name: "HTML is not a sitemap", body: []byte(`<html><body><a href="/x">x</a></body></html>`), notOne: true},
		{name: "garbage", body: []byte("\x1f\x8bnot really gzip"), notOne: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sm, err := parseSitemap(tc.body, 10<<20)
			if tc.notOne {
				if err == nil {
					t.Fatalf("parsed as a sitemap: %+v", sm)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sm.index != tc.index {
				t.Errorf("index %v, want %v", sm.index, tc.index)
			}
			if tc.name == "capped at the protocol's 50,000" {
				if len(sm.entries) != maxSitemapURLs {
					t.Fatalf("%d entries, want %d", len(sm.entries), maxSitemapURLs)
				}
				return
			}
			var locs []string
			for i, e := range sm.entries {
				locs = append(locs, e.loc)
				if i < len(tc.lastmod) && !e.lastmod.Equal(tc.lastmod[i]) {
					t.Errorf("%s: lastmod %v, want %v", e.loc, e.lastmod, tc.lastmod[i])
				}
			}
			if strings.Join(locs, " ") != strings.Join(tc.locs, " ") {
				t.Errorf("locs %q, want %q", locs, tc.locs)
			}
		})
	}
}

func TestRobotsSitemapLines(t *testing.T) {
	got := robotsSitemaps([]byte("User-agent: *\nDisallow: /x\nSitemap: http://a.test/s.xml # main\nsitemap:https://a.test/b.xml\nSitemap: /relative.xml\nSitemap: ftp://a.test/c.xml\nSite-map: http://a.test/d.xml\n"))
	want := []string{"http://a.test/s.xml", "https://a.test/b.xml", "http://a.test/d.xml"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("sitemaps %q, want %q", got, want)
	}
	// A Sitemap line between the records of a group does not end it.
	r := parseRobots([]byte("User-agent: *\nDisallow: /a\nSitemap: http://a.test/s.xml\nDisallow: /b\n"), "examplebot")
	if r.allowed("/b") || len(r.sitemaps) != 1 {
		t.Fatalf("rules %+v: /b allowed or sitemap lost", r)
	}
}

// sitemapSite is a host whose pages under /only/ are linked from nowhere
// but its sitemaps: robots.txt names a sitemap index (and a sitemap on
// another host, which is not this host's to name), the index a gzipped
// sitemap and a plain one; one entry points to another host.
type sitemapSite struct {
	*logServer
	mu      sync.Mutex
	lastmod map[int]time.Time // of /only/N in the sitemaps
}

func newSitemapSite(t *testing.T) *sitemapSite {
	s := &sitemapSite{lastmod: map[int]time.Time{}}
	old := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 1; i <= 4; i++ {
		s.lastmod[i] = old
	}
	s.logServer = newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		base := "http://" + r.Host
		entry := func(i int) string {
			s.mu.Lock()
			defer s.mu.Unlock()
			return fmt.Sprintf("<url><loc>%s/only/%d</loc><lastmod>%s</lastmod></url>", base, i, s.lastmod[i].Format(time.RFC3339))
		}
		switch p := r.URL.Path; {
		case p == "/robots.txt":
			fmt.Fprintf(w, "User-agent: *\nDisallow: /private/\nSitemap: %s/index.xml\nSitemap: http://elsewhere.test/sitemap.xml\n", base)
		case p == "/index.xml":
			w.Header().Set("Content-Type", "application/xml")
			fmt.Fprintf(w, `<?xml version="1.0"?><sitemapindex><sitemap><loc>%s/s1.xml.gz</loc></sitemap><sitemap><loc>/s2.xml</loc></sitemap></sitemapindex>`, base)
		case p == "/s1.xml.gz":
			w.Header().Set("Content-Type", "application/x-gzip")
			w.Write(gzipped(urlset(entry(1), entry(2), "<url><loc>http://elsewhere.test/page</loc></url>")))
		case p == "/s2.xml":
			w.Header().Set("Content-Type", "text/xml")
			fmt.Fprint(w, urlset(entry(3), entry(4), fmt.Sprintf("<url><loc>%s/private/1</loc></url>", base)))
		case p == "/" || strings.HasPrefix(p, "/only/") || strings.HasPrefix(p, "/private/"):
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, "<html><body><p>%s</p></body></html>", p)
		default:
			http.NotFound(w, r)
		}
	})
	return s
}

// recordingLinks is a LinkSink that keeps every link and passes them on.
type recordingLinks struct {
	next LinkSink
	mu   sync.Mutex
	all  []string
}

func (r *recordingLinks) Discovered(ctx context.Context, from frontier.Task, links []frontier.Task) {
	r.mu.Lock()
	for _, l := range links {
		r.all = append(r.all, l.URL)
	}
	r.mu.Unlock()
	r.next.Discovered(ctx, from, links)
}

// TestSitemapPagesFetched checks issue 13's sitemaps: pages linked only
// from a sitemap (through robots.txt, a sitemap index, a gzipped sitemap)
// are fetched, robots.txt still applies to them, and a sitemap's entries
// on another host, or a sitemap on another host, are not taken. With
// sitemaps off, those pages are never found.
func TestSitemapPagesFetched(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("sitemaps %v", on), func(t *testing.T) {
			site := newSitemapSite(t)
			host, _ := urls.HostOf(site.URL + "/")
			cfg := testConfig()
			cfg.IgnoreSitemaps = !on
			inner := &ringStandIn{seen: map[uint64]int{}, inScope: func(h string) bool { return h == host }}
			links := &recordingLinks{next: inner}
			c := newTestCrawler(t, cfg, newRecorder(), links)
			inner.c = c
			inner.seed([]string{site.URL + "/"})
			crawlUntilIdle(t, c, 30*time.Second)

			got := map[string]int{}
			for _, h := range site.log() {
				got[h.path]++
			}
			for i := 1; i <= 4; i++ {
				p := fmt.Sprintf("/only/%d", i)
				if on && got[p] != 1 || !on && got[p] != 0 {
					t.Errorf("%s requested %d times with sitemaps %v", p, got[p], on)
				}
			}
			if got["/private/1"] != 0 {
				t.Error("a sitemap entry disallowed by robots.txt was fetched")
			}
			for _, l := range links.all {
				if strings.Contains(l, "elsewhere.test") {
					t.Errorf("reported %s: another host's sitemap or page", l)
				}
			}
			if s := c.Stats(); on && s.Sitemaps != 3 {
				t.Errorf("%d sitemaps read, want 3 (the index and two sitemaps)", s.Sitemaps)
			}
		})
	}
}

// TestSitemapLastmodRecrawls checks that a sitemap's lastmod informs
// recrawls: when the sitemap is fetched again and lists a page with a
// lastmod later than the page's last fetch, the page is fetched again at
// once; a page whose lastmod did not move is not.
func TestSitemapLastmodRecrawls(t *testing.T) {
	site := newSitemapSite(t)
	host, _ := urls.HostOf(site.URL + "/")
	cfg := testConfig()
	cfg.MaxRecrawl = None // no recrawl but those the sitemap asks for (and the sitemap's own, below)
	inner := &ringStandIn{seen: map[uint64]int{}, inScope: func(h string) bool { return h == host }}
	c := newTestCrawler(t, cfg, newRecorder(), inner)
	inner.c = c
	inner.seed([]string{site.URL + "/"})
	crawlUntilIdle(t, c, 30*time.Second)

	site.mu.Lock()
	site.lastmod[3] = time.Now().Add(time.Hour)
	site.mu.Unlock()
	// The sitemap's own recrawl comes round (here: now).
	c.Enqueue(frontier.Task{URL: site.URL + "/s2.xml", Depth: 2, Recrawl: true})
	crawlUntilIdle(t, c, 30*time.Second)
	got := map[string]int{}
	for _, h := range site.log() {
		got[h.path]++
	}
	if got["/s2.xml"] != 2 || got["/only/3"] != 2 || got["/only/4"] != 1 {
		t.Fatalf("requests: sitemap %d, changed page %d, unchanged page %d; want 2, 2, 1", got["/s2.xml"], got["/only/3"], got["/only/4"])
	}
	if s := c.Stats(); s.SitemapRecrawls != 1 {
		t.Fatalf("SitemapRecrawls %d, want 1", s.SitemapRecrawls)
	}
}

// FuzzParseSitemap feeds hostile sitemaps (any bytes, gzipped or not) to
// parseSitemap: it never panics, keeps at most maxSitemapURLs entries,
// each with a location of bounded length, and an index never mixes in
// url entries.
func FuzzParseSitemap(f *testing.F) {
	seeds := map[string][]byte{
		"urlset":   []byte(urlset("<url><loc>http://a.test/1</loc><lastmod>2026-11-01</lastmod></url>", "<url><loc>/rel</loc></url>")),
		"index-gz": gzipped(`<sitemapindex><sitemap><loc>http://a.test/s.xml</loc></sitemap></sitemapindex>`),
		"nested":   []byte(`<urlset><url><url><loc>x</loc></url><loc>y</loc></url></urlset>`),
		"entities": []byte(`<!DOCTYPE urlset [<!ENTITY a "aaaaaaaaaa">]><urlset><url><loc>&a;&a;&amp;&#65;</loc></url></urlset>`),
		"rss":      []byte(`<rss><channel><link>http://a.test/</link></channel></rss>`),
	}
	for _, b := range seeds {
		f.Add(b)
	}
	fuzzcorpus.Write(f, func() map[string][]any {
		out := map[string][]any{}
		for name, b := range seeds {
			out[name] = []any{b}
		}
		return out
	})
	f.Fuzz(func(t *testing.T, body []byte) {
		sm, err := parseSitemap(body, 1<<20)
		if err != nil {
			return
		}
		if len(sm.entries) > maxSitemapURLs {
			t.Fatalf("%d entries", len(sm.entries))
		}
		for _, e := range sm.entries {
			if e.loc == "" || len(e.loc) > 4096 {
				t.Fatalf("entry location of %d bytes", len(e.loc))
			}
		}
	})
}

func TestParseSitemapBoundsFields(t *testing.T) {
	long := "http://a.test/" + strings.Repeat("x", 10_000)
	sm, err := parseSitemap([]byte(urlset("<url><loc>"+long+"</loc></url>")), 1<<20)
	if err != nil || len(sm.entries) != 1 || len(sm.entries[0].loc) != maxSitemapField {
		t.Fatalf("entries %d, err %v; want one location cut to %d bytes", len(sm.entries), err, maxSitemapField)
	}
}
