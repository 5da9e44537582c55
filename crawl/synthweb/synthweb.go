// Package synthweb is a deterministic synthetic web for testing crawlers, in
// the spirit of net/http/httptest.
//
// Start generates a graph of virtual hosts (h000.synth.test, h001.synth.test,
// ...) from a seed and serves all of them from one HTTP server on 127.0.0.1.
// The virtual host of a request is taken from r.Host, so the server works both
// as an HTTP proxy (clients use Proxy() and send absolute-URI requests such as
// "GET http://h003.synth.test/p/4 HTTP/1.1") and for direct requests carrying
// a Host header. Only plain http is served; CONNECT is not supported.
//
// The web exercises a crawler's URL normalisation (relative, absolute,
// uppercase, ":80", dot-segment, duplicate-slash, fragment, tracking and
// session-parameter forms of the same link, <base href>), link policy
// (rel="nofollow", <meta name="robots" content="nofollow">, links out of the
// web), robots.txt handling (per-agent groups per RFC 9309, Allow overriding
// Disallow, 404 robots.txt, Crawl-delay) and non-HTML content (PDF, PNG).
// Only <a href> elements carry links; there are no <img>, <link> or <script>
// references.
//
// With Config.Cases, special hosts (cases.synth.test links them all) add
// what a production crawler meets beyond that: robots.txt answering 404,
// 5xx, flakily, through redirects or beyond 500 KiB, wildcard and
// agent-specific rules, Crawl-delay, pages failing with 503 before
// answering, 429 with Retry-After, slow and dead pages, redirect chains and
// loops, a 20 MB page, calendar, deep-path and session-id traps, pages with
// ETag and Last-Modified changing on a schedule, gzip and deflate, and
// near-duplicate pages. Config.Cases documents what a correct crawler does
// on each.
//
// Every request is logged. GroundTruth gives the exact set of canonical URLs
// a correct crawler fetches, and the Check*, Duplicates, Missing and
// Unexpected methods compare the log against it.
//
// The package deliberately depends on the standard library only: it is an
// independent oracle for the crawler's own packages.
package synthweb

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config describes the synthetic web. Zero fields take the defaults noted;
// everything generated is a pure function of the Config.
type Config struct {
	// Seed seeds the graph generator; every byte served depends on it.
	Seed int64
	// Hosts is the number of virtual hosts (default 50), named
	// h000.synth.test, h001.synth.test, ...; the number width grows beyond
	// 1000 hosts.
	Hosts int
	// PagesPerHost is the mean number of pages per host (default 8). Each
	// host has between 1 and 2*PagesPerHost-1 pages, the root included.
	PagesPerHost int
	// LinksPerPage is the minimum number of links on an HTML page (default
	// 6); pages linking many spine children can have more.
	LinksPerPage int
	// CrossHostFraction is the share of random links pointing to other hosts
	// (default 0.3; a negative value means 0).
	CrossHostFraction float64
	// PageBytes is the approximate size of an HTML page (default 12 KiB).
	PageBytes int
	// Seeds is the number of seed URLs (default 3, at most Hosts): the roots
	// of the first hosts.
	Seeds int
	// CrawlDelayHosts is the number of hosts whose robots.txt has
	// "Crawl-delay: 1" in every group (default 0). It changes only robots.txt
	// files (a chosen host that would answer 404 gets a plain robots.txt
	// instead), never the pages.
	CrawlDelayHosts int
	// Latency delays every response (default 0). Close interrupts the wait.
	Latency time.Duration
	// HotHosts is the number of generated hosts, chosen among those after
	// the seeds and without a Crawl-delay, that have about HotPages pages
	// instead of PagesPerHost (default 0): the hosts that dominate a
	// crawl's duration at a fixed per-host delay.
	HotHosts int
	// HotPages is the mean number of pages of a hot host (default 1200);
	// each has between HotPages/2 and 2*HotPages.
	HotPages int
	// TrapHosts is the number of generated hosts, chosen among those after
	// the seeds and not hot, whose root also links an endless trap section
	// (default 0). Their kinds rotate through calendar, pagination, deep,
	// facets and session; see TrapKind. The trap sections are outside
	// GroundTruth (TrapRequests counts the requests to them); the hosts'
	// ordinary pages are in it. With HotHosts and TrapHosts zero the web is
	// exactly what it was before they existed.
	TrapHosts int
	// DustHosts is the number of generated hosts, chosen among those after
	// the seeds that are neither hot nor trap hosts, about half of whose
	// links come in a variant form that serves the page's very body: a
	// default document (/index.html, /index.php, /default.aspx), a
	// trailing slash, or a parameter that changes nothing (?ref=nav,
	// ?sort=asc). See DustRequests and VariantOf. Default 0.
	DustHosts int
	// LookalikeHosts is the number of hosts, chosen like DustHosts, whose
	// links take the same variant forms but where each variant is a page
	// of its own with another body, which a crawler must fetch (see
	// Lookalikes). Default 0. With DustHosts and LookalikeHosts zero the
	// web is exactly what it was before they existed.
	LookalikeHosts int
	// Cases adds special hosts, one per behaviour a production crawler must
	// get right, all served by the same server (so they share one IP). With
	// Cases false (the default) nothing below exists and the web is exactly
	// what it was before Cases.
	//
	// An extra seed, http://cases.synth.test/ (the hub), links every case
	// host's entry points, so a crawl from Seeds reaches them. Unless noted,
	// a case host's robots.txt allows everything and its root links its
	// other pages. Each host is <name>.synth.test (see CaseHost), and a
	// correct crawler — RFC 9309 robots.txt, at most 3 retries of 5xx, 429
	// and timeouts, each redirect hop a new URL and at most 5 hops, depth at
	// most 16, repeated-segment and per-host budget limits, session ids
	// stripped — behaves as follows:
	//
	//   - robots-404: robots.txt answers 404, so everything is allowed,
	//     /private/1 included.
	//   - robots-5xx: robots.txt answers 503 forever. The crawler treats the
	//     host as fully disallowed, retries robots.txt later and fetches
	//     nothing else there (the hub links / and /p/1).
	//   - robots-flaky: robots.txt answers 503 to its first 2 requests, then
	//     200 with "Disallow: /private/". The crawler fetches no page before
	//     it has that 200, then /, /p/1 but not /private/1.
	//   - robots-redirect: /robots.txt answers 301 to /real-robots.txt,
	//     which answers 302 to /robots-final.txt ("Disallow: /secret/"). The
	//     crawler follows (up to 5 hops) and never fetches /secret/1.
	//   - robots-big: robots.txt is RobotsBigBytes (600 KiB) long. Its
	//     "Disallow: /early/" applies; a "Disallow: /late/" placed past
	//     RobotsParseLimit (500 KiB) must be ignored, so /late/1 is fetched.
	//   - robots-wildcard: "Disallow: /*.pdf$", "Disallow: /*?print=",
	//     "Allow: /private/ok*", "Disallow: /private/", and "Allow: /tie/"
	//     with "Disallow: /tie/". Longest pattern wins, Allow wins ties:
	//     /doc/a.pdf, /doc/b?print=1 and /private/no1 are disallowed;
	//     /doc/a.pdf.html, /doc/b, /doc/b?view=1&print=1, /private/ok1 and
	//     /tie/1 are allowed.
	//   - robots-agent: a "*" group, a "swarmcrawl-images" group (not
	//     swarmcrawl's: tokens match exactly) and two groups naming
	//     swarmcrawl, which RFC 9309 merges. swarmcrawl must skip
	//     /not-for-swarmcrawl/1 and /merged-group/1 and may fetch
	//     /not-for-star/1; other tokens get the "*" group (otherbot is also
	//     named in the merged group).
	//   - crawl-delay: "Crawl-delay: 1"; CheckPoliteness and CrawlDelay know.
	//   - flaky: every page answers 503 to its first 2 requests, then 200;
	//     retries fetch all of them.
	//   - ratelimited: / and /p/1 answer their first request with 429 and
	//     "Retry-After: 2"; the crawler waits 2 s before its next request to
	//     the host (CheckRetryAfter) and then fetches them.
	//   - slow: /slow/1 and /slow/2 answer after SlowPageDelay (3 s), longer
	//     than the crawler's timeout; it retries and gives up (SlowURLs, not
	//     in the ground truth). / and /p/1 are fast.
	//   - dead: every page answers 500 forever; the crawler tries each of the
	//     3 linked URLs 4 times and dead-letters it (DeadURLs, not in the
	//     ground truth).
	//   - redirects (and redirects2): /chain/3 takes 3 hops (301, 302, 303)
	//     across both hosts to /final/3; /chain/7 takes 7 hops (307, 308,
	//     301, ...; relative, absolute and non-canonical Locations) of which
	//     a crawler following at most 5 fetches the first 6 URLs (the start
	//     and 5 hop targets), never /hop/7/6 or /final/7; /loop/a and
	//     /loop/b redirect to each other (each fetched once); /to-blocked
	//     redirects to /blocked/1, which robots.txt disallows.
	//   - big: / is BigPageBytes (20 MB) of HTML, streamed, with links to
	//     /after/1 and /after/2 at its start and one to /after-cap at its
	//     end, which a crawler capping bodies (10 MiB) never sees.
	//   - calendar (a trap): /cal?d=2026-01-01 and every other date link the
	//     previous and next day, forever.
	//   - deep (a trap): / links a/ and d1/; /a/.../a/ links one more a/,
	//     /d1/.../dN/ links dN+1/, forever. Depth and repeated-segment limits
	//     cut them.
	//   - session (a trap for crawlers that keep session ids): every link
	//     carries a fresh ?sessionid= or ?sid= each time a page is served;
	//     the canonical /, /s/1../s/4 are in the ground truth.
	//   - fresh: /change/1../change/4 change every ChangePeriod, / and
	//     /static/1../static/4 never; all send ETag and Last-Modified and
	//     answer 304 to a matching If-None-Match (or, without one, to an
	//     If-Modified-Since not older than Last-Modified). See Changed.
	//   - gzip, deflate: pages are sent with Content-Encoding gzip, or
	//     deflate (zlib), when Accept-Encoding admits it, identity otherwise.
	//   - nearcopy: /copy/1../copy/3 have the same long visible text but for
	//     one word, and each links a page nothing else links (/linked/1..3):
	//     a crawler that skips the links of near-duplicates misses some of
	//     them; /other is clearly different.
	//
	// Calendar and deep are outside GroundTruth altogether (check them with
	// TrapHosts and RequestsTo); so are DeadURLs, SlowURLs, unreachable
	// redirect tails and robots-disallowed URLs. Stateful hosts (flaky,
	// ratelimited, robots-flaky) count requests per URL until ResetLog.
	Cases bool
	// ChangePeriod is how often the fresh case host's changing pages change
	// (default 2s; used only with Cases).
	ChangePeriod time.Duration
}

// DefaultConfig returns the default configuration with Seed 1.
func DefaultConfig() Config {
	return Config{
		Seed:              1,
		Hosts:             50,
		PagesPerHost:      8,
		LinksPerPage:      6,
		CrossHostFraction: 0.3,
		PageBytes:         12 * 1024,
		Seeds:             3,
		HotPages:          1200,
	}
}

// withDefaults fills zero fields and validates the rest.
func (c Config) withDefaults() (Config, error) {
	d := DefaultConfig()
	if c.Hosts == 0 {
		c.Hosts = d.Hosts
	}
	if c.PagesPerHost == 0 {
		c.PagesPerHost = d.PagesPerHost
	}
	if c.LinksPerPage == 0 {
		c.LinksPerPage = d.LinksPerPage
	}
	if c.CrossHostFraction == 0 {
		c.CrossHostFraction = d.CrossHostFraction
	} else if c.CrossHostFraction < 0 {
		c.CrossHostFraction = 0
	}
	if c.PageBytes == 0 {
		c.PageBytes = d.PageBytes
	}
	if c.Seeds == 0 {
		c.Seeds = d.Seeds
	}
	if c.HotPages == 0 {
		c.HotPages = d.HotPages
	}
	switch {
	case c.Hosts < 0, c.PagesPerHost < 0, c.LinksPerPage < 0, c.PageBytes < 0, c.Seeds < 0,
		c.CrawlDelayHosts < 0, c.Latency < 0, c.ChangePeriod < 0, c.HotHosts < 0, c.HotPages < 0, c.TrapHosts < 0:
		return c, fmt.Errorf("synthweb: negative value in config %+v", c)
	case c.CrossHostFraction > 1:
		return c, fmt.Errorf("synthweb: CrossHostFraction %v > 1", c.CrossHostFraction)
	}
	if c.Cases && c.ChangePeriod == 0 {
		c.ChangePeriod = 2 * time.Second
	}
	c.Seeds = min(c.Seeds, c.Hosts)
	c.CrawlDelayHosts = min(c.CrawlDelayHosts, c.Hosts)
	return c, nil
}

// Request is one logged request.
type Request struct {
	// Time is the arrival time, taken when the handler was entered.
	Time time.Time
	// Host is the virtual host, lowercased, port stripped.
	Host string
	// Path is the path plus query exactly as requested ("?" only if a query
	// was sent).
	Path string
	// URL is "http://" + Host + Path: not normalised further, so that
	// non-canonical fetches show up.
	URL string
	// UserAgent is the User-Agent header.
	UserAgent string
	// Status is the response status sent (304, 429 and so on included); 0
	// while the response is being prepared (during a Latency or slow-page
	// wait), or for good when the client left during that wait (see
	// Abandoned). It is set before the response is written, so it is there
	// once the client has the response.
	Status int
	// Bytes is the length of the response body as sent, after any
	// Content-Encoding (for HEAD, of the body a GET would get); 0 while
	// Status is 0.
	Bytes int
	// IfNoneMatch, IfModifiedSince and AcceptEncoding are the request's
	// headers of those names ("" when absent).
	IfNoneMatch, IfModifiedSince, AcceptEncoding string
	// Conditional is set when the request carried If-None-Match or
	// If-Modified-Since: a recrawl, which Duplicates does not count.
	Conditional bool
	// Abandoned is set when the client closed the connection before the
	// response was complete: it gave up during a wait (Status stays 0) or
	// stopped reading a long body (Status is set), as far as the server
	// could tell. Duplicates does not count abandoned requests.
	Abandoned bool
	// RetryAfter is the Retry-After sent with the response, 0 if none.
	RetryAfter time.Duration
	// Location is the Location header of a redirect, as sent.
	Location string
	// ContentEncoding is the Content-Encoding sent, "" for identity.
	ContentEncoding string

	// done is when the status was recorded, just before the response was
	// written; zero while Status is 0.
	done time.Time
}

// Answered is when the response's status was recorded, just before the
// response was written; zero while Status is 0.
func (r Request) Answered() time.Time { return r.done }

// Web is a running synthetic web.
type Web struct {
	g        *graph
	listener net.Listener
	srv      *http.Server
	baseURL  string
	done     chan struct{}
	once     sync.Once
	serveErr chan error

	cases *caseWeb // nil unless Config.Cases

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup
	log      []*Request
	// Concurrency observed since the last ResetLog, whole server and per
	// host.
	busy, maxBusy         int
	busyHost, maxBusyHost map[string]int

	// truth caches GroundTruth per robots token: the graph never changes,
	// and tests poll Missing in tight loops.
	truthMu sync.Mutex
	truth   map[string][]string
}

// New generates the web for cfg without starting a server; Handler can then
// be mounted anywhere (for example on an httptest.Server). URL and Proxy
// return "" and nil for such a Web; Close is a no-op.
func New(cfg Config) (*Web, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	g, err := buildGraph(cfg)
	if err != nil {
		return nil, err
	}
	w := &Web{g: g, done: make(chan struct{}), busyHost: map[string]int{}, maxBusyHost: map[string]int{}}
	if cfg.Cases {
		w.cases = newCaseWeb(cfg)
	}
	return w, nil
}

// Start generates the web for cfg and serves it on 127.0.0.1 at a random
// port.
func Start(cfg Config) (*Web, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("synthweb: listen: %w", err)
	}
	return Serve(cfg, ln)
}

// Serve generates the web for cfg and serves it on ln, which it owns from
// then on (Close closes it): a test that needs the web elsewhere than on
// loopback (in a network namespace) makes the listener.
func Serve(cfg Config, ln net.Listener) (*Web, error) {
	w, err := New(cfg)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	w.listener = ln
	w.baseURL = "http://" + ln.Addr().String()
	w.srv = &http.Server{Handler: w, ReadHeaderTimeout: 10 * time.Second}
	w.serveErr = make(chan error, 1)
	go func() { w.serveErr <- w.srv.Serve(ln) }()
	return w, nil
}

// Close stops the server, interrupts pending Latency waits and waits for
// running handlers to finish. It is safe to call more than once. The log and
// oracle methods keep working after Close.
func (w *Web) Close() {
	w.once.Do(func() {
		w.mu.Lock()
		w.closed = true
		w.mu.Unlock()
		close(w.done)
		if w.srv != nil {
			w.srv.Close()
			<-w.serveErr
		}
		w.inflight.Wait()
	})
}

// URL returns the server's base URL, "http://127.0.0.1:PORT" (or the
// address of Serve's listener).
func (w *Web) URL() string { return w.baseURL }

// Proxy returns a function for http.Transport.Proxy that routes every
// request to this server, which then serves it as a proxy would.
func (w *Web) Proxy() func(*http.Request) (*url.URL, error) {
	if w.baseURL == "" {
		return nil
	}
	u, _ := url.Parse(w.baseURL)
	return http.ProxyURL(u)
}

// Handler returns the handler serving the synthetic web (the Web itself).
func (w *Web) Handler() http.Handler { return w }

// Config returns the configuration in effect, defaults applied.
func (w *Web) Config() Config { return w.g.cfg }

// Hosts returns the virtual host names in order: the generated hosts, then,
// with Config.Cases, the case hosts (CaseHosts).
func (w *Web) Hosts() []string {
	out := make([]string, len(w.g.hosts))
	for i, h := range w.g.hosts {
		out[i] = h.name
	}
	return append(out, w.CaseHosts()...)
}

// Seeds returns the canonical seed URLs, the roots of the first hosts, such
// as "http://h000.synth.test/", followed with Config.Cases by the hub
// "http://cases.synth.test/".
func (w *Web) Seeds() []string {
	out := make([]string, len(w.g.seeds))
	for i, id := range w.g.seeds {
		out[i] = w.g.pages[id].url
	}
	if w.cases != nil {
		out = append(out, "http://"+hubName+caseSuffix+"/")
	}
	return out
}

// Pages returns, sorted, the canonical URLs of every page of the generated
// hosts that the server answers with 200 (orphans, private and binary pages
// included; robots.txt and the targets of broken links excluded). Case hosts
// are not included.
func (w *Web) Pages() []string {
	var out []string
	for _, p := range w.g.pages {
		if !p.broken {
			out = append(out, p.url)
		}
	}
	sort.Strings(out)
	return out
}

// RobotsTxt returns the status (200 or 404) and body that the server sends
// for http://host/robots.txt, host being a synthetic host name. It returns
// 404 and "" for other hosts. For a case host it returns what a correct
// crawler ends up with: 503 and "" for robots-5xx, and for robots-flaky and
// robots-redirect 200 and the rules it gets after retrying or following
// the redirects.
func (w *Web) RobotsTxt(host string) (status int, body string) {
	if h := w.cases.host(strings.ToLower(host)); h != nil {
		switch h.robotsMode {
		case robotsMissing:
			return http.StatusNotFound, ""
		case robotsAlways5xx:
			return http.StatusServiceUnavailable, ""
		}
		return http.StatusOK, string(w.cases.robotsText(h))
	}
	i, ok := w.g.index[strings.ToLower(host)]
	if !ok || w.g.hosts[i].robots.notFound {
		return http.StatusNotFound, ""
	}
	return http.StatusOK, w.g.hosts[i].robots.text(w.g.hosts[i].name)
}

// CrawlDelay returns the Crawl-delay of a host's robots.txt (the same in all
// its groups), 0 if none or for hosts outside the web.
func (w *Web) CrawlDelay(host string) time.Duration {
	if h := w.cases.host(strings.ToLower(host)); h != nil {
		return h.crawlDelay
	}
	if i, ok := w.g.index[strings.ToLower(host)]; ok {
		return w.g.hosts[i].crawlDelay
	}
	return 0
}

// Allowed reports whether the oracle's robots evaluation lets token fetch
// rawURL. token may be a bare product token ("swarmcrawl") or a User-Agent
// string ("SwarmCrawl/1.0 (+http://...)"); its product token is matched
// case-insensitively against the user-agent lines (RFC 9309: the group naming
// the token applies, else the "*" group; groups are never merged). Rules are
// matched against the URL's path and query exactly as given, longest match
// winning and Allow winning ties. URLs outside the synthetic web and
// /robots.txt are allowed. On case hosts, rules may use "*" and "$", several
// groups naming the token are merged, and the rules are those a correct
// crawler ends up applying (robots-5xx: nothing allowed; robots-big: only
// the first RobotsParseLimit bytes count).
func (w *Web) Allowed(token, rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return true
	}
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	if pol := w.policy(strings.ToLower(u.Hostname())); pol != nil {
		return pol.allowed(token, p)
	}
	return true
}

// policy returns the robots policy of a synthetic host, nil for others.
func (w *Web) policy(host string) *robotsPolicy {
	if h := w.cases.host(host); h != nil {
		return &h.robots
	}
	if i, ok := w.g.index[host]; ok {
		return &w.g.hosts[i].robots
	}
	return nil
}

// GroundTruth returns, sorted, the canonical URLs that a correct crawler
// using robots token `token` fetches starting from Seeds(): a breadth-first
// walk from the seeds that follows only followable links (not rel="nofollow",
// not on a page with <meta name="robots" content="...nofollow...">), only to
// synthetic hosts, only to URLs the host's robots.txt allows for token, and
// only out of HTML pages. Targets of broken links (answered 404) are
// included, since a crawler cannot know they are broken before fetching.
// robots.txt itself is not included.
//
// With Config.Cases it also holds the case-host URLs that such a crawler
// eventually fetches with a final answer (2xx, 3xx or 4xx), as described on
// Config.Cases: each redirect hop's URL up to the 5th hop, the canonical
// pages of the session host, and neither the calendar and deep traps, nor
// DeadURLs, SlowURLs, redirect tails beyond 5 hops, the link past the big
// page's body cap, or robots-disallowed URLs.
func (w *Web) GroundTruth(token string) []string {
	w.truthMu.Lock()
	defer w.truthMu.Unlock()
	if t, ok := w.truth[token]; ok {
		return slices.Clone(t)
	}
	t := w.groundTruth(token)
	if w.truth == nil {
		w.truth = map[string][]string{}
	}
	w.truth[token] = t
	return slices.Clone(t)
}

func (w *Web) groundTruth(token string) []string {
	var out []string
	for _, id := range w.g.walk(token, -1, nil) {
		out = append(out, w.g.pages[id].url)
	}
	if w.cases != nil {
		out = append(out, w.cases.truth(token)...)
	}
	sort.Strings(out)
	return out
}

// Within returns, sorted, the URLs of the generated hosts that a correct
// crawler using robots token `token` and following links at most maxDepth
// hops from the seeds fetches: those of GroundTruth (case hosts left out)
// whose shortest followable path from a seed has at most maxDepth links.
func (w *Web) Within(token string, maxDepth int) []string {
	var out []string
	for _, id := range w.g.walk(token, maxDepth, nil) {
		out = append(out, w.g.pages[id].url)
	}
	sort.Strings(out)
	return out
}

// Scoped returns, sorted, the URLs of the generated hosts that a correct
// crawler using robots token `token` fetches when its scope admits only
// the URLs inScope accepts: those of GroundTruth (case hosts left out)
// reachable from the seeds in scope through pages in scope. A crawl
// limited to its seeds' hosts fetches Scoped(token, func(u) bool { its
// host is a seed's }).
func (w *Web) Scoped(token string, inScope func(url string) bool) []string {
	var out []string
	for _, id := range w.g.walk(token, -1, func(p *page) bool { return inScope(p.url) }) {
		out = append(out, w.g.pages[id].url)
	}
	sort.Strings(out)
	return out
}

// walk returns the pages a crawler using token reaches from the seeds, in
// breadth-first order, following links out of pages at most maxDepth hops
// from a seed (all of them when maxDepth < 0), and only to pages keep
// accepts (all of them when keep is nil).
func (g *graph) walk(token string, maxDepth int, keep func(*page) bool) []int {
	depth := make([]int, len(g.pages))
	for i := range depth {
		depth[i] = -1
	}
	var queue []int
	visit := func(id, d int) {
		p := g.pages[id]
		if depth[id] < 0 && g.hosts[p.host].robots.allowed(token, p.path) && (keep == nil || keep(p)) {
			depth[id] = d
			queue = append(queue, id)
		}
	}
	for _, id := range g.seeds {
		visit(id, 0)
	}
	for i := 0; i < len(queue); i++ {
		id := queue[i]
		p := g.pages[id]
		if p.broken || !p.kind.html() || p.metaNofollow != "" || (maxDepth >= 0 && depth[id] >= maxDepth) {
			continue
		}
		for _, l := range p.links {
			if l.target >= 0 && !l.nofollow {
				visit(l.target, depth[id]+1)
			}
		}
	}
	return queue
}

// Stats summarises the generated web.
type Stats struct {
	Hosts             int // virtual hosts
	Pages             int // pages answered with 200 (excluding robots.txt)
	HTMLPages         int // of which HTML
	PDFs              int // of which application/pdf
	PNGs              int // of which image/png
	Orphans           int // pages no link points to
	Hidden            int // pages linked only through nofollow links, meta-nofollow pages or disallowed-looking directories
	BrokenLinks       int // distinct link targets on synthetic hosts answered 404
	Links             int // <a href> elements
	NofollowLinks     int // of which rel="nofollow"
	ExternalLinks     int // of which leading out of the synthetic web
	MetaNofollowPages int // pages with <meta name="robots" content="...nofollow">
	BasePages         int // pages with <base href>
	RobotsNotFound    int // hosts answering robots.txt with 404
	RobotsAgentGroup  int // hosts with a separate "swarmcrawl" group
	RobotsAllowRule   int // hosts with Allow: /private/open/
	RobotsBadbotGroup int // hosts with a "badbot" group disallowing everything
	CrawlDelayHosts   int // hosts with Crawl-delay
}

// Stats returns figures about the generated web (case hosts excluded).
func (w *Web) Stats() Stats {
	s := Stats{Hosts: len(w.g.hosts)}
	for _, p := range w.g.pages {
		if p.broken {
			s.BrokenLinks++
			continue
		}
		s.Pages++
		switch p.kind {
		case kindPDF:
			s.PDFs++
		case kindPNG:
			s.PNGs++
		default:
			s.HTMLPages++
		}
		switch p.access {
		case accessOrphan:
			s.Orphans++
		case accessHidden:
			s.Hidden++
		}
		if p.metaNofollow != "" {
			s.MetaNofollowPages++
		}
		if p.base != "" {
			s.BasePages++
		}
		for _, l := range p.links {
			s.Links++
			if l.nofollow {
				s.NofollowLinks++
			}
			if l.target == externalTarget {
				s.ExternalLinks++
			}
		}
	}
	for _, h := range w.g.hosts {
		switch h.robots.kind {
		case robotsNotFound:
			s.RobotsNotFound++
		case robotsAgent, robotsAgentBoth:
			s.RobotsAgentGroup++
		case robotsAllow:
			s.RobotsAllowRule++
		}
		for _, grp := range h.robots.groups {
			if grp.agents[0] == "badbot" {
				s.RobotsBadbotGroup++
			}
		}
		if h.crawlDelay > 0 {
			s.CrawlDelayHosts++
		}
	}
	return s
}

// errClosed is reported (as 503) for requests arriving after Close.
var errClosed = errors.New("synthweb: closed")

// ServeHTTP serves one request of the synthetic web and logs it.
func (w *Web) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	host := strings.ToLower(r.Host)
	if strings.IndexByte(host, ':') >= 0 {
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
	}
	host = strings.TrimSuffix(host, ".") // "h001.synth.test." names the same host
	// One string holds the URL; Host and Path are parts of it.
	var u string
	if p := r.URL.EscapedPath(); r.URL.RawQuery != "" || r.URL.ForceQuery {
		u = "http://" + host + p + "?" + r.URL.RawQuery
	} else {
		u = "http://" + host + p
	}
	host, pq := u[len("http://"):len("http://")+len(host)], u[len("http://")+len(host):]
	entry := &Request{Host: host, Path: pq, URL: u, UserAgent: r.UserAgent(),
		IfNoneMatch: r.Header.Get("If-None-Match"), IfModifiedSince: r.Header.Get("If-Modified-Since"),
		AcceptEncoding: strings.Join(r.Header.Values("Accept-Encoding"), ", ")}
	entry.Conditional = entry.IfNoneMatch != "" || entry.IfModifiedSince != ""

	w.mu.Lock()
	entry.Time = time.Now()
	if w.closed {
		w.mu.Unlock()
		http.Error(rw, errClosed.Error(), http.StatusServiceUnavailable)
		return
	}
	w.log = append(w.log, entry)
	w.inflight.Add(1)
	w.busy++
	w.maxBusy = max(w.maxBusy, w.busy)
	busy := w.busyHost[host] + 1
	w.busyHost[host] = busy
	if busy > w.maxBusyHost[host] {
		w.maxBusyHost[host] = busy
	}
	w.mu.Unlock()
	defer w.inflight.Done()
	// The request is in flight until just before the bytes that complete
	// the response are written, so a client that sends its next request on
	// receiving them never overlaps with this one. finished tells whether
	// that end has been recorded; end records it, w.mu held.
	finished := false
	end := func() {
		finished = true
		w.busy--
		w.busyHost[host]--
	}
	defer func() {
		if !finished {
			w.mu.Lock()
			end()
			w.mu.Unlock()
		}
	}()

	resp := w.respond(r, host, pq)
	if resp.buf != nil {
		defer putBody(resp.buf, resp.body)
	}
	if wait := w.g.cfg.Latency + resp.delay; wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-w.done:
			t.Stop()
		case <-r.Context().Done():
			t.Stop()
		}
		// A client that left during the wait gets nothing. (Close is
		// different: it answers the waiting requests at once.)
		select {
		case <-w.done:
		default:
			if r.Context().Err() != nil {
				w.mu.Lock()
				entry.Abandoned = true
				w.mu.Unlock()
				return
			}
		}
	}
	// Record the outcome before the response is written, so that a client
	// that has read the response always finds it in the log. Nothing is
	// sent before the body is written, so a response written at once ends
	// its in-flight period here too.
	length := resp.length()
	var retryAfter time.Duration
	if v := resp.header.Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(v); err == nil {
			retryAfter = time.Duration(s) * time.Second
		}
	}
	location, encoding := resp.header.Get("Location"), resp.header.Get("Content-Encoding")
	w.mu.Lock()
	entry.Status = resp.status
	entry.Bytes = length
	entry.Location = location
	entry.ContentEncoding = encoding
	entry.RetryAfter = retryAfter
	entry.done = time.Now()
	if resp.chunks == nil || r.Method == http.MethodHead || length == 0 {
		end()
	}
	w.mu.Unlock()
	h := rw.Header()
	if resp.ctype != "" {
		h["Content-Type"] = []string{resp.ctype}
	}
	if resp.status != http.StatusNotModified {
		h["Content-Length"] = []string{strconv.Itoa(length)}
	}
	for k, v := range resp.header {
		h[k] = v
	}
	if resp.status == http.StatusMethodNotAllowed {
		h["Allow"] = []string{"GET, HEAD"}
	}
	rw.WriteHeader(resp.status)
	if r.Method == http.MethodHead || length == 0 {
		return
	}
	var err error
	if resp.chunks == nil {
		_, err = rw.Write(resp.body)
	} else {
		for c := resp.chunks(); c != nil && err == nil; {
			next := resp.chunks()
			if next == nil {
				w.mu.Lock()
				end()
				w.mu.Unlock()
			}
			_, err = rw.Write(c)
			c = next
		}
	}
	if err == nil {
		err = http.NewResponseController(rw).Flush()
	}
	if err != nil {
		w.mu.Lock()
		entry.Abandoned = true
		w.mu.Unlock()
	}
}

// notFound is the answer to a URL that names no page.
func notFound() response { return textResponse(http.StatusNotFound, "404 page not found") }

// respond computes the response for a request to host with path+query pq.
// Non-canonical spellings of a page's URL (tracking parameters, dot
// segments, duplicate slashes) are served like the page, as a real server
// would.
func (w *Web) respond(r *http.Request, host, pq string) response {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return textResponse(http.StatusMethodNotAllowed, "method not allowed")
	}
	if h := w.cases.host(host); h != nil {
		return w.cases.respond(r, h, pq)
	}
	hi, ok := w.g.index[host]
	if !ok {
		return notFound()
	}
	h := w.g.hosts[hi]
	if pq == "/robots.txt" {
		if h.robots.notFound {
			return notFound()
		}
		return response{status: http.StatusOK, ctype: "text/plain; charset=utf-8", body: h.robotsBody}
	}
	if kind := w.g.traps[hi]; kind != TrapNone && inTrapSection(kind, pq) {
		return w.respondTrap(hi, kind, pq)
	}
	if w.g.dust[hi] != dustNone {
		if resp, ok := w.respondDust(host, pq); ok {
			return resp
		}
	}
	// Page URLs are canonical (buildGraph checks), so a URL found as it is
	// is its own canonical form.
	var kb [128]byte
	key := append(append(append(kb[:0], "http://"...), h.name...), pq...)
	id, ok := w.g.byURL[string(key)]
	if !ok {
		c, err := Canonical("http://" + h.name + pq)
		if err != nil {
			return notFound()
		}
		if id, ok = w.g.byURL[c]; !ok {
			return notFound()
		}
	}
	if w.g.pages[id].broken {
		return notFound()
	}
	ct, b, buf := w.g.pooledBody(w.g.pages[id])
	return response{status: http.StatusOK, ctype: ct, body: b, buf: buf}
}
