// Package crawl is the single-node crawl engine of swarmcrawl: the crawl
// loop over the leases of its durable frontier (crawl/frontier), the
// admission of each task (ownership, robots.txt, page budget), DNS and
// dialing, fetching, link and text extraction, near-duplicates, freshness
// and failure handling, fetch delegation of hot hosts, and the hooks a node
// uses to move key ranges. URLs are normalised and keyed by crawl/urls.
//
// The node decides which hosts it owns and deduplicates URLs; it hands the
// new ones to Crawler.Enqueue. The Crawler keeps them in its durable
// frontier, fetches them politely, gives every response to a PageSink and
// every page's followable links (and every redirect target) to a LinkSink,
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

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

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
	// MaxBodyBytes is the most of a body kept, both as received and
	// decompressed (default 10 MiB); longer bodies are cut there, never
	// buffered whole, and the Page is flagged Truncated.
	MaxBodyBytes int64
	// MaxDepth is the deepest link reported (default 16): links found on a
	// page of depth MaxDepth are dropped, which bounds spider traps.
	MaxDepth int
	// MaxRedirects is the longest redirect chain followed (default 5). Each
	// hop is a task of its own; a URL reached through MaxRedirects hops that
	// redirects again is recorded as a dead letter of kind
	// "too_many_redirects". 0 follows no redirect (and records nothing).
	MaxRedirects int
	// MaxRepeatedSegments refuses, as error kind "trap", URLs whose path
	// holds one segment more than this many times (default 3: /a/a/a/a is
	// refused); 0 disables the check.
	MaxRepeatedSegments int
	// MaxPagesPerHost is the page budget of a host (default 0, unlimited):
	// once that many distinct pages of a host were fetched, its other tasks
	// are dropped and counted in Stats.BudgetDropped. Recrawls do not count.
	MaxPagesPerHost int
	// MinRecrawl and MaxRecrawl bound the recrawl interval of a URL
	// (defaults 1h and 30 days). A URL is first recrawled MinRecrawl after
	// its first fetch; the interval then halves whenever the content
	// changed and doubles whenever it did not. MaxRecrawl 0 turns recrawling
	// off.
	MinRecrawl, MaxRecrawl time.Duration
	// MaxRetries is how many times a failed fetch (timeout, connection
	// error, 429, 5xx) is retried before the task becomes a dead letter
	// (default 3).
	MaxRetries int
	// RetryBase is the backoff unit (default 1s): retry n waits a random
	// time in [0, RetryBase·2^n) ("full jitter"), and at least as long as
	// the server's Retry-After.
	RetryBase time.Duration
	// MaxRetryAfter caps the Retry-After honoured (default 1h). A
	// Retry-After closes the whole host until it has passed.
	MaxRetryAfter time.Duration
	// NearDupDistance is the largest simhash distance at which a page
	// counts as a near-duplicate of another (default 3); negative turns the
	// check off. A near-duplicate's links are not reported again.
	NearDupDistance int
	// RobotsTTL is how long a fetched robots.txt is trusted (default 24h).
	RobotsTTL time.Duration
	// KeyMode is how the node computes ring keys (default urls.KeyHost); the
	// per-URL tables of the store are laid out by them.
	KeyMode urls.KeyMode
	// Proxy picks the proxy for a request (default http.ProxyFromEnvironment,
	// which honours HTTP_PROXY, HTTPS_PROXY and NO_PROXY); nil means direct.
	Proxy func(*http.Request) (*url.URL, error)
	// Dial configures the DNS cache, the per-IP connection cap and the
	// refusal of non-public addresses for direct connections (default
	// DefaultDialConfig()). Connections to a proxy do not go through it.
	Dial DialConfig
	// Transport, when set, replaces the crawler's own transport, and with it
	// Proxy, Dial, ConnectTimeout and connection pooling. For tests.
	Transport http.RoundTripper
	// Clock returns the current time (default time.Now). It stamps pages and
	// decides politeness; waits still use real timers, so it must advance
	// with real time.
	Clock func() time.Time
	// Owns, if set, is asked right before any network request for a task
	// (robots.txt included) with the task's ring key (TaskKey in urls.KeyMode).
	// When it answers false the task is not fetched: it goes back to the
	// store untouched and its host is parked (removed from the in-memory
	// scheduler, store left as is) until Resume or Enqueue brings it back.
	// It is called from worker goroutines and must be quick.
	Owns func(ringKey uint64) bool
	// OnDone, if set, is called once a task reaches a terminal state:
	// fetched and stored (including recrawl rescheduling), dead-lettered,
	// dropped for good (robots disallow, trap, budget, a stale recrawl
	// copy). Not called for a retry that is scheduled, nor for a task that
	// goes back to the store (stopped, not owned, released). It is called
	// after the outcome is written to the store, from worker goroutines or,
	// for tasks Enqueue drops, from Enqueue's caller; it must not block for
	// long and must not call Enqueue or Release. meta is the URL's metadata
	// as the outcome stored it (nil when the task ended without one), so
	// that the caller need not read it back.
	OnDone func(t frontier.Task, ringKey, urlHash uint64, meta *store.URLMeta)
	// HotQueue is the number of queued tasks of one host at which its
	// fetches go to Delegate in batches (see Delegator); 0 never delegates.
	// Delegation needs urls.KeyHost.
	HotQueue int
	// DelegateBatch is the most tasks in one delegated batch (default 16
	// when 0, at most MaxDelegateTasks).
	DelegateBatch int
	// DelegateBudget bounds a delegated batch: the helper starts no
	// request later than this after it received the batch (default 5s
	// when 0). A node sets it within its ownership lease, so that a batch
	// never outlives the owner's right to the host.
	DelegateBudget time.Duration
	// Delegate hands fetch batches of hot hosts to helpers; nil fetches
	// everything locally.
	Delegate Delegator
}

// DefaultUserAgent is the User-Agent of DefaultConfig: honest, with a
// contact URL, as site operators expect from a crawler.
const DefaultUserAgent = "swarmcrawl/0.1 (+https://github.com/swarmcrawl/swarmcrawl)"

// DefaultConfig returns the configuration of a polite production crawler.
func DefaultConfig() Config {
	return Config{
		UserAgent:           DefaultUserAgent,
		Delay:               time.Second,
		MaxCrawlDelay:       time.Minute,
		Workers:             32,
		ConnectTimeout:      10 * time.Second,
		Timeout:             30 * time.Second,
		MaxBodyBytes:        10 << 20,
		MaxDepth:            16,
		MaxRedirects:        5,
		MaxRepeatedSegments: 3,
		MinRecrawl:          time.Hour,
		MaxRecrawl:          30 * 24 * time.Hour,
		MaxRetries:          3,
		RetryBase:           time.Second,
		MaxRetryAfter:       time.Hour,
		NearDupDistance:     3,
		RobotsTTL:           24 * time.Hour,
		Proxy:               http.ProxyFromEnvironment,
		Dial:                DefaultDialConfig(),
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
	case c.MaxRepeatedSegments < 0:
		return fmt.Errorf("MaxRepeatedSegments is negative (%d)", c.MaxRepeatedSegments)
	case c.MaxPagesPerHost < 0:
		return fmt.Errorf("MaxPagesPerHost is negative (%d)", c.MaxPagesPerHost)
	case c.MaxRecrawl < 0:
		return fmt.Errorf("MaxRecrawl is negative (%v)", c.MaxRecrawl)
	case c.MaxRecrawl > 0 && (c.MinRecrawl <= 0 || c.MinRecrawl > c.MaxRecrawl):
		return fmt.Errorf("MinRecrawl must be in (0, MaxRecrawl] (got %v, MaxRecrawl %v)", c.MinRecrawl, c.MaxRecrawl)
	case c.MaxRetries < 0:
		return fmt.Errorf("MaxRetries is negative (%d)", c.MaxRetries)
	case c.MaxRetries > 0 && c.RetryBase <= 0:
		return fmt.Errorf("RetryBase must be positive (got %v)", c.RetryBase)
	case c.MaxRetryAfter < 0:
		return fmt.Errorf("MaxRetryAfter is negative (%v)", c.MaxRetryAfter)
	case c.RobotsTTL <= 0:
		return fmt.Errorf("RobotsTTL must be positive (got %v)", c.RobotsTTL)
	case c.KeyMode != urls.KeyHost && c.KeyMode != urls.KeyURL:
		return fmt.Errorf("unknown %v", c.KeyMode)
	case c.HotQueue < 0:
		return fmt.Errorf("HotQueue is negative (%d)", c.HotQueue)
	case c.DelegateBudget < 0:
		return fmt.Errorf("DelegateBudget is negative (%v)", c.DelegateBudget)
	case c.DelegateBatch < 0 || c.DelegateBatch > MaxDelegateTasks:
		return fmt.Errorf("DelegateBatch must be in [0, %d] (got %d)", MaxDelegateTasks, c.DelegateBatch)
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
	Task frontier.Task
	// FinalURL is the URL of this response, always Task.URL: redirects are
	// not followed within a fetch but become tasks of their own.
	FinalURL string
	// Status is the HTTP status code.
	Status int
	// ContentType is the Content-Type header.
	ContentType string
	// Header holds all response headers.
	Header http.Header
	// Request holds the headers sent, conditional ones included.
	Request http.Header
	// Proto is the protocol of the response, such as "HTTP/1.1".
	Proto string
	// RemoteAddr is the ip:port the response came from (the proxy's when
	// one was used), or "" when unknown.
	RemoteAddr string
	// RawBody is the body as received, still content-coded (gzip,
	// deflate), at most Config.MaxBodyBytes: what a WARC record keeps.
	RawBody []byte
	// Body is the decoded body, at most Config.MaxBodyBytes. It is nil
	// for a 304 and for a content coding the crawler cannot decode.
	Body []byte
	// Truncated is set when the body, as received or decoded, was longer
	// than Config.MaxBodyBytes and was cut.
	Truncated bool
	// NotModified is set for a 304 answer to a conditional recrawl: the
	// page did not change and no body was sent.
	NotModified bool
	// RedirectTo is the normalised Location of a 3xx response, "" when
	// there is none or it does not normalise.
	RedirectTo string
	// Title and Text are the title and visible text of an HTML or plain
	// text page (see ExtractText).
	Title, Text string
	// Simhash is the fingerprint of Text (0 when there is no text).
	Simhash uint64
	// NearDuplicateOf is the URL of an earlier page whose fingerprint is
	// within Config.NearDupDistance of this one's, if any; the links of a
	// near-duplicate are not reported.
	NearDuplicateOf string
	// FetchedAt is when the response was complete.
	FetchedAt time.Time
	// Duration is the time the request took.
	Duration time.Duration
	// Links are the normalised links that are reported to the LinkSink.
	Links []string
}

// LinkSink receives discovered links. Discovered is called at most once per
// fetched page, and only when it has links to report: those of an HTML page
// with a 2xx status whose content is new or changed (followable,
// deduplicated within the page, depth from.Depth+1, not deeper than
// MaxDepth, no traps), or the target of a redirect (same depth,
// Redirects+1). Several workers call it concurrently.
type LinkSink interface {
	Discovered(ctx context.Context, from frontier.Task, links []frontier.Task)
}

// PageSink receives every final response: each fetch, including recrawls
// and 304s, except failed attempts that are retried. Several workers call
// it concurrently. An error is counted as kind "store"; the crawl goes on.
type PageSink interface {
	StorePage(ctx context.Context, p *Page) error
}

// Stats is a snapshot of a Crawler's counters.
type Stats struct {
	Fetched       int64            // pages handed to the PageSink
	Requests      int64            // HTTP requests sent, robots.txt included
	Errors        int64            // failures of any kind, the sum of ErrorsByKind
	ErrorsByKind  map[string]int64 // "timeout", "dns", "connect", "tls", "blocked_address", "http_4xx", "http_5xx", "too_many_redirects", "trap", "body", "encoding", "store", "bad_url", "delegate", "other"
	RobotsDenied  int64            // tasks dropped because robots.txt disallows them
	RobotsFetched int64            // robots.txt requests made
	Redirects     int64            // redirect targets reported as new tasks
	LinksReported int64            // links handed to the LinkSink, redirect targets included
	Retries       int64            // failed fetches rescheduled for another attempt
	DeadLetters   int64            // dead letters in the store
	NotModified   int64            // 304 answers to conditional requests
	Recrawls      int64            // fetches of URLs crawled before
	Changed       int64            // recrawls that found the content changed
	NearDups      int64            // pages found to be near-duplicates
	BudgetDropped int64            // tasks dropped because their host's page budget was spent
	Queued        int64            // tasks waiting in the frontier
	Scheduled     int64            // tasks waiting for a time: retries and recrawls
	InFlight      int64            // tasks being fetched or processed
	Hosts         int64            // hosts with queued or in-flight tasks
	BytesFetched  int64            // body bytes received as sent, robots.txt included
	Delegated     int64            // tasks of hot hosts a helper fetched for this owner
	Helped        int64            // tasks this crawler fetched for other owners
	DelegateFails int64            // delegated batches that failed after they were sent
	FetchP50      time.Duration    // median request latency over the last latencyWindow requests
	FetchP99      time.Duration    // 99th percentile of the same
	Dial          DialStats        // DNS cache and per-IP cap of direct connections
}

// Crawler fetches enqueued tasks politely with a pool of workers.
type Crawler struct {
	cfg      Config
	token    string
	db       *store.DB
	pages    PageSink
	links    LinkSink
	frontier *frontier.Frontier
	robots   *robotsCache
	client   *http.Client
	dialer   *Dialer // nil when cfg.Transport replaces the transport
	now      func() time.Time
	// robotsRetry is how long an unavailable robots.txt blocks its host
	// before the next attempt (robotsRetryTTL; shortened by tests).
	robotsRetry time.Duration

	running  atomic.Bool
	inFlight atomic.Int64

	fetched, requests, robotsDenied, robotsFetched atomic.Int64
	redirects, linksReported, bytesFetched         atomic.Int64
	retries, notModified, recrawls, changed        atomic.Int64
	nearDups, budgetDropped                        atomic.Int64
	delegated, helped, delegateFails               atomic.Int64

	// noHelperUntil (Unix nanoseconds of Config.Clock) stops delegation
	// for a while after the Delegator found no helper; helpSlots bounds
	// the batches fetched for other owners at once.
	noHelperUntil atomic.Int64
	helpSlots     chan struct{}

	// freshRobots holds the hosts whose robots.txt was fetched since the
	// last TakeFreshSnapshots.
	freshMu     sync.Mutex
	freshRobots map[string]bool

	fpMu sync.Mutex // serialises near-duplicate lookups with their additions

	mu       sync.Mutex
	errors   map[string]int64
	latency  [latencyWindow]time.Duration
	latencyN int
}

// latencyWindow is how many recent request latencies Stats' percentiles
// are computed from: enough for a stable p99, small enough to sort on demand.
const latencyWindow = 4096

// New returns a Crawler for cfg, which must be valid (start from
// DefaultConfig). It keeps its frontier, URL metadata, host state and dead
// letters in db, and resumes the queue stored there: a Crawler restarted on
// the same db fetches the tasks that were queued or in flight. A nil sink
// discards what it would receive.
func New(cfg Config, db *store.DB, pages PageSink, links LinkSink) (*Crawler, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("crawl config: %w", err)
	}
	if db == nil {
		return nil, errors.New("crawl: nil store")
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
	f, err := frontier.New(db, frontier.Config{
		Delay:           zeroIsNone(cfg.Delay),
		MaxCrawlDelay:   zeroIsNone(cfg.MaxCrawlDelay),
		MaxPagesPerHost: cfg.MaxPagesPerHost,
		KeyMode:         cfg.KeyMode,
		Clock:           cfg.Clock,
	})
	if err != nil {
		return nil, fmt.Errorf("crawl: %w", err)
	}
	c := &Crawler{
		cfg:      cfg,
		token:    ProductToken(cfg.UserAgent),
		db:       db,
		pages:    pages,
		links:    links,
		frontier: f,
		robots:   newRobotsCache(),
		now:      cfg.Clock,
		errors:   make(map[string]int64),

		robotsRetry: robotsRetryTTL,
		helpSlots:   make(chan struct{}, cfg.Workers),
	}
	c.client, c.dialer = newClient(&cfg)
	return c, nil
}

type discard struct{}

func (discard) StorePage(context.Context, *Page) error                     { return nil }
func (discard) Discovered(context.Context, frontier.Task, []frontier.Task) {}

// Enqueue queues tasks for crawling, durably: they are in the store when it
// returns. It is safe for concurrent use and never waits for fetching. Tasks
// whose URL has no http(s) host are counted as errors of kind "bad_url",
// and URLs that look like spider traps (see Config.MaxRepeatedSegments) as
// kind "trap"; both are dropped, as are tasks of a host whose page budget is
// spent. The crawler does not deduplicate: that is the owner's seen set's
// job.
func (c *Crawler) Enqueue(tasks ...frontier.Task) {
	good := tasks[:0:0]
	for _, t := range tasks {
		if _, err := urls.HostOf(t.URL); err != nil {
			c.countError("bad_url") // no ring key either: OnDone cannot name it
			continue
		}
		if c.isTrap(t.URL) {
			c.countError("trap")
			c.reportFinished(t, nil)
			continue
		}
		good = append(good, t)
	}
	if len(good) == 0 {
		return
	}
	dropped, err := c.frontier.Push(good...)
	c.budgetDropped.Add(int64(len(dropped)))
	if err != nil {
		c.countError("store")
	}
	for _, t := range dropped {
		c.reportFinished(t, nil)
	}
}

// RequeueDeadLetters moves the dead letters filter accepts (all when filter
// is nil) back into the queue with their attempts reset, and returns how
// many it moved. Each batch is moved atomically: a dead letter is either
// still a dead letter or queued again.
func (c *Crawler) RequeueDeadLetters(filter func(store.DeadLetter) bool) (int, error) {
	var picked []store.DeadLetter
	err := c.db.DeadLetters(func(d store.DeadLetter) error {
		if filter == nil || filter(d) {
			picked = append(picked, d)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("requeue dead letters: %w", err)
	}
	moved := 0
	for chunk := range slices.Chunk(picked, 1000) {
		if err := c.frontier.RequeueDeadLetters(chunk); err != nil {
			return moved, fmt.Errorf("requeue dead letters: %w", err)
		}
		moved += len(chunk)
	}
	return moved, nil
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

// work is one worker: lease the next ready host, handle it, repeat.
func (c *Crawler) work(ctx context.Context) {
	for {
		l, err := c.frontier.Next(ctx)
		if err != nil {
			return // ctx is done
		}
		c.inFlight.Add(1)
		c.handle(ctx, l)
		c.inFlight.Add(-1)
	}
}

// Idle reports whether nothing is queued, nothing is being fetched or
// handed to the sinks, and no retry is waiting; recrawls scheduled for
// later do not count. Links a sink re-enqueues are queued before the task
// that found them counts as finished, so Idle never flickers true mid-crawl
// in a single-node setup.
func (c *Crawler) Idle() bool {
	return c.frontier.Idle()
}

// Stats returns a snapshot of the counters.
func (c *Crawler) Stats() Stats {
	counts := c.frontier.Counts()
	s := Stats{
		Fetched:       c.fetched.Load(),
		Requests:      c.requests.Load(),
		RobotsDenied:  c.robotsDenied.Load(),
		RobotsFetched: c.robotsFetched.Load(),
		Redirects:     c.redirects.Load(),
		LinksReported: c.linksReported.Load(),
		Retries:       c.retries.Load(),
		DeadLetters:   counts.Dead,
		NotModified:   c.notModified.Load(),
		Recrawls:      c.recrawls.Load(),
		Changed:       c.changed.Load(),
		NearDups:      c.nearDups.Load(),
		BudgetDropped: c.budgetDropped.Load(),
		Queued:        int64(c.frontier.Len()),
		Scheduled:     counts.Scheduled,
		InFlight:      c.inFlight.Load(),
		Hosts:         int64(c.frontier.Hosts()),
		BytesFetched:  c.bytesFetched.Load(),
		Delegated:     c.delegated.Load(),
		Helped:        c.helped.Load(),
		DelegateFails: c.delegateFails.Load(),
		ErrorsByKind:  make(map[string]int64),
	}
	if c.dialer != nil {
		s.Dial = c.dialer.Stats()
	}
	if n := c.frontier.StoreErrors(); n > 0 {
		s.ErrorsByKind["store"] += int64(n)
		s.Errors += int64(n)
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

// zeroIsNone maps a zero duration of this Config, which means zero, to the
// frontier's None.
func zeroIsNone(d time.Duration) time.Duration {
	if d == 0 {
		return frontier.None
	}
	return d
}
