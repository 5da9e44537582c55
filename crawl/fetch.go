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
	"net/http/httptrace"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
)

// newClient builds the one HTTP client all workers share, so connections
// (and the proxy's) are pooled across hosts. Every request passes the
// address policy before anything is sent (Dialer.checkHost), proxied or
// not; direct connections go through a Dialer (DNS cache, per-IP cap, no
// private addresses), connections to a proxy do not, since the proxy is
// the operator's choice and usually local. The client never follows
// redirects (each hop is a task of its own) and never decompresses on its
// own: the crawler asks for gzip and deflate itself, keeps the body as
// received for the archive, and decodes it with a size cap.
func newClient(cfg *Config) (*http.Client, *Dialer, error) {
	rt := cfg.Transport
	var dialer *Dialer
	if t, ok := rt.(*http.Transport); ok {
		// A replacement transport's connections are gated too.
		t = t.Clone()
		dial := t.DialContext
		if dial == nil {
			dial = (&net.Dialer{}).DialContext
		}
		t.DialContext = gateDial(dial)
		rt = t
	}
	if rt == nil {
		var err error
		if dialer, err = NewDialer(cfg.Dial); err != nil {
			return nil, nil, err
		}
		direct := newTransport(cfg, nil, gateDial(dialer.DialContext))
		plain := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
		rt = &proxyRouter{
			proxy:   cfg.Proxy,
			proxied: newTransport(cfg, cfg.Proxy, gateDial(plain.DialContext)),
			direct:  direct,
			policy:  dialer,
		}
	}
	return &http.Client{
		Transport:     rt,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, dialer, nil
}

func newTransport(cfg *Config, proxy func(*http.Request) (*url.URL, error),
	dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
	return &http.Transport{
		Proxy:               proxy,
		DialContext:         dial,
		TLSHandshakeTimeout: cfg.ConnectTimeout,
		ForceAttemptHTTP2:   true,
		DisableCompression:  true,
		// Through a plain HTTP proxy every host shares the proxy's pool,
		// so it needs room for all workers at once.
		MaxIdleConns:        max(100, 2*cfg.Workers),
		MaxIdleConnsPerHost: cfg.Workers,
		// A host is revisited after Delay; keep its connection a while
		// longer than that, but not forever across thousands of hosts.
		IdleConnTimeout:        max(30*time.Second, 2*cfg.Delay),
		ResponseHeaderTimeout:  cfg.Timeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 1 << 20,
	}
}

// proxyRouter checks every request against the address policy, then sends
// it through the proxied transport when the proxy function picks a proxy
// for it, and through the direct one otherwise.
type proxyRouter struct {
	proxy           func(*http.Request) (*url.URL, error)
	proxied, direct *http.Transport
	policy          *Dialer
}

func (p *proxyRouter) RoundTrip(req *http.Request) (*http.Response, error) {
	u, err := p.proxy(req)
	if err == nil {
		err = p.policy.checkHost(req.Context(), req.URL.Hostname(), u != nil)
	} else {
		err = fmt.Errorf("choose proxy: %w", err)
	}
	if err != nil {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, err
	}
	if u != nil {
		return p.proxied.RoundTrip(req)
	}
	return p.direct.RoundTrip(req)
}

// CloseIdleConnections closes the idle connections of both transports.
func (p *proxyRouter) CloseIdleConnections() {
	p.proxied.CloseIdleConnections()
	p.direct.CloseIdleConnections()
}

// acceptEncoding is what the crawler asks for: the codings it decodes.
const acceptEncoding = "gzip, deflate"

// response is one HTTP exchange, body read.
type response struct {
	status     int
	header     http.Header
	reqHeader  http.Header
	proto      string
	remoteAddr string
	raw        []byte // as received, at most the limit
	body       []byte // decoded, at most the limit; nil when undecodable
	truncated  bool
	// undecodable is set when the content coding is unknown or corrupt.
	undecodable bool
	duration    time.Duration
	// answered is when the response headers arrived: the politeness gap
	// before the host's next request runs from there.
	answered time.Time
}

// fetchError is a failed request with the kind it is counted under.
type fetchError struct {
	kind string
	err  error
}

func (e *fetchError) Error() string { return e.kind + ": " + e.err.Error() }
func (e *fetchError) Unwrap() error { return e.err }

// errorKind returns the stats kind of an error from get.
func errorKind(err error) string {
	var fe *fetchError
	if errors.As(err, &fe) {
		return fe.kind
	}
	return "other"
}

// errNotOwned is get's error when its gate closed before the request was
// written, at every attempt: nothing reached the server.
var errNotOwned = errors.New("crawl: task no longer owned; request not sent")

// get performs one GET of rawURL, with the extra request headers given
// (conditional ones for a recrawl), and reads at most limit body bytes as
// received; the decoded body is capped at limit too. The whole exchange,
// body included, is bounded by cfg.Timeout. gate, when set, is asked once
// the connection is ready, right before the request is written: when it
// answers false the request is abandoned unsent and get returns
// errNotOwned. (Ownership is checked before a fetch begins, but waits for
// a connection slot, a dial, or a process pause can come in between.)
func (c *Crawler) get(ctx context.Context, rawURL string, limit int64, extra http.Header, gate func() bool) (*response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	r := &response{}
	// gated: the gate refused a write; opened: it allowed one. The HTTP
	// transport retries a request on a new connection when a reused one
	// failed before anything was written, as a refused write does: so
	// one request may be refused and then sent.
	var gated, opened atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			if a := info.Conn.RemoteAddr(); a != nil {
				r.remoteAddr = a.String()
			}
			if gate == nil {
				return
			}
			check := func() bool {
				if gate() {
					opened.Store(true)
					return true
				}
				gated.Store(true)
				return false
			}
			// The request's first write asks the gate (gate.go); a
			// connection that cannot be armed is checked now, and the
			// request cancelled, which races with its write.
			if !armGate(info.Conn, check) && !check() {
				cancel()
			}
		},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, &fetchError{"bad_url", fmt.Errorf("build request for %s: %w", urls.Truncate(rawURL, 80), err)}
	}
	req.Header.Set("User-Agent", c.cfg.UserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8")
	req.Header.Set("Accept-Encoding", acceptEncoding)
	for k, vs := range extra {
		req.Header[k] = vs
	}
	r.reqHeader = req.Header.Clone()

	start := time.Now()
	c.requests.Add(1)
	resp, err := c.client.Do(req)
	if err != nil && gated.Load() && !opened.Load() {
		// Refused at every attempt: nothing reached the server. A
		// request the gate let through once was sent, whatever became of
		// a later attempt, and an answer is an answer: before, a refusal
		// followed by the transport's retry on a fresh connection was
		// taken for "not sent", and the page fetched again later (one
		// page in a few hundred under load, issue 31 item 4).
		c.requests.Add(-1) // not sent after all
		return nil, fmt.Errorf("get %s: %w", urls.Truncate(rawURL, 80), errNotOwned)
	}
	if err != nil {
		return nil, &fetchError{classify(err), fmt.Errorf("get %s: %w", urls.Truncate(rawURL, 80), err)}
	}
	defer resp.Body.Close()
	r.answered = c.now()
	raw, truncated, err := readCapped(resp.Body, limit, resp.ContentLength)
	r.duration = time.Since(start)
	c.recordLatency(r.duration)
	c.responses.add(resp.StatusCode)
	if err != nil {
		kind := "body"
		if classify(err) == "timeout" {
			kind = "timeout"
		}
		return nil, &fetchError{kind, fmt.Errorf("read body of %s: %w", urls.Truncate(rawURL, 80), err)}
	}
	c.bytesFetched.Add(int64(len(raw)))
	r.status, r.header, r.proto = resp.StatusCode, resp.Header, resp.Proto
	r.raw, r.truncated = raw, truncated
	r.body, truncated, err = decodeBody(resp.Header.Get("Content-Encoding"), raw, limit, truncated)
	r.truncated = r.truncated || truncated
	r.undecodable = err != nil
	return r, nil
}

// readCapped reads r up to limit bytes and reports whether there was more.
// It never holds more than limit+1 bytes, whatever the server claims: the
// buffer grows by doubling from the Content-Length hint (when honest and
// small) or a modest start, up to limit+1.
func readCapped(r io.Reader, limit, hint int64) ([]byte, bool, error) {
	size := int64(16 << 10)
	if hint > 0 {
		size = hint + 1 // +1 to see EOF without another growth
	}
	buf := make([]byte, 0, min(size, limit+1))
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return buf[:limit:limit], true, nil
			}
			// Allocated by hand: append's growth would round past the cap.
			nb := make([]byte, len(buf), min(2*int64(cap(buf)), limit+1))
			copy(nb, buf)
			buf = nb
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			if int64(len(buf)) > limit {
				return buf[:limit:limit], true, nil
			}
			return slices.Clip(buf), false, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
}

// decodeBody undoes the content coding of a body received whole (or cut
// at the limit, rawTruncated), keeping at most limit decoded bytes: a
// gzip bomb costs no more than an honest page. An unknown or corrupt coding
// returns an error and no body.
func decodeBody(coding string, raw []byte, limit int64, rawTruncated bool) ([]byte, bool, error) {
	var zr io.Reader
	switch strings.ToLower(strings.TrimSpace(coding)) {
	case "", "identity":
		return raw, false, nil
	case "gzip", "x-gzip":
		gz, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, false, fmt.Errorf("gzip: %w", err)
		}
		zr = gz
	case "deflate":
		// RFC 9110 "deflate" is zlib-wrapped, but many servers send raw
		// DEFLATE: accept both, as browsers do.
		if len(raw) >= 2 && raw[0]&0x0f == 8 && (uint16(raw[0])<<8|uint16(raw[1]))%31 == 0 {
			z, err := zlib.NewReader(bytes.NewReader(raw))
			if err != nil {
				return nil, false, fmt.Errorf("deflate: %w", err)
			}
			zr = z
		} else {
			zr = flate.NewReader(bytes.NewReader(raw))
		}
	default:
		return nil, false, fmt.Errorf("unsupported content coding %q", coding)
	}
	body, truncated, err := readCapped(zr, limit, min(4*int64(len(raw)), limit))
	if err != nil {
		if rawTruncated && errors.Is(err, io.ErrUnexpectedEOF) {
			// Cut at the limit as received: keep what decoded.
			return body, true, nil
		}
		return nil, false, fmt.Errorf("decode %s body: %w", coding, err)
	}
	return body, truncated, nil
}

// classify names the kind of a transport error for the stats: what an
// operator needs to tell a dead host from a slow one from a bad certificate.
func classify(err error) string {
	if errors.Is(err, ErrBlockedAddress) {
		return "blocked_address"
	}
	var (
		dnsErr     *net.DNSError
		certErr    *tls.CertificateVerificationError
		recErr     tls.RecordHeaderError
		alertErr   tls.AlertError
		unknownCA  x509.UnknownAuthorityError
		hostErr    x509.HostnameError
		invalidErr x509.CertificateInvalidError
		opErr      *net.OpError
		netErr     net.Error
	)
	switch {
	case errors.As(err, &dnsErr):
		return "dns"
	case errors.As(err, &certErr), errors.As(err, &recErr), errors.As(err, &alertErr),
		errors.As(err, &unknownCA), errors.As(err, &hostErr), errors.As(err, &invalidErr),
		strings.Contains(err.Error(), "TLS handshake"):
		return "tls"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.As(err, &opErr) && (opErr.Op == "dial" || opErr.Op == "proxyconnect"),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "connect"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "connect" // the server hung up before answering
	}
	return "other"
}

// isRedirect reports whether status is a redirect that carries a Location
// worth following (304 Not Modified and 300 Multiple Choices do not).
func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// statusKind returns the error kind an HTTP status is counted under, or ""
// for statuses that are not failures.
func statusKind(status int) string {
	switch {
	case status >= 500:
		return "http_5xx"
	case status >= 400:
		return "http_4xx"
	}
	return ""
}
