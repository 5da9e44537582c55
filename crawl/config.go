package crawl

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// None, set on a Config or DialConfig field that documents it, turns off
// what the field sets, where "off" is a choice distinct from the default:
// cfg.Delay = crawl.None is no pause between requests, cfg.MaxRetries =
// crawl.None no retry. A zero field always means the default.
const None = frontier.None

// Config configures a Crawler. A zero field means its default, so a zero
// Config is a polite production crawler and DefaultConfig only spells the
// defaults out; where turning a feature off is a choice of its own, the
// field takes None (any negative value) for it.
type Config struct {
	// UserAgent is sent on every request. Its first product token, lowercased
	// ("examplebot" in "examplebot/1.0 (+http://bot.example/about)"), is the
	// name matched against robots.txt groups and <meta name=...> tags.
	// Default DefaultUserAgent.
	UserAgent string
	// Delay is the minimum time between the moment a host answered one
	// request (its response headers arrived; for a failed request, when it
	// failed) and the start of the next, which also waits for the previous
	// response to be read (default 1s). A larger robots.txt Crawl-delay
	// wins. None: no pause at all, for benchmarks and tests.
	Delay time.Duration
	// MaxCrawlDelay caps the robots.txt Crawl-delay honoured (default 60s),
	// so one robots.txt cannot park a host for hours. None: Crawl-delay is
	// not honoured, only Delay.
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
	// page of depth MaxDepth are dropped, which bounds spider traps. None:
	// no link is reported at all, only the tasks enqueued are fetched.
	MaxDepth int
	// MaxLinksPerPage is the most links taken from one page (default
	// 5,000): the page's first MaxLinksPerPage distinct link references,
	// in document order, are kept, and link elements beyond them are
	// dropped and counted in Stats.LinksCapped. Real pages stay well below
	// it (the longest list pages carry a few thousand links); a page
	// written to flood the crawl, 10 MiB of links, holds about 480,000.
	// None: no cap, the body cap alone bounds a page.
	MaxLinksPerPage int
	// MaxRedirects is the longest redirect chain followed (default 5). Each
	// hop is a task of its own; a URL reached through MaxRedirects hops that
	// redirects again is recorded as a dead letter of kind
	// "too_many_redirects". None: no redirect is followed (and nothing is
	// recorded), the 3xx is the page.
	MaxRedirects int
	// MaxRepeatedSegments refuses, as error kind "trap", URLs whose path
	// holds one segment more than this many times (default 3: /a/a/a/a is
	// refused). None: no URL is refused for it.
	MaxRepeatedSegments int
	// TrapDates is how many distinct dates the pages of one date pattern
	// of a host (a URL with its dates blanked out: /events/{date}) may link
	// among themselves before the pattern is judged a trap, a calendar,
	// and links from one of its pages to another are no longer followed
	// (default 5: a calendar then costs about 5 fetches, and links into
	// the pattern from elsewhere, such as an archive index, are still
	// followed). A dated page that links the dates just before and after
	// its own is judged at once, calendar navigation. None: dates are not
	// watched. See trapDetector.
	TrapDates int
	// TrapGrowth is how many levels (path segments plus query
	// parameters) a URL may have when its page links it by adding to its
	// own path or query; a link that grows beyond is a trap and is not
	// followed (default 10). A link that adds a segment or parameter its
	// page has, counted up (/t/n1/ to /t/n1/n2/, ?f=1 to ?f=1&f=2), is one
	// at once. None: growth is not watched.
	TrapGrowth int
	// TrapRun is how many pages in a row of one URL shape of a host (the
	// URL with its numbers blanked out) with nearly the same main content
	// judge the shape a trap, after which links from one of its pages to
	// another are no longer followed (default 5). A chain takes two: a
	// page with nearly the same main content (50 words or more) as the
	// page of its shape, or the page it extends, that linked it. None:
	// runs and chains are not watched.
	TrapRun int
	// TrapSessions is how many fetched pages with the same content, whose
	// URLs differ only in a token-like query parameter, judge the
	// parameter a session id of the host, stripped from its links from
	// then on (default 2, the least that can show it). None: not watched.
	TrapSessions int
	// MaxPagesPerHost is the page budget of a host (default 100,000): once
	// that many distinct pages of a host were fetched, its other tasks are
	// dropped and counted in Stats.BudgetDropped. Recrawls do not count.
	// The default leaves all but the largest sites whole and bounds a
	// spider trap to about a day of its host's politeness slot at the
	// default Delay. None: no budget.
	MaxPagesPerHost int
	// MinRecrawl and MaxRecrawl bound the recrawl interval of a URL
	// (defaults 1h and 30 days). A URL is first recrawled MinRecrawl after
	// its first fetch; the interval then halves whenever the content
	// changed and doubles whenever it did not. MaxRecrawl None: no URL is
	// recrawled.
	MinRecrawl, MaxRecrawl time.Duration
	// MaxRetries is how many times a failed fetch (timeout, connection
	// error, 429, 5xx) is retried before the task becomes a dead letter
	// (default 3). None: no retry, a failed fetch is a dead letter at once.
	MaxRetries int
	// RetryBase is the backoff unit (default 1s): retry n waits a random
	// time in [0, RetryBase·2^n) ("full jitter"), and at least as long as
	// the server's Retry-After.
	RetryBase time.Duration
	// MaxRetryAfter caps the Retry-After honoured (default 1h). A
	// Retry-After closes the whole host until it has passed. None:
	// Retry-After is not honoured.
	MaxRetryAfter time.Duration
	// NearDupDistance is the largest simhash distance at which a page
	// counts as a near-duplicate of another (default 3), which is counted
	// (Stats.NearDups) and changes nothing else: its links are followed.
	// None: no page is checked. Since zero
	// means the default, the strictest distance that can be chosen is 1
	// (fingerprints that differ in one bit); identical fingerprints alone
	// cannot be asked for.
	NearDupDistance int
	// IgnoreSitemaps turns off sitemaps (default: used). With them, the
	// Sitemap lines of a host's robots.txt are queued once the robots.txt
	// is fetched, one level deeper than the task it was fetched for, and a
	// fetched sitemap's URLs on its own host are reported as links; see
	// sitemap.go.
	IgnoreSitemaps bool
	// GuessSitemap also queues a host's /sitemap.xml when its robots.txt
	// names no sitemap (default off: one more request per host, mostly
	// answered 404).
	GuessSitemap bool
	// RobotsTTL is how long a fetched robots.txt is trusted (default 24h).
	RobotsTTL time.Duration
	// KeyMode is how the node computes ring keys (default urls.KeyHost);
	// the per-URL tables of the store are laid out by them.
	KeyMode urls.KeyMode
	// Scope limits what the crawler fetches (default: everything; see
	// ScopeConfig and scope.go). A task out of scope is dropped before any
	// request, robots.txt included, and a batch for another owner with a
	// task out of scope is refused. A seed rule needs host or domain keys
	// (seed-domains: domain keys).
	Scope ScopeConfig
	// Proxy picks the proxy for a request (default http.ProxyFromEnvironment,
	// which honours HTTP_PROXY, HTTPS_PROXY and NO_PROXY). NoProxy connects
	// directly.
	Proxy func(*http.Request) (*url.URL, error)
	// Dial configures the DNS cache, the per-IP connection cap of direct
	// connections, and the address policy, which refuses non-public
	// targets of every request, direct or proxied (default
	// DefaultDialConfig(), its ConnectTimeout this Config's). Connections to
	// the proxy itself are the operator's choice and are not checked.
	Dial DialConfig
	// Transport, when set, replaces the crawler's own transport, and with it
	// Proxy, Dial (the address policy included), ConnectTimeout and
	// connection pooling. For tests.
	Transport http.RoundTripper
	// Clock returns the current time (default time.Now). It stamps pages and
	// decides politeness; waits still use real timers, so it must advance
	// with real time.
	Clock func() time.Time
	// Owns, if set, is asked right before any network request for a task
	// (robots.txt included) with the task's ring key (urls.TaskKey in
	// KeyMode). When it answers false the task is not fetched: it goes back
	// to the store untouched and its host is parked (removed from the
	// in-memory scheduler, store left as is) until Resume or Enqueue brings
	// it back. It is called from worker goroutines and must be quick.
	Owns func(ringKey uint64) bool
	// OnFinished, if set, is called once a task is finished: fetched and
	// stored (including recrawl rescheduling), dead-lettered, dropped for
	// good (robots disallow, trap, budget, a stale recrawl copy). Not
	// called for a retry that is scheduled, nor for a task that goes back
	// to the store (stopped, not owned, released). It is called after the
	// outcome is written to the store, from worker goroutines or, for tasks
	// Enqueue drops, from Enqueue's caller; it must not block for long and
	// must not call Enqueue or ReleaseRange. meta is the URL's metadata as the
	// outcome stored it (nil when the task ended without one), so that the
	// caller need not read it back.
	OnFinished func(t frontier.Task, ringKey, urlHash uint64, meta *store.URLMeta)
	// CaptureHolder, when set, is the name (a peer ID) under which this
	// crawler's WARC records can be asked for: every fetch archived with a
	// body or an error status (all but a 304) adds a store.Capture naming
	// it, with the response record's ID and payload digest, to the URL's
	// metadata. Empty: no captures are recorded.
	CaptureHolder string
	// HotQueue is the number of queued tasks of one host at which its
	// fetches go to Delegate in batches (default 200; see Delegator).
	// Delegation needs urls.KeyHost and a Delegate. None: never delegate.
	HotQueue int
	// DelegateBatch is the most tasks in one delegated batch (default 16,
	// at most MaxDelegateTasks).
	DelegateBatch int
	// DelegateBudget bounds a delegated batch: the helper starts no
	// request later than this after it received the batch (default 5s, so
	// that a ReleaseRange of the host's range never waits long for it). A node
	// sets it within its ownership lease, so that a batch never outlives
	// the owner's right to the host.
	DelegateBudget time.Duration
	// Delegate hands fetch batches of hot hosts to helpers; nil fetches
	// everything locally.
	Delegate Delegator
}

// DefaultUserAgent is the User-Agent of DefaultConfig: honest, with a
// contact URL, as site operators expect from a crawler.
const DefaultUserAgent = "swarmcrawl/0.1 (+https://github.com/swarmcrawl/swarmcrawl)"

// NoProxy is the Config.Proxy of a crawler that connects directly, whatever
// the environment says.
func NoProxy(*http.Request) (*url.URL, error) { return nil, nil }

// DefaultConfig returns the configuration of a polite production crawler:
// what a zero Config means, spelled out. The politeness defaults are the
// frontier's.
func DefaultConfig() Config {
	f := frontier.DefaultConfig()
	dial := DefaultDialConfig()
	return Config{
		UserAgent:           DefaultUserAgent,
		Delay:               f.Delay,
		MaxCrawlDelay:       f.MaxCrawlDelay,
		Workers:             32,
		ConnectTimeout:      dial.ConnectTimeout,
		Timeout:             30 * time.Second,
		MaxBodyBytes:        10 << 20,
		MaxDepth:            16,
		MaxLinksPerPage:     5000,
		MaxRedirects:        5,
		MaxRepeatedSegments: 3,
		TrapDates:           5,
		TrapGrowth:          10,
		TrapRun:             5,
		TrapSessions:        2,
		MaxPagesPerHost:     f.MaxPagesPerHost,
		MinRecrawl:          time.Hour,
		MaxRecrawl:          30 * 24 * time.Hour,
		MaxRetries:          3,
		RetryBase:           time.Second,
		MaxRetryAfter:       time.Hour,
		NearDupDistance:     3,
		RobotsTTL:           24 * time.Hour,
		KeyMode:             f.KeyMode,
		Proxy:               http.ProxyFromEnvironment,
		Dial:                dial,
		Clock:               f.Clock,
		HotQueue:            200,
		DelegateBatch:       16,
		DelegateBudget:      5 * time.Second,
	}
}

// WithDefaults returns c with every zero field set to its default, as New
// does; None stays None. It tells a caller what a Config means in effect.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	c.UserAgent = orDefault(c.UserAgent, d.UserAgent)
	c.Delay = orDefault(c.Delay, d.Delay)
	c.MaxCrawlDelay = orDefault(c.MaxCrawlDelay, d.MaxCrawlDelay)
	c.Workers = orDefault(c.Workers, d.Workers)
	c.ConnectTimeout = orDefault(c.ConnectTimeout, d.ConnectTimeout)
	c.Timeout = orDefault(c.Timeout, d.Timeout)
	c.MaxBodyBytes = orDefault(c.MaxBodyBytes, d.MaxBodyBytes)
	c.MaxDepth = orDefault(c.MaxDepth, d.MaxDepth)
	c.MaxLinksPerPage = orDefault(c.MaxLinksPerPage, d.MaxLinksPerPage)
	c.MaxRedirects = orDefault(c.MaxRedirects, d.MaxRedirects)
	c.MaxRepeatedSegments = orDefault(c.MaxRepeatedSegments, d.MaxRepeatedSegments)
	c.TrapDates = orDefault(c.TrapDates, d.TrapDates)
	c.TrapGrowth = orDefault(c.TrapGrowth, d.TrapGrowth)
	c.TrapRun = orDefault(c.TrapRun, d.TrapRun)
	c.TrapSessions = orDefault(c.TrapSessions, d.TrapSessions)
	c.MaxPagesPerHost = orDefault(c.MaxPagesPerHost, d.MaxPagesPerHost)
	c.MinRecrawl = orDefault(c.MinRecrawl, d.MinRecrawl)
	c.MaxRecrawl = orDefault(c.MaxRecrawl, d.MaxRecrawl)
	c.MaxRetries = orDefault(c.MaxRetries, d.MaxRetries)
	c.RetryBase = orDefault(c.RetryBase, d.RetryBase)
	c.MaxRetryAfter = orDefault(c.MaxRetryAfter, d.MaxRetryAfter)
	c.NearDupDistance = orDefault(c.NearDupDistance, d.NearDupDistance)
	c.RobotsTTL = orDefault(c.RobotsTTL, d.RobotsTTL)
	c.KeyMode = orDefault(c.KeyMode, d.KeyMode)
	c.HotQueue = orDefault(c.HotQueue, d.HotQueue)
	c.DelegateBatch = orDefault(c.DelegateBatch, d.DelegateBatch)
	c.DelegateBudget = orDefault(c.DelegateBudget, d.DelegateBudget)
	if c.Proxy == nil {
		c.Proxy = d.Proxy
	}
	if c.Clock == nil {
		c.Clock = d.Clock
	}
	// A connect is a connect, direct or not: the dialer's timeout defaults
	// to the crawler's.
	c.Dial.ConnectTimeout = orDefault(c.Dial.ConnectTimeout, c.ConnectTimeout)
	c.Dial = c.Dial.withDefaults()
	return c
}

// orDefault returns v, or def when v is the zero value.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// inEffect returns c, defaults filled in, with None turned into the zero
// the engine works with: from here on 0 means "off" (no pause, no retry,
// no recrawl, no redirect followed...). NearDupDistance keeps its negative
// None, which the engine tests for.
func (c Config) inEffect() Config {
	c.Delay, c.MaxCrawlDelay = max(c.Delay, 0), max(c.MaxCrawlDelay, 0)
	c.MaxRecrawl, c.MaxRetryAfter = max(c.MaxRecrawl, 0), max(c.MaxRetryAfter, 0)
	c.MaxDepth, c.MaxRedirects = max(c.MaxDepth, 0), max(c.MaxRedirects, 0)
	c.MaxLinksPerPage, c.MaxPagesPerHost = max(c.MaxLinksPerPage, 0), max(c.MaxPagesPerHost, 0)
	c.MaxRepeatedSegments, c.MaxRetries = max(c.MaxRepeatedSegments, 0), max(c.MaxRetries, 0)
	c.HotQueue = max(c.HotQueue, 0)
	c.TrapDates, c.TrapGrowth = max(c.TrapDates, 0), max(c.TrapGrowth, 0)
	c.TrapRun, c.TrapSessions = max(c.TrapRun, 0), max(c.TrapSessions, 0)
	return c
}

// validate reports the first problem with c, defaults filled in, as one
// readable line. A negative value is a problem only where a field does not
// take None.
func (c *Config) validate() error {
	switch {
	case strings.TrimSpace(c.UserAgent) == "":
		return errors.New("UserAgent is empty")
	case strings.ContainsAny(c.UserAgent, "\r\n"):
		return errors.New("UserAgent contains a line break")
	case ProductToken(c.UserAgent) == "":
		return fmt.Errorf("UserAgent %q has no product token", c.UserAgent)
	case c.Workers < 1:
		return fmt.Errorf("workers must be at least 1 (got %d)", c.Workers)
	case c.ConnectTimeout <= 0:
		return fmt.Errorf("ConnectTimeout must be positive (got %v)", c.ConnectTimeout)
	case c.Timeout <= 0:
		return fmt.Errorf("timeout must be positive (got %v)", c.Timeout)
	case c.MaxBodyBytes <= 0:
		return fmt.Errorf("MaxBodyBytes must be positive (got %d)", c.MaxBodyBytes)
	case c.MaxRecrawl > 0 && (c.MinRecrawl <= 0 || c.MinRecrawl > c.MaxRecrawl):
		return fmt.Errorf("MinRecrawl must be in (0, MaxRecrawl] (got %v, MaxRecrawl %v)", c.MinRecrawl, c.MaxRecrawl)
	case c.MaxRetries > 0 && c.RetryBase <= 0:
		return fmt.Errorf("RetryBase must be positive (got %v)", c.RetryBase)
	case c.RobotsTTL <= 0:
		return fmt.Errorf("RobotsTTL must be positive (got %v)", c.RobotsTTL)
	case c.KeyMode != urls.KeyHost && c.KeyMode != urls.KeyURL && c.KeyMode != urls.KeyDomain:
		return fmt.Errorf("unknown %v", c.KeyMode)
	case c.DelegateBudget < 0:
		return fmt.Errorf("DelegateBudget is negative (%v)", c.DelegateBudget)
	case c.DelegateBatch < 0 || c.DelegateBatch > MaxDelegateTasks:
		return fmt.Errorf("DelegateBatch must be in [1, %d] (got %d)", MaxDelegateTasks, c.DelegateBatch)
	}
	if err := c.Dial.validate(); err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	if err := c.Scope.validate(c.KeyMode); err != nil {
		return err
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
