package crawl

import (
	"compress/gzip"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
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
	c.Enqueue(Task{URL: srv.URL + "/", Depth: 1}, Task{URL: srv.URL + "/doc.pdf"},
		Task{URL: srv.URL + "/missing"}, Task{URL: srv.URL + "/broken"}, Task{URL: srv.URL + "/deep", Depth: 3})
	crawlUntilIdle(t, c, 5*time.Second)

	root := rec.page(srv.URL + "/")
	if root == nil || root.Status != 200 || root.FinalURL != srv.URL+"/" || !strings.Contains(string(root.Body), "<a href") {
		t.Fatalf("root page %+v", root)
	}
	wantLinks := []string{srv.URL + "/a", srv.URL + "/b"}
	if !slices.Equal(root.Links, wantLinks) {
		t.Errorf("Page.Links = %q, want %q", root.Links, wantLinks)
	}
	got := rec.links[srv.URL+"/"]
	if len(got) != 2 || got[0] != (Task{URL: srv.URL + "/a", Depth: 2}) || got[1] != (Task{URL: srv.URL + "/b", Depth: 2}) {
		t.Errorf("Discovered %v, want /a and /b at depth 2", got)
	}
	if p := rec.page(srv.URL + "/doc.pdf"); p == nil || p.ContentType != "application/pdf" || len(p.Links) != 0 {
		t.Errorf("pdf page %+v: want stored, not parsed", p)
	}
	if p := rec.page(srv.URL + "/missing"); p == nil || p.Status != 404 {
		t.Errorf("404 page %+v: want stored with its status", p)
	}
	if p := rec.page(srv.URL + "/broken"); p == nil || p.Status != 502 {
		t.Errorf("502 page %+v: want stored with its status", p)
	}
	if len(rec.links[srv.URL+"/doc.pdf"])+len(rec.links[srv.URL+"/deep"]) != 0 {
		t.Error("links reported from a PDF or from beyond MaxDepth")
	}
	s := c.Stats()
	if s.Fetched != 5 || s.ErrorsByKind["http_4xx"] != 1 || s.ErrorsByKind["http_5xx"] != 1 || s.Errors != 2 ||
		s.LinksReported != 2 || s.BytesFetched == 0 || s.FetchP50 <= 0 || s.FetchP99 < s.FetchP50 {
		t.Errorf("stats %+v", s)
	}
	if s.Queued != 0 || s.InFlight != 0 || s.Hosts != 0 {
		t.Errorf("idle crawler reports work: %+v", s)
	}
}

func TestFetchRedirects(t *testing.T) {
	other := newLogServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "other") })
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
		case p == "/away":
			// localhost is another host than 127.0.0.1: not ours to fetch now.
			http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+"/there", http.StatusFound)
		case p == "/to-secret":
			http.Redirect(w, r, "/secret", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	})
	rec := newRecorder()
	cfg := testConfig()
	cfg.Delay = 40 * time.Millisecond
	cfg.MaxRedirects = 3
	c := newTestCrawler(t, cfg, rec, rec)
	for _, p := range []string{"/start", "/loop/0", "/self", "/away", "/to-secret"} {
		c.Enqueue(Task{URL: srv.URL + p})
	}
	crawlUntilIdle(t, c, 10*time.Second)

	p := rec.page(srv.URL + "/start")
	if p == nil || p.Status != 200 || p.FinalURL != srv.URL+"/final" ||
		!slices.Equal(p.Redirects, []string{srv.URL + "/start", srv.URL + "/middle"}) {
		t.Fatalf("redirected page %+v", p)
	}
	// Links resolve against the final URL.
	if !slices.Equal(p.Links, []string{srv.URL + "/x"}) {
		t.Errorf("links %q, want /x relative to the final URL", p.Links)
	}
	if p := rec.page(srv.URL + "/loop/0"); p == nil || p.Status != 302 || len(p.Redirects) != 3 {
		t.Errorf("loop page %+v, want the 4th 302 after 3 redirects", p)
	}
	if n := srv.count("/loop/4"); n != 0 {
		t.Errorf("followed more than MaxRedirects")
	}
	if n := srv.count("/self"); n != 1 {
		t.Errorf("self-redirect fetched %d times, want 1", n)
	}
	// Cross-host: not followed, handed to the LinkSink.
	away := rec.page(srv.URL + "/away")
	wantAway := strings.Replace(other.URL, "127.0.0.1", "localhost", 1) + "/there"
	if away == nil || away.Status != 302 || !slices.Equal(away.Links, []string{wantAway}) {
		t.Errorf("cross-host redirect page %+v, want 302 with link %s", away, wantAway)
	}
	if len(other.log()) != 0 {
		t.Errorf("cross-host redirect target fetched directly: %v", other.log())
	}
	if l := rec.links[srv.URL+"/away"]; len(l) != 1 || l[0].URL != wantAway || l[0].Depth != 1 {
		t.Errorf("Discovered for the redirect %v", l)
	}
	// Redirect into a disallowed path: not followed.
	if srv.count("/secret") != 0 {
		t.Error("followed a redirect into a robots-disallowed path")
	}
	s := c.Stats()
	if s.ErrorsByKind["too_many_redirects"] != 2 || s.RobotsDenied != 1 || s.Redirects != 5 {
		t.Errorf("stats %+v, want 2 too_many_redirects (loop, self), 1 robots denied, 5 redirects followed", s)
	}
	// Every hop is a request to the host and keeps the delay.
	log := srv.log()
	for i, g := range gaps(log) {
		if g < cfg.Delay {
			t.Errorf("%s only %v after %s", log[i+1].path, g, log[i].path)
		}
	}
}

func TestFetchBodyLimitAndGzip(t *testing.T) {
	big := strings.Repeat("x", 1000)
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robotsAllowAll(w, r) {
			return
		}
		if r.URL.Path == "/gz" {
			if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
				http.Error(w, "want gzip", http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Type", "text/plain")
			zw := gzip.NewWriter(w)
			io.WriteString(zw, "compressed hello")
			zw.Close()
			return
		}
		fmt.Fprint(w, big)
	})
	rec := newRecorder()
	cfg := testConfig()
	cfg.MaxBodyBytes = 100
	c := newTestCrawler(t, cfg, rec, rec)
	c.Enqueue(Task{URL: srv.URL + "/big"}, Task{URL: srv.URL + "/gz"})
	crawlUntilIdle(t, c, 5*time.Second)

	if p := rec.page(srv.URL + "/big"); p == nil || !p.Truncated || len(p.Body) != 100 {
		t.Errorf("big page: %+v, want 100 bytes, truncated", p)
	}
	if p := rec.page(srv.URL + "/gz"); p == nil || p.Truncated || string(p.Body) != "compressed hello" {
		t.Errorf("gzip page: %+v, want the decompressed body", p)
	}
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
	cfg.Timeout = 200 * time.Millisecond
	c := newTestCrawler(t, cfg, rec, rec)
	c.robotsRetry = 10 * time.Millisecond
	c.Enqueue(Task{URL: srv.URL + "/slow"}, Task{URL: srv.URL + "/hangup"}, Task{URL: closed})
	start := time.Now()
	crawlUntilIdle(t, c, 5*time.Second)
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("took %v: the timeout did not cut the request short", el)
	}
	s := c.Stats()
	// The dead host fails at its robots.txt, maxRobotsAttempts times, and its
	// task is then given up; the hang-up fails at the page.
	if s.ErrorsByKind["timeout"] != 1 || s.ErrorsByKind["connect"] != maxRobotsAttempts+1 ||
		s.RobotsDenied != 1 || s.Fetched != 0 {
		t.Errorf("stats %+v, want 1 timeout, %d connect errors, 1 task given up, no pages", s, maxRobotsAttempts+1)
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
	c.Enqueue(Task{URL: srv.URL + "/hang"})
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
		{func(c *Config) { c.UserAgent = "" }, "UserAgent is empty"},
		{func(c *Config) { c.UserAgent = "bot/1\r\nX-Evil: 1" }, "line break"},
		{func(c *Config) { c.UserAgent = "/1.0" }, "no product token"},
		{func(c *Config) { c.Workers = 0 }, "workers must be at least 1"},
		{func(c *Config) { c.Delay = -time.Second }, "delay is negative"},
		{func(c *Config) { c.Timeout = 0 }, "timeout must be positive"},
		{func(c *Config) { c.ConnectTimeout = 0 }, "ConnectTimeout must be positive"},
		{func(c *Config) { c.MaxBodyBytes = 0 }, "MaxBodyBytes must be positive"},
		{func(c *Config) { c.MaxDepth = -1 }, "MaxDepth is negative"},
		{func(c *Config) { c.MaxRedirects = -1 }, "MaxRedirects is negative"},
		{func(c *Config) { c.RobotsTTL = 0 }, "RobotsTTL must be positive"},
		{func(c *Config) { c.MaxCrawlDelay = -1 }, "MaxCrawlDelay is negative"},
	}
	for _, tt := range tests {
		cfg := DefaultConfig()
		tt.mutate(&cfg)
		_, err := New(cfg, nil, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "crawl config: ") {
			t.Errorf("New: error %v, want one containing %q", err, tt.want)
		}
	}
	cfg := DefaultConfig()
	cfg.Delay = 0 // zero is a value, not "default"
	if _, err := New(cfg, nil, nil); err != nil {
		t.Errorf("New(DefaultConfig with Delay 0): %v", err)
	}
	if got := ProductToken("ExampleBot/1.0 (+http://bot.example/about)"); got != "examplebot" {
		t.Errorf("ProductToken = %q", got)
	}
}

func TestEnqueueRejectsBadURLs(t *testing.T) {
	c := newTestCrawler(t, testConfig(), nil, nil)
	c.Enqueue(Task{URL: "not a url"}, Task{URL: "ftp://example.com/"}, Task{URL: "http://example.com/"})
	s := c.Stats()
	if s.ErrorsByKind["bad_url"] != 2 || s.Queued != 1 || c.Idle() {
		t.Errorf("stats %+v idle %v: want 2 bad_url, 1 queued", s, c.Idle())
	}
}
