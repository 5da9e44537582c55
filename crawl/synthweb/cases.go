package synthweb

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"hash/fnv"
	"html"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Figures of the case hosts that tests and crawler configurations need.
const (
	// SlowPageDelay is how long the slow case host takes to answer its slow
	// pages. GroundTruth assumes the crawler's timeout is shorter.
	SlowPageDelay = 3 * time.Second
	// BigPageBytes is the size of the big case host's root page.
	BigPageBytes = 20 << 20
	// RobotsParseLimit is the number of robots.txt bytes RFC 9309 obliges a
	// crawler to parse (500 KiB); robots-big.synth.test puts a rule beyond it.
	RobotsParseLimit = 500 << 10
	// RobotsBigBytes is the size of robots-big.synth.test's robots.txt.
	RobotsBigBytes = 600 << 10
	// caseSuffix is the domain of every host of the web.
	caseSuffix = ".synth.test"
	// hubName is the case name of the hub host linking every case host.
	hubName = "cases"
	// flakyFailures is the number of 503 answers before a flaky page (or
	// robots-flaky's robots.txt) answers 200.
	flakyFailures = 2
	// retryAfter is the Retry-After of the ratelimited host's 429 answers.
	retryAfter = 2 * time.Second
	// lateRuleOffset is where robots-big's "Disallow: /late/" starts.
	lateRuleOffset = 560_000
)

// freshBase is the Last-Modified of version 0 of every fresh page. It is a
// fixed date so that the bytes served depend on the version only.
var freshBase = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// caseKind says how a case host answers.
type caseKind uint8

const (
	casePlain       caseKind = iota // static HTML pages
	caseFlaky                       // 503 to the first requests of each page
	caseRateLimited                 // 429 + Retry-After to the first request of some pages
	caseSlow                        // some pages wait SlowPageDelay
	caseDead                        // 500 to everything but robots.txt
	caseRedirects                   // redirect hops
	caseBig                         // 20 MB root
	caseCalendar                    // /cal?d=YYYY-MM-DD forever
	caseDeep                        // /a/a/a/... and /d1/d2/d3/... forever
	caseSession                     // links carry fresh session ids
	caseFresh                       // ETag, Last-Modified, 304, scheduled changes
	caseGzip                        // Content-Encoding: gzip when accepted
	caseDeflate                     // Content-Encoding: deflate when accepted
)

// robotsMode says how a case host answers /robots.txt.
type robotsMode uint8

const (
	robotsServe     robotsMode = iota // 200 with the policy's text
	robotsMissing                     // 404
	robotsAlways5xx                   // 503 forever
	robotsFlaky                       // 503 to the first requests, then 200
	robotsRedirect                    // 301 -> /real-robots.txt 302 -> /robots-final.txt
	robotsBig                         // 200 with a 600 KiB file
)

// fate is what a correct crawler ends up with for a case page.
type fate uint8

const (
	fateFetched   fate = iota // fetched successfully: in the ground truth if robots allow
	fateDead                  // answered 500 forever: DeadURLs
	fateSlow                  // slower than the crawler's timeout: SlowURLs
	fateUnreached             // never requested (past a redirect cap or a body cap)
)

// caseHost is one special host of Config.Cases.
type caseHost struct {
	name       string // full host name, "flaky.synth.test"
	short      string // case name, "flaky"
	kind       caseKind
	robots     robotsPolicy // the rules a correct crawler ends up applying
	robotsMode robotsMode
	crawlDelay time.Duration
	trap       bool     // a crawler trap (TrapHosts)
	unbounded  bool     // a trap with no finite canonical form: outside the ground truth
	entries    []string // canonical URLs the hub links to
}

// casePage is one finite page of a case host.
type casePage struct {
	host     *caseHost
	path     string // canonical path plus query
	url      string // canonical URL
	fate     fate
	title    string   // <title> and <h1>; "" means host and path
	text     string   // visible text; "" means filler seeded by the URL
	links    []string // hrefs
	redirect string   // Location of a redirect, "" for pages
	code     int      // redirect status
	ctype    string   // "" means text/html
	changes  bool     // fresh host: content changes every ChangePeriod
	limited  bool     // ratelimited host: 429 to the first request
}

// caseWeb holds the case hosts of a Web and their per-request state.
type caseWeb struct {
	seed   int64
	period time.Duration
	start  time.Time
	hosts  []*caseHost
	byName map[string]*caseHost
	pages  map[string]*casePage // canonical URL -> page
	order  []*casePage          // pages in definition order

	bigRobotsOnce sync.Once
	bigRobots     []byte

	mu       sync.Mutex
	hits     map[string]int // canonical URL (robots.txt included) -> requests so far
	sessions uint64         // session ids handed out
}

// caseHostDefs lists the case hosts in order, with their robots.txt.
func caseHostDefs() []*caseHost {
	star := func(rules ...robotsRule) robotsPolicy {
		return robotsPolicy{groups: []robotsGroup{{agents: []string{"*"}, rules: rules}}}
	}
	open := func() robotsPolicy { return star(robotsRule{allow: true, path: "/"}) }
	dis := func(p string) robotsRule { return robotsRule{path: p} }
	allow := func(p string) robotsRule { return robotsRule{allow: true, path: p} }
	h := func(short string, kind caseKind, pol robotsPolicy) *caseHost {
		return &caseHost{name: short + caseSuffix, short: short, kind: kind, robots: pol}
	}
	hosts := []*caseHost{
		h(hubName, casePlain, open()),
		h("robots-404", casePlain, robotsPolicy{notFound: true}),
		h("robots-5xx", casePlain, star(dis("/"))),
		h("robots-flaky", casePlain, star(dis("/private/"))),
		h("robots-redirect", casePlain, star(dis("/secret/"))),
		h("robots-big", casePlain, star(dis("/early/"))),
		h("robots-wildcard", casePlain, star(dis("/*.pdf$"), dis("/*?print="), allow("/private/ok*"), dis("/private/"),
			allow("/tie/"), dis("/tie/"))),
		h("robots-agent", casePlain, robotsPolicy{groups: []robotsGroup{
			{agents: []string{"*"}, rules: []robotsRule{dis("/not-for-star/")}},
			{agents: []string{"swarmcrawl-images"}, rules: []robotsRule{dis("/")}},
			{agents: []string{"SwarmCrawl"}, rules: []robotsRule{dis("/not-for-swarmcrawl/")}},
			{agents: []string{"otherbot", "swarmcrawl"}, rules: []robotsRule{dis("/merged-group/")}},
		}}),
		h("crawl-delay", casePlain, open()),
		h("flaky", caseFlaky, open()),
		h("ratelimited", caseRateLimited, open()),
		h("slow", caseSlow, open()),
		h("dead", caseDead, open()),
		h("redirects", caseRedirects, star(dis("/blocked/"))),
		h("redirects2", caseRedirects, open()),
		h("big", caseBig, open()),
		h("calendar", caseCalendar, open()),
		h("deep", caseDeep, open()),
		h("session", caseSession, open()),
		h("fresh", caseFresh, open()),
		h("gzip", caseGzip, open()),
		h("deflate", caseDeflate, open()),
		h("nearcopy", casePlain, open()),
	}
	for _, c := range hosts {
		switch c.short {
		case "robots-404":
			c.robotsMode = robotsMissing
		case "robots-5xx":
			c.robotsMode = robotsAlways5xx
		case "robots-flaky":
			c.robotsMode = robotsFlaky
		case "robots-redirect":
			c.robotsMode = robotsRedirect
		case "robots-big":
			c.robotsMode = robotsBig
		case "crawl-delay":
			c.crawlDelay = time.Second
			c.robots.groups[0].crawlDelay = time.Second
		case "calendar", "deep":
			c.trap, c.unbounded = true, true
		case "session":
			c.trap = true
		}
	}
	return hosts
}

// newCaseWeb builds the case hosts and their pages for cfg.
func newCaseWeb(cfg Config) *caseWeb {
	c := &caseWeb{
		seed:   cfg.Seed,
		period: cfg.ChangePeriod,
		start:  time.Now(),
		byName: map[string]*caseHost{},
		pages:  map[string]*casePage{},
		hits:   map[string]int{},
	}
	c.hosts = caseHostDefs()
	for _, h := range c.hosts {
		c.byName[h.name] = h
	}
	host := func(short string) *caseHost { return c.byName[short+caseSuffix] }
	add := func(short, path string, links ...string) *casePage {
		h := host(short)
		p := &casePage{host: h, path: path, url: "http://" + h.name + path, links: links}
		c.pages[p.url] = p
		c.order = append(c.order, p)
		return p
	}
	// site adds a root linking to the given paths and a page for each path.
	site := func(short string, paths ...string) {
		add(short, "/", paths...)
		for _, p := range paths {
			add(short, p)
		}
		host(short).entries = []string{"/"}
	}

	site("robots-404", "/p/1", "/p/2", "/private/1")
	site("robots-5xx", "/p/1")
	host("robots-5xx").entries = []string{"/", "/p/1"}
	site("robots-flaky", "/p/1", "/private/1")
	site("robots-redirect", "/p/1", "/secret/1")
	site("robots-big", "/p/1", "/early/1", "/late/1")
	site("robots-wildcard", "/doc/a.pdf", "/doc/a.pdf.html", "/doc/b", "/doc/b?print=1", "/doc/b?view=1&print=1",
		"/private/ok1", "/private/no1", "/tie/1")
	c.pages["http://robots-wildcard"+caseSuffix+"/doc/a.pdf"].ctype = "application/pdf"
	site("robots-agent", "/p/1", "/not-for-star/1", "/not-for-swarmcrawl/1", "/merged-group/1")
	site("crawl-delay", "/p/1", "/p/2", "/p/3")
	site("flaky", "/p/1", "/p/2")
	site("ratelimited", "/p/1", "/p/2", "/p/3")
	c.pages["http://ratelimited"+caseSuffix+"/"].limited = true
	c.pages["http://ratelimited"+caseSuffix+"/p/1"].limited = true
	site("slow", "/p/1", "/slow/1", "/slow/2")
	for _, p := range []string{"/slow/1", "/slow/2"} {
		c.pages["http://slow"+caseSuffix+p].fate = fateSlow
	}
	site("dead", "/p/1", "/p/2")
	host("dead").entries = []string{"/", "/p/1", "/p/2"}
	for _, p := range c.order {
		if p.host.kind == caseDead {
			p.fate = fateDead
		}
	}

	// Redirects. Each hop is its own URL; the chain's hosts alternate.
	r, r2 := "http://redirects"+caseSuffix, "http://redirects2"+caseSuffix
	hop := func(u string, code int, loc string, f fate) {
		short, path, _ := strings.Cut(strings.TrimPrefix(u, "http://"), "/")
		p := add(strings.TrimSuffix(short, caseSuffix), "/"+path)
		p.code, p.redirect, p.fate = code, loc, f
	}
	hop(r+"/chain/3", 301, r2+"/hop/3/1", fateFetched)
	hop(r2+"/hop/3/1", 302, "/hop/3/2", fateFetched)
	hop(r2+"/hop/3/2", 303, r+"/final/3", fateFetched)
	add("redirects", "/final/3")
	hop(r+"/chain/7", 307, "HTTP://REDIRECTS2.SYNTH.TEST:80/hop/7/1?utm_source=redirect", fateFetched)
	hop(r2+"/hop/7/1", 308, r+"/hop/7/2", fateFetched)
	hop(r+"/hop/7/2", 301, "3", fateFetched) // relative to /hop/7/2
	hop(r+"/hop/7/3", 302, r2+"/hop/7/4", fateFetched)
	hop(r2+"/hop/7/4", 303, "/hop/7/5", fateFetched)
	hop(r2+"/hop/7/5", 307, r+"/hop/7/6", fateFetched) // the 5th redirect followed ends here
	hop(r+"/hop/7/6", 308, "/final/7", fateUnreached)
	add("redirects", "/final/7").fate = fateUnreached
	hop(r+"/loop/a", 302, "/loop/b", fateFetched)
	hop(r+"/loop/b", 301, "/loop/a", fateFetched)
	hop(r+"/to-blocked", 301, "/blocked/1", fateFetched)
	add("redirects", "/blocked/1")
	host("redirects").entries = []string{"/chain/3", "/chain/7", "/loop/a", "/to-blocked"}

	// Big: the root is streamed (respondBig); one link follows the 20 MB.
	add("big", "/")
	add("big", "/after/1")
	add("big", "/after/2")
	add("big", "/after-cap").fate = fateUnreached
	host("big").entries = []string{"/"}

	host("calendar").entries = []string{"/cal?d=2026-01-01"}
	host("deep").entries = []string{"/"}

	site("session", "/s/1", "/s/2", "/s/3", "/s/4")
	for i := 1; i <= 4; i++ {
		p := c.pages["http://session"+caseSuffix+"/s/"+strconv.Itoa(i)]
		p.links = []string{"/", "/s/" + strconv.Itoa(i%4+1)}
	}

	site("fresh", "/change/1", "/change/2", "/change/3", "/change/4", "/static/1", "/static/2", "/static/3", "/static/4")
	for i := 1; i <= 4; i++ {
		c.pages["http://fresh"+caseSuffix+"/change/"+strconv.Itoa(i)].changes = true
	}
	site("gzip", "/p/1", "/p/2")
	site("deflate", "/p/1", "/p/2")

	// Near copies: the same long text but for one word, each linking a
	// page of its own that nothing else links.
	site("nearcopy", "/copy/1", "/copy/2", "/copy/3", "/other")
	base := strings.Fields(fillerText(pageRand(cfg.Seed, "nearcopy"), 2400))
	for i, word := range []string{"amber", "bronze", "crimson"} {
		words := slices.Clone(base)
		words[len(words)/2] = word
		n := strconv.Itoa(i + 1)
		p := c.pages["http://nearcopy"+caseSuffix+"/copy/"+n]
		p.title, p.text, p.links = "A long article", strings.Join(words, " "), []string{"/linked/" + n}
		add("nearcopy", "/linked/"+n)
	}
	other := c.pages["http://nearcopy"+caseSuffix+"/other"]
	other.title, other.text, other.links = "Another article", fillerText(pageRand(cfg.Seed, "nearcopy-other"), 2400), []string{"/linked/other"}
	add("nearcopy", "/linked/other")

	// The hub links every case host's entry points.
	hub := add(hubName, "/")
	host(hubName).entries = []string{"/"}
	for _, h := range c.hosts[1:] {
		for _, e := range h.entries {
			hub.links = append(hub.links, "http://"+h.name+e)
		}
	}
	return c
}

// fillerText returns n words of filler.
func fillerText(r interface{ IntN(int) int }, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(fillerWords[r.IntN(len(fillerWords))])
	}
	return b.String()
}

// host returns the case host named host (a full, lowercase name), or nil.
func (c *caseWeb) host(host string) *caseHost {
	if c == nil {
		return nil
	}
	return c.byName[host]
}

// hit counts a request for key and returns how many came before it.
func (c *caseWeb) hit(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.hits[key]
	c.hits[key] = n + 1
	return n
}

// reset forgets the per-URL request counts.
func (c *caseWeb) reset() {
	c.mu.Lock()
	c.hits = map[string]int{}
	c.mu.Unlock()
}

// version returns the version of the fresh host's changing pages at t.
func (c *caseWeb) version(t time.Time) int64 {
	if t.Before(c.start) {
		return 0
	}
	return int64(t.Sub(c.start) / c.period)
}

// isRobotsPath reports whether path is a robots.txt fetch on host h: the
// file itself, or a hop of robots-redirect's redirected robots.txt.
func (h *caseHost) isRobotsPath(path string) bool {
	return path == "/robots.txt" ||
		(h.robotsMode == robotsRedirect && (path == "/real-robots.txt" || path == "/robots-final.txt"))
}

// robotsText returns the robots.txt body a correct crawler ends up reading.
func (c *caseWeb) robotsText(h *caseHost) []byte {
	if h.robotsMode == robotsBig {
		c.bigRobotsOnce.Do(func() { c.bigRobots = bigRobots(h) })
		return c.bigRobots
	}
	return []byte(h.robots.text(h.name))
}

// bigRobots renders robots-big's robots.txt: its real rules first, a rule
// past RobotsParseLimit that a crawler must not see, and padding to
// RobotsBigBytes.
func bigRobots(h *caseHost) []byte {
	var b bytes.Buffer
	b.WriteString(h.robots.text(h.name))
	// Padding is comment lines (never blank lines, which some parsers take
	// for the end of a group), the last one cut to length.
	pad := func(limit int) {
		for i := 0; b.Len() < limit; i++ {
			line := fmt.Sprintf("# padding line %06d: rules end at 500 KiB, RFC 9309 section 2.5 ......\n", i)
			if left := limit - b.Len(); left < len(line)+2 {
				line = "#" + strings.Repeat(".", left-2) + "\n"
			}
			b.WriteString(line)
		}
	}
	pad(lateRuleOffset)
	b.WriteString("Disallow: /late/\n")
	pad(RobotsBigBytes)
	return b.Bytes()
}

// response is what the server sends for one request.
type response struct {
	status int
	ctype  string
	header http.Header // extra headers
	body   []byte
	// chunks, when set, produces the body (of length size) piece by piece;
	// it returns nil when done.
	chunks func() []byte
	size   int
	delay  time.Duration // wait before answering
	// buf, when set, is the bodyPool buffer holding body, given back once
	// the response is sent.
	buf *[]byte
}

// length returns the body length.
func (r *response) length() int {
	if r.chunks != nil {
		return r.size
	}
	return len(r.body)
}

// set adds an extra header.
func (r *response) set(k, v string) {
	if r.header == nil {
		r.header = http.Header{}
	}
	r.header.Set(k, v)
}

// textResponse returns a plain-text response.
func textResponse(status int, msg string) response {
	return response{status: status, ctype: "text/plain; charset=utf-8", body: []byte(msg + "\n")}
}

// respond computes the answer of case host h to a request for pq.
func (c *caseWeb) respond(r *http.Request, h *caseHost, pq string) response {
	if h.isRobotsPath(pq) {
		return c.respondRobots(h, pq)
	}
	switch h.kind {
	case caseDead:
		return textResponse(http.StatusInternalServerError, "500 internal server error")
	case caseCalendar:
		return c.respondCalendar(h, pq)
	case caseDeep:
		return c.respondDeep(h, pq)
	case caseBig:
		if pq == "/" {
			return c.respondBig(h)
		}
	}
	canon, err := Canonical("http://" + h.name + pq)
	if err != nil {
		return textResponse(http.StatusNotFound, "404 page not found")
	}
	p := c.pages[canon]
	if p == nil {
		return textResponse(http.StatusNotFound, "404 page not found")
	}
	switch {
	case h.kind == caseFlaky && c.hit(canon) < flakyFailures:
		return textResponse(http.StatusServiceUnavailable, "503 service unavailable, try again")
	case p.limited && c.hit(canon) == 0:
		resp := textResponse(http.StatusTooManyRequests, "429 too many requests")
		resp.set("Retry-After", strconv.Itoa(int(retryAfter/time.Second)))
		return resp
	case p.redirect != "":
		resp := textResponse(p.code, "redirecting")
		resp.set("Location", p.redirect)
		return resp
	case h.kind == caseFresh:
		return c.respondFresh(r, p)
	}
	resp := response{status: http.StatusOK, ctype: "text/html; charset=utf-8", body: c.render(p, 0)}
	if p.ctype != "" {
		resp.ctype, resp.body = p.ctype, []byte("%PDF-1.4\n% synthweb "+p.url+"\n%%EOF\n")
	}
	if p.fate == fateSlow {
		resp.delay = SlowPageDelay
	}
	switch h.kind {
	case caseGzip:
		encode(r, &resp, "gzip")
	case caseDeflate:
		encode(r, &resp, "deflate")
	}
	return resp
}

// respondRobots answers a robots.txt fetch according to the host's mode.
func (c *caseWeb) respondRobots(h *caseHost, pq string) response {
	ok := response{status: http.StatusOK, ctype: "text/plain; charset=utf-8"}
	switch h.robotsMode {
	case robotsMissing:
		return textResponse(http.StatusNotFound, "404 page not found")
	case robotsAlways5xx:
		return textResponse(http.StatusServiceUnavailable, "503 service unavailable")
	case robotsFlaky:
		if c.hit("http://"+h.name+pq) < flakyFailures {
			return textResponse(http.StatusServiceUnavailable, "503 service unavailable, try again")
		}
	case robotsRedirect:
		switch pq {
		case "/robots.txt":
			resp := textResponse(http.StatusMovedPermanently, "moved")
			resp.set("Location", "http://"+h.name+"/real-robots.txt")
			return resp
		case "/real-robots.txt":
			resp := textResponse(http.StatusFound, "found")
			resp.set("Location", "/robots-final.txt")
			return resp
		}
	}
	ok.body = c.robotsText(h)
	return ok
}

// respondFresh answers a fresh page, honouring conditional requests.
func (c *caseWeb) respondFresh(r *http.Request, p *casePage) response {
	v := int64(0)
	if p.changes {
		v = c.version(time.Now())
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d|%s|%d", c.seed, p.url, v)
	etag := fmt.Sprintf(`"%016x"`, h.Sum64())
	lm := freshBase.Add(time.Duration(v) * c.period).Truncate(time.Second)
	resp := response{status: http.StatusOK, ctype: "text/html; charset=utf-8", body: c.render(p, v)}
	if etagMatch(r.Header.Get("If-None-Match"), etag) {
		resp = response{status: http.StatusNotModified}
	} else if ims := r.Header.Get("If-Modified-Since"); ims != "" && r.Header.Get("If-None-Match") == "" {
		if t, err := http.ParseTime(ims); err == nil && !lm.After(t) {
			resp = response{status: http.StatusNotModified}
		}
	}
	resp.set("ETag", etag)
	resp.set("Last-Modified", lm.Format(http.TimeFormat))
	return resp
}

// etagMatch reports whether an If-None-Match header value matches etag
// (weak comparison, RFC 9110 section 13.1.2).
func etagMatch(header, etag string) bool {
	if header == "" {
		return false
	}
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}

// accepts reports whether an Accept-Encoding value admits coding: named
// with a non-zero q-value, or covered by "*" without being refused.
func accepts(header, coding string) bool {
	star := false
	for _, part := range strings.Split(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		name = strings.ToLower(strings.TrimSpace(name))
		q := 1.0
		for _, prm := range strings.Split(params, ";") {
			if k, v, ok := strings.Cut(strings.TrimSpace(prm), "="); ok && strings.EqualFold(k, "q") {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					q = f
				}
			}
		}
		switch name {
		case coding:
			return q > 0
		case "*":
			star = q > 0
		}
	}
	return star
}

// encode compresses resp's body with coding when the request accepts it.
func encode(r *http.Request, resp *response, coding string) {
	resp.set("Vary", "Accept-Encoding")
	if !accepts(strings.Join(r.Header.Values("Accept-Encoding"), ","), coding) {
		return
	}
	var b bytes.Buffer
	var zw interface {
		Write([]byte) (int, error)
		Close() error
	}
	if coding == "gzip" {
		zw = gzip.NewWriter(&b)
	} else {
		zw = zlib.NewWriter(&b) // HTTP "deflate" is the zlib format (RFC 9110 section 8.4.1.2)
	}
	zw.Write(resp.body)
	zw.Close()
	resp.body = b.Bytes()
	resp.set("Content-Encoding", coding)
}

// render produces the HTML of a case page; v is the fresh host's version.
func (c *caseWeb) render(p *casePage, v int64) []byte {
	var b bytes.Buffer
	title := p.title
	if title == "" {
		title = strings.TrimSuffix(p.host.name, caseSuffix) + " " + p.path
	}
	text := p.text
	if text == "" {
		key := p.url
		if v > 0 {
			key += fmt.Sprintf("#v%d", v)
		}
		text = fillerText(pageRand(c.seed, key), 80)
	}
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>%s</title>\n</head>\n<body>\n", html.EscapeString(title))
	fmt.Fprintf(&b, "<h1>%s</h1>\n", html.EscapeString(title))
	if p.changes {
		fmt.Fprintf(&b, "<p>version %d</p>\n", v)
	}
	fmt.Fprintf(&b, "<p>%s</p>\n", html.EscapeString(text))
	if len(p.links) > 0 {
		b.WriteString("<ul>\n")
		for i, l := range p.links {
			href := l
			if p.host.kind == caseSession {
				href += c.sessionParam(i)
			}
			fmt.Fprintf(&b, "<li><a href=\"%s\">%s</a></li>\n", html.EscapeString(href), html.EscapeString(linkText(l)))
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString("</body>\n</html>\n")
	return b.Bytes()
}

// linkText names a link after its target.
func linkText(href string) string {
	if u, err := url.Parse(href); err == nil && u.Host != "" {
		return strings.TrimSuffix(u.Hostname(), caseSuffix) + u.RequestURI()
	}
	return href
}

// sessionParam returns a fresh session query for the i-th link of a page:
// "?sessionid=..." or "?sid=...". The ids follow a per-Web sequence, so two
// webs answering the same requests in the same order serve the same bytes.
func (c *caseWeb) sessionParam(i int) string {
	c.mu.Lock()
	c.sessions++
	n := c.sessions
	c.mu.Unlock()
	id := pageRand(c.seed, "session#"+strconv.FormatUint(n, 10)).Uint64()
	if i%2 == 0 {
		return fmt.Sprintf("?sessionid=%016x", id)
	}
	return fmt.Sprintf("?sid=%08x", uint32(id))
}

// trapPage renders a page of a trap host with the given links.
func (c *caseWeb) trapPage(h *caseHost, pq string, links ...string) response {
	p := &casePage{host: h, path: pq, url: "http://" + h.name + pq, links: links}
	return response{status: http.StatusOK, ctype: "text/html; charset=utf-8", body: c.render(p, 0)}
}

// respondCalendar serves /cal?d=YYYY-MM-DD for every date, each page
// linking the day before and the day after.
func (c *caseWeb) respondCalendar(h *caseHost, pq string) response {
	path, query, _ := strings.Cut(pq, "?")
	if path == "/" {
		return c.trapPage(h, pq, "/cal?d=2026-01-01")
	}
	q, err := url.ParseQuery(query)
	if path != "/cal" || err != nil {
		return textResponse(http.StatusNotFound, "404 page not found")
	}
	d, err := time.Parse("2006-01-02", q.Get("d"))
	if err != nil {
		return textResponse(http.StatusNotFound, "404 page not found")
	}
	return c.trapPage(h, pq, "/cal?d="+d.AddDate(0, 0, -1).Format("2006-01-02"), "/cal?d="+d.AddDate(0, 0, 1).Format("2006-01-02"))
}

// respondDeep serves "/", ever-deeper repeated paths /a/a/.../ and
// ever-deeper unique paths /d1/d2/.../, each linking one level deeper.
func (c *caseWeb) respondDeep(h *caseHost, pq string) response {
	if pq == "/" {
		return c.trapPage(h, pq, "a/", "d1/")
	}
	segs := strings.Split(strings.Trim(pq, "/"), "/")
	if !strings.HasSuffix(pq, "/") || strings.Contains(pq, "?") {
		return textResponse(http.StatusNotFound, "404 page not found")
	}
	repeated, unique := true, true
	for i, s := range segs {
		repeated = repeated && s == "a"
		unique = unique && s == "d"+strconv.Itoa(i+1)
	}
	switch {
	case repeated:
		return c.trapPage(h, pq, "a/")
	case unique:
		return c.trapPage(h, pq, "d"+strconv.Itoa(len(segs)+1)+"/")
	}
	return textResponse(http.StatusNotFound, "404 page not found")
}

// respondBig streams the big host's root: links first, then filler up to
// BigPageBytes, with one more link at the very end. Only one 32 KiB block
// of filler is ever held in memory.
func (c *caseWeb) respondBig(h *caseHost) response {
	head := []byte("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>big /</title>\n</head>\n<body>\n" +
		"<h1>big /</h1>\n<ul>\n<li><a href=\"/after/1\">after 1</a></li>\n<li><a href=\"/after/2\">after 2</a></li>\n</ul>\n")
	tail := []byte("<p><a href=\"/after-cap\">beyond any body cap</a></p>\n</body>\n</html>\n")
	var block bytes.Buffer
	r := pageRand(c.seed, "http://"+h.name+"/")
	for block.Len() < 32<<10 {
		fmt.Fprintf(&block, "<p>%s.</p>\n", fillerText(r, 60))
	}
	filler := block.Bytes()
	left := BigPageBytes - len(head) - len(tail)
	stage := 0
	return response{
		status: http.StatusOK,
		ctype:  "text/html; charset=utf-8",
		size:   BigPageBytes,
		chunks: func() []byte {
			switch {
			case stage == 0:
				stage = 1
				return head
			case left > 0:
				n := min(left, len(filler))
				left -= n
				return filler[:n]
			case stage == 1:
				stage = 2
				return tail
			}
			return nil
		},
	}
}

// truth returns the case pages a correct crawler using token fetches.
func (c *caseWeb) truth(token string) []string {
	var out []string
	for _, p := range c.order {
		if p.fate == fateFetched && !p.host.unbounded && p.host.robots.allowed(token, p.path) {
			out = append(out, p.url)
		}
	}
	return out
}

// urlsWithFate returns, sorted, the canonical URLs of the pages with fate f.
func (c *caseWeb) urlsWithFate(f fate) []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, p := range c.order {
		if p.fate == f {
			out = append(out, p.url)
		}
	}
	slices.Sort(out)
	return out
}
