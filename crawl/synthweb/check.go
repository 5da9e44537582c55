package synthweb

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Log returns a copy of the request log in arrival order.
func (w *Web) Log() []Request {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Request, len(w.log))
	for i, e := range w.log {
		out[i] = *e
	}
	return out
}

// LogSince returns a copy of the request log from its i-th request on
// (none if it holds no more than i), in arrival order: a caller watching
// the log reads only what is new. A request still in progress (Status 0,
// not Abandoned) may change after it is read.
func (w *Web) LogSince(i int) []Request {
	w.mu.Lock()
	defer w.mu.Unlock()
	if i >= len(w.log) {
		return nil
	}
	out := make([]Request, len(w.log)-max(i, 0))
	for j, e := range w.log[max(i, 0):] {
		out[j] = *e
	}
	return out
}

// ResetLog empties the request log and restarts the MaxInFlight counts.
// Requests still in progress complete but are not logged again. With
// Config.Cases it also forgets how often each URL was requested, so the
// flaky, ratelimited and robots-flaky hosts fail again as for a new web.
func (w *Web) ResetLog() {
	w.mu.Lock()
	w.log = nil
	w.maxBusy = w.busy
	w.maxBusyHost = map[string]int{}
	for h, n := range w.busyHost {
		if n > 0 {
			w.maxBusyHost[h] = n
		}
	}
	w.mu.Unlock()
	if w.cases != nil {
		w.cases.reset()
	}
}

// CheckPoliteness returns one violation for every pair of consecutive
// requests (robots.txt included) to the same host whose arrival times are
// closer than max(minGap, the host's Crawl-delay). Following a redirect of
// robots.txt at once (robots-redirect) is part of one robots.txt fetch and
// no violation.
func (w *Web) CheckPoliteness(minGap time.Duration) []string {
	log := w.Log()
	if len(log) == 0 {
		return nil
	}
	t0 := log[0].Time
	last := map[string]Request{}
	var out []string
	for _, r := range log {
		if prev, ok := last[r.Host]; ok && !(w.isRobots(prev) && w.isRobots(r) && prev.Location != "") {
			need := max(minGap, w.CrawlDelay(r.Host))
			if gap := r.Time.Sub(prev.Time); gap < need {
				out = append(out, fmt.Sprintf("%s: %s at +%v only %v after %s (need %v)",
					r.Host, r.Path, r.Time.Sub(t0).Round(time.Microsecond), gap.Round(time.Microsecond), prev.Path, need))
			}
		}
		last[r.Host] = r
	}
	return out
}

// CheckRobots returns the requests (other than /robots.txt) to synthetic
// hosts whose path is disallowed for token, judged on the path as requested
// and on its canonical form (either being disallowed is a violation). On
// case hosts the rules are those of Allowed, every page request to
// robots-5xx is a violation, and so is any page request to robots-flaky
// that arrives before its robots.txt has been answered with 200.
func (w *Web) CheckRobots(token string) []string {
	var out []string
	robotsOK := map[string]bool{}
	for _, r := range w.Log() {
		if w.isRobots(r) {
			if r.Status == 200 {
				robotsOK[r.Host] = true
			}
			continue
		}
		pol := w.policy(r.Host)
		if pol == nil {
			continue
		}
		if h := w.cases.host(r.Host); h != nil && h.robotsMode == robotsFlaky && !robotsOK[r.Host] {
			out = append(out, fmt.Sprintf("%s requested before robots.txt of %s was available", r.URL, r.Host))
			continue
		}
		bad := !pol.allowed(token, r.Path)
		if c, err := Canonical(r.URL); err == nil && !bad {
			_, pq, _ := strings.Cut(strings.TrimPrefix(c, "http://"), "/")
			bad = !pol.allowed(token, "/"+pq)
		}
		if bad {
			out = append(out, fmt.Sprintf("%s disallowed for %q by robots.txt of %s (status %d)", r.URL, token, r.Host, r.Status))
		}
	}
	return out
}

// Duplicates returns, sorted, the page URLs (robots.txt excluded) requested
// more than once, counting all spellings with the same canonical form as the
// same URL. Legitimate repeats are not counted: requests answered with 5xx
// or 429 (a retry follows), requests the client abandoned (Abandoned), and
// conditional requests (recrawls).
func (w *Web) Duplicates() []string {
	var out []string
	for k, reqs := range w.Repeated() {
		var forms []string
		for _, r := range reqs {
			if !contains(forms, r.URL) {
				forms = append(forms, r.URL)
			}
		}
		s := fmt.Sprintf("%s requested %d times", k, len(reqs))
		if len(forms) > 1 || forms[0] != k {
			s += " (as " + strings.Join(forms, ", ") + ")"
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Repeated returns, by canonical URL, the requests of every page URL that
// Duplicates counts as requested more than once, in arrival order.
func (w *Web) Repeated() map[string][]Request {
	by := map[string][]Request{}
	for _, r := range w.Log() {
		if w.isRobots(r) || legitimateRepeat(r) {
			continue
		}
		key := r.URL
		if c, err := Canonical(r.URL); err == nil {
			key = c
		}
		by[key] = append(by[key], r)
	}
	for k, reqs := range by {
		if len(reqs) < 2 {
			delete(by, k)
		}
	}
	return by
}

// contains reports whether list holds s.
func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// requestedSet returns the distinct logged URLs other than robots.txt; with
// onlyAnswered, only those of requests that got a final answer (a status
// other than 5xx and 429 was sent).
func (w *Web) requestedSet(onlyAnswered bool) map[string]bool {
	set := map[string]bool{}
	for _, r := range w.Log() {
		if !w.isRobots(r) && !isSitemapGuess(r) && (!onlyAnswered || answered(r)) {
			set[r.URL] = true
		}
	}
	return set
}

// Missing returns, sorted, the ground-truth URLs for token that were never
// requested in exactly their canonical form with a final answer: a request
// still waiting, abandoned before the answer, or answered 5xx or 429 does
// not count.
func (w *Web) Missing(token string) []string {
	got := w.requestedSet(true)
	var out []string
	for _, u := range w.GroundTruth(token) {
		if !got[u] {
			out = append(out, u)
		}
	}
	return out
}

// Unexpected returns, sorted, the requested URLs (robots.txt and
// /sitemap.xml excluded) that
// are not in GroundTruth(token) as spelled: non-canonical spellings,
// disallowed or unreachable pages, guessed paths and requests to hosts
// outside the synthetic web. Requests a correct crawler makes although
// their URLs are outside the ground truth are left out: DeadURLs, SlowURLs
// and trap URLs (IsTrapURL; count those with TrapRequests or RequestsTo).
func (w *Web) Unexpected(token string) []string {
	want := map[string]bool{}
	for _, u := range w.GroundTruth(token) {
		want[u] = true
	}
	seen := map[string]bool{}
	var out []string
	for _, r := range w.Log() {
		if w.isRobots(r) || isSitemapGuess(r) || want[r.URL] || seen[r.URL] || !w.notExpected(r) {
			continue
		}
		seen[r.URL] = true
		out = append(out, r.URL)
	}
	sort.Strings(out)
	return out
}

// isSitemapGuess reports whether r asks for /sitemap.xml, which a crawler
// tries on a host whose robots.txt names no sitemap: like robots.txt, it is
// neither a page of the web nor unexpected.
func isSitemapGuess(r Request) bool { return r.Path == "/sitemap.xml" }

// Requested returns the number of distinct URLs requested, as spelled,
// robots.txt and /sitemap.xml excluded (requests to hosts outside the web
// included).
func (w *Web) Requested() int { return len(w.requestedSet(false)) }

// CheckRobotsFirst returns the synthetic hosts on which some other URL was
// requested before /robots.txt (or robots.txt was never requested at all).
func (w *Web) CheckRobotsFirst() []string {
	state := map[string]int{} // 1 robots first, 2 violated
	var out []string
	for _, r := range w.Log() {
		if w.policy(r.Host) == nil || state[r.Host] != 0 {
			continue
		}
		if w.isRobots(r) {
			state[r.Host] = 1
		} else {
			state[r.Host] = 2
			out = append(out, fmt.Sprintf("%s: %s requested before /robots.txt", r.Host, r.Path))
		}
	}
	return out
}
