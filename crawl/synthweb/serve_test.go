package synthweb

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"html"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// sessionIDs matches the fresh session ids of a session trap host's links,
// which differ from one serving to the next.
var sessionIDs = regexp.MustCompile(`(sessionid|sid|PHPSESSID)=[0-9a-f]{16}`)

// maskSessions replaces the session IDs in b with SESSION, as
// sessionIDs.ReplaceAll would: the regexp over every body was 80% of
// TestServedOutputUnchanged's CPU (which pins the result).
func maskSessions(b []byte) []byte {
	var out []byte
	last := 0
	for i := 0; i < len(b); {
		j := bytes.IndexByte(b[i:], '=')
		if j < 0 {
			break
		}
		eq := i + j
		i = eq + 1
		if len(b)-i < 16 || !isHex16(b[i:i+16]) {
			continue
		}
		for _, name := range [...]string{"sessionid", "sid", "PHPSESSID"} {
			if from := eq - len(name); from >= last && string(b[from:eq]) == name {
				out = append(append(out, b[last:from]...), "SESSION"...)
				i += 16
				last = i
				break
			}
		}
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// isHex16 reports whether b is 16 lowercase hex digits.
func isHex16(b []byte) bool {
	for _, c := range b {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// serveFingerprint hashes what a crawler observes of web w beyond what
// fingerprint covers: every page of the generated hosts under every
// spelling its links use, the trap sections (a few steps of each, and
// paths of a section that do not exist), HEAD, POST, host spellings,
// conditional and Accept-Encoding headers, and then the request log those
// requests left (every field but the times) and the checks run on it.
// Session ids are masked, being fresh each time.
func serveFingerprint(t *testing.T, w *Web) string {
	t.Helper()
	h := sha256.New()
	w.ResetLog()
	do := func(method, u string, hdr ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, u, nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Add(hdr[i], hdr[i+1])
		}
		rec := httptest.NewRecorder()
		w.ServeHTTP(rec, req)
		var hs []string
		for k, v := range rec.Header() {
			hs = append(hs, k+": "+strings.Join(v, ","))
		}
		sort.Strings(hs)
		fmt.Fprintf(h, "%s %s %q %d %q %d\n", method, u, hdr, rec.Code, hs, rec.Body.Len())
		h.Write(maskSessions(rec.Body.Bytes()))
		return rec
	}
	for _, p := range w.g.pages {
		do(http.MethodGet, p.url)
		// Every link as spelled, resolved as a browser would (fragment
		// dropped, as a client does), once per page.
		doc, _ := url.Parse(p.url)
		if p.base != "" {
			b, _ := url.Parse(p.base)
			doc = doc.ResolveReference(b)
		}
		for _, l := range p.links {
			if l.target < 0 {
				continue
			}
			ref, err := url.Parse(l.href)
			if err != nil {
				t.Fatal(err)
			}
			u := doc.ResolveReference(ref)
			u.Fragment = ""
			do(http.MethodGet, u.String())
		}
	}
	for i, hn := range w.Hosts() {
		do(http.MethodGet, "http://"+hn+"/robots.txt")
		do(http.MethodHead, "http://"+hn+"/")
		do(http.MethodHead, "http://"+hn+"/robots.txt")
		if i%7 == 0 {
			do(http.MethodPost, "http://"+hn+"/")
			do(http.MethodGet, "http://"+strings.ToUpper(hn)+":80/p/1?utm_source=x&a=1")
			do(http.MethodGet, "http://"+hn+".//p//1?")
			do(http.MethodGet, "http://"+hn+"/x/../p/1", "Accept-Encoding", "gzip", "Accept-Encoding", "br")
			do(http.MethodGet, "http://"+hn+"/", "If-None-Match", `"x"`, "If-Modified-Since", "Mon, 02 Jan 2006 15:04:05 GMT",
				"User-Agent", "SwarmCrawl/1.0")
			do(http.MethodGet, "http://"+hn+"/sitemap.xml")
			do(http.MethodGet, "http://"+hn+"/p/%31")
		}
		k := w.TrapKindOf(hn)
		if k == TrapNone || k == TrapSession {
			continue
		}
		u := "http://" + hn + trapEntry(k)
		for range 6 {
			rec := do(http.MethodGet, u)
			m := regexp.MustCompile(`<li><a href="([^"]*)"`).FindStringSubmatch(rec.Body.String())
			if m == nil {
				t.Fatalf("%s: no link", u)
			}
			base, _ := url.Parse(u)
			ref, _ := url.Parse(strings.ReplaceAll(m[1], "&amp;", "&"))
			u = base.ResolveReference(ref).String()
		}
		for _, bad := range []string{"/events/2026-13-01", "/events/", "/events/2026-01-01/x", "/archive", "/archive?page=0",
			"/archive?page=01", "/archive?page=2&x=1", "/tree/", "/tree/n1", "/tree/n1/n3/", "/tree/n1//", "/shop",
			"/shop?f=2", "/shop?f=1&f=3", "/shop?f=1&", "/events/2026-02-29", "/archive?page=9999999999999999999999"} {
			do(http.MethodGet, "http://"+hn+bad)
		}
	}
	do(http.MethodGet, "http://elsewhere.invalid/")
	do(http.MethodGet, "http://127.0.0.1/")
	for _, r := range w.Log() {
		fmt.Fprintf(h, "%q %q %q %q %d %d %q %q %q %v %v %v %q %q\n", r.Host, r.Path, r.URL, r.UserAgent, r.Status, r.Bytes,
			r.IfNoneMatch, r.IfModifiedSince, r.AcceptEncoding, r.Conditional, r.Abandoned, r.RetryAfter, r.Location, r.ContentEncoding)
	}
	trap, pages := w.TrapRequests()
	mask := func(s []string) []string {
		for i := range s {
			s[i] = sessionIDs.ReplaceAllString(s[i], "SESSION")
		}
		return s
	}
	fmt.Fprintf(h, "%q\n%q\n%q\n%q\n%d %d %d\n%q\n", mask(w.Duplicates()), mask(w.CheckRobots("swarmcrawl")),
		w.Missing("swarmcrawl"), mask(w.Unexpected("swarmcrawl")), trap, pages, w.Requested(), w.CheckRobotsFirst())
	fmt.Fprintf(h, "%d %v\n", w.MaxInFlight(), w.MaxInFlightPerHost())
	return hex.EncodeToString(h.Sum(nil))
}

// serveConfigs are webs with every kind of generated host (hot, trap of
// each kind, Crawl-delay), whose served output serveFingerprint pins.
var serveConfigs = []struct {
	name string
	cfg  Config
	want string
}{
	{"traps", Config{Seed: 1, Hosts: 60, HotHosts: 2, HotPages: 80, TrapHosts: 10, CrawlDelayHosts: 6}, "59026c9c1d81042bdf12bf9c33577cb6a738e4bc463a8f62f131d7c2a36e5eab"},
	{"default", DefaultConfig(), "ddfa8da7651cece31ea6d3ae99454667082be3a7fb81363e8eb7a2aca92288da"},
	{"1001-hosts", Config{Seed: 5, Hosts: 1001, PagesPerHost: 2, Seeds: 10, PageBytes: 2048, TrapHosts: 5}, "584e2c0652005eafd1607337fa1be2f27dc6b0ca6fc77528510be40aaa217166"},
	{"small-pages", Config{Seed: 9, Hosts: 20, PageBytes: 100, LinksPerPage: 12, CrossHostFraction: -1}, "fecd324240db1d0b818de0cc4671ff7c7d17e275d96b6c40b48894773649ded9"},
}

// TestServedOutputUnchanged pins everything the server sends and logs for
// serveConfigs (see serveFingerprint).
func TestServedOutputUnchanged(t *testing.T) {
	for _, sc := range serveConfigs {
		w, err := New(sc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := serveFingerprint(t, w); got != sc.want {
			t.Errorf("%s: fingerprint %s, want %s", sc.name, got, sc.want)
		}
	}
}

// TestServeConcurrent serves the pages of a web from several goroutines at
// once, twice, through a real server: the bodies are the same as served
// one by one through the handler, and the log holds every request.
func TestServeConcurrent(t *testing.T) {
	w := startWeb(t, Config{Seed: 4, Hosts: 40, TrapHosts: 5, HotHosts: 1, HotPages: 60})
	pages := w.Pages()
	want := map[string]string{}
	for _, u := range pages {
		want[u] = sessionIDs.ReplaceAllString(serve(w, u).Body.String(), "SESSION")
	}
	w.ResetLog()
	c := proxyClient(w)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	const workers = 8
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := i; j < 2*len(pages); j += workers {
				u := pages[j%len(pages)]
				resp, err := c.Get(u)
				if err != nil {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%s: %v", u, err))
					mu.Unlock()
					continue
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || sessionIDs.ReplaceAllString(string(b), "SESSION") != want[u] {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("%s: status %d, %d bytes, %v", u, resp.StatusCode, len(b), err))
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(bad) > 0 {
		t.Fatalf("%d bad responses, first %s", len(bad), bad[0])
	}
	if n := len(w.Log()); n != 2*len(pages) {
		t.Errorf("log holds %d requests, want %d", n, 2*len(pages))
	}
	for _, r := range w.Log() {
		if r.Status != 200 || r.Bytes != len(want[r.URL]) && w.TrapKindOf(r.Host) != TrapSession {
			t.Errorf("logged %s: status %d, %d bytes, want 200, %d", r.URL, r.Status, r.Bytes, len(want[r.URL]))
		}
	}
}

// benchWeb is nodebench's web (issue 10's synthetic web).
var benchWeb = Config{Seed: 1, Hosts: 1000, HotHosts: 10, HotPages: 1600, TrapHosts: 20, CrawlDelayHosts: 91}

var (
	benchOnce sync.Once
	benchW    *Web
	benchURLs []string
)

// benchSetup starts nodebench's web once and lists what a crawl of it
// requests: every host's robots.txt and every page.
func benchSetup(b *testing.B) (*Web, []string) {
	benchOnce.Do(func() {
		w, err := Start(benchWeb)
		if err != nil {
			b.Fatal(err)
		}
		benchW = w
		for _, hn := range w.Hosts() {
			benchURLs = append(benchURLs, "http://"+hn+"/robots.txt")
		}
		benchURLs = append(benchURLs, w.Pages()...)
	})
	return benchW, benchURLs
}

// BenchmarkServeHTTP serves the pages of nodebench's web through the
// handler, one per op (-benchtime 46000x serves each page once).
func BenchmarkServeHTTP(b *testing.B) {
	w, urls := benchSetup(b)
	w.ResetLog()
	reqs := make([]*http.Request, len(urls))
	for i, u := range urls {
		reqs[i] = httptest.NewRequest(http.MethodGet, u, nil)
	}
	rec := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		clear(rec.h)
		w.ServeHTTP(rec, reqs[i%len(reqs)])
	}
}

// processCPU returns the user and system time the process has used, in
// nanoseconds: what serving costs when the machine is shared.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// discardWriter is a ResponseWriter that drops what it is sent.
type discardWriter struct {
	h    http.Header
	code int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(code int)        { d.code = code }
func (d *discardWriter) Flush()                      {}

// BenchmarkServeLoopback serves the pages of nodebench's web, one per op,
// through the real server on loopback to 4 clients using it as a proxy
// over keep-alive connections, as a crawler node does.
func BenchmarkServeLoopback(b *testing.B) {
	w, urls := benchSetup(b)
	w.ResetLog()
	c := &http.Client{Transport: &http.Transport{Proxy: w.Proxy(), MaxIdleConnsPerHost: 8}}
	var next sync.Mutex
	i := 0
	b.ReportAllocs()
	b.SetParallelism(2)
	b.ResetTimer()
	cpu0 := processCPU(b)
	defer func() { b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op") }()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			next.Lock()
			u := urls[i%len(urls)]
			i++
			next.Unlock()
			resp, err := c.Get(u)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	})
}

// TestPRNG: prng draws what math/rand/v2 draws from pageRand's seed, and
// pageSeed is the FNV-1a hash of "<seed>|<url>".
func TestPRNG(t *testing.T) {
	for _, seed := range []int64{0, 1, -7, 1 << 62} {
		for _, u := range []string{"", "http://h000.synth.test/", "http://h12.synth.test/list?cat=1&page=2"} {
			h := fnv.New64a()
			fmt.Fprintf(h, "%d|%s", seed, u)
			if got, want := pageSeed(seed, u), h.Sum64(); got != want {
				t.Fatalf("pageSeed(%d, %q) = %x, want %x", seed, u, got, want)
			}
			want, got := rand.New(rand.NewPCG(h.Sum64(), 0x0bad5eed)), newPRNG(seed, u)
			for i, n := range []int{1, 2, 3, 7, 64, 70, 80, 256, 4096, 1<<62 + 1, 3 << 61, math.MaxInt64} {
				for j := range 200 {
					if a, b := got.IntN(n), want.IntN(n); a != b {
						t.Fatalf("seed %d, %q: draw %d of IntN(%d) is %d, want %d", seed, u, 200*i+j, n, a, b)
					}
				}
			}
		}
	}
}

// TestAppendEscaped: appendEscaped escapes as html.EscapeString does.
func TestAppendEscaped(t *testing.T) {
	for _, s := range []string{"", "plain", `<a href="x?a=1&b='2'">`, "&&", "é<>\"'&x"} {
		if got, want := string(appendEscaped([]byte("pre:"), s)), "pre:"+html.EscapeString(s); got != want {
			t.Errorf("appendEscaped(%q) = %q, want %q", s, got, want)
		}
	}
}
