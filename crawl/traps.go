package crawl

import (
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
)

// Trap detection beyond the depth limit (seed 001, "spider traps"): a site
// that generates pages without end (a calendar, pagination past the last
// post, folders inside folders, filters added to filters, session ids in
// links) would keep a crawler busy until its depth limit or its page
// budget. The crawler watches each host's links and pages for the signs of
// such a generator and, once a URL pattern of the host is judged a trap,
// stops following the links by which the pattern expands itself: links
// from one of its pages to another. Links into the pattern from elsewhere
// are still followed, and so are links out of it, so a page is lost only
// if it is reachable through the trap's own chain alone, beyond the
// thresholds (Config.TrapDates, TrapGrowth, TrapRun).
//
// The signals, per host:
//
//   - dates: pages linking pages whose URLs differ only in a date
//     (2026-01-02, 2026/01/02, 20260102, 2026-01) that keeps changing; the
//     pattern is the URL with its dates blanked out.
//   - growth: links that extend their page's path by more segments, or
//     its query by more parameters, beyond TrapGrowth levels (repeated
//     segments are refused outright, see Config.MaxRepeatedSegments).
//   - calendar navigation: a dated page that links the dates just before
//     and just after its own, in its own URL shape, is a calendar: its
//     pattern is judged at once, from its first page.
//   - counters: a link that adds to its page's path a segment that is the
//     page's last one with its number changed (/tree/n1/ to
//     /tree/n1/n2/), or to its query a parameter the query has already
//     (/shop?f=1 to /shop?f=1&f=2), is a generator counting up, judged
//     at sight like repeated segments; so is a link that adds to its
//     page's path the page's last segments again (/a/ to /a/a/, /a/b/ to
//     /a/b/a/b/: a relative link that repeats itself), signal "repeated".
//   - runs: TrapRun pages in a row of one URL shape (the URL with its
//     numbers blanked out) whose main content is nearly the same: a
//     generator changing a number in the URL and little on the page. A
//     chain is judged sooner: a page linked from a page of its own shape,
//     or from the page whose path or query it extends (a page with at
//     most trapChainLinks such links), with nearly the same main content
//     (of minNearDupWords or more) as that page judges the pattern at its
//     second page (pagination past the last post, folders of nothing).
//   - session ids: two fetched pages whose URLs differ only in the value of
//     a token-like query parameter (16 or more letters and digits) and
//     whose content is the same: the parameter is a session id, and is
//     stripped from the host's links from then on, so that each page is
//     fetched once. Known session parameters are stripped by urls.Normalize
//     anyway.
//
// The judgements live in memory: a restarted node, or the next owner of a
// host, learns them again at the price of a few more fetches. Each is
// reported once in Stats.Traps with its reason.

// TrapReport is a URL pattern of a host judged a spider trap.
type TrapReport struct {
	Host    string    `json:"host"`    // the host
	Signal  string    `json:"signal"`  // "dates", "growth", "run", "session" or "repeated"
	Pattern string    `json:"pattern"` // the URL pattern: path and query with its varying part blanked out
	Reason  string    `json:"reason"`  // why, in words
	At      time.Time `json:"at"`      // when it was judged
	Links   int64     `json:"links"`   // links not followed (or, for a session id, rewritten) because of it
}

// Limits of the detector's memory.
const (
	// trapMaxHosts is the most hosts the detector remembers; beyond it, the
	// state of hosts without a trap is forgotten.
	trapMaxHosts = 50_000
	// trapMaxPatterns is the most patterns of one kind it follows per host.
	trapMaxPatterns = 256
	// trapReports is the most trap reports Stats returns (the newest).
	trapReports = 100
	// trapRunDistance is the largest fingerprint distance at which two
	// pages in a row count as nearly the same. Stricter than a near-dup
	// would be too strict here: pages generated from one template differ
	// in a date or a number in several places. Unrelated pages lie near 32.
	trapRunDistance = 12
	// sessionTokenLen is the shortest query value taken for a token.
	sessionTokenLen = 16
	// trapChainLinks is the most links along its pattern a page may have
	// for them to be watched as a chain, and trapMaxChain the most such
	// links remembered per host.
	trapChainLinks = 2
	trapMaxChain   = 256
	// sessionDistance is the largest fingerprint distance of two pages
	// taken for the same page under two session ids: the same text, whose
	// links differ in their ids only.
	sessionDistance = 3
)

// trapDetector holds the trap signals of every host.
type trapDetector struct {
	dates, growth, run, sessions int // limits in effect; 0: the signal is off
	now                          func() time.Time

	mu      sync.Mutex
	hosts   map[string]*hostTraps
	judged  []*TrapReport
	count   int64 // patterns judged
	cutLink int64 // links not followed or rewritten
}

// hostTraps is what the detector knows of one host.
type hostTraps struct {
	dates    map[string]map[string]bool // date pattern -> dates linked from pattern pages
	runs     map[string]*pageRun        // URL shape -> the current run
	sessions map[string]sessionSeen     // URL without a token parameter -> its first page
	traps    map[string]*TrapReport     // signal + pattern -> report
	strip    map[string]bool            // session parameters judged
	chain    map[string]chainLink       // path+query linked along a pattern -> the linking page
}

// chainLink is a link from a page to another of its shape, or to one that
// extends its path or query: the linking page's main-text fingerprint.
type chainLink struct {
	fp    uint64
	grows bool
}

// pageRun is the current run of nearly identical pages of one shape.
type pageRun struct {
	fp uint64
	n  int
}

// sessionSeen is a fetched page whose URL has a token-like parameter.
type sessionSeen struct {
	param, value string
	fp           uint64 // fingerprint of its main text
}

func newTrapDetector(cfg *Config) *trapDetector {
	return &trapDetector{
		dates: cfg.TrapDates, growth: cfg.TrapGrowth, run: cfg.TrapRun, sessions: cfg.TrapSessions,
		now: cfg.Clock, hosts: map[string]*hostTraps{},
	}
}

// hostLocked returns the state of host, creating it.
func (d *trapDetector) hostLocked(host string) *hostTraps {
	h := d.hosts[host]
	if h == nil {
		if len(d.hosts) >= trapMaxHosts {
			for k, o := range d.hosts {
				if len(o.traps) == 0 {
					delete(d.hosts, k)
				}
			}
		}
		h = &hostTraps{}
		d.hosts[host] = h
	}
	return h
}

// judgeLocked records a pattern of host judged a trap, once.
func (d *trapDetector) judgeLocked(h *hostTraps, host, signal, pattern, reason string) *TrapReport {
	key := signal + " " + pattern
	if r := h.traps[key]; r != nil {
		return r
	}
	if h.traps == nil {
		h.traps = map[string]*TrapReport{}
	}
	r := &TrapReport{Host: host, Signal: signal, Pattern: pattern, Reason: reason, At: d.now()}
	h.traps[key] = r
	d.count++
	d.judged = append(d.judged, r)
	if len(d.judged) > 2*trapReports {
		d.judged = append(d.judged[:0], d.judged[len(d.judged)-trapReports:]...)
	}
	return r
}

// cutLocked counts a link not followed because of r.
func (d *trapDetector) cutLocked(r *TrapReport) {
	r.Links++
	d.cutLink++
}

// page takes note of a fetched page of host (its URL and the fingerprint
// of its main text) for the run and session signals; solid is the
// fingerprint again when the main text is long enough for a chain to be
// judged on it (see minNearDupWords), 0 otherwise.
func (d *trapDetector) page(host, u string, fp, solid uint64) {
	if d == nil || (d.run == 0 && d.sessions == 0) {
		return
	}
	_, pq := urls.SplitOrigin(u)
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.hostLocked(host)
	if cl, ok := h.chain[pq]; ok && d.run > 0 {
		delete(h.chain, pq)
		if solid != 0 && SimhashDistance(cl.fp, solid) <= trapRunDistance {
			if cl.grows {
				d.judgeLocked(h, host, "growth", growthPattern(pq), "a page linked from the page whose path or query it extends has nearly the same main content")
			} else {
				d.judgeLocked(h, host, "run", numberShape(pq), "a page linked from another page of its shape has nearly the same main content")
			}
		}
	}
	if d.run > 0 && fp != 0 {
		shape := numberShape(pq)
		if h.runs == nil || len(h.runs) >= trapMaxPatterns && h.runs[shape] == nil {
			h.runs = map[string]*pageRun{}
		}
		r := h.runs[shape]
		switch {
		case r == nil:
			h.runs[shape] = &pageRun{fp: fp, n: 1}
		case SimhashDistance(r.fp, fp) <= trapRunDistance:
			r.fp, r.n = fp, r.n+1
			if r.n >= d.run {
				d.judgeLocked(h, host, "run", shape, strconv.Itoa(r.n)+" pages in a row of this shape with nearly the same main content")
			}
		default:
			r.fp, r.n = fp, 1
		}
	}
	if d.sessions > 0 && fp != 0 {
		if key, param, value, ok := tokenParam(pq); ok {
			if h.sessions == nil || len(h.sessions) >= trapMaxPatterns && h.sessions[key].param == "" {
				h.sessions = map[string]sessionSeen{}
			}
			s, seen := h.sessions[key]
			switch {
			case !seen:
				h.sessions[key] = sessionSeen{param: param, value: value, fp: fp}
			case s.param == param && s.value != value && SimhashDistance(s.fp, fp) <= sessionDistance && !h.strip[param]:
				if h.strip == nil {
					h.strip = map[string]bool{}
				}
				h.strip[param] = true
				d.judgeLocked(h, host, "session", "?"+param+"=", sessionReason(param))
			}
		}
	}
}

// filter returns the links of page `from` (whose main text has
// fingerprint fp, 0 when it is too short to judge a chain on) to follow (normalised, all of them from.Depth+1),
// leaving out those that feed a pattern judged a trap and rewriting those
// that carry a session id judged for the host. Only links within the
// page's host are judged.
func (d *trapDetector) filter(from string, fp uint64, links []frontier.Task) []frontier.Task {
	if d == nil || (d.dates == 0 && d.growth == 0 && d.run == 0 && d.sessions == 0) {
		return links
	}
	host, err := urls.HostOf(from)
	if err != nil {
		return links
	}
	origin, fpq := urls.SplitOrigin(from)
	fshape, fdates := "", ""
	if d.dates > 0 {
		fshape, fdates = dateShape(fpq)
	}
	fnum := numberShape(fpq)
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.hostLocked(host)
	if fdates != "" && h.traps["dates "+fshape] == nil && calendarNav(origin, fshape, fdates, links) {
		d.judgeLocked(h, host, "dates", fshape, "a dated page links the dates just before and after its own: calendar navigation")
	}
	kept := links[:0]
	var chain [trapChainLinks]chainLink
	var chainTo [trapChainLinks]string
	nchain := 0
	for _, l := range links {
		if !strings.HasPrefix(l.URL, origin) || len(l.URL) == len(origin) || l.URL[len(origin)] != '/' {
			kept = append(kept, l) // another host
			continue
		}
		if d.follow(h, host, fpq, fshape, fdates, fnum, &l) {
			kept = append(kept, l)
			if tpq := l.URL[len(origin):]; d.run > 0 && fp != 0 && tpq != fpq && nchain <= trapChainLinks {
				grows := extends(fpq, tpq)
				if grows || sameNumberShape(fpq, tpq) {
					if nchain < trapChainLinks {
						chain[nchain], chainTo[nchain] = chainLink{fp: fp, grows: grows}, tpq
					}
					nchain++
				}
			}
		}
	}
	// A generator's page links one or two pages along its pattern (the
	// next, the one before); a page that links more of its shape is a
	// site's index, and its links are not watched as a chain.
	if nchain > 0 && nchain <= trapChainLinks {
		if h.chain == nil || len(h.chain) >= trapMaxChain {
			h.chain = map[string]chainLink{}
		}
		for i := range nchain {
			h.chain[chainTo[i]] = chain[i]
		}
	}
	return kept
}

// sameNumberShape reports, without allocating, whether a and b have the
// same numberShape.
func sameNumberShape(a, b string) bool {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if isDigit(a[i]) && isDigit(b[j]) {
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			continue
		}
		if a[i] != b[j] {
			return false
		}
		i, j = i+1, j+1
	}
	return i == len(a) && j == len(b)
}

// extends reports, without allocating, whether tpq grows fpq (see
// growth): a longer path under fpq's, or fpq's path with fpq's query and
// more.
func extends(fpq, tpq string) bool {
	fp, fq, _ := strings.Cut(fpq, "?")
	tp, tq, _ := strings.Cut(tpq, "?")
	if tp == fp {
		return len(tq) > len(fq) && strings.HasPrefix(tq, fq)
	}
	f, t := strings.Trim(fp, "/"), strings.Trim(tp, "/")
	return f != "" && len(t) > len(f) && strings.HasPrefix(t, f) && t[len(f)] == '/'
}

// calendarNav reports whether a page of date shape fshape, whose URL holds
// the one date fdates, links (among links, absolute URLs of origin) the
// dates just before and just after its own in its own shape.
func calendarNav(origin, fshape, fdates string, links []frontier.Task) bool {
	day, unit, ok := parseDate(fdates)
	if !ok {
		return false
	}
	before, after := false, false
	for _, l := range links {
		if !strings.HasPrefix(l.URL, origin) || len(l.URL) == len(origin) || l.URL[len(origin)] != '/' {
			continue
		}
		tshape, tdates := dateShape(l.URL[len(origin):])
		if tshape != fshape || tdates == fdates {
			continue
		}
		t, tunit, ok := parseDate(tdates)
		if !ok || tunit != unit {
			continue
		}
		switch {
		case unit == 'd' && t.Equal(day.AddDate(0, 0, -1)), unit == 'm' && t.Equal(day.AddDate(0, -1, 0)):
			before = true
		case unit == 'd' && t.Equal(day.AddDate(0, 0, 1)), unit == 'm' && t.Equal(day.AddDate(0, 1, 0)):
			after = true
		}
	}
	return before && after
}

// dateUnit returns, without allocating, the unit of dates as dateShape
// joins them: 'd' for a day, 'm' for a month, 0 for anything else
// (several dates among them).
func dateUnit(dates string) byte {
	runs, digits := 0, 0
	for i := 0; i < len(dates); i++ {
		switch {
		case dates[i] == ' ':
			return 0
		case isDigit(dates[i]):
			if i == 0 || !isDigit(dates[i-1]) {
				runs++
			}
			digits++
		}
	}
	switch {
	case runs == 3, runs == 1 && digits == 8:
		return 'd'
	case runs == 2:
		return 'm'
	}
	return 0
}

// parseDate reads one date as dateAt finds them: its day (the first of
// the month for a month) and its unit, 'd' or 'm'; ok false for anything
// else, several dates among them.
func parseDate(s string) (t time.Time, unit byte, ok bool) {
	if len(s) < 6 || dateAt(s, 0) != len(s) {
		return time.Time{}, 0, false
	}
	var nums []int
	for i := 0; i < len(s); {
		if !isDigit(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		v, _ := strconv.Atoi(s[i:j])
		nums = append(nums, v)
		i = j
	}
	if len(nums) == 1 && len(s) == 8 { // YYYYMMDD
		nums = []int{nums[0] / 10000, nums[0] / 100 % 100, nums[0] % 100}
	}
	switch len(nums) {
	case 2:
		return time.Date(nums[0], time.Month(nums[1]), 1, 0, 0, 0, 0, time.UTC), 'm', true
	case 3:
		return time.Date(nums[0], time.Month(nums[1]), nums[2], 0, 0, 0, 0, time.UTC), 'd', true
	}
	return time.Time{}, 0, false
}

// follow decides on one link of the host's page fpq (with its date shape
// and dates, and number shape): false when it feeds a trap; a session id
// judged for the host is stripped from it. Callers hold d.mu.
func (d *trapDetector) follow(h *hostTraps, host, fpq, fshape, fdates, fnum string, l *frontier.Task) bool {
	origin, tpq := urls.SplitOrigin(l.URL)
	if len(h.strip) > 0 {
		if s, param := stripParams(tpq, h.strip); param != "" {
			r := d.judgeLocked(h, host, "session", "?"+param+"=", sessionReason(param))
			d.cutLocked(r)
			if _, fetched := h.sessions[s]; fetched {
				return false // fetched already, under another id
			}
			tpq, l.URL = s, origin+s
		}
	}
	if tpq == fpq {
		return true
	}
	if fdates != "" {
		if tshape, tdates := dateShape(tpq); tshape == fshape && tdates != fdates {
			// A month's page linking its days is an index, not the
			// calendar's chain: only links between dates of one unit are
			// cut.
			if r := h.traps["dates "+tshape]; r != nil && dateUnit(fdates) == dateUnit(tdates) {
				d.cutLocked(r)
				return false
			}
			if h.dates == nil || len(h.dates) >= trapMaxPatterns && h.dates[tshape] == nil {
				h.dates = map[string]map[string]bool{}
			}
			set := h.dates[tshape]
			if set == nil {
				set = map[string]bool{}
				h.dates[tshape] = set
			}
			set[tdates] = true
			if len(set) > d.dates {
				r := d.judgeLocked(h, host, "dates", tshape, strconv.Itoa(len(set))+" dates linked from one another's pages, and counting")
				delete(h.dates, tshape)
				d.cutLocked(r)
				return false
			}
		}
	}
	if d.growth > 0 {
		level, grows := growth(fpq, tpq)
		switch {
		case !grows:
		case level > d.growth:
			r := d.judgeLocked(h, host, "growth", growthPattern(tpq), "links keep adding to the path or query, "+strconv.Itoa(level)+" levels deep")
			d.cutLocked(r)
			return false
		case counting(fpq, tpq):
			r := d.judgeLocked(h, host, "growth", growthPattern(tpq), "a link adds to its page's path or query a segment or parameter its page has, counted up")
			d.cutLocked(r)
			return false
		case repeating(fpq, tpq):
			// Judged as a repetition: only such links are cut, not
			// every link that grows a path under the pattern.
			r := d.judgeLocked(h, host, "repeated", numberShape(growthPattern(tpq)), "a link adds to its page's path the page's last segments again")
			d.cutLocked(r)
			return false
		case len(h.traps) > 0 && h.traps["growth "+growthPattern(tpq)] != nil:
			d.cutLocked(h.traps["growth "+growthPattern(tpq)])
			return false
		}
	}
	if d.run > 0 && len(h.traps) > 0 {
		if r := h.traps["run "+fnum]; r != nil && numberShape(tpq) == fnum {
			d.cutLocked(r)
			return false
		}
	}
	return true
}

func sessionReason(param string) string {
	return "parameter " + param + " changes between URLs of the same page: a session id, stripped from the host's links"
}

// sessionCopy reports whether u carries a session id judged for its host,
// and returns u without it: the page it names. fetched is set when a page
// of that name was fetched under another session id.
func (d *trapDetector) sessionCopy(u string) (stripped string, fetched, ok bool) {
	if d == nil {
		return u, false, false
	}
	host, err := urls.HostOf(u)
	if err != nil {
		return u, false, false
	}
	origin, pq := urls.SplitOrigin(u)
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.hosts[host]
	if h == nil || len(h.strip) == 0 {
		return u, false, false
	}
	s, param := stripParams(pq, h.strip)
	if param == "" {
		return u, false, false
	}
	_, fetched = h.sessions[s]
	return origin + s, fetched, true
}

// repeated records a URL refused for repeated path segments as a trap of
// its host.
func (d *trapDetector) repeated(u string) {
	host, err := urls.HostOf(u)
	if d == nil || err != nil {
		return
	}
	_, pq := urls.SplitOrigin(u)
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.hostLocked(host)
	d.cutLocked(d.judgeLocked(h, host, "repeated", numberShape(growthPattern(pq)), "a path segment repeats more than MaxRepeatedSegments times"))
}

// stats returns the number of patterns judged, of links cut, and copies of
// the newest reports, by host and pattern.
func (d *trapDetector) stats() (patterns, links int64, reports []TrapReport) {
	if d == nil {
		return 0, 0, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	from := max(0, len(d.judged)-trapReports)
	for _, r := range d.judged[from:] {
		reports = append(reports, *r)
	}
	sort.Slice(reports, func(i, j int) bool {
		if reports[i].Host != reports[j].Host {
			return reports[i].Host < reports[j].Host
		}
		return reports[i].Signal+reports[i].Pattern < reports[j].Signal+reports[j].Pattern
	})
	return d.count, d.cutLink, reports
}

// numberShape blanks out the numbers of a path and query: "/p/12?x=3"
// gives "/p/#?x=#".
func numberShape(pq string) string {
	var b strings.Builder
	b.Grow(len(pq))
	inNum := false
	for i := 0; i < len(pq); i++ {
		c := pq[i]
		if '0' <= c && c <= '9' {
			if !inNum {
				b.WriteByte('#')
			}
			inNum = true
			continue
		}
		inNum = false
		b.WriteByte(c)
	}
	return b.String()
}

// dateShape finds the dates in a path and query (2026-01-02, 2026/01/02,
// 2026.01.02, 2026_01_02, 20260102, 2026-01): shape is pq with each
// blanked out as "{date}", and dates the dates found, joined; "" when
// there is none.
func dateShape(pq string) (shape, dates string) {
	var b, ds strings.Builder
	for i := 0; i < len(pq); {
		if n := dateAt(pq, i); n > 0 {
			b.WriteString("{date}")
			if ds.Len() > 0 {
				ds.WriteByte(' ')
			}
			ds.WriteString(pq[i : i+n])
			i += n
			continue
		}
		// Skip the rest of a run of digits: a date never starts inside one.
		j := i + 1
		for isDigit(pq[i]) && j < len(pq) && isDigit(pq[j]) {
			j++
		}
		b.WriteString(pq[i:j])
		i = j
	}
	if ds.Len() == 0 {
		return pq, ""
	}
	return b.String(), ds.String()
}

// dateAt returns the length of a date starting at s[i], 0 if there is none.
// The date must not run on into more digits.
func dateAt(s string, i int) int {
	digits := func(at, n int) (int, bool) {
		if at+n > len(s) {
			return 0, false
		}
		v := 0
		for k := at; k < at+n; k++ {
			if !isDigit(s[k]) {
				return 0, false
			}
			v = 10*v + int(s[k]-'0')
		}
		return v, true
	}
	year, ok := digits(i, 4)
	if !ok || year < 1900 || year > 2199 {
		return 0
	}
	end := func(n int) int { // n, unless more digits follow
		if i+n < len(s) && isDigit(s[i+n]) {
			return 0
		}
		return n
	}
	// Compact: YYYYMMDD.
	if m, ok := digits(i+4, 2); ok {
		if day, ok := digits(i+6, 2); ok && m >= 1 && m <= 12 && day >= 1 && day <= 31 {
			return end(8)
		}
		return 0
	}
	if i+4 >= len(s) || !strings.ContainsRune("-/._", rune(s[i+4])) {
		return 0
	}
	sep := s[i+4]
	mlen := 2
	m, ok := digits(i+5, 2)
	if !ok {
		mlen = 1
		if m, ok = digits(i+5, 1); !ok {
			return 0
		}
	}
	if m < 1 || m > 12 {
		return 0
	}
	n := 5 + mlen
	if n < len(s)-i && s[i+n] == sep {
		dlen := 2
		day, ok := digits(i+n+1, 2)
		if !ok {
			dlen = 1
			day, ok = digits(i+n+1, 1)
		}
		if ok && day >= 1 && day <= 31 {
			return end(n + 1 + dlen)
		}
	}
	return end(n)
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// growth reports whether the link from path+query fpq to tpq extends it:
// tpq's path holds all of fpq's segments and more, or the same path with
// fpq's query and more; level is tpq's path segments plus query
// parameters.
func growth(fpq, tpq string) (level int, grows bool) {
	fp, fq, _ := strings.Cut(fpq, "?")
	tp, tq, _ := strings.Cut(tpq, "?")
	fsegs, tsegs := segments(fp), segments(tp)
	level = len(tsegs)
	if tq != "" {
		level += strings.Count(tq, "&") + 1
	}
	switch {
	case len(tsegs) > len(fsegs) && len(fsegs) > 0:
		for i, s := range fsegs {
			if tsegs[i] != s {
				return level, false
			}
		}
		return level, true
	case tp == fp && len(tq) > len(fq) && strings.HasPrefix(tq, fq):
		return level, true
	}
	return level, false
}

// counting reports whether tpq, which grows fpq (see growth), adds one
// path segment that is fpq's last one with its number changed (n1, then
// n2; a segment with letters and digits), or one query parameter whose
// name fpq's query has already: a generator counting up.
func counting(fpq, tpq string) bool {
	fp, fq, _ := strings.Cut(fpq, "?")
	tp, tq, _ := strings.Cut(tpq, "?")
	if tp == fp {
		if fq == "" || len(tq) <= len(fq)+1 || tq[len(fq)] != '&' {
			return false
		}
		added := tq[len(fq)+1:]
		name, _, _ := strings.Cut(added, "=")
		if name == "" || strings.Contains(added, "&") {
			return false
		}
		for _, kv := range strings.Split(fq, "&") {
			if k, _, _ := strings.Cut(kv, "="); k == name {
				return true
			}
		}
		return false
	}
	fsegs, tsegs := segments(fp), segments(tp)
	if len(fsegs) == 0 || len(tsegs) != len(fsegs)+1 {
		return false
	}
	last, added := fsegs[len(fsegs)-1], tsegs[len(tsegs)-1]
	letters := strings.IndexFunc(added, func(r rune) bool { return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' }) >= 0
	return added != last && letters && strings.ContainsAny(added, "0123456789") && numberShape(added) == numberShape(last)
}

// repeating reports, without allocating, whether tpq's path is fpq's
// with one or more of fpq's last segments once more (/a/ to /a/a/, /x/y
// to /x/y/y, /a/b/ to /a/b/a/b/): a relative link such as href="a/" on
// page /a/, which grows the path by the same segments without end
// (MaxRepeatedSegments refuses it only a few levels down).
func repeating(fpq, tpq string) bool {
	fp, _, _ := strings.Cut(fpq, "?")
	tp, _, _ := strings.Cut(tpq, "?")
	f, t := strings.Trim(fp, "/"), strings.Trim(tp, "/")
	if f == "" || len(t) <= len(f)+1 || !strings.HasPrefix(t, f) || t[len(f)] != '/' {
		return false
	}
	added := t[len(f)+1:]
	return strings.HasSuffix(f, added) && (len(added) == len(f) || f[len(f)-len(added)-1] == '/')
}

// segments splits a path into its non-empty segments.
func segments(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// growthPattern names a growing path or query: its first segment, or its
// path with the query left out.
func growthPattern(pq string) string {
	p, q, _ := strings.Cut(pq, "?")
	if q != "" {
		return p + "?…"
	}
	if segs := segments(p); len(segs) > 0 {
		return "/" + segs[0] + "/…"
	}
	return p
}

// tokenParam finds the first query parameter of pq whose value looks like
// a generated token: at least sessionTokenLen letters and digits (and - or
// _), with both letters and digits. It returns pq without it (the key of
// the page it names), its name and value.
func tokenParam(pq string) (key, param, value string, ok bool) {
	p, q, found := strings.Cut(pq, "?")
	if !found {
		return "", "", "", false
	}
	params := strings.Split(q, "&")
	for i, kv := range params {
		k, v, _ := strings.Cut(kv, "=")
		if !isToken(v) {
			continue
		}
		rest := append(append([]string{}, params[:i]...), params[i+1:]...)
		key = p
		if len(rest) > 0 {
			key += "?" + strings.Join(rest, "&")
		}
		return key, k, v, true
	}
	return "", "", "", false
}

func isToken(v string) bool {
	if len(v) < sessionTokenLen {
		return false
	}
	letters, digits := false, false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case isDigit(c):
			digits = true
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
			letters = true
		case c == '-' || c == '_':
		default:
			return false
		}
	}
	return letters && digits
}

// stripParams removes the parameters named in strip from pq's query and
// returns the result and the name of one it removed, "" when none.
func stripParams(pq string, strip map[string]bool) (string, string) {
	p, q, found := strings.Cut(pq, "?")
	if !found {
		return pq, ""
	}
	var kept []string
	removed := ""
	for _, kv := range strings.Split(q, "&") {
		if k, _, _ := strings.Cut(kv, "="); strip[k] {
			removed = k
			continue
		}
		kept = append(kept, kv)
	}
	if removed == "" {
		return pq, ""
	}
	if len(kept) > 0 {
		p += "?" + strings.Join(kept, "&")
	}
	return p, removed
}
