package synthweb

import (
	"fmt"
	"strings"
	"time"
)

// CaseHost returns the host name of case name ("flaky" gives
// "flaky.synth.test"; "cases" is the hub), or "" if there is no such case
// or Config.Cases is off.
func (w *Web) CaseHost(name string) string {
	if h := w.cases.host(strings.ToLower(name) + caseSuffix); h != nil {
		return h.name
	}
	return ""
}

// CaseHosts returns the case host names in order, the hub first; nil
// unless Config.Cases.
func (w *Web) CaseHosts() []string {
	if w.cases == nil {
		return nil
	}
	out := make([]string, len(w.cases.hosts))
	for i, h := range w.cases.hosts {
		out[i] = h.name
	}
	return out
}

// TrapHosts returns the crawler-trap case hosts: calendar and deep, which
// serve pages without end and are outside GroundTruth, and session, whose
// links are unbounded only for a crawler that keeps session ids (its
// canonical pages are in GroundTruth). A crawl should request a bounded
// number of URLs on each (see RequestsTo). nil unless Config.Cases.
func (w *Web) TrapHosts() []string {
	if w.cases == nil {
		return nil
	}
	var out []string
	for _, h := range w.cases.hosts {
		if h.trap {
			out = append(out, h.name)
		}
	}
	return out
}

// DeadURLs returns, sorted, the canonical URLs that a crawler reaches but
// that answer 500 forever (the dead case host): they belong in its
// dead-letter queue after the retries, not in GroundTruth. nil unless
// Config.Cases.
func (w *Web) DeadURLs() []string { return w.cases.urlsWithFate(fateDead) }

// SlowURLs returns, sorted, the canonical URLs that answer only after
// SlowPageDelay (the slow case host): a crawler with a shorter timeout
// retries them and gives up, so they are not in GroundTruth. nil unless
// Config.Cases.
func (w *Web) SlowURLs() []string { return w.cases.urlsWithFate(fateSlow) }

// Changed reports whether the content of a fresh case page changed after
// since: true when a changing page has gone through a ChangePeriod boundary
// between since and now, false for the pages that never change and for
// URLs that are not fresh pages.
func (w *Web) Changed(rawURL string, since time.Time) bool {
	if w.cases == nil {
		return false
	}
	c, err := Canonical(rawURL)
	if err != nil {
		return false
	}
	p := w.cases.pages[c]
	if p == nil || !p.changes {
		return false
	}
	return w.cases.version(since) != w.cases.version(time.Now())
}

// RequestsTo returns the logged requests to host (any case, port ignored),
// robots.txt included, in arrival order.
func (w *Web) RequestsTo(host string) []Request {
	host = strings.ToLower(host)
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		host = host[:i]
	}
	var out []Request
	for _, r := range w.Log() {
		if r.Host == host {
			out = append(out, r)
		}
	}
	return out
}

// MaxInFlight returns the largest number of requests the server was
// handling at once since the last ResetLog, whatever their hosts: what a
// per-IP connection cap bounds, since every host has the same IP. A
// request counts from its arrival until the server starts sending the
// bytes that complete its response.
func (w *Web) MaxInFlight() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxBusy
}

// MaxInFlightPerHost returns, per host, the largest number of requests to
// that host the server was handling at once since the last ResetLog
// (counted as for MaxInFlight). A crawler polite to each host keeps every
// value at 1.
func (w *Web) MaxInFlightPerHost() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.maxBusyHost))
	for h, n := range w.maxBusyHost {
		out[h] = n
	}
	return out
}

// CheckRetryAfter returns one violation for every request that reached a
// host before the Retry-After it had last been given ran out, counted from
// when that 429 or 503 response was sent. robots.txt requests count: a
// Retry-After slows the whole host.
func (w *Web) CheckRetryAfter() []string {
	log := w.Log()
	type block struct {
		path  string
		until time.Time
		sent  time.Time
	}
	var blocks = map[string][]block{}
	for _, r := range log {
		if r.RetryAfter > 0 && !r.done.IsZero() {
			blocks[r.Host] = append(blocks[r.Host], block{r.Path, r.done.Add(r.RetryAfter), r.done})
		}
	}
	var out []string
	for _, r := range log {
		for _, b := range blocks[r.Host] {
			if r.Time.After(b.sent) && r.Time.Before(b.until) {
				out = append(out, fmt.Sprintf("%s: %s %v before the Retry-After given with %s ran out",
					r.Host, r.Path, b.until.Sub(r.Time).Round(time.Millisecond), b.path))
				break
			}
		}
	}
	return out
}

// legitimateRepeat reports whether a request may repeat an earlier one
// without being a duplicate: it failed (5xx, 429), the client abandoned it,
// or it was a conditional recrawl.
func legitimateRepeat(r Request) bool {
	return r.Status >= 500 || r.Status == 429 || r.Abandoned || r.Conditional
}

// answered reports whether a request got a final answer: a status other
// than 5xx or 429 was sent.
func answered(r Request) bool {
	return r.Status != 0 && r.Status < 500 && r.Status != 429
}

// isRobots reports whether a logged request is a robots.txt fetch: for
// /robots.txt, or for a hop of robots-redirect's redirected robots.txt.
func (w *Web) isRobots(r Request) bool {
	if r.Path == "/robots.txt" {
		return true
	}
	h := w.cases.host(r.Host)
	return h != nil && h.isRobotsPath(r.Path)
}

// notExpected reports whether a requested URL outside GroundTruth is
// nevertheless what a correct crawler requests: a page of an unbounded trap
// host, a dead URL or a slow URL.
func (w *Web) notExpected(r Request) bool {
	if w.IsTrapURL(r.URL) {
		return false
	}
	if w.cases == nil {
		return true
	}
	if h := w.cases.host(r.Host); h != nil && h.unbounded {
		return false
	}
	c, err := Canonical(r.URL)
	if err != nil || c != r.URL {
		return true
	}
	p := w.cases.pages[c]
	return p == nil || (p.fate != fateDead && p.fate != fateSlow)
}
