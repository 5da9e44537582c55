// Package crawl is the single-node crawl engine of swarmcrawl: URL
// normalisation and task keys, the per-host politeness frontier, robots.txt,
// fetching and link extraction.
//
// The node decides which hosts it owns and deduplicates URLs; it hands the
// new ones to Crawler.Enqueue. The Crawler fetches them politely, gives every
// response to a PageSink and every page's followable links to a LinkSink,
// which routes them to their owners (possibly this node again). Nothing here
// knows about the ring or the network between nodes.
package crawl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Task is one URL to crawl.
type Task struct {
	// URL is the absolute URL, already in the form Normalize returns.
	URL string
	// Depth is the number of link hops from a seed (seeds have depth 0).
	Depth int
}

// Config configures a Crawler. Start from DefaultConfig: a zero field means
// zero (Delay 0 is a valid choice for benchmarks), not "default".
type Config struct {
	// UserAgent is sent on every request. Its first product token, lowercased
	// ("examplebot" in "examplebot/1.0 (+http://bot.example/about)"), is the
	// name matched against robots.txt groups and <meta name=...> tags.
	// Default "swarmcrawl/0.1 (+https://github.com/swarmcrawl/swarmcrawl)".
	UserAgent string
	// Delay is the minimum time between the completion of one request to a
	// host and the start of the next (default 1s). A larger robots.txt
	// Crawl-delay wins.
	Delay time.Duration
	// MaxCrawlDelay caps the robots.txt Crawl-delay honoured (default 60s),
	// so one robots.txt cannot park a host for hours.
	MaxCrawlDelay time.Duration
	// Workers is the number of concurrent fetches, each to a different host
	// (default 32).
	Workers int
	// ConnectTimeout bounds the TCP connect and the TLS handshake (default
	// 10s).
	ConnectTimeout time.Duration
	// Timeout bounds one request from dial to the last body byte (default
	// 30s).
	Timeout time.Duration
	// MaxBodyBytes is the most of a body kept (default 10 MiB); longer bodies
	// are truncated and the Page is flagged.
	MaxBodyBytes int64
	// MaxDepth is the deepest link reported (default 16): links found on a
	// page of depth MaxDepth are dropped, which bounds spider traps.
	MaxDepth int
	// MaxRedirects is the number of redirects followed per task (default 5);
	// 0 keeps every 3xx response as it is.
	MaxRedirects int
	// RobotsTTL is how long a fetched robots.txt is trusted (default 24h).
	RobotsTTL time.Duration
	// Proxy picks the proxy for a request (default http.ProxyFromEnvironment,
	// which honours HTTP_PROXY, HTTPS_PROXY and NO_PROXY); nil means direct.
	Proxy func(*http.Request) (*url.URL, error)
	// Transport, when set, replaces the crawler's own transport, and with it
	// Proxy, ConnectTimeout and connection pooling. For tests.
	Transport http.RoundTripper
	// Clock returns the current time (default time.Now). It stamps pages and
	// decides politeness; waits still use real timers, so it must advance
	// with real time.
	Clock func() time.Time
}

// DefaultUserAgent is the User-Agent of DefaultConfig: honest, with a
// contact URL, as site operators expect from a crawler.
const DefaultUserAgent = "swarmcrawl/0.1 (+https://github.com/swarmcrawl/swarmcrawl)"

// DefaultConfig returns the configuration of a polite production crawler.
func DefaultConfig() Config {
	return Config{
		UserAgent:      DefaultUserAgent,
		Delay:          time.Second,
		MaxCrawlDelay:  time.Minute,
		Workers:        32,
		ConnectTimeout: 10 * time.Second,
		Timeout:        30 * time.Second,
		MaxBodyBytes:   10 << 20,
		MaxDepth:       16,
		MaxRedirects:   5,
		RobotsTTL:      24 * time.Hour,
		Proxy:          http.ProxyFromEnvironment,
	}
}

// validate reports the first problem with c as one readable line.
func (c *Config) validate() error {
	switch {
	case strings.TrimSpace(c.UserAgent) == "":
		return errors.New("UserAgent is empty")
	case strings.ContainsAny(c.UserAgent, "\r\n"):
		return errors.New("UserAgent contains a line break")
	case ProductToken(c.UserAgent) == "":
		return fmt.Errorf("UserAgent %q has no product token", c.UserAgent)
	case c.Delay < 0:
		return fmt.Errorf("delay is negative (%v)", c.Delay)
	case c.MaxCrawlDelay < 0:
		return fmt.Errorf("MaxCrawlDelay is negative (%v)", c.MaxCrawlDelay)
	case c.Workers < 1:
		return fmt.Errorf("workers must be at least 1 (got %d)", c.Workers)
	case c.ConnectTimeout <= 0:
		return fmt.Errorf("ConnectTimeout must be positive (got %v)", c.ConnectTimeout)
	case c.Timeout <= 0:
		return fmt.Errorf("timeout must be positive (got %v)", c.Timeout)
	case c.MaxBodyBytes <= 0:
		return fmt.Errorf("MaxBodyBytes must be positive (got %d)", c.MaxBodyBytes)
	case c.MaxDepth < 0:
		return fmt.Errorf("MaxDepth is negative (%d)", c.MaxDepth)
	case c.MaxRedirects < 0:
		return fmt.Errorf("MaxRedirects is negative (%d)", c.MaxRedirects)
	case c.RobotsTTL <= 0:
		return fmt.Errorf("RobotsTTL must be positive (got %v)", c.RobotsTTL)
	}
	return nil
}

// ProductToken returns the lowercase robots.txt name of a User-Agent: its
// first product token, "examplebot" for
// "ExampleBot/1.0 (+http://bot.example/about)".
func ProductToken(userAgent string) string {
	t := strings.TrimSpace(userAgent)
	if i := strings.IndexAny(t, "/ \t("); i >= 0 {
		t = t[:i]
	}
	return strings.ToLower(t)
}

// Page is one fetched response.
type Page struct {
	// Task is the task that led to the fetch.
	Task Task
	// FinalURL is the URL of this response: Task.URL, or where redirects led.
	FinalURL string
	// Redirects lists the URLs that answered with a redirect before FinalURL,
	// in order; nil when there was none.
	Redirects []string
	// Status is the HTTP status code.
	Status int
	// ContentType is the Content-Type header.
	ContentType string
	// Header holds all response headers.
	Header http.Header
	// Body is the (decompressed) body, at most Config.MaxBodyBytes.
	Body []byte
	// Truncated is set when the body was longer than Config.MaxBodyBytes.
	Truncated bool
	// FetchedAt is when the response was complete.
	FetchedAt time.Time
	// Duration is the time spent in requests, redirects included, politeness
	// waits between them excluded.
	Duration time.Duration
	// Links are the normalised links that are reported to the LinkSink.
	Links []string
}

// LinkSink receives discovered links. Discovered is called at most once per
// fetched page, and only when it has links to report: those of an HTML
// page with a 2xx status (followable, deduplicated within the page, depth
// from.Depth+1, not deeper than MaxDepth), or the target of a redirect that
// the crawler does not follow itself because it leads to another host.
// Several workers call it concurrently.
type LinkSink interface {
	Discovered(ctx context.Context, from Task, links []Task)
}

// PageSink receives every fetched response, whatever its status. Several
// workers call it concurrently. An error is counted as kind "store"; the
// crawl goes on.
type PageSink interface {
	StorePage(ctx context.Context, p *Page) error
}

// Stats is a snapshot of a Crawler's counters.
type Stats struct {
	Fetched       int64            // pages handed to the PageSink
	Requests      int64            // HTTP requests sent, robots.txt and redirects included
	Errors        int64            // failures of any kind, the sum of ErrorsByKind
	ErrorsByKind  map[string]int64 // "timeout", "dns", "connect", "tls", "http_4xx", "http_5xx", "too_many_redirects", "body", "store", "bad_url", "other"
	RobotsDenied  int64            // tasks dropped because robots.txt disallows them
	RobotsFetched int64            // robots.txt requests made
	Redirects     int64            // redirects followed
	LinksReported int64            // links handed to the LinkSink
	Queued        int64            // tasks waiting in the frontier
	InFlight      int64            // tasks being fetched or processed
	Hosts         int64            // hosts with queued or in-flight tasks
	BytesFetched  int64            // body bytes received, robots.txt included
	FetchP50      time.Duration    // median request latency over the last latencyWindow requests
	FetchP99      time.Duration    // 99th percentile of the same
}

// Crawler fetches enqueued tasks politely with a pool of workers.
type Crawler struct {
	cfg      Config
	token    string
	gap      func(crawlDelay time.Duration) time.Duration
	pages    PageSink
	links    LinkSink
	frontier *Frontier
	robots   *robotsCache
	client   *http.Client
	now      func() time.Time
	// robotsRetry is how long an unavailable robots.txt blocks its host
	// before the next attempt (robotsRetryTTL; shortened by tests).
	robotsRetry time.Duration

	running atomic.Bool
	// pending counts tasks enqueued and not yet finished (queued, in flight,
	// or being handed to the sinks). Idle is pending == 0: one counter, so it
	// cannot miss a task moving between the frontier and a worker.
	pending  atomic.Int64
	inFlight atomic.Int64

	fetched, requests, robotsDenied, robotsFetched atomic.Int64
	redirects, linksReported, bytesFetched         atomic.Int64

	mu       sync.Mutex
	errors   map[string]int64
	latency  [latencyWindow]time.Duration
	latencyN int
}

// latencyWindow is how many recent request latencies Stats' percentiles
// are computed from: enough for a stable p99, small enough to sort on demand.
const latencyWindow = 4096

// New returns a Crawler for cfg, which must be valid (start from
// DefaultConfig). A nil sink discards what it would receive.
func New(cfg Config, pages PageSink, links LinkSink) (*Crawler, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("crawl config: %w", err)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if pages == nil {
		pages = discard{}
	}
	if links == nil {
		links = discard{}
	}
	c := &Crawler{
		cfg:      cfg,
		token:    ProductToken(cfg.UserAgent),
		pages:    pages,
		links:    links,
		frontier: NewFrontier(cfg.Delay, cfg.MaxCrawlDelay, cfg.Clock),
		robots:   newRobotsCache(),
		now:      cfg.Clock,
		errors:   make(map[string]int64),

		robotsRetry: robotsRetryTTL,
	}
	c.gap = c.frontier.Gap
	c.client = newClient(&cfg)
	return c, nil
}

type discard struct{}

func (discard) StorePage(context.Context, *Page) error   { return nil }
func (discard) Discovered(context.Context, Task, []Task) {}

// Enqueue queues tasks for crawling. It is safe for concurrent use and never
// waits for fetching. Tasks whose URL has no http(s) host are counted as
// errors of kind "bad_url" and dropped. The crawler does not deduplicate:
// that is the owner's seen set's job.
func (c *Crawler) Enqueue(tasks ...Task) {
	good := tasks[:0:0]
	for _, t := range tasks {
		if _, err := HostOf(t.URL); err != nil {
			c.countError("bad_url")
			continue
		}
		good = append(good, t)
	}
	if len(good) == 0 {
		return
	}
	c.pending.Add(int64(len(good)))
	if err := c.frontier.Push(good...); err != nil {
		// Cannot happen: every URL was checked above. Keep the count honest
		// anyway rather than leave Idle false forever.
		c.pending.Add(-int64(len(good)))
		c.countError("bad_url")
	}
}

// Run fetches queued tasks with cfg.Workers workers until ctx ends, then
// waits for every worker to return. Requests in flight are cancelled and
// their tasks put back in the queue, so a later Run picks them up. It
// returns nil when stopped through ctx, and an error if the Crawler is
// already running.
func (c *Crawler) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("crawl: Run called while already running")
	}
	defer c.running.Store(false)
	var wg sync.WaitGroup
	for range c.cfg.Workers {
		wg.Go(func() { c.work(ctx) })
	}
	wg.Wait()
	// Idle keep-alive connections own goroutines; close them so that a
	// stopped crawler leaves nothing running behind.
	c.client.CloseIdleConnections()
	return nil
}

// work is one worker: take the next ready host's task, handle it, repeat.
func (c *Crawler) work(ctx context.Context) {
	for {
		t, err := c.frontier.Next(ctx)
		if err != nil {
			return // ctx is done
		}
		c.inFlight.Add(1)
		c.handle(ctx, t)
		c.inFlight.Add(-1)
	}
}

// Idle reports whether nothing is queued and nothing is being fetched or
// handed to the sinks. Links a sink re-enqueues are queued before the task
// that found them counts as finished, so Idle never flickers true mid-crawl
// in a single-node setup.
func (c *Crawler) Idle() bool {
	return c.pending.Load() == 0
}

// Stats returns a snapshot of the counters.
func (c *Crawler) Stats() Stats {
	s := Stats{
		Fetched:       c.fetched.Load(),
		Requests:      c.requests.Load(),
		RobotsDenied:  c.robotsDenied.Load(),
		RobotsFetched: c.robotsFetched.Load(),
		Redirects:     c.redirects.Load(),
		LinksReported: c.linksReported.Load(),
		Queued:        int64(c.frontier.Len()),
		InFlight:      c.inFlight.Load(),
		Hosts:         int64(c.frontier.Hosts()),
		BytesFetched:  c.bytesFetched.Load(),
		ErrorsByKind:  make(map[string]int64),
	}
	c.mu.Lock()
	for k, v := range c.errors {
		s.ErrorsByKind[k] = v
		s.Errors += v
	}
	n := min(c.latencyN, latencyWindow)
	lat := make([]time.Duration, n)
	copy(lat, c.latency[:n])
	c.mu.Unlock()
	s.FetchP50, s.FetchP99 = percentile(lat, 0.50), percentile(lat, 0.99)
	return s
}

func (c *Crawler) countError(kind string) {
	c.mu.Lock()
	c.errors[kind]++
	c.mu.Unlock()
}

func (c *Crawler) recordLatency(d time.Duration) {
	c.mu.Lock()
	c.latency[c.latencyN%latencyWindow] = d
	c.latencyN++
	c.mu.Unlock()
}

// percentile returns the q-quantile of ds (which it sorts), or 0 when empty.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}
