package crawl

import (
	"bytes"
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
	"time"
)

// newClient builds the one HTTP client all workers share, so connections
// (and the proxy's) are pooled across hosts.
func newClient(cfg *Config) *http.Client {
	rt := cfg.Transport
	if rt == nil {
		dialer := &net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
		rt = &http.Transport{
			Proxy:               cfg.Proxy,
			DialContext:         dialer.DialContext,
			TLSHandshakeTimeout: cfg.ConnectTimeout,
			ForceAttemptHTTP2:   true,
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
	return &http.Client{
		Transport: rt,
		// Redirects are followed by the worker, one politeness-checked hop
		// at a time (see fetchPage), never blindly by the client.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// response is one HTTP exchange, body read.
type response struct {
	status    int
	header    http.Header
	body      []byte
	truncated bool
	duration  time.Duration
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

// get performs one GET of rawURL and reads at most limit body bytes. The
// whole exchange, body included, is bounded by cfg.Timeout.
func (c *Crawler) get(ctx context.Context, rawURL string, limit int64) (*response, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, &fetchError{"bad_url", fmt.Errorf("build request for %s: %w", truncate(rawURL, 80), err)}
	}
	req.Header.Set("User-Agent", c.cfg.UserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8")

	start := time.Now()
	c.requests.Add(1)
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, &fetchError{classify(err), fmt.Errorf("get %s: %w", truncate(rawURL, 80), err)}
	}
	defer resp.Body.Close()

	// Size the buffer from Content-Length when it is honest and small, so a
	// typical page costs one allocation instead of a dozen regrowths.
	var buf bytes.Buffer
	if cl := resp.ContentLength; cl > 0 && cl <= limit {
		buf.Grow(int(cl) + bytes.MinRead)
	}
	_, err = buf.ReadFrom(io.LimitReader(resp.Body, limit+1))
	d := time.Since(start)
	c.recordLatency(d)
	if err != nil {
		kind := "body"
		if classify(err) == "timeout" {
			kind = "timeout"
		}
		return nil, &fetchError{kind, fmt.Errorf("read body of %s: %w", truncate(rawURL, 80), err)}
	}
	body := buf.Bytes()
	r := &response{status: resp.StatusCode, header: resp.Header, duration: d}
	if int64(len(body)) > limit {
		body, r.truncated = body[:limit], true
	}
	r.body = slices.Clip(body)
	c.bytesFetched.Add(int64(len(body)))
	return r, nil
}

// classify names the kind of a transport error for the stats: what an
// operator needs to tell a dead host from a slow one from a bad certificate.
func classify(err error) string {
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
