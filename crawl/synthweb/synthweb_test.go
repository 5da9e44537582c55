package synthweb

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"html"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/temoto/robotstxt"
)

func startWeb(t *testing.T, cfg Config) *Web {
	t.Helper()
	w, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

func proxyClient(w *Web) *http.Client {
	return &http.Client{
		Transport: &http.Transport{Proxy: w.Proxy(), MaxIdleConnsPerHost: 4},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
		Timeout: 10 * time.Second,
	}
}

type fetched struct {
	status int
	ctype  string
	body   []byte
}

func get(t *testing.T, c *http.Client, u string) fetched {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", u, err)
	}
	return fetched{resp.StatusCode, resp.Header.Get("Content-Type"), b}
}

// ---------------------------------------------------------------------------
// Determinism

func TestDeterminism(t *testing.T) {
	cfg := DefaultConfig()
	a, b := startWeb(t, cfg), startWeb(t, cfg)
	if !slices.Equal(a.Pages(), b.Pages()) || !slices.Equal(a.Hosts(), b.Hosts()) || !slices.Equal(a.Seeds(), b.Seeds()) {
		t.Fatal("same config gave different page, host or seed lists")
	}
	if a.Stats() != b.Stats() {
		t.Fatalf("same config gave different stats:\n%+v\n%+v", a.Stats(), b.Stats())
	}
	urls := append([]string{}, a.Pages()...)
	for _, h := range a.Hosts() {
		urls = append(urls, "http://"+h+"/robots.txt", "http://"+h+"/no/such/page")
	}
	for _, p := range a.g.pages {
		if p.broken {
			urls = append(urls, p.url)
		}
	}
	ca, cb := proxyClient(a), proxyClient(b)
	htmlBytes, htmlPages := 0, 0
	for _, u := range urls {
		fa, fb := get(t, ca, u), get(t, cb, u)
		if fa.status != fb.status || fa.ctype != fb.ctype || !bytes.Equal(fa.body, fb.body) {
			t.Fatalf("%s differs between two webs with the same config (status %d/%d, %d/%d bytes)",
				u, fa.status, fb.status, len(fa.body), len(fb.body))
		}
		if strings.HasPrefix(fa.ctype, "text/html") {
			htmlBytes += len(fa.body)
			htmlPages++
		}
	}
	if avg := htmlBytes / htmlPages; avg < cfg.PageBytes*8/10 || avg > cfg.PageBytes*13/10 {
		t.Errorf("average HTML page is %d bytes, want about %d", avg, cfg.PageBytes)
	}

	cfg2 := cfg
	cfg2.Seed++
	c, err := New(cfg2)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(a.GroundTruth("swarmcrawl"), c.GroundTruth("swarmcrawl")) {
		t.Error("different seeds gave the same ground truth")
	}
	_, rootA := a.g.body(a.g.pages[a.g.seeds[0]])
	_, rootC := c.g.body(c.g.pages[c.g.seeds[0]])
	if bytes.Equal(rootA, rootC) {
		t.Error("different seeds gave the same root page")
	}
	same := 0
	for i := range a.g.hosts {
		if a.g.hosts[i].robots.kind == c.g.hosts[i].robots.kind && len(a.g.hosts[i].pages) == len(c.g.hosts[i].pages) {
			same++
		}
	}
	if same == len(a.g.hosts) {
		t.Error("different seeds gave identical host shapes")
	}
}

// ---------------------------------------------------------------------------
// Serving

func TestServing(t *testing.T) {
	w := startWeb(t, DefaultConfig())
	pc := proxyClient(w)
	h1 := w.Hosts()[1]

	// Proxy-style request.
	f := get(t, pc, "http://"+h1+"/")
	if f.status != 200 || !strings.HasPrefix(f.ctype, "text/html") || !bytes.Contains(f.body, []byte("<h1 id=\"top\">"+h1+" /</h1>")) {
		t.Fatalf("proxy GET root: %d %q %.80q", f.status, f.ctype, f.body)
	}

	// Direct request with a Host header.
	req, _ := http.NewRequest("GET", w.URL()+"/", nil)
	req.Host = h1
	req.Header.Set("User-Agent", "direct-test/1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(body, f.body) {
		t.Fatalf("direct GET with Host header: %d, same body %v", resp.StatusCode, bytes.Equal(body, f.body))
	}

	// Raw absolute-URI request with uppercase host, :80 and a tracking parameter.
	conn, err := net.Dial("tcp", strings.TrimPrefix(w.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	up := strings.ToUpper(h1)
	fmt.Fprintf(conn, "GET http://%s:80/?utm_source=x HTTP/1.1\r\nHost: %s:80\r\nConnection: close\r\n\r\n", up, up)
	rresp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	rbody, _ := io.ReadAll(rresp.Body)
	conn.Close()
	if rresp.StatusCode != 200 || !bytes.Equal(rbody, f.body) {
		t.Fatalf("raw proxy request: %d", rresp.StatusCode)
	}

	log := w.Log()
	if len(log) != 3 {
		t.Fatalf("log has %d entries, want 3: %+v", len(log), log)
	}
	wantURLs := []string{"http://" + h1 + "/", "http://" + h1 + "/", "http://" + h1 + "/?utm_source=x"}
	for i, e := range log {
		if e.Host != h1 || e.URL != wantURLs[i] || e.Status != 200 || e.Bytes != len(f.body) || e.Time.IsZero() {
			t.Errorf("log[%d] = %+v, want host %s URL %s", i, e, h1, wantURLs[i])
		}
		if i > 0 && e.Time.Before(log[i-1].Time) {
			t.Errorf("log not in arrival order")
		}
	}
	if log[1].UserAgent != "direct-test/1.0" || log[2].Path != "/?utm_source=x" {
		t.Errorf("log details wrong: %+v", log)
	}

	// Unknown hosts and paths.
	for _, u := range []string{"http://elsewhere.invalid/", "http://" + h1 + "/no/such/page", "http://" + h1 + "/P/1", w.URL() + "/"} {
		if f := get(t, pc, u); f.status != 404 {
			t.Errorf("GET %s: status %d, want 404", u, f.status)
		}
	}
	req, _ = http.NewRequest("GET", w.URL()+"/", nil)
	req.Host = "nope.invalid"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 404 {
		t.Errorf("direct GET unknown host: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// Methods.
	resp, err = pc.Head("http://" + h1 + "/")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("HEAD: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	resp, err = pc.Post("http://"+h1+"/", "text/plain", strings.NewReader("x"))
	if err != nil || resp.StatusCode != 405 {
		t.Errorf("POST: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// Content types of every kind of page, and robots.txt answers.
	seenKind := map[pageKind]bool{}
	for _, p := range w.g.pages {
		if p.broken || seenKind[p.kind] {
			continue
		}
		seenKind[p.kind] = true
		f := get(t, pc, p.url)
		if f.status != 200 {
			t.Errorf("%s: status %d", p.url, f.status)
		}
		switch p.kind {
		case kindPDF:
			if f.ctype != "application/pdf" || !bytes.HasPrefix(f.body, []byte("%PDF-")) || len(f.body) < 2048 {
				t.Errorf("%s: %q, %d bytes", p.url, f.ctype, len(f.body))
			}
		case kindPNG:
			if _, err := png.Decode(bytes.NewReader(f.body)); f.ctype != "image/png" || err != nil {
				t.Errorf("%s: %q, %v", p.url, f.ctype, err)
			}
		default:
			if !strings.HasPrefix(f.ctype, "text/html") {
				t.Errorf("%s: %q", p.url, f.ctype)
			}
		}
	}
	if len(seenKind) != 8 {
		t.Errorf("default config has only %d page kinds", len(seenKind))
	}
	for _, h := range w.g.hosts {
		f := get(t, pc, "http://"+h.name+"/robots.txt")
		if h.robots.notFound != (f.status == 404) || (f.status == 200 && !strings.HasPrefix(f.ctype, "text/plain")) {
			t.Errorf("%s/robots.txt: %d %q (kind %v)", h.name, f.status, f.ctype, h.robots.kind)
		}
	}
	for _, p := range w.g.pages {
		if p.broken {
			if f := get(t, pc, p.url); f.status != 404 {
				t.Errorf("broken link target %s: status %d", p.url, f.status)
			}
			break
		}
	}
}

func TestCloseInterruptsLatency(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Hosts, cfg.Latency = 3, 5*time.Second
	w, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := proxyClient(w)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if resp, err := c.Get(w.Seeds()[0]); err == nil {
			resp.Body.Close()
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for len(w.Log()) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	w.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v with a request waiting on Latency", d)
	}
	w.Close() // idempotent
	wg.Wait()
	if l := w.Log(); len(l) != 1 || l[0].Status != 200 {
		t.Errorf("log after Close: %+v", l)
	}
}

// ---------------------------------------------------------------------------
// Canonical form

func TestCanonical(t *testing.T) {
	cases := map[string]string{
		"http://h001.synth.test":                                                 "http://h001.synth.test/",
		"HTTP://H001.SYNTH.TEST:80/p/3#top":                                      "http://h001.synth.test/p/3",
		"http://h001.synth.test:8080/p/3":                                        "http://h001.synth.test:8080/p/3",
		"https://h001.synth.test:443/x":                                          "https://h001.synth.test/x",
		"http://h001.synth.test/p//3":                                            "http://h001.synth.test/p/3",
		"http://h001.synth.test/p/./3":                                           "http://h001.synth.test/p/3",
		"http://h001.synth.test/x/../p/3":                                        "http://h001.synth.test/p/3",
		"http://h001.synth.test/../p/":                                           "http://h001.synth.test/p/",
		"http://h001.synth.test/p/.":                                             "http://h001.synth.test/p/",
		"http://h001.synth.test/?utm_source=x":                                   "http://h001.synth.test/",
		"http://h001.synth.test/list?utm_medium=a&cat=2&gclid=1&page=3&fbclid=z": "http://h001.synth.test/list?cat=2&page=3",
		"http://h001.synth.test/list?page=3&cat=2&SessionID=9&sid=1&PHPSESSID=2": "http://h001.synth.test/list?page=3&cat=2",
		"http://h001.synth.test/list?jsessionid=1&q=a%20b":                       "http://h001.synth.test/list?q=a%20b",
		"http://h001.synth.test/p/3?":                                            "http://h001.synth.test/p/3",
		"http://user:pw@h001.synth.test/":                                        "http://h001.synth.test/",
		"http://h001.synth.test/A%2fB":                                           "http://h001.synth.test/A%2fB",
	}
	for in, want := range cases {
		if got, err := Canonical(in); err != nil || got != want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"/p/3", "mailto:x@y.invalid", "javascript:void(0)", "ftp://x/", "http:///p"} {
		if got, err := Canonical(bad); err == nil {
			t.Errorf("Canonical(%q) = %q, want error", bad, got)
		}
	}
}

// ---------------------------------------------------------------------------
// Robots evaluator versus github.com/temoto/robotstxt

func TestRobotsAgainstTemoto(t *testing.T) {
	tokens := []string{"swarmcrawl", "SwarmCrawl", "SwarmCrawl/1.0 (+http://swarmcrawl.test)", "otherbot", "badbot", "EvilBot", "*"}
	probes := []string{"/", "/private", "/private/", "/private/x", "/private/open", "/private/open/", "/private/open/7",
		"/no-swarmcrawl", "/no-swarmcrawl/", "/no-swarmcrawl/3", "/p/1?a=/private/", "/list?cat=1&page=1", "/PRIVATE/1"}
	// (/robots.txt is left out: RFC 9309 always allows it, temoto does not.)
	decisions, disallowed, tokenDiffs := 0, 0, 0
	for seed := int64(1); seed <= 6; seed++ {
		cfg := DefaultConfig()
		cfg.Seed, cfg.Hosts, cfg.CrawlDelayHosts = seed, 120, 10
		w, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range w.g.hosts {
			status, body := w.RobotsTxt(h.name)
			rd, err := robotstxt.FromStatusAndString(status, body)
			if err != nil {
				t.Fatalf("%s: temoto cannot parse robots.txt: %v\n%s", h.name, err, body)
			}
			paths := append([]string{}, probes...)
			for _, id := range h.pages {
				paths = append(paths, w.g.pages[id].path)
			}
			for _, p := range paths {
				var first bool
				for i, tok := range tokens {
					ours := w.Allowed(tok, "http://"+h.name+p)
					if ours != h.robots.allowed(tok, p) {
						t.Fatalf("Allowed and allowed disagree on %s%s", h.name, p)
					}
					theirs := rd.TestAgent(p, tok)
					decisions++
					if ours != theirs {
						t.Errorf("seed %d %s (%v) path %q token %q: ours %v, temoto %v\n%s", seed, h.name, h.robots.kind, p, tok, ours, theirs, body)
					}
					if !ours {
						disallowed++
					}
					if i == 0 {
						first = ours
					} else if ours != first {
						tokenDiffs++
					}
				}
			}
			for _, tok := range tokens {
				if got, want := rd.FindGroup(tok).CrawlDelay, w.CrawlDelay(h.name); got != want {
					t.Errorf("%s token %q: temoto crawl delay %v, ours %v", h.name, tok, got, want)
				}
			}
		}
	}
	t.Logf("%d decisions, %d disallowed, %d token-dependent", decisions, disallowed, tokenDiffs)
	if disallowed == 0 || tokenDiffs == 0 {
		t.Error("cross-check is trivial")
	}
}

// TestRobotsGroupSelection pins the RFC 9309 behaviour that temoto shares.
func TestRobotsGroupSelection(t *testing.T) {
	p := robotsPolicy{groups: []robotsGroup{
		{agents: []string{"*"}, rules: []robotsRule{{path: "/private/"}}},
		{agents: []string{"SwarmCrawl"}, rules: []robotsRule{{path: "/no-swarmcrawl/"}}},
	}}
	checks := []struct {
		tok, path string
		want      bool
	}{
		{"swarmcrawl", "/private/1", true}, // the * group is ignored for swarmcrawl
		{"swarmcrawl", "/no-swarmcrawl/1", false},
		{"other", "/private/1", false},
		{"other", "/no-swarmcrawl/1", true},
	}
	for _, c := range checks {
		if got := p.allowed(c.tok, c.path); got != c.want {
			t.Errorf("allowed(%q, %q) = %v", c.tok, c.path, got)
		}
	}
}

// ---------------------------------------------------------------------------
// Generated features

func TestFeatures(t *testing.T) {
	w, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	s := w.Stats()
	t.Logf("stats: %+v", s)
	for name, v := range map[string]int{
		"Orphans": s.Orphans, "Hidden": s.Hidden, "BrokenLinks": s.BrokenLinks, "NofollowLinks": s.NofollowLinks,
		"ExternalLinks": s.ExternalLinks, "MetaNofollowPages": s.MetaNofollowPages, "BasePages": s.BasePages,
		"PDFs": s.PDFs, "PNGs": s.PNGs, "RobotsNotFound": s.RobotsNotFound, "RobotsAgentGroup": s.RobotsAgentGroup,
		"RobotsAllowRule": s.RobotsAllowRule, "RobotsBadbotGroup": s.RobotsBadbotGroup,
	} {
		if v == 0 {
			t.Errorf("default config has no %s", name)
		}
	}
	if s.Hosts != 50 || s.Pages < 300 || s.Pages > 560 {
		t.Errorf("unexpected size: %+v", s)
	}

	// Link spellings.
	var all strings.Builder
	for _, p := range w.g.pages {
		for _, l := range p.links {
			all.WriteString(" " + l.href)
		}
	}
	hrefs := all.String()
	for _, pat := range []string{` HTTP://H`, `.synth.test:80/`, ` ../`, ` ./`, `#top`, `#section-2`, `utm_`, `sessionid=`, `gclid=`,
		`fbclid=`, `/./`, `/x/../`, `/p//`, ` /p/`, ` http://h`, ` mailto:`, ` javascript:`, `elsewhere.invalid`, `?cat=`} {
		if !strings.Contains(hrefs, pat) {
			t.Errorf("no href contains %q", pat)
		}
	}
	if regexp.MustCompile(` //`).MatchString(hrefs) {
		t.Error("a scheme-relative href was generated")
	}
	rel := regexp.MustCompile(` [0-9a-z][^ :]*`)
	if !rel.MatchString(hrefs) {
		t.Error("no bare relative href")
	}
	baseOther := false
	for _, p := range w.g.pages {
		if p.base != "" && !strings.Contains(p.base, w.g.hosts[p.host].name) {
			baseOther = true
		}
	}
	if !baseOther {
		t.Error("no <base> pointing at another host")
	}

	gt := w.GroundTruth("swarmcrawl")
	other := w.GroundTruth("otherbot")
	inEither := map[string]bool{}
	for _, u := range append(slices.Clone(gt), other...) {
		inEither[u] = true
	}
	in := map[string]bool{}
	for _, u := range gt {
		in[u] = true
	}
	if !sort.StringsAreSorted(gt) || len(in) != len(gt) {
		t.Error("ground truth not sorted or has duplicates")
	}
	for _, h := range w.Hosts() {
		if !in["http://"+h+"/"] {
			t.Errorf("root of %s not in ground truth", h)
		}
	}
	hiddenOut, hiddenIn, brokenIn, disallowedOut := 0, 0, 0, 0
	for _, p := range w.g.pages {
		switch {
		case p.access == accessOrphan && in[p.url]:
			t.Errorf("orphan %s in ground truth", p.url)
		case p.access == accessHidden && inEither[p.url]:
			hiddenIn++
		case p.access == accessHidden && !in[p.url]:
			hiddenOut++
		case p.broken && in[p.url]:
			brokenIn++
		case !w.Allowed("swarmcrawl", p.url):
			disallowedOut++
			if in[p.url] {
				t.Errorf("disallowed %s in ground truth", p.url)
			}
		}
	}
	if hiddenOut == 0 || hiddenIn == 0 || brokenIn == 0 || disallowedOut == 0 {
		t.Errorf("hidden excluded %d, hidden included %d, broken included %d, disallowed %d: want all > 0",
			hiddenOut, hiddenIn, brokenIn, disallowedOut)
	}
	if len(gt) < s.Pages*6/10 {
		t.Errorf("ground truth %d of %d pages: graph not mostly connected", len(gt), s.Pages)
	}
	for _, suffix := range []string{".pdf", ".png"} {
		found := false
		for _, u := range gt {
			found = found || strings.HasSuffix(u, suffix)
		}
		if !found {
			t.Errorf("no %s in ground truth", suffix)
		}
	}
	onlySwarm, onlyOther := diff(gt, other), diff(other, gt)
	if len(onlySwarm) == 0 || len(onlyOther) == 0 {
		t.Errorf("ground truths for swarmcrawl and otherbot should differ both ways: %d, %d", len(onlySwarm), len(onlyOther))
	}
	t.Logf("ground truth: swarmcrawl %d, otherbot %d, badbot %d of %d pages",
		len(gt), len(other), len(w.GroundTruth("badbot")), s.Pages)
}

func diff(a, b []string) []string {
	set := map[string]bool{}
	for _, x := range b {
		set[x] = true
	}
	var out []string
	for _, x := range a {
		if !set[x] {
			out = append(out, x)
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// End to end: an independent BFS crawler reaches exactly the ground truth.

var (
	tagRe  = regexp.MustCompile(`(?is)<(a|base|meta)\s([^>]*)>`)
	attrRe = regexp.MustCompile(`(?is)([a-z-]+)\s*=\s*"([^"]*)"`)
)

// testNormalize resolves href against base and normalises it without using
// the package's Canonical; ok is false for non-http links.
func testNormalize(base *url.URL, href string) (string, bool) {
	ref, err := url.Parse(strings.TrimSpace(href))
	if err != nil {
		return "", false
	}
	u := base.ResolveReference(ref)
	if u.Scheme != "http" || u.Host == "" {
		return "", false
	}
	host := strings.ToLower(u.Hostname())
	if port := u.Port(); port != "" && port != "80" {
		host += ":" + port
	}
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	var kept []string
	for _, kv := range strings.Split(u.RawQuery, "&") {
		k := strings.ToLower(strings.SplitN(kv, "=", 2)[0])
		if kv == "" || strings.HasPrefix(k, "utm_") || slices.Contains([]string{"gclid", "fbclid", "sessionid", "sid", "phpsessid", "jsessionid"}, k) {
			continue
		}
		kept = append(kept, kv)
	}
	s := "http://" + host + clean
	if len(kept) > 0 {
		s += "?" + strings.Join(kept, "&")
	}
	return s, true
}

// extractLinks returns the followable links of an HTML page.
func extractLinks(pageURL *url.URL, body []byte) []string {
	base := pageURL
	type a struct {
		href string
		rel  string
	}
	var anchors []a
	for _, m := range tagRe.FindAllStringSubmatch(string(body), -1) {
		attrs := map[string]string{}
		for _, kv := range attrRe.FindAllStringSubmatch(m[2], -1) {
			attrs[strings.ToLower(kv[1])] = html.UnescapeString(kv[2])
		}
		switch strings.ToLower(m[1]) {
		case "base":
			if b, err := url.Parse(attrs["href"]); err == nil {
				base = pageURL.ResolveReference(b)
			}
		case "meta":
			if strings.EqualFold(attrs["name"], "robots") && strings.Contains(strings.ToLower(attrs["content"]), "nofollow") {
				return nil
			}
		case "a":
			if h, ok := attrs["href"]; ok {
				anchors = append(anchors, a{h, attrs["rel"]})
			}
		}
	}
	var out []string
	for _, x := range anchors {
		if slices.Contains(strings.Fields(strings.ToLower(x.rel)), "nofollow") {
			continue
		}
		if u, ok := testNormalize(base, x.href); ok {
			out = append(out, u)
		}
	}
	return out
}

// testCrawl crawls w through its proxy as a polite, robots-respecting BFS
// crawler would (see refCrawl), waiting at least gap (or the Crawl-delay)
// between the end of one request to a host and the start of the next. It
// returns the URLs fetched with a final answer.
func testCrawl(t *testing.T, w *Web, token string, gap time.Duration) []string {
	t.Helper()
	return refCrawl(t, w, crawlOptions{token: token, gap: gap}).fetched
}

// Limits of the reference crawler, those GroundTruth assumes.
const (
	refMaxRetries   = 3         // retries after a 5xx, 429 or timeout
	refMaxRedirects = 5         // redirect hops per chain
	refMaxDepth     = 16        // links on pages of this depth are dropped
	refMaxRepeats   = 3         // a path segment may occur this often
	refHostBudget   = 25        // pages per host
	refMaxURL       = 2048      // URL length
	refRobotsLimit  = 500 << 10 // robots.txt bytes parsed
	refRetryBase    = 20 * time.Millisecond
)

// crawlOptions configures the reference crawler.
type crawlOptions struct {
	token   string
	gap     time.Duration // minimum time between requests to one host
	timeout time.Duration // per request, body included (default 10s)
	maxBody int64         // body bytes read (default 1 MiB)
	recrawl bool          // end with a conditional recrawl of pages with validators
}

// crawlResult is what the reference crawler did.
type crawlResult struct {
	fetched   []string       // sorted canonical URLs answered with a final status
	dead      []string       // sorted URLs given up after the retries
	recrawled map[string]int // URL -> status of its conditional recrawl
	changed   map[string]bool
	ambiguous map[string]bool // recrawls that straddled a change
}

// refTask is one URL in the reference crawler's queue.
type refTask struct {
	url       string
	host      string
	depth     int
	redirects int
	attempts  int
	notBefore time.Time
}

// refHost is the reference crawler's state of one host.
type refHost struct {
	robots      *refRobots // nil until robots.txt was fetched
	robotsFails int
	robotsRetry time.Time
	gaveUp      bool
	next        time.Time // politeness: no request before
	pages       int
}

// refFetch is one response as the reference crawler sees it.
type refFetch struct {
	status int
	header http.Header
	body   []byte // decoded
	err    error
	sent   time.Time
	recv   time.Time
}

// refCrawler is an independent crawler: it shares no code with the
// package under test except Web's public methods for its configuration.
type refCrawler struct {
	t      *testing.T
	w      *Web
	opts   crawlOptions
	client *http.Client
	ua     string
	hosts  map[string]*refHost
	seen   map[string]bool
	queue  []*refTask
	res    crawlResult
	valid  map[string]refFetch // URL -> response carrying ETag or Last-Modified
}

// refCrawl crawls w from its seeds like a correct production crawler:
// robots.txt per RFC 9309 (redirects followed up to 5 hops, 500 KiB
// parsed, 5xx meaning "disallow all, retry later", 4xx meaning "allow
// all"), retries of 5xx, 429 and timeouts with exponential backoff (at most
// refMaxRetries) honouring Retry-After for the whole host, each redirect
// hop a new URL (at most refMaxRedirects per chain), depth, repeated
// segment, URL length and per-host budget limits, session and tracking
// parameters stripped, gzip and deflate decoded, bodies capped, and
// optionally a conditional recrawl.
func refCrawl(t *testing.T, w *Web, opts crawlOptions) crawlResult {
	t.Helper()
	if opts.timeout == 0 {
		opts.timeout = 10 * time.Second
	}
	if opts.maxBody == 0 {
		opts.maxBody = 1 << 20
	}
	cr := &refCrawler{t: t, w: w, opts: opts, client: proxyClient(w), hosts: map[string]*refHost{},
		seen: map[string]bool{}, valid: map[string]refFetch{}, ua: opts.token + "/1.0 (+http://swarmcrawl.test/bot)"}
	cr.client.Timeout = opts.timeout
	for _, s := range w.Seeds() {
		cr.add(s, 0, 0)
	}
	cr.run()
	if opts.recrawl {
		cr.recrawl()
	}
	sort.Strings(cr.res.fetched)
	sort.Strings(cr.res.dead)
	return cr.res
}

// add queues u unless it was seen or its host was given up.
func (cr *refCrawler) add(u string, depth, redirects int) {
	pu, _ := url.Parse(u)
	if cr.seen[u] || cr.host(pu.Hostname()).gaveUp {
		return
	}
	cr.seen[u] = true
	cr.queue = append(cr.queue, &refTask{url: u, host: pu.Hostname(), depth: depth, redirects: redirects})
}

func (cr *refCrawler) host(h string) *refHost {
	if cr.hosts[h] == nil {
		cr.hosts[h] = &refHost{}
	}
	return cr.hosts[h]
}

// need returns the politeness gap of host h.
func (cr *refCrawler) need(h *refHost) time.Duration {
	if h.robots != nil && h.robots.delay > cr.opts.gap {
		return h.robots.delay
	}
	return cr.opts.gap
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// run crawls until the queue is empty.
func (cr *refCrawler) run() {
	for len(cr.queue) > 0 {
		now := time.Now()
		pick, wake := -1, now.Add(time.Hour)
		for i, tk := range cr.queue {
			h := cr.host(tk.host)
			ready := later(h.next, tk.notBefore)
			if h.robots == nil {
				ready = later(h.next, h.robotsRetry)
			}
			if !ready.After(now) {
				pick = i
				break
			}
			if ready.Before(wake) {
				wake = ready
			}
		}
		if pick < 0 {
			time.Sleep(time.Until(wake))
			continue
		}
		tk := cr.queue[pick]
		h := cr.host(tk.host)
		if h.robots == nil {
			cr.robots(tk.host, h)
			continue
		}
		cr.queue = slices.Delete(cr.queue, pick, pick+1)
		u, _ := url.Parse(tk.url)
		if !h.robots.allowed(u.RequestURI()) {
			continue
		}
		if tk.attempts == 0 {
			if h.pages >= refHostBudget {
				continue
			}
			h.pages++
		}
		f := cr.get(tk.url, nil)
		h.next = f.recv.Add(cr.need(h))
		if ra, err := strconv.Atoi(f.header.Get("Retry-After")); err == nil {
			h.next = later(h.next, f.recv.Add(time.Duration(ra)*time.Second))
		}
		switch {
		case f.err != nil || f.status >= 500 || f.status == 429:
			tk.attempts++
			if tk.attempts > refMaxRetries {
				cr.res.dead = append(cr.res.dead, tk.url)
				continue
			}
			tk.notBefore = f.recv.Add(refRetryBase << tk.attempts)
			cr.queue = append(cr.queue, tk)
		case f.status >= 300 && f.status < 400 && f.header.Get("Location") != "":
			cr.res.fetched = append(cr.res.fetched, tk.url)
			if l, ok := testNormalize(u, f.header.Get("Location")); ok && tk.redirects < refMaxRedirects {
				cr.add(l, tk.depth, tk.redirects+1)
			}
		default:
			cr.res.fetched = append(cr.res.fetched, tk.url)
			if f.header.Get("ETag") != "" || f.header.Get("Last-Modified") != "" {
				cr.valid[tk.url] = f
			}
			if f.status/100 != 2 || !strings.HasPrefix(f.header.Get("Content-Type"), "text/html") || tk.depth >= refMaxDepth {
				continue
			}
			for _, l := range extractLinks(u, f.body) {
				if lu, _ := url.Parse(l); strings.HasSuffix(lu.Hostname(), ".synth.test") && len(l) <= refMaxURL && !repeatsSegment(lu.Path) {
					cr.add(l, tk.depth+1, 0)
				}
			}
		}
	}
}

// repeatsSegment reports whether a path segment occurs more than
// refMaxRepeats times.
func repeatsSegment(p string) bool {
	n := map[string]int{}
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			if n[s]++; n[s] > refMaxRepeats {
				return true
			}
		}
	}
	return false
}

// robots fetches robots.txt of host name, following up to 5 redirects.
func (cr *refCrawler) robots(name string, h *refHost) {
	u := "http://" + name + "/robots.txt"
	var f refFetch
	for hop := 0; ; hop++ {
		f = cr.getN(u, nil, refRobotsLimit)
		loc := f.header.Get("Location")
		if f.err != nil || f.status < 300 || f.status >= 400 || loc == "" {
			break
		}
		if hop == refMaxRedirects { // RFC 9309 2.3.1.2: may be taken as unavailable (allow all)
			f = refFetch{status: 404, header: http.Header{}, recv: f.recv}
			break
		}
		base, _ := url.Parse(u)
		ref, err := url.Parse(loc)
		if err != nil {
			f = refFetch{status: 404, header: http.Header{}, recv: f.recv}
			break
		}
		u = base.ResolveReference(ref).String()
	}
	h.next = f.recv.Add(cr.opts.gap)
	switch {
	case f.err == nil && f.status/100 == 2:
		h.robots = parseRobots(f.body, cr.opts.token)
		h.next = f.recv.Add(cr.need(h))
	case f.err == nil && f.status/100 == 4:
		h.robots = &refRobots{}
	default: // unavailable: disallow all, retry later, give up eventually
		h.robotsFails++
		if h.robotsFails > refMaxRetries {
			h.gaveUp = true
			cr.queue = slices.DeleteFunc(cr.queue, func(tk *refTask) bool { return tk.host == name })
			return
		}
		h.robotsRetry = f.recv.Add(refRetryBase << h.robotsFails)
	}
}

func (cr *refCrawler) get(u string, hdr map[string]string) refFetch {
	return cr.getN(u, hdr, cr.opts.maxBody)
}

// getN sends one GET and reads at most limit bytes of the body, decoding
// gzip and deflate.
func (cr *refCrawler) getN(u string, hdr map[string]string, limit int64) refFetch {
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("User-Agent", cr.ua)
	req.Header.Set("Accept-Encoding", "gzip, deflate")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	f := refFetch{sent: time.Now(), header: http.Header{}}
	resp, err := cr.client.Do(req)
	if err != nil {
		f.err, f.recv = err, time.Now()
		return f
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	f.recv = time.Now()
	if err != nil {
		f.err = err
		return f
	}
	f.status, f.header = resp.StatusCode, resp.Header
	f.body, err = decodeBody(resp.Header.Get("Content-Encoding"), raw)
	if err != nil {
		cr.t.Errorf("GET %s: %v", u, err)
	}
	return f
}

// decodeBody undoes a Content-Encoding of gzip or deflate (zlib, or raw
// deflate as some servers send).
func decodeBody(coding string, raw []byte) ([]byte, error) {
	var r io.Reader
	switch strings.ToLower(coding) {
	case "":
		return raw, nil
	case "gzip":
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		r = zr
	case "deflate":
		if zr, err := zlib.NewReader(bytes.NewReader(raw)); err == nil {
			r = zr
		} else {
			r = flate.NewReader(bytes.NewReader(raw))
		}
	default:
		return nil, fmt.Errorf("unknown Content-Encoding %q", coding)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", coding, err)
	}
	return b, nil
}

// recrawl waits until every changing page has had time to change, then
// fetches every page that had validators again, conditionally: with
// If-None-Match for some, If-Modified-Since alone for the others.
func (cr *refCrawler) recrawl() {
	cr.res.recrawled, cr.res.changed, cr.res.ambiguous = map[string]int{}, map[string]bool{}, map[string]bool{}
	var urls []string
	for u := range cr.valid {
		urls = append(urls, u)
	}
	sort.Strings(urls)
	if len(urls) == 0 {
		return
	}
	time.Sleep(cr.w.Config().ChangePeriod)
	for i, u := range urls {
		prev := cr.valid[u]
		hdr := map[string]string{}
		if i%2 == 0 && prev.header.Get("ETag") != "" {
			hdr["If-None-Match"] = prev.header.Get("ETag")
		} else {
			hdr["If-Modified-Since"] = prev.header.Get("Last-Modified")
		}
		time.Sleep(cr.opts.gap)
		f := cr.get(u, hdr)
		if f.err != nil {
			cr.t.Errorf("recrawl %s: %v", u, f.err)
			continue
		}
		cr.res.recrawled[u] = f.status
		cr.res.changed[u] = cr.w.Changed(u, prev.sent)
		cr.res.ambiguous[u] = cr.w.Changed(u, prev.sent) != cr.w.Changed(u, prev.recv) ||
			cr.w.Changed(u, f.sent) != cr.w.Changed(u, f.recv)
		if f.status == 200 && !bytes.Equal(f.body, prev.body) != cr.res.changed[u] && !cr.res.ambiguous[u] {
			cr.t.Errorf("recrawl %s: body changed %v, Changed says %v", u, !bytes.Equal(f.body, prev.body), cr.res.changed[u])
		}
	}
}

// refRobots is the reference crawler's RFC 9309 reading of a robots.txt
// for one token.
type refRobots struct {
	rules []refRule
	delay time.Duration
}

type refRule struct {
	allow bool
	re    *regexp.Regexp
	n     int // pattern length, for "longest match"
}

// parseRobots reads body per RFC 9309 for token's product token: groups
// start at user-agent lines, every group naming the token is merged, else
// every "*" group; patterns support "*" and a final "$".
func parseRobots(body []byte, token string) *refRobots {
	tok := strings.ToLower(strings.FieldsFunc(token, func(r rune) bool { return r == '/' || r == ' ' })[0])
	type group struct {
		agents []string
		rules  []refRule
		delay  time.Duration
	}
	var groups []*group
	var cur *group
	agentLine := false
	for _, line := range strings.Split(string(body), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		switch k {
		case "user-agent":
			if cur == nil || !agentLine {
				cur = &group{}
				groups = append(groups, cur)
			}
			cur.agents = append(cur.agents, strings.ToLower(v))
			agentLine = true
			continue
		case "allow", "disallow":
			if cur != nil && v != "" {
				pat := regexp.QuoteMeta(strings.TrimSuffix(v, "$"))
				pat = "^" + strings.ReplaceAll(pat, `\*`, ".*")
				if strings.HasSuffix(v, "$") {
					pat += "$"
				}
				cur.rules = append(cur.rules, refRule{allow: k == "allow", re: regexp.MustCompile(pat), n: len(v)})
			}
		case "crawl-delay":
			if s, err := strconv.ParseFloat(v, 64); err == nil && cur != nil {
				cur.delay = time.Duration(s * float64(time.Second))
			}
		}
		agentLine = false
	}
	pick := func(name string) *refRobots {
		var rb *refRobots
		for _, g := range groups {
			if slices.Contains(g.agents, name) {
				if rb == nil {
					rb = &refRobots{}
				}
				rb.rules = append(rb.rules, g.rules...)
				if rb.delay == 0 {
					rb.delay = g.delay
				}
			}
		}
		return rb
	}
	if rb := pick(tok); rb != nil {
		return rb
	}
	if rb := pick("*"); rb != nil {
		return rb
	}
	return &refRobots{}
}

// allowed applies the longest matching rule, Allow winning ties.
func (rb *refRobots) allowed(pathQuery string) bool {
	if pathQuery == "/robots.txt" {
		return true
	}
	best, allow := -1, true
	for _, r := range rb.rules {
		if r.re.MatchString(pathQuery) && (r.n > best || (r.n == best && r.allow)) {
			best, allow = r.n, r.allow
		}
	}
	return allow
}

func TestCrawlMatchesGroundTruth(t *testing.T) {
	w := startWeb(t, DefaultConfig())
	const gap = 10 * time.Millisecond
	for _, token := range []string{"swarmcrawl", "otherbot"} {
		w.ResetLog()
		start := time.Now()
		got := testCrawl(t, w, token, gap)
		gt := w.GroundTruth(token)
		t.Logf("%s: crawled %d URLs in %v, ground truth %d", token, len(got), time.Since(start).Round(time.Millisecond), len(gt))
		if !slices.Equal(got, gt) {
			t.Fatalf("%s: crawl and ground truth differ:\nonly crawled: %v\nonly ground truth: %v", token, diff(got, gt), diff(gt, got))
		}
		for name, v := range map[string][]string{
			"CheckRobots": w.CheckRobots(token), "Duplicates": w.Duplicates(), "Missing": w.Missing(token),
			"Unexpected": w.Unexpected(token), "CheckPoliteness": w.CheckPoliteness(gap), "CheckRobotsFirst": w.CheckRobotsFirst(),
		} {
			if len(v) > 0 {
				t.Errorf("%s: %s after a correct crawl: %v", token, name, v)
			}
		}
		if n := w.Requested(); n != len(gt) {
			t.Errorf("%s: Requested() = %d, want %d", token, n, len(gt))
		}
	}

	// The checks must fail on bad behaviour. Token is now "otherbot".
	c := proxyClient(w)
	root := w.Seeds()[0]
	rootHost := strings.TrimSuffix(strings.TrimPrefix(root, "http://"), "/")
	for i := 0; i < 3; i++ {
		get(t, c, root)
	}
	// Judged against a 1s gap so that a loaded machine cannot space the
	// burst out enough to pass.
	burst := 0
	for _, v := range w.CheckPoliteness(time.Second) {
		if strings.HasPrefix(v, rootHost+": / at") && strings.Contains(v, "after / (need 1s)") {
			burst++
		}
	}
	if burst < 2 {
		t.Errorf("CheckPoliteness missed an impolite burst: %v", w.CheckPoliteness(time.Second))
	}
	if v := w.CheckPoliteness(0); len(v) != 0 {
		t.Errorf("CheckPoliteness(0) = %v, want none", v)
	}
	if v := w.Duplicates(); len(v) != 1 || !strings.HasPrefix(v[0], root+" requested 4 times") {
		t.Errorf("Duplicates = %v", v)
	}
	var disallowed string
	for _, u := range w.Pages() {
		if !w.Allowed("otherbot", u) {
			disallowed = u
			break
		}
	}
	get(t, c, disallowed)
	get(t, c, root+"?utm_source=x")
	if v := w.CheckRobots("otherbot"); len(v) != 1 || !strings.HasPrefix(v[0], disallowed) {
		t.Errorf("CheckRobots = %v, want %s", v, disallowed)
	}
	if v := w.Unexpected("otherbot"); !slices.Equal(v, []string{disallowed, root + "?utm_source=x"}) && !slices.Equal(v, []string{root + "?utm_source=x", disallowed}) {
		t.Errorf("Unexpected = %v", v)
	}
	if v := w.Duplicates(); len(v) != 1 || !strings.Contains(v[0], "requested 5 times (as "+root+", "+root+"?utm_source=x)") {
		t.Errorf("Duplicates = %v", v)
	}
	w.ResetLog()
	get(t, c, root)
	if v := w.Missing("otherbot"); len(v) != len(w.GroundTruth("otherbot"))-1 {
		t.Errorf("Missing after reset: %d", len(v))
	}
	if v := w.CheckRobotsFirst(); len(v) != 1 || !strings.HasPrefix(v[0], rootHost) {
		t.Errorf("CheckRobotsFirst = %v", v)
	}
}

func TestPolitenessCrawlDelay(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Hosts, cfg.CrawlDelayHosts = 10, 3
	w := startWeb(t, cfg)
	var cd, plain string
	for _, h := range w.Hosts() {
		if w.CrawlDelay(h) == time.Second {
			cd = h
		} else if w.CrawlDelay(h) == 0 {
			plain = h
		}
	}
	if cd == "" || plain == "" {
		t.Fatal("need a crawl-delay host and a plain host")
	}
	if _, body := w.RobotsTxt(cd); !strings.Contains(body, "Crawl-delay: 1\n") {
		t.Errorf("robots.txt of %s lacks Crawl-delay:\n%s", cd, body)
	}
	c := proxyClient(w)
	get(t, c, "http://"+cd+"/robots.txt")
	get(t, c, "http://"+plain+"/robots.txt")
	time.Sleep(60 * time.Millisecond)
	get(t, c, "http://"+cd+"/")
	get(t, c, "http://"+plain+"/")
	v := w.CheckPoliteness(20 * time.Millisecond)
	if len(v) != 1 || !strings.HasPrefix(v[0], cd+": / at") {
		t.Errorf("CheckPoliteness = %v, want one violation on %s", v, cd)
	}
}

func TestEdgeConfigs(t *testing.T) {
	for _, cfg := range []Config{
		{Hosts: 1, PagesPerHost: 1},
		{Hosts: 1, Seeds: 5, LinksPerPage: 1, PageBytes: 1},
		{Hosts: 2, CrossHostFraction: -1, CrawlDelayHosts: 5},
		{Hosts: 1001, PagesPerHost: 2, Seeds: 10},
	} {
		w, err := New(cfg)
		if err != nil {
			t.Fatalf("%+v: %v", cfg, err)
		}
		hosts, gt := w.Hosts(), w.GroundTruth("swarmcrawl")
		in := map[string]bool{}
		for _, u := range gt {
			in[u] = true
		}
		for _, h := range hosts {
			if !in["http://"+h+"/"] {
				t.Errorf("%+v: root of %s not in ground truth", cfg, h)
			}
		}
		wantFirst := "h000.synth.test"
		if len(hosts) > 1000 {
			wantFirst = "h0000.synth.test"
		}
		if hosts[0] != wantFirst || len(w.Seeds()) != min(w.Config().Seeds, len(hosts)) {
			t.Errorf("%+v: hosts %v..., seeds %v", cfg, hosts[0], w.Seeds())
		}
	}
	if _, err := New(Config{Hosts: -1}); err == nil {
		t.Error("negative Hosts accepted")
	}
	a, _ := New(Config{Seed: 7})
	b, _ := New(Config{Seed: 7, CrawlDelayHosts: 4})
	// CrawlDelayHosts only edits robots.txt files (a chosen 404 host gets a
	// plain robots.txt), never the pages.
	_, ra := a.g.body(a.g.pages[0])
	_, rb := b.g.body(b.g.pages[0])
	if !slices.Equal(a.Pages(), b.Pages()) || a.Stats().Links != b.Stats().Links || !bytes.Equal(ra, rb) {
		t.Error("CrawlDelayHosts changed the pages")
	}
}
