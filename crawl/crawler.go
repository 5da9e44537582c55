// Package crawl is the single-node crawl engine of swarmcrawl: the crawl
// loop over the leases of its durable frontier (crawl/frontier), the
// admission of each task (ownership, robots.txt, page budget), DNS and
// dialing, fetching, link and text extraction, near-duplicates, spider
// trap detection (traps.go), following a page's links again from a shorter
// path (reopen.go), freshness and failure handling, fetch delegation of
// hot hosts, and the hooks a node uses to move key ranges. URLs are
// normalised and keyed by crawl/urls.
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
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

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
	// ResponseID is the WARC-Record-ID the response record is to get, set
	// when the fetch is recorded as a capture (Config.CaptureHolder); ""
	// lets the archive pick one. PayloadDigest is then the capture's
	// digest of RawBody (warc.PayloadDigest), computed once for the
	// capture and the response record.
	ResponseID, PayloadDigest string
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
	// MainText is the page's main content: Text without what a site
	// repeats around it (navigation, header, footer, sidebars, comments,
	// link lists, hidden dialogs; see mainScan), "" when there is no
	// text. It is the text the archive keeps (WARCExchange).
	MainText string
	// Simhash is the fingerprint of MainText (0 when there is no text).
	Simhash uint64
	// NearDuplicateOf is the URL of an earlier page whose fingerprint is
	// within Config.NearDupDistance of this one's, if any: an index may skip
	// it. Its links are followed like any page's.
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
// deduplicated within the page, depth from.Depth+1, from a page shallower
// than MaxDepth, no traps, not a byte-identical copy of a page whose links
// were reported from as shallow a depth), or the target of a redirect (same
// depth, Redirects+1). It is called again, without a fetch, for a page
// queued again from a shorter path (see Enqueue), with the page's links
// from the new depth, for the twin of a DUST variant dropped at admission
// (same depth), and for variants a DUST hint rewrote that go back to the
// queue (from the zero Task; see dust.go). Several workers call it
// concurrently.
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
	Fetched         int64               `json:"fetched"`          // pages handed to the PageSink
	Requests        int64               `json:"requests"`         // HTTP requests sent, robots.txt included
	Errors          int64               `json:"errors"`           // failures of any kind, the sum of ErrorsByKind
	ErrorsByKind    map[string]int64    `json:"errors_by_kind"`   // "timeout", "dns", "connect", "tls", "blocked_address", "http_4xx", "http_5xx", "too_many_redirects", "trap", "body", "encoding", "store", "bad_url", "delegate", "other"
	RobotsDenied    int64               `json:"robots_denied"`    // tasks dropped because robots.txt disallows them
	RobotsFetched   int64               `json:"robots_fetched"`   // robots.txt requests made
	Redirects       int64               `json:"redirects"`        // redirect targets reported as new tasks
	LinksReported   int64               `json:"links_reported"`   // links handed to the LinkSink, redirect targets included
	LinksCapped     int64               `json:"links_capped"`     // link elements dropped beyond Config.MaxLinksPerPage on their page
	Retries         int64               `json:"retries"`          // failed fetches rescheduled for another attempt
	DeadLetters     int64               `json:"dead_letters"`     // dead letters in the store
	NotModified     int64               `json:"not_modified"`     // 304 answers to conditional requests
	Recrawls        int64               `json:"recrawls"`         // fetches of URLs crawled before
	Changed         int64               `json:"changed"`          // recrawls that found the content changed
	NearDups        int64               `json:"near_dups"`        // pages found to be near-duplicates (their links are followed all the same)
	Sitemaps        int64               `json:"sitemaps"`         // sitemap files (and sitemap indexes) read
	SitemapRecrawls int64               `json:"sitemap_recrawls"` // URLs queued for a recrawl because their sitemap lastmod is later than their last fetch
	ExactCopies     int64               `json:"exact_copies"`     // byte-identical copies of pages whose links were followed from as shallow a depth: their links were not reported again
	DepthCut        int64               `json:"depth_cut"`        // pages as deep as links are followed whose links were kept for a shorter path
	Reopened        int64               `json:"reopened"`         // pages fetched before, queued again from a shorter path, whose kept links were followed from there without a request
	Refetched       int64               `json:"refetched"`        // pages fetched again from a shorter path because this node did not know their links
	TrapPatterns    int64               `json:"trap_patterns"`    // URL patterns judged spider traps (see Config.TrapDates)
	TrapLinks       int64               `json:"trap_links"`       // links not followed, or stripped of a session id, because of them
	Traps           []TrapReport        `json:"traps"`            // the newest of them (at most 100), by host, each with its reason
	DustRules       int64               `json:"dust_rules"`       // URL equivalence rules active (see dust.go)
	DustRewrites    int64               `json:"dust_rewrites"`    // links rewritten to a twin by them
	DustHinted      int64               `json:"dust_hinted"`      // of those, rewritten by a hint learned on other hosts
	DustDropped     int64               `json:"dust_dropped"`     // rules dropped because a fetched pair contradicted them
	Dust            []DustRule          `json:"dust"`             // the newest rules (at most 100), by host, each with its evidence
	BudgetDropped   int64               `json:"budget_dropped"`   // tasks dropped because their host's page budget was spent
	Queued          int64               `json:"queued"`           // tasks waiting in the frontier
	Scheduled       int64               `json:"scheduled"`        // tasks waiting for a time: retries and recrawls
	InFlight        int64               `json:"in_flight"`        // tasks being fetched or processed
	Hosts           int64               `json:"hosts"`            // hosts with queued or in-flight tasks
	BytesFetched    int64               `json:"bytes_fetched"`    // body bytes received as sent, robots.txt included
	Delegated       int64               `json:"delegated"`        // tasks of hot hosts a helper fetched for this owner
	Helped          int64               `json:"helped"`           // tasks this crawler fetched for other owners
	DelegateFails   int64               `json:"delegate_fails"`   // delegated batches that failed after they were sent
	FetchP50        time.Duration       `json:"-"`                // median request latency over the last latencyWindow requests
	FetchP99        time.Duration       `json:"-"`                // 99th percentile of the same
	FetchLatency    Histogram           `json:"fetch_latency"`    // every request's latency since start (robots.txt and helpers' batches included)
	Responses       map[string]int64    `json:"responses"`        // responses by status class: "2xx", "3xx", "4xx", "5xx" ("1xx", "other")
	HostsReady      int64               `json:"hosts_ready"`      // hosts whose next request is allowed now, waiting for a worker
	HostsWaiting    int64               `json:"hosts_waiting"`    // hosts with work waiting for their politeness gap
	RobotsCached    int64               `json:"robots_cached"`    // origins whose robots.txt rules are cached
	TopHosts        []frontier.HostLoad `json:"top_hosts"`        // the hosts with work that fetched the most pages (at most 10)
	ScopeDropped    int64               `json:"scope_dropped"`    // queued tasks dropped before any request because they are out of the crawl's scope (Config.Scope)
	Dial            DialStats           `json:"dial"`             // DNS cache and per-IP cap of direct connections
}

// Crawler fetches enqueued tasks politely with a pool of workers.
type Crawler struct {
	cfg      Config // in effect: defaults filled in, None as 0 ("off"), see Config.inEffect
	token    string
	db       *store.DB
	pages    PageSink
	links    LinkSink
	frontier *frontier.Frontier
	scope    *Scope
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
	redirects, linksReported, linksCapped          atomic.Int64
	bytesFetched                                   atomic.Int64
	retries, notModified, recrawls, changed        atomic.Int64
	nearDups, budgetDropped, scopeDropped          atomic.Int64
	depthCut, exactCopies, reopened, refetched     atomic.Int64
	sitemaps, sitemapRecrawls                      atomic.Int64
	latencyHist                                    latencyHistogram
	responses                                      statusClasses
	delegated, helped, delegateFails               atomic.Int64

	// noHelperUntil (Unix nanoseconds of Config.Clock) stops delegation
	// for a while after the Delegator found no helper; helpSlots bounds
	// the batches fetched for other owners at once.
	noHelperUntil atomic.Int64
	helpSlots     chan struct{}
	// helping paces batches of one host across each other: at most one
	// runs at a time, and the next starts from the last request of the
	// one before.
	helping helpHosts

	// freshRobots holds the hosts whose robots.txt was fetched since the
	// last TakeFreshSnapshots.
	freshMu     sync.Mutex
	freshRobots map[string]bool

	fpMu sync.Mutex // serialises near-duplicate lookups with their additions

	traps *trapDetector
	dust  *dustRules

	mu       sync.Mutex
	errors   map[string]int64
	latency  [latencyWindow]time.Duration
	latencyN int
}

// latencyWindow is how many recent request latencies Stats' percentiles
// are computed from: enough for a stable p99, small enough to sort on demand.
const latencyWindow = 4096

// New returns a Crawler for cfg, whose zero fields take their defaults
// (see Config); it refuses an invalid cfg. It keeps its frontier, URL metadata, host state and dead
// letters in db, and resumes the queue stored there: a Crawler restarted on
// the same db fetches the tasks that were queued or in flight. A nil sink
// discards what it would receive.
func New(cfg Config, db *store.DB, pages PageSink, links LinkSink) (*Crawler, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("crawl config: %w", err)
	}
	if db == nil {
		return nil, errors.New("crawl: nil store")
	}
	if pages == nil {
		pages = discard{}
	}
	if links == nil {
		links = discard{}
	}
	f, err := frontier.New(db, frontier.Config{
		Delay:           cfg.Delay,
		MaxCrawlDelay:   cfg.MaxCrawlDelay,
		MaxPagesPerHost: cfg.MaxPagesPerHost,
		KeyMode:         cfg.KeyMode,
		Clock:           cfg.Clock,
	})
	if err != nil {
		return nil, fmt.Errorf("crawl: %w", err)
	}
	scope, err := NewScope(cfg.Scope, cfg.KeyMode, db)
	if err != nil {
		return nil, fmt.Errorf("crawl config: %w", err)
	}
	cfg = cfg.inEffect()
	c := &Crawler{
		cfg:      cfg,
		token:    ProductToken(cfg.UserAgent),
		db:       db,
		pages:    pages,
		links:    links,
		frontier: f,
		scope:    scope,
		robots:   newRobotsCache(),
		now:      cfg.Clock,
		errors:   make(map[string]int64),

		robotsRetry: robotsRetryTTL,
		helpSlots:   make(chan struct{}, cfg.Workers),
		traps:       newTrapDetector(&cfg),
		dust:        newDustRules(&cfg),
	}
	if c.client, c.dialer, err = newClient(&cfg); err != nil {
		return nil, fmt.Errorf("crawl: %w", err)
	}
	return c, nil
}

// Scope returns the crawler's scope, for the owner that admits URLs to
// judge them by the same rules and seeds.
func (c *Crawler) Scope() *Scope { return c.scope }

type discard struct{}

func (discard) StorePage(context.Context, *Page) error                     { return nil }
func (discard) Discovered(context.Context, frontier.Task, []frontier.Task) {}

// Enqueue queues tasks for crawling, durably: they are in the store when it
// returns. It is safe for concurrent use and never waits for fetching. Tasks
// whose URL has no http(s) host are counted as errors of kind "bad_url",
// and URLs that look like spider traps (see Config.MaxRepeatedSegments) as
// kind "trap"; both are dropped, as are tasks of a host whose page budget is
// spent. The crawler does not deduplicate: that is the owner's seen set's
// job. A task for a URL fetched before is not fetched again: the owner
// queues it again when it found a shorter path to the URL, and the
// crawler follows the page's links from the new depth if they were not
// followed from as shallow a depth yet (see reopen).
func (c *Crawler) Enqueue(tasks ...frontier.Task) {
	good := tasks[:0:0]
	for _, t := range tasks {
		if _, err := urls.HostOf(t.URL); err != nil {
			c.countError("bad_url") // no ring key either: OnFinished cannot name it
			continue
		}
		if c.isTrap(t.URL) {
			c.countError("trap")
			c.traps.repeated(t.URL)
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
			return // ctx ended
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
		Fetched:         c.fetched.Load(),
		Requests:        c.requests.Load(),
		RobotsDenied:    c.robotsDenied.Load(),
		RobotsFetched:   c.robotsFetched.Load(),
		Redirects:       c.redirects.Load(),
		LinksReported:   c.linksReported.Load(),
		LinksCapped:     c.linksCapped.Load(),
		Retries:         c.retries.Load(),
		DeadLetters:     counts.Dead,
		NotModified:     c.notModified.Load(),
		Recrawls:        c.recrawls.Load(),
		Changed:         c.changed.Load(),
		NearDups:        c.nearDups.Load(),
		ExactCopies:     c.exactCopies.Load(),
		Sitemaps:        c.sitemaps.Load(),
		SitemapRecrawls: c.sitemapRecrawls.Load(),
		DepthCut:        c.depthCut.Load(),
		Reopened:        c.reopened.Load(),
		Refetched:       c.refetched.Load(),
		BudgetDropped:   c.budgetDropped.Load(),
		ScopeDropped:    c.scopeDropped.Load(),
		Queued:          int64(c.frontier.Len()),
		Scheduled:       counts.Scheduled,
		InFlight:        c.inFlight.Load(),
		Hosts:           int64(c.frontier.Hosts()),
		BytesFetched:    c.bytesFetched.Load(),
		Delegated:       c.delegated.Load(),
		Helped:          c.helped.Load(),
		DelegateFails:   c.delegateFails.Load(),
		ErrorsByKind:    make(map[string]int64),
	}
	s.TrapPatterns, s.TrapLinks, s.Traps = c.traps.stats()
	s.DustRules, s.DustRewrites, s.DustHinted, s.DustDropped, s.Dust = c.dust.stats()
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
	s.FetchLatency = c.latencyHist.snapshot()
	s.Responses = c.responses.snapshot()
	ready, waiting := c.frontier.HostStates()
	s.HostsReady, s.HostsWaiting = int64(ready), int64(waiting)
	s.RobotsCached = int64(c.robots.len())
	s.TopHosts = c.frontier.TopHosts(10)
	return s
}

func (c *Crawler) countError(kind string) {
	c.mu.Lock()
	c.errors[kind]++
	c.mu.Unlock()
}

func (c *Crawler) recordLatency(d time.Duration) {
	c.latencyHist.observe(d)
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
