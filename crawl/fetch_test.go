package crawl

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/store"
)

func robotsAllowAll(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path == "/robots.txt" {
		http.NotFound(w, r)
		return true
	}
	return false
}

func TestFetchPageAndLinks(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robotsAllowAll(w, r) {
			return
		}
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, `<a href="/a">a</a><a href="b?utm_source=x">b</a><a href="/a#dup">dup</a><a rel="nofollow" href="/n">n</a>`)
		case "/doc.pdf":
			w.Header().Set("Content-Type", "application/pdf")
			fmt.Fprint(w, `<a href="/from-pdf">not a link</a>`)
		case "/missing":
			http.NotFound(w, r)
		case "/broken":
			http.Error(w, "boom", http.StatusBadGateway)
		default:
			fmt.Fprint(w, "<p>leaf</p>")
		}
	})
	rec := newRecorder()
	cfg := testConfig()
	cfg.MaxDepth = 3
	c := newTestCrawler(t, cfg, rec, rec)
	c.Enqueue(frontier.Task{URL: srv.URL + "/", Depth: 1}, frontier.Task{URL: srv.URL + "/doc.pdf"},
		frontier.Task{URL: srv.URL + "/missing"}, frontier.Task{URL: srv.URL + "/broken"}, frontier.Task{URL: srv.URL + "/deep", Depth: 3})
	crawlUntilIdle(t, c, 5*time.Second)

	root := rec.page(srv.URL + "/")
	if root == nil || root.Status != 200 || root.FinalURL != srv.URL+"/" || !strings.Contains(string(root.Body), "<a href") {
		t.Fatalf("root page %+v", root)
	}
	// What the archive needs: the request as sent, the protocol, the peer.
	if root.Request.Get("User-Agent") != cfg.UserAgent || root.Request.Get("Accept-Encoding") != "gzip, deflate" ||
		root.Proto != "HTTP/1.1" || root.RemoteAddr != srv.Listener.Addr().String() || !bytes.Equal(root.RawBody, root.Body) {
		t.Errorf("root exchange: request %v, proto %q, remote %q (server %s)", root.Request, root.Proto, root.RemoteAddr, srv.Listener.Addr())
	}
	wantLinks := []string{srv.URL + "/a", srv.URL + "/b"}
	if !slices.Equal(root.Links, wantLinks) {
		t.Errorf("Page.Links = %q, want %q", root.Links, wantLinks)
	}
	got := rec.links[srv.URL+"/"]
	if len(got) != 2 || got[0] != (frontier.Task{URL: srv.URL + "/a", Depth: 2}) || got[1] != (frontier.Task{URL: srv.URL + "/b", Depth: 2}) {
		t.Errorf("Discovered %v, want /a and /b at depth 2", got)
	}
	if p := rec.page(srv.URL + "/doc.pdf"); p == nil || p.ContentType != "application/pdf" || len(p.Links) != 0 {
		t.Errorf("pdf page %+v: want stored, not parsed", p)
	}
	if p := rec.page(srv.URL + "/missing"); p == nil || p.Status != 404 {
		t.Errorf("404 page %+v: want stored with its status", p)
	}
	if p := rec.page(srv.URL + "/broken"); p == nil || p.Status != 502 {
		t.Errorf("502 page %+v: want the last answer stored with its status", p)
	}
	if n := srv.count("/broken"); n != 1+cfg.MaxRetries {
		t.Errorf("/broken fetched %d times, want 1 + %d retries", n, cfg.MaxRetries)
	}
	if len(rec.links[srv.URL+"/doc.pdf"])+len(rec.links[srv.URL+"/deep"]) != 0 {
		t.Error("links reported from a PDF or from beyond MaxDepth")
	}
	s := c.Stats()
	// The 502 is retried MaxRetries times, then given up: one page, one
	// dead letter, an error per attempt.
	if s.Fetched != 5 || s.ErrorsByKind["http_4xx"] != 1 || s.ErrorsByKind["http_5xx"] != 4 || s.Errors != 5 ||
		s.Retries != 3 || s.DeadLetters != 1 ||
		s.LinksReported != 2 || s.BytesFetched == 0 || s.FetchP50 <= 0 || s.FetchP99 < s.FetchP50 {
		t.Errorf("stats %+v", s)
	}
	if s.Queued != 0 || s.InFlight != 0 || s.Hosts != 0 {
		t.Errorf("idle crawler reports work: %+v", s)
	}
}

// TestFetchRedirects checks that redirects are not followed inside a fetch:
// every hop is stored as its own page and its target becomes a new task
// through the LinkSink, so it goes through the seen set (loops end there),
// robots.txt and politeness of its own host, and a chain longer than
// MaxRedirects is cut and recorded as a dead letter.
func TestFetchRedirects(t *testing.T) {
	other := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robotsAllowAll(w, r) {
			return
		}
		fmt.Fprint(w, "other")
	})
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\nDisallow: /secret\n")
			return
		}
		switch p := r.URL.Path; {
		case p == "/start":
			http.Redirect(w, r, "/middle", http.StatusMovedPermanently)
		case p == "/middle":
			http.Redirect(w, r, "final?utm_source=r", http.StatusFound)
		case p == "/final":
			fmt.Fprint(w, `<a href="x">x</a>`)
		case strings.HasPrefix(p, "/loop/"):
			var n int
			fmt.Sscanf(p, "/loop/%d", &n)
			http.Redirect(w, r, fmt.Sprintf("/loop/%d", n+1), http.StatusFound)
		case p == "/self":
			http.Redirect(w, r, "/self#again", http.StatusFound)
		case p == "/ping":
			http.Redirect(w, r, "/pong", http.StatusFound)
		case p == "/pong":
			http.Redirect(w, r, "/ping", http.StatusFound)
		case p == "/away":
			// localhost is another host than 127.0.0.1: its own queue.
			http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+"/there", http.StatusFound)
		case p == "/to-secret":
			http.Redirect(w, r, "/secret", http.StatusFound)
		default:
			fmt.Fprint(w, "leaf")
		}
	})
	rec := newRecorder()
	cfg := testConfig()
	cfg.Delay = 40 * time.Millisecond
	cfg.MaxRedirects = 3
	ring := &ringStandIn{seen: map[uint64]int{}, inScope: func(h string) bool { return h == "127.0.0.1" || h == "localhost" }}
	c := newTestCrawler(t, cfg, rec, ring)
	ring.c = c
	var seeds []string
	for _, p := range []string{"/start", "/loop/0", "/self", "/ping", "/away", "/to-secret"} {
		seeds = append(seeds, srv.URL+p)
	}
	ring.seed(seeds)
	crawlUntilIdle(t, c, 20*time.Second)

	// Each hop is a page of its own, with the normalised target.
	for _, hop := range []struct{ from, to string }{{"/start", "/middle"}, {"/middle", "/final"}} {
		p := rec.page(srv.URL + hop.from)
		if p == nil || p.Status/100 != 3 || p.RedirectTo != srv.URL+hop.to || p.FinalURL != srv.URL+hop.from {
			t.Errorf("page %s = %+v, want a 3xx redirecting to %s", hop.from, p, hop.to)
		}
	}
	final := rec.page(srv.URL + "/final")
	if final == nil || final.Status != 200 || final.Task.Redirects != 2 || final.Task.Depth != 0 {
		t.Fatalf("final page %+v, want 200 reached through 2 redirects at the seed's depth", final)
	}
	if !slices.Equal(final.Links, []string{srv.URL + "/x"}) {
		t.Errorf("links %q, want /x", final.Links)
	}
	// The chain is cut after MaxRedirects hops and recorded.
	for i := range 4 {
		if n := srv.count(fmt.Sprintf("/loop/%d", i)); n != 1 {
			t.Errorf("/loop/%d fetched %d times, want 1", i, n)
		}
	}
	if n := srv.count("/loop/4"); n != 0 {
		t.Errorf("followed a chain longer than MaxRedirects")
	}
	var dead []store.DeadLetter
	c.db.DeadLetters(func(d store.DeadLetter) error { dead = append(dead, d); return nil })
	if len(dead) != 1 || dead[0].URL != srv.URL+"/loop/3" || dead[0].Kind != "too_many_redirects" || dead[0].Redirects != 3 {
		t.Errorf("dead letters %+v, want /loop/3 as too_many_redirects", dead)
	}
	// Loops end at the seen set.
	for _, p := range []string{"/self", "/ping", "/pong"} {
		if n := srv.count(p); n != 1 {
			t.Errorf("%s fetched %d times, want 1", p, n)
		}
	}
	// Another host: fetched through its own queue, robots.txt first.
	log := other.log()
	if len(log) != 2 || log[0].path != "/robots.txt" || log[1].path != "/there" {
		t.Errorf("other host saw %v, want robots.txt then /there", log)
	}
	there := rec.page(strings.Replace(other.URL, "127.0.0.1", "localhost", 1) + "/there")
	if there == nil || there.Task.Redirects != 1 {
		t.Errorf("cross-host target page %+v", there)
	}
	// A redirect into a disallowed path is not fetched.
	if srv.count("/secret") != 0 {
		t.Error("followed a redirect into a robots-disallowed path")
	}
	s := c.Stats()
	if s.ErrorsByKind["too_many_redirects"] != 1 || s.RobotsDenied != 1 || s.DeadLetters != 1 {
		t.Errorf("stats %+v, want 1 too_many_redirects, 1 robots denied, 1 dead letter", s)
	}
	// Every hop is a request to the host and keeps the delay.
	hits := srv.log()
	for i, g := range gaps(hits) {
		if g < cfg.Delay {
			t.Errorf("%s only %v after %s", hits[i+1].path, g, hits[i].path)
		}
	}
}

// TestFetchBodyCapAndCodings checks that bodies are streamed with a cap
// (a 20 MB page costs no more than the cap), that gzip and deflate (zlib
// and raw) are asked for, kept as received for the archive and decoded for
// parsing, that a gzip bomb is cut at the cap too, and that an unknown
// coding is kept raw and not parsed.
func TestFetchBodyCapAndCodings(t *testing.T) {
	const limit = 1 << 20
	html := `<html><title>Coded</title><body><p>hello coded world</p><a href="/linked">l</a></body></html>`
	compress := func(coding string, data []byte) []byte {
		var b bytes.Buffer
		var w io.WriteCloser
		switch coding {
		case "gzip":
			w = gzip.NewWriter(&b)
		case "zlib":
			w = zlib.NewWriter(&b)
		case "raw":
			w, _ = flate.NewWriter(&b, flate.BestSpeed)
		}
		w.Write(data)
		w.Close()
		return b.Bytes()
	}
	bodies := map[string][]byte{
		"/gz":         compress("gzip", []byte(html)),
		"/zlib":       compress("zlib", []byte(html)),
		"/rawdeflate": compress("raw", []byte(html)),
		"/bomb":       compress("gzip", make([]byte, 24<<20)),
	}
	codings := map[string]string{"/gz": "gzip", "/zlib": "deflate", "/rawdeflate": "deflate", "/bomb": "gzip", "/br": "br"}
	var bigSent atomic.Int64
	var badAccept atomic.Int32
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robotsAllowAll(w, r) {
			return
		}
		if r.Header.Get("Accept-Encoding") != "gzip, deflate" {
			badAccept.Add(1)
		}
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/big" {
			// Plain text and a bomb of bytes, so that what is measured is
			// the fetch, not the parsing of a megabyte of markup.
			w.Header().Set("Content-Type", "text/plain")
			chunk := bytes.Repeat([]byte("<p>twenty megabytes of page</p>\n"), 2048)
			for sent := 0; sent < 20<<20; sent += len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					return // the crawler hung up: good
				}
				bigSent.Add(int64(len(chunk)))
			}
			return
		}
		if c, ok := codings[r.URL.Path]; ok {
			w.Header().Set("Content-Encoding", c)
		}
		if r.URL.Path == "/bomb" {
			w.Header().Set("Content-Type", "application/octet-stream")
		}
		if b, ok := bodies[r.URL.Path]; ok {
			w.Write(b)
			return
		}
		fmt.Fprint(w, html)
	})
	rec := newRecorder()
	cfg := testConfig()
	cfg.Delay = None
	cfg.MaxBodyBytes = limit
	cfg.NearDupDistance = None // the three coded pages are the same page
	c := newTestCrawler(t, cfg, rec, nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, p := range []string{"/big", "/gz", "/zlib", "/rawdeflate", "/bomb", "/br"} {
		c.Enqueue(frontier.Task{URL: srv.URL + p})
	}
	crawlUntilIdle(t, c, 10*time.Second)
	runtime.ReadMemStats(&after)

	if n := badAccept.Load(); n != 0 {
		t.Errorf("%d requests without Accept-Encoding: gzip, deflate", n)
	}
	big := rec.page(srv.URL + "/big")
	if big == nil || !big.Truncated || len(big.Body) != limit || len(big.RawBody) != limit {
		t.Errorf("big page: %s, want %d bytes, truncated", describe(big), limit)
	}
	if sent := bigSent.Load(); sent >= 20<<20 {
		t.Errorf("the server sent the whole 20 MB: the crawler read past its cap")
	}
	// Neither the 20 MB page nor the 24 MB bomb was held in memory.
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("the crawl allocated %.1f MB", float64(alloc)/(1<<20))
	if alloc > 12<<20 {
		t.Errorf("crawling allocated %d MB; a capped crawl needs a few", alloc>>20)
	}
	// The three coded pages decode to the same bytes: the links of the
	// first are reported, the other two are exact copies.
	reported := 0
	for _, p := range []string{"/gz", "/zlib", "/rawdeflate"} {
		pg := rec.page(srv.URL + p)
		if pg == nil || string(pg.Body) != html || !bytes.Equal(pg.RawBody, bodies[p]) || pg.Truncated ||
			pg.Title != "Coded" || !strings.Contains(pg.Text, "hello coded world") || pg.Simhash == 0 {
			t.Errorf("%s: %s, body %.60q, title %q, text %q", p, describe(pg), pgBody(pg), pgTitle(pg), pgText(pg))
			continue
		}
		if len(pg.Links) > 0 {
			reported++
			if !slices.Equal(pg.Links, []string{srv.URL + "/linked"}) {
				t.Errorf("%s: links %q", p, pg.Links)
			}
		}
	}
	if s := c.Stats(); reported != 1 || s.ExactCopies != 2 {
		t.Errorf("links of %d coded pages reported, %d exact copies; want 1 and 2", reported, s.ExactCopies)
	}
	if bomb := rec.page(srv.URL + "/bomb"); bomb == nil || !bomb.Truncated || len(bomb.Body) != limit || !bytes.Equal(bomb.RawBody, bodies["/bomb"]) {
		t.Errorf("gzip bomb: %s", describe(bomb))
	}
	br := rec.page(srv.URL + "/br")
	if br == nil || br.Body != nil || string(br.RawBody) != html || len(br.Links) != 0 || c.Stats().ErrorsByKind["encoding"] != 1 {
		t.Errorf("unknown coding: %s, links %q, stats %+v", describe(br), pgLinks(br), c.Stats())
	}
}

func pgBody(p *Page) []byte {
	if p == nil {
		return nil
	}
	return p.Body
}

func pgTitle(p *Page) string {
	if p == nil {
		return ""
	}
	return p.Title
}

func pgText(p *Page) string {
	if p == nil {
		return ""
	}
	return p.Text
}

func pgLinks(p *Page) []string {
	if p == nil {
		return nil
	}
	return p.Links
}

func TestFetchTimeoutAndConnectErrors(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robotsAllowAll(w, r) {
			return
		}
		if r.URL.Path == "/hangup" {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		select { // slower than the crawler's Timeout
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/"
	ln.Close()

	rec := newRecorder()
	cfg := testConfig()
	cfg.Timeout = 500 * time.Millisecond // 4 attempts of /slow: 2s
	c := newTestCrawler(t, cfg, rec, rec)
	c.robotsRetry = 10 * time.Millisecond
	c.Enqueue(frontier.Task{URL: srv.URL + "/slow"}, frontier.Task{URL: srv.URL + "/hangup"}, frontier.Task{URL: closed})
	start := time.Now()
	crawlUntilIdle(t, c, 15*time.Second)
	if el := time.Since(start); el > 8*time.Second {
		t.Errorf("took %v: the timeout did not cut the request short", el)
	}
	s := c.Stats()
	// The dead host fails at its robots.txt, maxRobotsAttempts times, and its
	// task is then given up; the slow page and the hang-up fail at the page,
	// are retried MaxRetries times each, then become dead letters.
	tries := 1 + cfg.MaxRetries
	if s.ErrorsByKind["timeout"] != int64(tries) || s.ErrorsByKind["connect"] != int64(maxRobotsAttempts+tries) ||
		s.RobotsDenied != 1 || s.Fetched != 0 || s.Retries != 2*int64(cfg.MaxRetries) || s.DeadLetters != 2 {
		t.Errorf("stats %+v, want %d timeouts, %d connect errors, 1 task given up, 2 dead letters, no pages",
			s, tries, maxRobotsAttempts+tries)
	}
	kinds := map[string]string{}
	c.db.DeadLetters(func(d store.DeadLetter) error {
		kinds[d.URL] = d.Kind
		if d.Attempts != tries || d.LastError == "" {
			t.Errorf("dead letter %+v, want %d attempts and the last error", d, tries)
		}
		return nil
	})
	if kinds[srv.URL+"/slow"] != "timeout" || kinds[srv.URL+"/hangup"] != "connect" {
		t.Errorf("dead letters by URL %v", kinds)
	}
	if len(rec.pageURLs()) != 0 {
		t.Errorf("failed fetches stored: %q", rec.pageURLs())
	}
}

// TestRunStopsPromptly checks that cancelling Run aborts a request in
// flight, waits for the workers, and keeps the task for a later Run.
func TestRunStopsPromptly(t *testing.T) {
	block := make(chan struct{})
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robotsAllowAll(w, r) {
			return
		}
		select {
		case <-r.Context().Done():
		case <-block:
		}
	})
	defer close(block)
	c := newTestCrawler(t, testConfig(), nil, nil)
	c.Enqueue(frontier.Task{URL: srv.URL + "/hang"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	for srv.count("/hang") == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := c.Run(ctx); err == nil {
		t.Error("second concurrent Run succeeded")
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil after cancel", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("Run took %v to stop", el)
	}
	if c.Idle() || c.Stats().Queued != 1 || c.Stats().Errors != 0 {
		t.Errorf("after stop: idle %v, stats %+v; want the task queued again, no error", c.Idle(), c.Stats())
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{&net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}, "dns"},
		{fmt.Errorf("get: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), "connect"},
		{&net.OpError{Op: "proxyconnect", Err: errors.New("refused")}, "connect"},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), "connect"},
		{context.DeadlineExceeded, "timeout"},
		{&net.OpError{Op: "read", Err: timeoutErr{}}, "timeout"},
		{&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, "tls"},
		{tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, "tls"},
		{errors.New("net/http: TLS handshake timeout"), "tls"},
		{io.ErrUnexpectedEOF, "connect"},
		{errors.New("something else"), "other"},
	}
	for _, tt := range tests {
		if got := classify(tt.err); got != tt.want {
			t.Errorf("classify(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestNewValidatesConfig(t *testing.T) {
	tests := []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.UserAgent = " \t" }, "UserAgent is empty"},
		{func(c *Config) { c.UserAgent = "bot/1\r\nX-Evil: 1" }, "line break"},
		{func(c *Config) { c.UserAgent = "/1.0" }, "no product token"},
		{func(c *Config) { c.Workers = -1 }, "workers must be at least 1"},
		{func(c *Config) { c.Timeout = -time.Second }, "timeout must be positive"},
		{func(c *Config) { c.ConnectTimeout = -time.Second }, "ConnectTimeout must be positive"},
		{func(c *Config) { c.MaxBodyBytes = -1 }, "MaxBodyBytes must be positive"},
		{func(c *Config) { c.MinRecrawl = 2 * c.MaxRecrawl }, "MinRecrawl must be in"},
		{func(c *Config) { c.RetryBase = -time.Second }, "RetryBase must be positive"},
		{func(c *Config) { c.RobotsTTL = -time.Hour }, "RobotsTTL must be positive"},
		{func(c *Config) { c.KeyMode = 7 }, "unknown KeyMode(7)"},
		{func(c *Config) { c.DelegateBatch = MaxDelegateTasks + 1 }, "DelegateBatch must be in"},
		{func(c *Config) { c.DelegateBudget = -time.Second }, "DelegateBudget is negative"},
		{func(c *Config) { c.Dial.NegativeTTL = -time.Second }, "NegativeTTL is negative"},
	}
	for _, tt := range tests {
		cfg := DefaultConfig()
		tt.mutate(&cfg)
		_, err := New(cfg, openStore(t), nil, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "crawl config: ") {
			t.Errorf("New: error %v, want one containing %q", err, tt.want)
		}
	}
	// Zero means the default, and None turns off what takes it.
	if _, err := New(Config{}, openStore(t), nil, nil); err != nil {
		t.Errorf("New(Config{}): %v", err)
	}
	if got, want := (Config{}).WithDefaults(), DefaultConfig().WithDefaults(); !sameConfig(got, want) {
		t.Errorf("Config{}.WithDefaults() = %+v, want the defaults %+v", got, want)
	}
	off := DefaultConfig()
	off.Delay, off.MaxCrawlDelay, off.MaxDepth, off.MaxRedirects = None, None, None, None
	off.MaxRepeatedSegments, off.MaxRecrawl, off.MaxRetries, off.MaxRetryAfter = None, None, None, None
	off.NearDupDistance, off.HotQueue, off.Dial.MaxConnsPerIP, off.Dial.ReclaimIdle = None, None, None, None
	off.MaxPagesPerHost, off.MaxLinksPerPage = None, None
	if _, err := New(off, openStore(t), nil, nil); err != nil {
		t.Errorf("New(DefaultConfig with every None): %v", err)
	}
	if got := ProductToken("ExampleBot/1.0 (+http://bot.example/about)"); got != "examplebot" {
		t.Errorf("ProductToken = %q", got)
	}
}

// sameConfig compares two configurations field by field, the functions by
// whether they are set.
func sameConfig(a, b Config) bool {
	if (a.Proxy == nil) != (b.Proxy == nil) || (a.Clock == nil) != (b.Clock == nil) ||
		(a.Dial.Resolve == nil) != (b.Dial.Resolve == nil) || (a.Dial.Now == nil) != (b.Dial.Now == nil) {
		return false
	}
	a.Proxy, b.Proxy, a.Clock, b.Clock = nil, nil, nil, nil
	a.Dial.Resolve, b.Dial.Resolve, a.Dial.Now, b.Dial.Now = nil, nil, nil, nil
	return reflect.DeepEqual(a, b)
}

func TestEnqueueRejectsBadURLs(t *testing.T) {
	c := newTestCrawler(t, testConfig(), nil, nil)
	c.Enqueue(frontier.Task{URL: "not a url"}, frontier.Task{URL: "ftp://example.com/"}, frontier.Task{URL: "http://example.com/"})
	s := c.Stats()
	if s.ErrorsByKind["bad_url"] != 2 || s.Queued != 1 || c.Idle() {
		t.Errorf("stats %+v idle %v: want 2 bad_url, 1 queued", s, c.Idle())
	}
}
