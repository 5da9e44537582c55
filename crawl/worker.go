package crawl

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// maxRobotsRedirects is how many redirects a robots.txt fetch follows, the
// minimum RFC 9309 asks for.
const maxRobotsRedirects = 5

// handle crawls the task a lease on its host was handed out with, or the
// first one after it that admission lets through. Whatever happens, the
// lease's End puts back what was not settled and frees the host.
func (c *Crawler) handle(ctx context.Context, l *frontier.Lease) {
	defer l.End()
	t, v := c.admit(ctx, l, l.Task(), forCrawl)
	var f fetch
	switch v {
	case later:
		return
	case reopenNow:
		var ok bool
		if f, ok = c.reopen(ctx, l, t); !ok {
			return
		}
	default:
		if c.hot(l) && c.delegate(ctx, l, t, v) {
			return
		}
		var fresh bool
		if f, fresh = c.prepare(l, t, v); !fresh {
			return
		}
	}
	if !c.owns(t) {
		l.Park() // ownership moved while robots.txt and the URL's metadata were read
		return
	}
	var extra http.Header
	if !f.refetch {
		extra = conditional(f.meta, f.hasMeta)
	}
	resp, err := c.request(ctx, l, c.gate(t), t.URL, c.cfg.MaxBodyBytes, extra)
	switch {
	case errors.Is(err, errNotOwned):
		l.Park()
		return
	case err != nil && ctx.Err() != nil:
		return // stopped mid-fetch: the task was not crawled, End keeps it for later
	}
	if d := c.retryAfter(resp, c.now()); d > 0 {
		f.notBefore = c.now().Add(d)
		l.SlowUntil(f.notBefore)
	}
	c.keep(l, t)
	l.End() // before the sinks: a slow store must not hold the host
	f.resp, f.err = resp, err
	o, finished := c.process(ctx, &f)
	c.record(t, o, finished)
}

// pace is a run of requests to one host and what each must keep: the gap
// after the last one, a Crawl-delay, a Retry-After. A frontier lease is the
// crawl loop's; a helper's batch has its own (batchPace).
type pace interface {
	Host() string
	NotBefore() time.Time
	Last() time.Time
	Contacted(at time.Time)
	Gap() time.Duration
	RaiseCrawlDelay(d time.Duration)
	SlowUntil(t time.Time)
}

var _ pace = (*frontier.Lease)(nil)

// request waits until the host may be contacted again under l, then GETs
// rawURL, asking gate (see get) right before the request is written. The
// first request of a lease waits for the lease's NotBefore (the frontier
// leases a host a little ahead of it, so that the work before a request
// is done in the gap); the next ones wait the gap after the previous one
// was answered.
func (c *Crawler) request(ctx context.Context, l pace, gate func() bool, rawURL string, limit int64, extra http.Header) (*response, error) {
	at := l.NotBefore()
	if last := l.Last(); !last.IsZero() {
		at = latest(at, last.Add(l.Gap()))
	}
	if d := at.Sub(c.now()); d > 0 && !sleepCtx(ctx, d) {
		return nil, ctx.Err()
	}
	r, err := c.get(ctx, rawURL, limit, extra, gate)
	answered := c.now() // a failed request still counts as contact
	if r != nil && !r.answered.IsZero() {
		answered = r.answered
	}
	l.Contacted(answered)
	return r, err
}

// gate returns the ownership check get makes for t once its connection is
// ready, or nil when there is no Config.Owns to ask.
func (c *Crawler) gate(t frontier.Task) func() bool {
	if c.cfg.Owns == nil {
		return nil
	}
	return func() bool { return c.owns(t) }
}

// prepare looks up what is known of t's URL before a fetch, admitted with
// v: a first fetch (fetchFirst) was admitted because the store held no
// metadata of the URL, which is not read again. fresh is false
// when the task turned out to be a stale recrawl and was dropped: a
// recrawl of a URL that is queued twice is dropped when the other copy is
// being fetched right now or was fetched since this one was scheduled,
// since that copy schedules the URL's next recrawl. (In this order: a copy
// that completes in between has written its metadata.)
func (c *Crawler) prepare(l *frontier.Lease, t frontier.Task, v verdict) (f fetch, fresh bool) {
	stale := t.Recrawl && l.TakenTwice(t)
	f.task = t
	f.ringKey, f.urlHash = c.keys(t.URL)
	if v != fetchFirst {
		f.meta, f.hasMeta = c.urlMeta(f.ringKey, f.urlHash)
	}
	if stale || t.Recrawl && f.hasMeta && f.meta.NextCrawl.After(c.now()) {
		c.drop(l, t)
		return f, false
	}
	return f, true
}

// keep takes t out of the lease for its outcome to be recorded. It fails
// only for a task the lease does not hold, which the crawl loop never
// asks; count it should it happen.
func (c *Crawler) keep(l *frontier.Lease, t frontier.Task) bool {
	if err := l.Keep(t); err != nil {
		c.countError("other")
		return false
	}
	return true
}

// drop finishes t, taken under l, without a request and without an
// outcome beyond its removal from the queue.
func (c *Crawler) drop(l *frontier.Lease, t frontier.Task) {
	if c.keep(l, t) {
		c.record(t, frontier.Outcome{}, true)
	}
}

// record writes the outcome of a task its lease kept; a failure leaves the
// task in the store, to be fetched again after a restart. finished marks
// an outcome that ends the task (anything but a retry): once it is
// recorded, Config.OnFinished hears of it.
func (c *Crawler) record(t frontier.Task, o frontier.Outcome, finished bool) {
	if err := c.frontier.Complete(t, o); err != nil {
		c.countError("store")
		return
	}
	if finished {
		c.reportFinished(t, o.Meta)
	}
}

// reportFinished tells Config.OnFinished that t reached its end, with the URL
// metadata its outcome stored (nil for none).
func (c *Crawler) reportFinished(t frontier.Task, meta *store.URLMeta) {
	if c.cfg.OnFinished == nil {
		return
	}
	ringKey, urlHash := c.keys(t.URL)
	c.cfg.OnFinished(t, ringKey, urlHash, meta)
}

// keys returns the ring key and URL hash of a normalised URL.
func (c *Crawler) keys(u string) (ringKey, urlHash uint64) {
	ringKey, _ = urls.TaskKey(u, c.cfg.KeyMode) // queued URLs always have a key
	return ringKey, urls.URLHash(u)
}

// urlMeta reads what is known about a URL; a read error counts as "store"
// and as nothing known.
func (c *Crawler) urlMeta(ringKey, urlHash uint64) (store.URLMeta, bool) {
	m, ok, err := c.db.URLMeta(ringKey, urlHash)
	if err != nil {
		c.countError("store")
		return store.URLMeta{}, false
	}
	return m, ok
}

// conditional returns the validators of the last fetch as conditional
// request headers, or nil.
func conditional(m store.URLMeta, ok bool) http.Header {
	if !ok || (m.ETag == "" && m.LastModified == "") {
		return nil
	}
	h := make(http.Header, 2)
	if m.ETag != "" {
		h.Set("If-None-Match", m.ETag)
	}
	if m.LastModified != "" {
		h.Set("If-Modified-Since", m.LastModified)
	}
	return h
}

// fetchRobots fetches and caches the robots.txt of origin under l, asking
// gate before each request. It returns an error only when ctx ended or the
// gate closed (errNotOwned); every other failure becomes rules (see
// robotsFromResponse).
func (c *Crawler) fetchRobots(ctx context.Context, l pace, gate func() bool, origin string) (*robotsRules, error) {
	u := origin + "/robots.txt"
	var rules *robotsRules
	for hop := 0; rules == nil; hop++ {
		c.robotsFetched.Add(1)
		resp, err := c.request(ctx, l, gate, u, maxRobotsBytes, nil)
		if d := c.retryAfter(resp, c.now()); d > 0 {
			l.SlowUntil(c.now().Add(d)) // slows the whole host, pages included
		}
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, errNotOwned):
			return nil, err
		case err != nil:
			c.countError(errorKind(err))
			rules = c.robotsFrom(0, nil)
		case isRedirect(resp.status) && hop < maxRobotsRedirects:
			// Followed even to another host, as RFC 9309 asks: a robots.txt
			// request is cheap and expected by every server.
			next, nerr := urls.Normalize(mustParse(u), resp.header.Get("Location"))
			if nerr != nil || next == u {
				rules = c.robotsFrom(404, nil)
			}
			u = next
		case isRedirect(resp.status):
			// Too many redirects: RFC 9309 lets us treat the file as
			// unavailable, which means no restrictions.
			rules = c.robotsFrom(404, nil)
		default:
			if resp.status >= 500 {
				c.countError("http_5xx")
			}
			rules = c.robotsFrom(resp.status, resp.body)
		}
	}
	l.RaiseCrawlDelay(rules.crawlDelay)
	c.robots.put(origin, rules, c.now())
	c.noteFreshRobots(l.Host())
	return rules, nil
}

func (c *Crawler) robotsFrom(status int, body []byte) *robotsRules {
	now := c.now()
	r := robotsFromResponse(status, body, c.token, now, c.cfg.RobotsTTL, c.robotsRetry)
	r.status, r.fetched = status, now
	if status >= 200 && status < 300 {
		r.packed = packRobots(body) // other answers need no body to be handed over
	}
	return r
}

// sleepCtx waits d (nothing when d <= 0) and reports false if ctx ended
// first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// mustParse parses a URL this package produced with Normalize; those always
// parse, and a nil base would only make relative references fail cleanly.
func mustParse(u string) *url.URL {
	p, err := url.Parse(u)
	if err != nil {
		return nil
	}
	return p
}
