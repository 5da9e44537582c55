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

// ResetLog empties the request log. Requests still in progress complete but
// are not logged again.
func (w *Web) ResetLog() {
	w.mu.Lock()
	w.log = nil
	w.mu.Unlock()
}

// isRobots reports whether a logged request is for robots.txt.
func isRobots(r Request) bool { return r.Path == "/robots.txt" }

// CheckPoliteness returns one violation for every pair of consecutive
// requests (robots.txt included) to the same host whose arrival times are
// closer than max(minGap, the host's Crawl-delay).
func (w *Web) CheckPoliteness(minGap time.Duration) []string {
	log := w.Log()
	if len(log) == 0 {
		return nil
	}
	t0 := log[0].Time
	last := map[string]Request{}
	var out []string
	for _, r := range log {
		if prev, ok := last[r.Host]; ok {
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
// and on its canonical form (either being disallowed is a violation).
func (w *Web) CheckRobots(token string) []string {
	var out []string
	for _, r := range w.Log() {
		if isRobots(r) {
			continue
		}
		hi, ok := w.g.index[r.Host]
		if !ok {
			continue
		}
		pol := &w.g.hosts[hi].robots
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
// same URL.
func (w *Web) Duplicates() []string {
	type acc struct {
		n     int
		forms []string
	}
	by := map[string]*acc{}
	for _, r := range w.Log() {
		if isRobots(r) {
			continue
		}
		key := r.URL
		if c, err := Canonical(r.URL); err == nil {
			key = c
		}
		a := by[key]
		if a == nil {
			a = &acc{}
			by[key] = a
		}
		a.n++
		if !contains(a.forms, r.URL) {
			a.forms = append(a.forms, r.URL)
		}
	}
	var out []string
	for k, a := range by {
		if a.n < 2 {
			continue
		}
		s := fmt.Sprintf("%s requested %d times", k, a.n)
		if len(a.forms) > 1 || a.forms[0] != k {
			s += " (as " + strings.Join(a.forms, ", ") + ")"
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
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

// requestedSet returns the distinct logged URLs other than robots.txt.
func (w *Web) requestedSet() map[string]bool {
	set := map[string]bool{}
	for _, r := range w.Log() {
		if !isRobots(r) {
			set[r.URL] = true
		}
	}
	return set
}

// Missing returns, sorted, the ground-truth URLs for token that were never
// requested in exactly their canonical form.
func (w *Web) Missing(token string) []string {
	got := w.requestedSet()
	var out []string
	for _, u := range w.GroundTruth(token) {
		if !got[u] {
			out = append(out, u)
		}
	}
	return out
}

// Unexpected returns, sorted, the requested URLs (robots.txt excluded) that
// are not in GroundTruth(token) as spelled: non-canonical spellings,
// disallowed or unreachable pages, guessed paths and requests to hosts
// outside the synthetic web.
func (w *Web) Unexpected(token string) []string {
	want := map[string]bool{}
	for _, u := range w.GroundTruth(token) {
		want[u] = true
	}
	var out []string
	for u := range w.requestedSet() {
		if !want[u] {
			out = append(out, u)
		}
	}
	sort.Strings(out)
	return out
}

// Requested returns the number of distinct URLs requested, as spelled,
// robots.txt excluded (requests to hosts outside the web included).
func (w *Web) Requested() int { return len(w.requestedSet()) }

// CheckRobotsFirst returns the synthetic hosts on which some other URL was
// requested before /robots.txt (or robots.txt was never requested at all).
func (w *Web) CheckRobotsFirst() []string {
	state := map[string]int{} // 1 robots first, 2 violated
	var out []string
	for _, r := range w.Log() {
		if _, ok := w.g.index[r.Host]; !ok || state[r.Host] != 0 {
			continue
		}
		if isRobots(r) {
			state[r.Host] = 1
		} else {
			state[r.Host] = 2
			out = append(out, fmt.Sprintf("%s: %s requested before /robots.txt", r.Host, r.Path))
		}
	}
	return out
}
