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
	switch {
	case c.Hosts < 0, c.PagesPerHost < 0, c.LinksPerPage < 0, c.PageBytes < 0, c.Seeds < 0,
		c.CrawlDelayHosts < 0, c.Latency < 0:
		return c, fmt.Errorf("synthweb: negative value in config %+v", c)
	case c.CrossHostFraction > 1:
		return c, fmt.Errorf("synthweb: CrossHostFraction %v > 1", c.CrossHostFraction)
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
	// Status is the response status; 0 only while the response is being
	// prepared (during the Latency wait). It is set before the response is
	// written, so it is there once the client has the response.
	Status int
	// Bytes is the length of the response body (for HEAD, of the body a GET
	// would get); 0 while Status is 0.
	Bytes int
}

// Web is a running synthetic web.
type Web struct {
	g        *graph
	listener net.Listener
	srv      *http.Server
	baseURL  string
	done     chan struct{}
	once     sync.Once
	serveErr chan error

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup
	log      []*Request

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
	return &Web{g: g, done: make(chan struct{})}, nil
}

// Start generates the web for cfg and serves it on 127.0.0.1 at a random
// port.
func Start(cfg Config) (*Web, error) {
	w, err := New(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("synthweb: listen: %w", err)
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

// URL returns the server's base URL, "http://127.0.0.1:PORT".
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

// Hosts returns the virtual host names in order.
func (w *Web) Hosts() []string {
	out := make([]string, len(w.g.hosts))
	for i, h := range w.g.hosts {
		out[i] = h.name
	}
	return out
}

// Seeds returns the canonical seed URLs, the roots of the first hosts, such
// as "http://h000.synth.test/".
func (w *Web) Seeds() []string {
	out := make([]string, len(w.g.seeds))
	for i, id := range w.g.seeds {
		out[i] = w.g.pages[id].url
	}
	return out
}

// Pages returns, sorted, the canonical URLs of every page the server answers
// with 200 (orphans, private and binary pages included; robots.txt and the
// targets of broken links excluded).
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
// 404 and "" for other hosts.
func (w *Web) RobotsTxt(host string) (status int, body string) {
	i, ok := w.g.index[strings.ToLower(host)]
	if !ok || w.g.hosts[i].robots.notFound {
		return http.StatusNotFound, ""
	}
	return http.StatusOK, w.g.hosts[i].robots.text(w.g.hosts[i].name)
}

// CrawlDelay returns the Crawl-delay of a host's robots.txt (the same in all
// its groups), 0 if none or for hosts outside the web.
func (w *Web) CrawlDelay(host string) time.Duration {
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
// /robots.txt are allowed.
func (w *Web) Allowed(token, rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return true
	}
	i, ok := w.g.index[strings.ToLower(u.Hostname())]
	if !ok {
		return true
	}
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return w.g.hosts[i].robots.allowed(token, p)
}

// GroundTruth returns, sorted, the canonical URLs that a correct crawler
// using robots token `token` fetches starting from Seeds(): a breadth-first
// walk from the seeds that follows only followable links (not rel="nofollow",
// not on a page with <meta name="robots" content="...nofollow...">), only to
// synthetic hosts, only to URLs the host's robots.txt allows for token, and
// only out of HTML pages. Targets of broken links (answered 404) are
// included, since a crawler cannot know they are broken before fetching.
// robots.txt itself is not included.
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
	g := w.g
	seen := make([]bool, len(g.pages))
	var queue []int
	visit := func(id int) {
		p := g.pages[id]
		if !seen[id] && g.hosts[p.host].robots.allowed(token, p.path) {
			seen[id] = true
			queue = append(queue, id)
		}
	}
	for _, id := range g.seeds {
		visit(id)
	}
	var out []string
	for len(queue) > 0 {
		p := g.pages[queue[0]]
		queue = queue[1:]
		out = append(out, p.url)
		if p.broken || !p.kind.html() || p.metaNofollow != "" {
			continue
		}
		for _, l := range p.links {
			if l.target >= 0 && !l.nofollow {
				visit(l.target)
			}
		}
	}
	sort.Strings(out)
	return out
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

// Stats returns figures about the generated web.
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
			if l.target < 0 {
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
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(host, ".") // "h001.synth.test." names the same host
	pq := r.URL.EscapedPath()
	if r.URL.RawQuery != "" || r.URL.ForceQuery {
		pq += "?" + r.URL.RawQuery
	}
	entry := &Request{Host: host, Path: pq, URL: "http://" + host + pq, UserAgent: r.UserAgent()}

	w.mu.Lock()
	entry.Time = time.Now()
	if w.closed {
		w.mu.Unlock()
		http.Error(rw, errClosed.Error(), http.StatusServiceUnavailable)
		return
	}
	w.log = append(w.log, entry)
	w.inflight.Add(1)
	w.mu.Unlock()
	defer w.inflight.Done()

	status, ctype, body := w.respond(r.Method, host, pq)
	if lat := w.g.cfg.Latency; lat > 0 {
		t := time.NewTimer(lat)
		select {
		case <-t.C:
		case <-w.done:
			t.Stop()
		case <-r.Context().Done():
			t.Stop()
		}
	}
	// Record the outcome before the response is written, so that a client
	// that has read the response always finds it in the log.
	w.mu.Lock()
	entry.Status = status
	entry.Bytes = len(body)
	w.mu.Unlock()
	rw.Header().Set("Content-Type", ctype)
	rw.Header().Set("Content-Length", fmt.Sprint(len(body)))
	if status == http.StatusMethodNotAllowed {
		rw.Header().Set("Allow", "GET, HEAD")
	}
	rw.WriteHeader(status)
	if r.Method != http.MethodHead {
		rw.Write(body)
	}
}

// respond computes the response for a request to host with path+query pq.
// Non-canonical spellings of a page's URL (tracking parameters, dot
// segments, duplicate slashes) are served like the page, as a real server
// would.
func (w *Web) respond(method, host, pq string) (status int, ctype string, body []byte) {
	notFound := func() (int, string, []byte) {
		return http.StatusNotFound, "text/plain; charset=utf-8", []byte("404 page not found\n")
	}
	if method != http.MethodGet && method != http.MethodHead {
		return http.StatusMethodNotAllowed, "text/plain; charset=utf-8", []byte("method not allowed\n")
	}
	hi, ok := w.g.index[host]
	if !ok {
		return notFound()
	}
	if pq == "/robots.txt" {
		st, txt := w.RobotsTxt(host)
		if st != http.StatusOK {
			return notFound()
		}
		return http.StatusOK, "text/plain; charset=utf-8", []byte(txt)
	}
	c, err := Canonical("http://" + w.g.hosts[hi].name + pq)
	if err != nil {
		return notFound()
	}
	id, ok := w.g.byURL[c]
	if !ok || w.g.pages[id].broken {
		return notFound()
	}
	ct, b := w.g.body(w.g.pages[id])
	return http.StatusOK, ct, b
}
