package synthweb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/bits"
	"net/http"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/temoto/robotstxt"
)

// casesConfig is the configuration of the case tests: the default web with
// Cases and a short ChangePeriod.
func casesConfig() Config {
	cfg := DefaultConfig()
	cfg.Cases = true
	cfg.ChangePeriod = time.Second
	return cfg
}

// rawClient talks to w through its proxy, never follows redirects and never
// adds or undoes Content-Encoding on its own.
func rawClient(w *Web, timeout time.Duration) *http.Client {
	return &http.Client{
		Transport: &http.Transport{Proxy: w.Proxy(), DisableCompression: true, MaxIdleConnsPerHost: 4},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
		Timeout: timeout,
	}
}

// step is one request of a case table and what its response must be.
type step struct {
	url     string
	hdr     map[string]string
	status  int
	header  map[string]string // exact values; "" means absent
	body    []string          // substrings of the decoded body
	notBody []string
}

// run performs s and checks the response, returning it and its decoded body.
func (s step) run(t *testing.T, c *http.Client) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.url, nil)
	req.Header.Set("Accept-Encoding", "identity")
	for k, v := range s.hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", s.url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", s.url, err)
	}
	body, err := decodeBody(resp.Header.Get("Content-Encoding"), raw)
	if err != nil {
		t.Fatalf("GET %s: %v", s.url, err)
	}
	if resp.StatusCode != s.status {
		t.Errorf("GET %s %v: status %d, want %d", s.url, s.hdr, resp.StatusCode, s.status)
	}
	for k, v := range s.header {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("GET %s %v: %s = %q, want %q", s.url, s.hdr, k, got, v)
		}
	}
	for _, b := range s.body {
		if !bytes.Contains(body, []byte(b)) {
			t.Errorf("GET %s %v: body lacks %q", s.url, s.hdr, b)
		}
	}
	for _, b := range s.notBody {
		if bytes.Contains(body, []byte(b)) {
			t.Errorf("GET %s %v: body has %q", s.url, s.hdr, b)
		}
	}
	return resp, body
}

// TestCaseHosts checks, request by request through the proxy, that each
// case host behaves as Config.Cases documents.
func TestCaseHosts(t *testing.T) {
	w := startWeb(t, casesConfig())
	c := rawClient(w, 10*time.Second)
	u := func(name, path string) string {
		h := w.CaseHost(name)
		if h == "" {
			t.Fatalf("no case host %q", name)
		}
		return "http://" + h + path
	}
	ok, html := http.StatusOK, "<!DOCTYPE html>"
	tables := []struct {
		name  string
		steps []step
		after func(t *testing.T)
	}{
		{name: "hub", steps: []step{{url: u("cases", "/"), status: ok, body: []string{
			`href="http://robots-5xx.synth.test/p/1"`, `href="http://dead.synth.test/p/2"`, `href="http://redirects.synth.test/chain/7"`,
			`href="http://calendar.synth.test/cal?d=2026-01-01"`, `href="http://nearcopy.synth.test/"`}}}},
		{name: "robots-404", steps: []step{
			{url: u("robots-404", "/robots.txt"), status: 404},
			{url: u("robots-404", "/"), status: ok, body: []string{`href="/private/1"`}},
			{url: u("robots-404", "/private/1"), status: ok},
		}},
		{name: "robots-5xx", steps: []step{
			{url: u("robots-5xx", "/robots.txt"), status: 503},
			{url: u("robots-5xx", "/robots.txt"), status: 503},
			{url: u("robots-5xx", "/robots.txt"), status: 503},
			{url: u("robots-5xx", "/robots.txt"), status: 503},
			{url: u("robots-5xx", "/p/1"), status: ok},
		}},
		{name: "robots-flaky", steps: []step{
			{url: u("robots-flaky", "/robots.txt"), status: 503},
			{url: u("robots-flaky", "/robots.txt"), status: 503},
			{url: u("robots-flaky", "/robots.txt"), status: ok, body: []string{"User-agent: *\nDisallow: /private/\n"}},
			{url: u("robots-flaky", "/robots.txt"), status: ok},
		}},
		{name: "robots-redirect", steps: []step{
			{url: u("robots-redirect", "/robots.txt"), status: 301, header: map[string]string{"Location": u("robots-redirect", "/real-robots.txt")}},
			{url: u("robots-redirect", "/real-robots.txt"), status: 302, header: map[string]string{"Location": "/robots-final.txt"}},
			{url: u("robots-redirect", "/robots-final.txt"), status: ok, body: []string{"Disallow: /secret/\n"}},
			{url: u("robots-redirect", "/secret/1"), status: ok},
		}},
		{name: "robots-wildcard", steps: []step{
			{url: u("robots-wildcard", "/robots.txt"), status: ok, body: []string{
				"Disallow: /*.pdf$\n", "Disallow: /*?print=\n", "Allow: /private/ok*\n", "Disallow: /private/\n", "Allow: /tie/\nDisallow: /tie/\n"}},
			{url: u("robots-wildcard", "/doc/a.pdf"), status: ok, header: map[string]string{"Content-Type": "application/pdf"}},
			{url: u("robots-wildcard", "/doc/b?view=1&print=1"), status: ok},
		}},
		{name: "robots-agent", steps: []step{
			{url: u("robots-agent", "/robots.txt"), status: ok, body: []string{
				"User-agent: swarmcrawl-images\nDisallow: /\n", "User-agent: SwarmCrawl\nDisallow: /not-for-swarmcrawl/\n",
				"User-agent: otherbot\nUser-agent: swarmcrawl\nDisallow: /merged-group/\n"}},
		}},
		{name: "crawl-delay", steps: []step{
			{url: u("crawl-delay", "/robots.txt"), status: ok, body: []string{"Crawl-delay: 1\n"}},
		}, after: func(t *testing.T) {
			if d := w.CrawlDelay(w.CaseHost("crawl-delay")); d != time.Second {
				t.Errorf("CrawlDelay = %v", d)
			}
		}},
		{name: "flaky", steps: []step{
			{url: u("flaky", "/robots.txt"), status: ok},
			{url: u("flaky", "/p/1"), status: 503},
			{url: u("flaky", "/p/1?utm_source=x"), status: 503}, // the same page
			{url: u("flaky", "/p/1"), status: ok, body: []string{html}},
			{url: u("flaky", "/p/1"), status: ok},
			{url: u("flaky", "/p/2"), status: 503},
		}},
		{name: "ratelimited", steps: []step{
			{url: u("ratelimited", "/"), status: 429, header: map[string]string{"Retry-After": "2"}},
			{url: u("ratelimited", "/"), status: ok, header: map[string]string{"Retry-After": ""}},
			{url: u("ratelimited", "/p/1"), status: 429, header: map[string]string{"Retry-After": "2"}},
			{url: u("ratelimited", "/p/2"), status: ok},
			{url: u("ratelimited", "/p/3"), status: ok},
		}, after: func(t *testing.T) {
			if l := w.Log(); l[0].RetryAfter != 2*time.Second || l[1].RetryAfter != 0 || l[0].Status != 429 {
				t.Errorf("log: %+v", l[:2])
			}
		}},
		{name: "dead", steps: []step{
			{url: u("dead", "/robots.txt"), status: ok},
			{url: u("dead", "/"), status: 500},
			{url: u("dead", "/p/1"), status: 500},
			{url: u("dead", "/p/1"), status: 500},
			{url: u("dead", "/p/1"), status: 500},
			{url: u("dead", "/p/1"), status: 500},
			{url: u("dead", "/p/1"), status: 500},
		}},
		{name: "redirects", steps: []step{
			{url: u("redirects", "/chain/3"), status: 301, header: map[string]string{"Location": u("redirects2", "/hop/3/1")}},
			{url: u("redirects2", "/hop/3/1"), status: 302, header: map[string]string{"Location": "/hop/3/2"}},
			{url: u("redirects2", "/hop/3/2"), status: 303, header: map[string]string{"Location": u("redirects", "/final/3")}},
			{url: u("redirects", "/final/3"), status: ok, body: []string{html}},
			{url: u("redirects", "/chain/7"), status: 307, header: map[string]string{"Location": "HTTP://REDIRECTS2.SYNTH.TEST:80/hop/7/1?utm_source=redirect"}},
			{url: u("redirects2", "/hop/7/1?utm_source=redirect"), status: 308, header: map[string]string{"Location": u("redirects", "/hop/7/2")}},
			{url: u("redirects", "/hop/7/2"), status: 301, header: map[string]string{"Location": "3"}},
			{url: u("redirects", "/hop/7/3"), status: 302, header: map[string]string{"Location": u("redirects2", "/hop/7/4")}},
			{url: u("redirects2", "/hop/7/4"), status: 303, header: map[string]string{"Location": "/hop/7/5"}},
			{url: u("redirects2", "/hop/7/5"), status: 307, header: map[string]string{"Location": u("redirects", "/hop/7/6")}},
			{url: u("redirects", "/hop/7/6"), status: 308, header: map[string]string{"Location": "/final/7"}},
			{url: u("redirects", "/final/7"), status: ok},
			{url: u("redirects", "/loop/a"), status: 302, header: map[string]string{"Location": "/loop/b"}},
			{url: u("redirects", "/loop/b"), status: 301, header: map[string]string{"Location": "/loop/a"}},
			{url: u("redirects", "/to-blocked"), status: 301, header: map[string]string{"Location": "/blocked/1"}},
			{url: u("redirects", "/robots.txt"), status: ok, body: []string{"Disallow: /blocked/\n"}},
			{url: u("redirects", "/"), status: 404},
		}, after: func(t *testing.T) {
			if w.Allowed("swarmcrawl", u("redirects", "/blocked/1")) {
				t.Error("/blocked/1 allowed")
			}
			if l := w.Log(); l[0].Location != u("redirects2", "/hop/3/1") {
				t.Errorf("Location not logged: %+v", l[0])
			}
		}},
		{name: "calendar", steps: []step{
			{url: u("calendar", "/cal?d=2026-01-01"), status: ok, body: []string{`href="/cal?d=2025-12-31"`, `href="/cal?d=2026-01-02"`}},
			{url: u("calendar", "/cal?d=2026-03-01"), status: ok, body: []string{`href="/cal?d=2026-02-28"`}},
			{url: u("calendar", "/cal?d=3999-12-31"), status: ok, body: []string{`href="/cal?d=4000-01-01"`}},
			{url: u("calendar", "/cal?d=someday"), status: 404},
		}},
		{name: "deep", steps: []step{
			{url: u("deep", "/"), status: ok, body: []string{`href="a/"`, `href="d1/"`}},
			{url: u("deep", "/a/a/a/a/a/a/a/a/"), status: ok, body: []string{`href="a/"`}},
			{url: u("deep", "/d1/d2/d3/"), status: ok, body: []string{`href="d4/"`}},
			{url: u("deep", "/d1/d3/"), status: 404},
			{url: u("deep", "/a/b/"), status: 404},
		}},
		{name: "gzip", steps: []step{
			{url: u("gzip", "/p/1"), hdr: map[string]string{"Accept-Encoding": "gzip, deflate"}, status: ok,
				header: map[string]string{"Content-Encoding": "gzip", "Vary": "Accept-Encoding"}, body: []string{html}},
			{url: u("gzip", "/p/1"), hdr: map[string]string{"Accept-Encoding": "*"}, status: ok, header: map[string]string{"Content-Encoding": "gzip"}},
			{url: u("gzip", "/p/1"), hdr: map[string]string{"Accept-Encoding": "gzip;q=0, deflate"}, status: ok, header: map[string]string{"Content-Encoding": ""}, body: []string{html}},
			{url: u("gzip", "/p/1"), hdr: map[string]string{"Accept-Encoding": "*;q=0"}, status: ok, header: map[string]string{"Content-Encoding": ""}},
			{url: u("gzip", "/p/1"), status: ok, header: map[string]string{"Content-Encoding": ""}},
		}, after: func(t *testing.T) {
			l := w.Log()
			if l[0].ContentEncoding != "gzip" || l[0].AcceptEncoding != "gzip, deflate" || l[2].ContentEncoding != "" || l[0].Bytes >= l[2].Bytes {
				t.Errorf("log: %+v / %+v", l[0], l[2])
			}
		}},
		{name: "deflate", steps: []step{
			{url: u("deflate", "/"), hdr: map[string]string{"Accept-Encoding": "gzip, deflate;q=0.5"}, status: ok,
				header: map[string]string{"Content-Encoding": "deflate"}, body: []string{`href="/p/1"`}},
			{url: u("deflate", "/"), hdr: map[string]string{"Accept-Encoding": "gzip"}, status: ok, header: map[string]string{"Content-Encoding": ""}},
		}},
	}
	for _, tc := range tables {
		t.Run(tc.name, func(t *testing.T) {
			w.ResetLog()
			var bodies [][]byte
			for _, s := range tc.steps {
				_, b := s.run(t, c)
				bodies = append(bodies, b)
			}
			if tc.name == "gzip" && !bytes.Equal(bodies[0], bodies[2]) {
				t.Error("gzip and identity bodies differ once decoded")
			}
			if tc.after != nil {
				tc.after(t)
			}
		})
	}

	t.Run("robots-big", func(t *testing.T) {
		_, body := step{url: u("robots-big", "/robots.txt"), status: ok}.run(t, c)
		early, late := bytes.Index(body, []byte("Disallow: /early/\n")), bytes.Index(body, []byte("Disallow: /late/\n"))
		if len(body) != RobotsBigBytes || early < 0 || early > 1000 || late < RobotsParseLimit || bytes.Contains(body, []byte("\n\n")) {
			t.Errorf("robots.txt: %d bytes, /early/ at %d, /late/ at %d", len(body), early, late)
		}
		full, _ := robotstxt.FromBytes(body)
		cut, _ := robotstxt.FromBytes(body[:RobotsParseLimit])
		if full.TestAgent("/late/1", "swarmcrawl") || !cut.TestAgent("/late/1", "swarmcrawl") || cut.TestAgent("/early/1", "swarmcrawl") {
			t.Error("the /late/ rule is not exactly the one beyond 500 KiB")
		}
		if w.Allowed("swarmcrawl", u("robots-big", "/early/1")) || !w.Allowed("swarmcrawl", u("robots-big", "/late/1")) {
			t.Error("Allowed does not apply only the first 500 KiB")
		}
	})

	t.Run("slow", func(t *testing.T) {
		w.ResetLog()
		step{url: u("slow", "/p/1"), status: ok}.run(t, c)
		quick := rawClient(w, 300*time.Millisecond)
		start := time.Now()
		if resp, err := quick.Get(u("slow", "/slow/1")); err == nil {
			resp.Body.Close()
			t.Fatalf("slow page answered within 300ms: %d", resp.StatusCode)
		}
		// The server notices that the client left.
		waitFor(t, func() bool { l := w.Log(); return len(l) == 2 && l[1].Abandoned })
		if l := w.Log(); l[1].Status != 0 || time.Since(start) > 2*time.Second {
			t.Errorf("abandoned slow request: %+v after %v", l[1], time.Since(start))
		}
	})

	t.Run("big", func(t *testing.T) {
		w.ResetLog()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		resp, err := c.Get(u("big", "/"))
		if err != nil {
			t.Fatal(err)
		}
		head := make([]byte, 4096)
		io.ReadFull(resp.Body, head)
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		runtime.ReadMemStats(&after)
		if err != nil || resp.ContentLength != BigPageBytes || n+4096 != BigPageBytes {
			t.Fatalf("big page: Content-Length %d, read %d, %v", resp.ContentLength, n+4096, err)
		}
		if !bytes.Contains(head, []byte(`href="/after/1"`)) || !bytes.Contains(head, []byte(`href="/after/2"`)) {
			t.Errorf("links not at the start: %q", head)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
			t.Errorf("serving the 20 MB page allocated %d bytes", alloc)
		}
		// A crawler that stops reading after 1 MiB: logged as abandoned, 200.
		resp, err = c.Get(u("big", "/"))
		if err != nil {
			t.Fatal(err)
		}
		io.CopyN(io.Discard, resp.Body, 1<<20)
		resp.Body.Close()
		waitFor(t, func() bool { l := w.Log(); return len(l) == 2 && l[1].Abandoned })
		if l := w.Log(); l[0].Abandoned || l[1].Status != 200 || l[1].Bytes != BigPageBytes {
			t.Errorf("log: %+v", l)
		}
		if d := w.Duplicates(); len(d) != 0 {
			t.Errorf("abandoned request counted as duplicate: %v", d)
		}
	})

	t.Run("session", func(t *testing.T) {
		_, a := step{url: u("session", "/"), status: ok}.run(t, c)
		_, b := step{url: u("session", "/?sessionid=abc"), status: ok}.run(t, c)
		_, s1 := step{url: u("session", "/s/1?sid=42"), status: ok, body: []string{"<h1>session /s/1</h1>"}}.run(t, c)
		ids := regexp.MustCompile(`\?(sessionid|sid)=([0-9a-f]+)"`)
		ma, mb := ids.FindAllStringSubmatch(string(a), -1), ids.FindAllStringSubmatch(string(b), -1)
		if len(ma) != 4 || len(mb) != 4 || len(ids.FindAllString(string(s1), -1)) != 2 {
			t.Fatalf("session links: %v, %v", ma, mb)
		}
		all := map[string]bool{}
		for _, m := range append(ma, mb...) {
			all[m[2]] = true
		}
		if len(all) != 8 {
			t.Errorf("session ids repeat: %v", all)
		}
		strip := func(b []byte) string { return ids.ReplaceAllString(string(b), `"`) }
		if strip(a) != strip(b) {
			t.Error("pages differ beyond their session ids")
		}
	})

	t.Run("fresh", func(t *testing.T) {
		// Start just after a change, so that the next ChangePeriod (1s) is
		// free of changes for the conditional requests below.
		v := w.cases.version(time.Now())
		waitFor(t, func() bool { return w.cases.version(time.Now()) != v })
		since := time.Now()
		w.ResetLog()
		resp, v0 := step{url: u("fresh", "/change/1"), status: ok, body: []string{"version "}}.run(t, c)
		etag, lm := resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
		sresp, _ := step{url: u("fresh", "/static/1"), status: ok}.run(t, c)
		setag, slm := sresp.Header.Get("ETag"), sresp.Header.Get("Last-Modified")
		if etag == "" || lm == "" || setag == "" || slm == "" {
			t.Fatalf("validators missing: %q %q %q %q", etag, lm, setag, slm)
		}
		step{url: u("fresh", "/change/1"), hdr: map[string]string{"If-None-Match": etag}, status: 304, header: map[string]string{"ETag": etag, "Content-Length": ""}}.run(t, c)
		step{url: u("fresh", "/change/1"), hdr: map[string]string{"If-None-Match": `"x", W/` + etag}, status: 304}.run(t, c)
		step{url: u("fresh", "/change/1"), hdr: map[string]string{"If-Modified-Since": lm}, status: 304}.run(t, c)
		step{url: u("fresh", "/change/1"), hdr: map[string]string{"If-None-Match": `"other"`, "If-Modified-Since": lm}, status: ok}.run(t, c)
		if w.Changed(u("fresh", "/change/1"), since) {
			t.Fatal("the requests above took longer than a ChangePeriod")
		}
		l := w.Log()
		if !l[2].Conditional || l[2].IfNoneMatch != etag || l[2].Status != 304 || l[2].Bytes != 0 || !l[4].Conditional || l[4].IfModifiedSince != lm || l[0].Conditional {
			t.Errorf("conditional requests logged as %+v", l)
		}
		if d := w.Duplicates(); len(d) != 0 {
			t.Errorf("conditional recrawls counted as duplicates: %v", d)
		}
		waitFor(t, func() bool { return w.Changed(u("fresh", "/change/1"), since) })
		_, v1 := step{url: u("fresh", "/change/1"), hdr: map[string]string{"If-None-Match": etag}, status: ok}.run(t, c)
		step{url: u("fresh", "/change/1"), hdr: map[string]string{"If-Modified-Since": lm}, status: ok}.run(t, c)
		if bytes.Equal(v0, v1) {
			t.Error("changing page did not change")
		}
		step{url: u("fresh", "/static/1"), hdr: map[string]string{"If-None-Match": setag}, status: 304}.run(t, c)
		step{url: u("fresh", "/static/1"), hdr: map[string]string{"If-Modified-Since": slm}, status: 304}.run(t, c)
		if w.Changed(u("fresh", "/static/1"), since) || w.Changed(u("gzip", "/"), since) {
			t.Error("Changed reports a change of a page that never changes")
		}
	})

	t.Run("nearcopy", func(t *testing.T) {
		var texts []string
		for _, p := range []string{"/copy/1", "/copy/2", "/copy/3", "/other"} {
			_, b := step{url: u("nearcopy", p), status: ok}.run(t, c)
			texts = append(texts, visibleText(b))
		}
		for i := 1; i < 3; i++ {
			a, b := strings.Fields(texts[0]), strings.Fields(texts[i])
			diffs := 0
			for j := range a {
				if j < len(b) && a[j] != b[j] {
					diffs++
				}
			}
			if len(a) != len(b) || diffs != 2 || len(a) < 2000 { // one word, and the link's number
				t.Errorf("copy %d: %d and %d words, %d differ", i+1, len(a), len(b), diffs)
			}
			if d := bits.OnesCount64(testSimhash(texts[0]) ^ testSimhash(texts[i])); d > 3 {
				t.Errorf("copy %d: simhash distance %d, want at most 3", i+1, d)
			}
		}
		if d := bits.OnesCount64(testSimhash(texts[0]) ^ testSimhash(texts[3])); d < 10 {
			t.Errorf("/other: simhash distance %d, want a clearly different page", d)
		}
	})
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var tagsRe = regexp.MustCompile(`(?s)<[^>]*>`)

// visibleText returns the words of an HTML page outside its tags.
func visibleText(b []byte) string {
	return strings.Join(strings.Fields(tagsRe.ReplaceAllString(string(b), " ")), " ")
}

// testSimhash is a textbook 64-bit simhash over 3-word shingles, to check
// that the near copies are near in the sense crawlers use.
func testSimhash(text string) uint64 {
	words := strings.Fields(strings.ToLower(text))
	var v [64]int
	for i := 0; i+3 <= len(words); i++ {
		h := fnv.New64a()
		h.Write([]byte(strings.Join(words[i:i+3], " ")))
		x := h.Sum64()
		for b := 0; b < 64; b++ {
			if x&(1<<b) != 0 {
				v[b]++
			} else {
				v[b]--
			}
		}
	}
	var out uint64
	for b := 0; b < 64; b++ {
		if v[b] > 0 {
			out |= 1 << b
		}
	}
	return out
}

// TestCaseRobotsRules checks the oracle's robots decisions on the case hosts
// against the reference crawler's RFC 9309 parser, and records where
// github.com/temoto/robotstxt disagrees with RFC 9309.
func TestCaseRobotsRules(t *testing.T) {
	w, err := New(casesConfig())
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		host, path string
		swarm      bool // allowed for swarmcrawl
		other      bool // allowed for otherbot
		star       bool // allowed for a bot with no group of its own
	}{
		{"robots-wildcard", "/doc/a.pdf", false, false, false},
		{"robots-wildcard", "/doc/a.pdf.html", true, true, true},
		{"robots-wildcard", "/doc/b", true, true, true},
		{"robots-wildcard", "/doc/b?print=1", false, false, false},
		{"robots-wildcard", "/doc/b?view=1&print=1", true, true, true},
		{"robots-wildcard", "/private/ok1", true, true, true},
		{"robots-wildcard", "/private/no1", false, false, false},
		{"robots-wildcard", "/tie/1", true, true, true},
		{"robots-agent", "/", true, true, true},
		{"robots-agent", "/not-for-star/1", true, true, false},
		{"robots-agent", "/not-for-swarmcrawl/1", false, true, true},
		{"robots-agent", "/merged-group/1", false, false, true},
		{"robots-404", "/private/1", true, true, true},
		{"robots-5xx", "/", false, false, false},
		{"robots-flaky", "/private/1", false, false, false},
		{"robots-flaky", "/p/1", true, true, true},
		{"robots-redirect", "/secret/1", false, false, false},
		{"robots-big", "/early/1", false, false, false},
		{"robots-big", "/late/1", true, true, true},
		{"redirects", "/blocked/1", false, false, false},
		{"dead", "/p/1", true, true, true},
	}
	var temotoDiffs []string
	for _, c := range want {
		host := w.CaseHost(c.host)
		status, body := w.RobotsTxt(host)
		for tok, allowed := range map[string]bool{"swarmcrawl": c.swarm, "otherbot": c.other, "testbot": c.star} {
			if got := w.Allowed(tok, "http://"+host+c.path); got != allowed {
				t.Errorf("Allowed(%s, %s%s) = %v, want %v", tok, host, c.path, got, allowed)
			}
			if status != 200 {
				continue
			}
			b := []byte(body)
			if len(b) > refRobotsLimit {
				b = b[:refRobotsLimit]
			}
			if got := parseRobots(b, tok).allowed(c.path); got != allowed {
				t.Errorf("reference parser on %s%s for %s: %v, want %v", host, c.path, tok, got, allowed)
			}
			rd, err := robotstxt.FromStatusAndBytes(status, b)
			if err != nil {
				t.Fatal(err)
			}
			if got := rd.TestAgent(c.path, tok); got != allowed {
				temotoDiffs = append(temotoDiffs, fmt.Sprintf("%s%s for %s: temoto %v, RFC 9309 %v", host, c.path, tok, got, allowed))
			}
		}
	}
	sort.Strings(temotoDiffs)
	t.Logf("temoto/robotstxt disagrees with RFC 9309 on %d case decisions:\n%s", len(temotoDiffs), strings.Join(temotoDiffs, "\n"))

	// Pattern matching, including what the generated hosts never use.
	rules := []struct {
		pat, path string
		want      bool
	}{
		{"/private/", "/private/x", true}, {"/private/", "/privat", false},
		{"/*.pdf$", "/a/b.pdf", true}, {"/*.pdf$", "/a/b.pdf?x", false}, {"/*.pdf$", "/.pdf", true},
		{"/*?print=", "/doc?print=1", true}, {"/*?print=", "/doc?a=1&print=1", false},
		{"/a*b*c", "/axxbyyc", true}, {"/a*b*c", "/axxcyyb", false}, {"/a*b$", "/abab", true}, {"/a*b$", "/abba", false},
		{"/x$", "/x", true}, {"/x$", "/xy", false}, {"*", "/anything", true}, {"/ab*", "/a", false},
	}
	for _, r := range rules {
		if got := (robotsRule{path: r.pat}).matches(r.path); got != r.want {
			t.Errorf("pattern %q on %q: %v, want %v", r.pat, r.path, got, r.want)
		}
	}
}

// TestCrawlCasesMatchesGroundTruth runs the reference crawler over the web
// with every case host and checks that a correct crawler fetches exactly
// GroundTruth and passes every check, with traps, dead and slow pages
// handled as documented.
func TestCrawlCasesMatchesGroundTruth(t *testing.T) {
	w := startWeb(t, casesConfig())
	const gap = 10 * time.Millisecond
	const token = "swarmcrawl"
	start := time.Now()
	res := refCrawl(t, w, crawlOptions{token: token, gap: gap, timeout: time.Second, recrawl: true}) // well under SlowPageDelay, well over a loaded machine's stalls
	gt := w.GroundTruth(token)
	t.Logf("crawled %d URLs in %v; ground truth %d (%d hosts); %d requests",
		len(res.fetched), time.Since(start).Round(time.Millisecond), len(gt), len(w.Hosts()), len(w.Log()))
	// Pages of the calendar and deep traps are fetched but are outside the
	// ground truth by definition; they are counted below.
	res.fetched = slices.DeleteFunc(res.fetched, func(s string) bool {
		return strings.HasPrefix(s, "http://calendar.synth.test/") || strings.HasPrefix(s, "http://deep.synth.test/")
	})
	if !slices.Equal(res.fetched, gt) {
		t.Errorf("crawl and ground truth differ:\nonly crawled: %v\nonly ground truth: %v", diff(res.fetched, gt), diff(gt, res.fetched))
	}
	gaveUp := append(w.DeadURLs(), w.SlowURLs()...)
	sort.Strings(gaveUp)
	if !slices.Equal(res.dead, gaveUp) {
		t.Errorf("given up on %v, want DeadURLs+SlowURLs %v", res.dead, gaveUp)
	}
	for name, v := range map[string][]string{
		"CheckRobots": w.CheckRobots(token), "Duplicates": w.Duplicates(), "Missing": w.Missing(token),
		"Unexpected": w.Unexpected(token), "CheckPoliteness": w.CheckPoliteness(gap), "CheckRobotsFirst": w.CheckRobotsFirst(),
		"CheckRetryAfter": w.CheckRetryAfter(),
	} {
		if len(v) > 0 {
			t.Errorf("%s after a correct crawl: %v", name, v)
		}
	}

	pages := func(host string) (n int, abandoned int, statuses []int) {
		for _, r := range w.RequestsTo(host) {
			if !w.isRobots(r) && !r.Conditional {
				n++
				statuses = append(statuses, r.Status)
				if r.Abandoned {
					abandoned++
				}
			}
		}
		return
	}
	// Traps are cut: the calendar by the per-host budget, deep by the
	// repeated-segment limit (/a/a/a/) and the depth limit (/d1/.../d15/).
	if n, _, _ := pages(w.CaseHost("calendar")); n != refHostBudget {
		t.Errorf("calendar: %d pages requested, want the budget %d", n, refHostBudget)
	}
	if n, _, _ := pages(w.CaseHost("deep")); n != 1+3+15 {
		t.Errorf("deep: %d pages requested, want 19", n)
	}
	if n, _, _ := pages(w.CaseHost("session")); n != 5 {
		t.Errorf("session: %d pages requested, want 5", n)
	}
	for _, u := range w.DeadURLs() {
		var st []int
		for _, r := range w.Log() {
			if r.URL == u {
				st = append(st, r.Status)
			}
		}
		if !slices.Equal(st, []int{500, 500, 500, 500}) {
			t.Errorf("%s: statuses %v, want 4 × 500", u, st)
		}
	}
	if n, ab, _ := pages(w.CaseHost("slow")); n != 2+2*(1+refMaxRetries) || ab != 2*(1+refMaxRetries) {
		t.Errorf("slow: %d requests, %d abandoned", n, ab)
	}
	if _, _, st := pages(w.CaseHost("flaky")); len(st) != 9 {
		t.Errorf("flaky: statuses %v, want 3 pages × (503, 503, 200)", st)
	}
	robotsFetches := func(name string) (out []string) {
		for _, r := range w.RequestsTo(w.CaseHost(name)) {
			if w.isRobots(r) {
				out = append(out, fmt.Sprintf("%s %d", r.Path, r.Status))
			}
		}
		return out
	}
	for name, want := range map[string][]string{
		"robots-5xx":      {"/robots.txt 503", "/robots.txt 503", "/robots.txt 503", "/robots.txt 503"},
		"robots-flaky":    {"/robots.txt 503", "/robots.txt 503", "/robots.txt 200"},
		"robots-redirect": {"/robots.txt 301", "/real-robots.txt 302", "/robots-final.txt 200"},
	} {
		if got := robotsFetches(name); !slices.Equal(got, want) {
			t.Errorf("%s robots.txt fetches: %v, want %v", name, got, want)
		}
	}
	for h, n := range w.MaxInFlightPerHost() {
		if n != 1 {
			t.Errorf("%s: %d requests in flight at once from a sequential crawler", h, n)
		}
	}
	encoded := 0
	for _, r := range w.Log() {
		if r.ContentEncoding != "" {
			encoded++
		}
	}
	if encoded != 6 {
		t.Errorf("%d responses content-coded, want the 6 gzip and deflate pages", encoded)
	}

	// The recrawl: 304 exactly for what did not change.
	var unchanged, changed int
	for u, st := range res.recrawled {
		if res.ambiguous[u] {
			continue
		}
		want := 304
		if res.changed[u] {
			want = 200
			changed++
		} else {
			unchanged++
		}
		if st != want {
			t.Errorf("recrawl of %s: %d, want %d (changed %v)", u, st, want, res.changed[u])
		}
	}
	if len(res.recrawled) != 9 || changed < 3 || unchanged < 4 {
		t.Errorf("recrawl: %d pages, %d changed, %d unchanged", len(res.recrawled), changed, unchanged)
	}
}

// TestCaseChecksCatchBadCrawlers makes the mistakes the case hosts exist
// for and checks that the oracle reports each one.
func TestCaseChecksCatchBadCrawlers(t *testing.T) {
	w := startWeb(t, casesConfig())
	c := rawClient(w, 10*time.Second)
	u := func(name, path string) string { return "http://" + w.CaseHost(name) + path }
	get := func(s string, hdr ...string) Request {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, s, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", s, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		l := w.Log()
		return l[len(l)-1]
	}
	has := func(list []string, sub string) bool {
		for _, s := range list {
			if strings.Contains(s, sub) {
				return true
			}
		}
		return false
	}

	// Robots: fetching before robots-flaky's robots.txt is available, on
	// robots-5xx at all, past robots-redirect's redirect, or by the rule
	// beyond 500 KiB.
	get(u("robots-flaky", "/p/1"))
	get(u("robots-flaky", "/robots.txt"))
	get(u("robots-flaky", "/p/1"))
	get(u("robots-5xx", "/p/1"))
	get(u("robots-redirect", "/secret/1"))
	get(u("robots-big", "/early/1"))
	get(u("robots-big", "/late/1"))
	get(u("robots-wildcard", "/doc/b?print=1"))
	get(u("robots-agent", "/merged-group/1"))
	v := w.CheckRobots("swarmcrawl")
	for _, want := range []string{"robots-flaky.synth.test/p/1 requested before robots.txt", "robots-5xx.synth.test/p/1", "/secret/1",
		"/early/1", "/doc/b?print=1", "/merged-group/1"} {
		if !has(v, want) {
			t.Errorf("CheckRobots misses %q: %v", want, v)
		}
	}
	if len(v) != 7 || has(v, "/late/1") {
		t.Errorf("CheckRobots = %v, want 7 violations, none for /late/1", v)
	}
	if v := w.CheckRobots("otherbot"); has(v, "/merged-group/1") == false || len(v) != 7 {
		t.Errorf("CheckRobots(otherbot) = %v", v)
	}

	// Retry-After: a request right after a 429.
	w.ResetLog()
	if r := get(u("ratelimited", "/")); r.Status != 429 || r.RetryAfter != 2*time.Second {
		t.Fatalf("first request: %+v", r)
	}
	get(u("ratelimited", "/robots.txt"))
	if v := w.CheckRetryAfter(); len(v) != 1 || !strings.Contains(v[0], "/robots.txt") {
		t.Errorf("CheckRetryAfter = %v, want the robots.txt request", v)
	}

	// Duplicates: retries after failures, abandoned and conditional
	// requests are legitimate; a second successful fetch is not.
	w.ResetLog()
	for i := 0; i < 3; i++ {
		get(u("flaky", "/p/2"))
	}
	for i := 0; i < 4; i++ {
		get(u("dead", "/p/1"))
	}
	fresh := get(u("fresh", "/static/2"))
	get(u("fresh", "/static/2"), "If-Modified-Since", freshBase.Format(http.TimeFormat))
	if d := w.Duplicates(); len(d) != 0 || fresh.Status != 200 {
		t.Errorf("Duplicates = %v after legitimate repeats", d)
	}
	get(u("flaky", "/p/2"))
	get(u("fresh", "/static/2"))
	if d := w.Duplicates(); len(d) != 2 || !has(d, "flaky.synth.test/p/2 requested 2 times") || !has(d, "fresh.synth.test/static/2 requested 2 times") {
		t.Errorf("Duplicates = %v, want the two repeated successes", d)
	}

	// Missing counts only final answers: a page answered 503 is missing.
	w.ResetLog()
	get(u("flaky", "/p/1"))
	if m := w.Missing("swarmcrawl"); !slices.Contains(m, u("flaky", "/p/1")) {
		t.Error("a page answered only with 503 is not missing")
	}
	get(u("flaky", "/p/1"))
	get(u("flaky", "/p/1"))
	if m := w.Missing("swarmcrawl"); slices.Contains(m, u("flaky", "/p/1")) {
		t.Error("a page answered 200 after retries is missing")
	}

	// Unexpected: session ids kept, a redirect chain followed too far, the
	// link past the body cap, robots-disallowed pages; not the traps, dead
	// or slow pages.
	w.ResetLog()
	get(u("session", "/s/1?sessionid=0123"))
	get(u("redirects", "/hop/7/6"))
	get(u("redirects", "/final/7"))
	get(u("big", "/after-cap"))
	get(u("robots-big", "/early/1"))
	get(u("calendar", "/cal?d=1999-01-01"))
	get(u("deep", "/a/a/a/a/a/a/"))
	get(u("dead", "/p/2"))
	get(u("dead", "/p/2?utm_source=x"))
	if v, want := w.Unexpected("swarmcrawl"), []string{u("big", "/after-cap"), u("dead", "/p/2?utm_source=x"), u("redirects", "/final/7"),
		u("redirects", "/hop/7/6"), u("robots-big", "/early/1"), u("session", "/s/1?sessionid=0123")}; !slices.Equal(v, want) {
		t.Errorf("Unexpected = %v\nwant %v", v, want)
	}

	// Politeness: robots-redirect's hops are one fetch; the crawl-delay host
	// needs a second between requests.
	w.ResetLog()
	get(u("robots-redirect", "/robots.txt"))
	get(u("robots-redirect", "/real-robots.txt"))
	get(u("robots-redirect", "/robots-final.txt"))
	get(u("crawl-delay", "/robots.txt"))
	time.Sleep(50 * time.Millisecond)
	get(u("crawl-delay", "/"))
	if v := w.CheckPoliteness(20 * time.Millisecond); len(v) != 1 || !strings.HasPrefix(v[0], "crawl-delay.synth.test: / at") {
		t.Errorf("CheckPoliteness = %v, want one violation on crawl-delay", v)
	}

	// Concurrency: several requests waiting on slow pages at once.
	w.ResetLog()
	quick := rawClient(w, 5*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u("slow", "/slow/1"), nil)
			if resp, err := quick.Do(req); err == nil {
				resp.Body.Close()
			} else if !errors.Is(err, context.Canceled) {
				t.Errorf("slow request: %v", err)
			}
		}()
	}
	waitFor(t, func() bool { return len(w.Log()) == 4 })
	get(u("gzip", "/"))
	cancel()
	wg.Wait()
	if n, per := w.MaxInFlight(), w.MaxInFlightPerHost(); n != 5 || per[w.CaseHost("slow")] != 4 || per[w.CaseHost("gzip")] != 1 {
		t.Errorf("MaxInFlight %d, per host %v", n, per)
	}
	waitFor(t, func() bool {
		for _, r := range w.RequestsTo(w.CaseHost("slow")) {
			if !r.Abandoned {
				return false
			}
		}
		return true
	})
	w.ResetLog()
	if n := w.MaxInFlight(); n != 0 {
		t.Errorf("MaxInFlight after ResetLog = %d", n)
	}
}

// TestCasesDeterminism checks that two webs with Cases and the same
// configuration serve the same bytes to the same requests, and that Cases
// leaves the generated hosts as they are.
func TestCasesDeterminism(t *testing.T) {
	cfg := casesConfig()
	cfg.ChangePeriod = time.Hour // both webs stay at version 0
	a, b := startWeb(t, cfg), startWeb(t, cfg)
	var urls []string
	for _, h := range a.CaseHosts() {
		urls = append(urls, "http://"+h+"/robots.txt", "http://"+h+"/robots.txt")
		if h != "big.synth.test" {
			urls = append(urls, "http://"+h+"/")
		}
	}
	for _, p := range a.cases.order {
		if p.fate != fateSlow && p.url != "http://big.synth.test/" { // (TestCaseHosts reads the big page)
			urls = append(urls, p.url, p.url)
		}
	}
	urls = append(urls, "http://calendar.synth.test/cal?d=2026-02-03", "http://deep.synth.test/d1/d2/d3/")
	if sha(t, a, urls) != sha(t, b, urls) {
		t.Error("two webs with the same config answered the same requests differently")
	}
	// The big page, without 2 × 20 MB through the race detector: same
	// length, same first chunks.
	ba, bb := a.cases.respondBig(a.cases.host("big.synth.test")), b.cases.respondBig(b.cases.host("big.synth.test"))
	for i := 0; i < 3; i++ {
		if !bytes.Equal(ba.chunks(), bb.chunks()) || ba.size != bb.size {
			t.Errorf("big page chunk %d differs", i)
		}
	}

	// The generated hosts are the same with and without Cases.
	off, _ := New(DefaultConfig())
	on, _ := New(casesConfig())
	if !slices.Equal(off.Pages(), on.Pages()) || off.Stats() != on.Stats() || !slices.Equal(on.Hosts()[:len(off.Hosts())], off.Hosts()) {
		t.Error("Cases changed the generated hosts")
	}
	for _, tok := range []string{"swarmcrawl", "otherbot"} {
		if d := diff(off.GroundTruth(tok), on.GroundTruth(tok)); len(d) > 0 {
			t.Errorf("%s: ground truth without Cases not contained in the one with: %v", tok, d)
		}
	}
	if s := on.Seeds(); len(s) != 4 || s[3] != "http://cases.synth.test/" {
		t.Errorf("Seeds with Cases: %v", s)
	}
	if off.CaseHost("flaky") != "" || off.CaseHosts() != nil || off.TrapHosts() != nil || off.DeadURLs() != nil || off.Changed("http://fresh.synth.test/change/1", time.Time{}) {
		t.Error("case helpers answer without Cases")
	}
	if got := on.TrapHosts(); !slices.Equal(got, []string{"calendar.synth.test", "deep.synth.test", "session.synth.test"}) {
		t.Errorf("TrapHosts = %v", got)
	}
	if _, err := New(Config{Cases: true, ChangePeriod: -1}); err == nil {
		t.Error("negative ChangePeriod accepted")
	}
	if on.Config().ChangePeriod != time.Second || off.Config().ChangePeriod != 0 {
		t.Error("ChangePeriod default")
	}
	if p, _ := New(Config{Cases: true}); p.Config().ChangePeriod != 2*time.Second {
		t.Error("ChangePeriod does not default to 2s")
	}
}

// sha fetches urls in order from web and hashes status, headers (Date
// excluded) and bodies.
func sha(t *testing.T, web *Web, urls []string) string {
	t.Helper()
	c := rawClient(web, 10*time.Second)
	h := fnv.New128a()
	for _, u := range urls {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Header.Del("Date")
		fmt.Fprintf(h, "%s %d %v %d\n", u, resp.StatusCode, resp.Header, len(b))
		h.Write(b)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}
