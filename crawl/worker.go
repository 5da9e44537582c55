package crawl

import (
	"context"
	"net/url"
	"slices"
	"time"
)

// maxRobotsRedirects is how many redirects a robots.txt fetch follows, the
// minimum RFC 9309 asks for.
const maxRobotsRedirects = 5

// lease is a worker's hold on one host, from Frontier.Next to Done. It
// remembers when the last request under it completed, so that a second
// request in the same lease (a redirect hop, the robots.txt of another
// origin of the host) keeps the same gap as requests the frontier spaces.
type lease struct {
	host       string
	last       time.Time // completion of the last request; zero before the first
	crawlDelay time.Duration
}

// request waits until the lease's host may be contacted again, then GETs
// rawURL. The first request of a lease does not wait: the frontier only
// hands out hosts that are ready.
func (c *Crawler) request(ctx context.Context, l *lease, rawURL string, limit int64) (*response, error) {
	if !l.last.IsZero() {
		if d := l.last.Add(c.gap(l.crawlDelay)).Sub(c.now()); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
		}
	}
	r, err := c.get(ctx, rawURL, limit)
	l.last = c.now() // a failed request still counts as contact
	return r, err
}

// finish ends the lease with the frontier.
func (c *Crawler) finish(l *lease) {
	if l.last.IsZero() {
		c.frontier.Release(l.host)
		return
	}
	c.frontier.Done(l.host, l.last, l.crawlDelay)
}

// handle processes the task Next handed out, holding its host's lease.
func (c *Crawler) handle(ctx context.Context, t Task) {
	host, _ := HostOf(t.URL) // Enqueue only admits URLs with a host
	l := &lease{host: host}
	for {
		origin, pathQuery := splitOrigin(t.URL)
		rules := c.robots.get(origin, c.now())
		if rules == nil {
			// robots.txt first, through the same politeness slot.
			var err error
			if rules, err = c.fetchRobots(ctx, l, origin); err != nil {
				c.requeue(t) // ctx ended
				c.finish(l)
				return
			}
		}
		l.crawlDelay = max(l.crawlDelay, rules.crawlDelay)
		switch {
		case rules.unavailable && rules.attempt < maxRobotsAttempts:
			// No usable robots.txt yet: park the host until the retry
			// rather than drop work because of a passing outage.
			c.requeue(t)
			c.finishNotBefore(l, rules.expires)
			return
		case !rules.allowed(pathQuery):
			// Disallowed (or robots.txt unavailable too often): drop it
			// and look at the host's next task at once, since dropping
			// needs no request.
			c.robotsDenied.Add(1)
			c.pending.Add(-1)
			next, ok := c.frontier.NextFromHost(host)
			if !ok {
				c.finish(l)
				return
			}
			t = next
			continue
		case !l.last.IsZero():
			// robots.txt was fetched under this lease: the page waits for
			// the host's next turn instead of holding a worker.
			c.requeue(t)
			c.finish(l)
			return
		}
		break
	}

	ex := c.fetchPage(ctx, l, t)
	if ex.err != nil && ctx.Err() != nil {
		// Stopped mid-fetch: the task was not crawled, keep it for later.
		c.requeue(t)
		c.finish(l)
		return
	}
	c.finish(l) // before the sinks: a slow store must not hold the host
	c.deliver(ctx, t, ex)
	c.pending.Add(-1)
}

// finishNotBefore ends the lease and keeps the host closed until at least
// the given time, and at least the usual gap after the lease's last request.
func (c *Crawler) finishNotBefore(l *lease, until time.Time) {
	if !l.last.IsZero() {
		if next := l.last.Add(c.gap(l.crawlDelay)); next.After(until) {
			until = next
		}
	}
	c.frontier.Defer(l.host, until)
}

// requeue puts a task back under the lease; it cannot fail for a task taken
// under the lease, and if it did the task would be lost, so count it.
func (c *Crawler) requeue(t Task) {
	if err := c.frontier.Requeue(t); err != nil {
		c.pending.Add(-1)
		c.countError("other")
	}
}

// fetchRobots fetches and caches the robots.txt of origin under lease l. It
// returns an error only when ctx ended; every other failure becomes rules
// (see robotsFromResponse).
func (c *Crawler) fetchRobots(ctx context.Context, l *lease, origin string) (*robotsRules, error) {
	u := origin + "/robots.txt"
	var rules *robotsRules
	for hop := 0; rules == nil; hop++ {
		c.robotsFetched.Add(1)
		resp, err := c.request(ctx, l, u, maxRobotsBytes)
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			c.countError(errorKind(err))
			rules = c.robotsFrom(0, nil)
		case isRedirect(resp.status) && hop < maxRobotsRedirects:
			// Followed even to another host, as RFC 9309 asks: a robots.txt
			// request is cheap and expected by every server.
			next, nerr := Normalize(mustParse(u), resp.header.Get("Location"))
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
	l.crawlDelay = max(l.crawlDelay, rules.crawlDelay)
	c.robots.put(origin, rules, c.now())
	return rules, nil
}

func (c *Crawler) robotsFrom(status int, body []byte) *robotsRules {
	return robotsFromResponse(status, body, c.token, c.now(), c.cfg.RobotsTTL, c.robotsRetry)
}

// exchange is the outcome of fetching a task, redirects included.
type exchange struct {
	resp      *response // last response; nil when err is set
	finalURL  string
	redirects []string
	handoff   string // a redirect target on another host, left to its owner
	tooMany   bool   // the redirect chain was longer than MaxRedirects
	duration  time.Duration
	err       error
}

// fetchPage fetches t.URL and follows redirects within the lease's host,
// each hop spaced like any request and checked against robots.txt. A
// redirect to another host is not followed: that host may be owned by
// another node and is crawled politely only through its own queue, so the
// target is reported as a link instead (exchange.handoff).
func (c *Crawler) fetchPage(ctx context.Context, l *lease, t Task) exchange {
	ex := exchange{finalURL: t.URL}
	for hop := 0; ; hop++ {
		resp, err := c.request(ctx, l, ex.finalURL, c.cfg.MaxBodyBytes)
		if err != nil {
			ex.err = err
			return ex
		}
		ex.resp = resp
		ex.duration += resp.duration
		if !isRedirect(resp.status) {
			return ex
		}
		target, err := Normalize(mustParse(ex.finalURL), resp.header.Get("Location"))
		if err != nil {
			return ex // a broken Location: keep the 3xx as the page
		}
		if target == ex.finalURL || slices.Contains(ex.redirects, target) || hop >= c.cfg.MaxRedirects {
			ex.tooMany = c.cfg.MaxRedirects > 0
			return ex
		}
		if h, _ := HostOf(target); h != l.host {
			ex.handoff = target
			return ex
		}
		origin, pathQuery := splitOrigin(target)
		rules := c.robots.get(origin, c.now())
		if rules == nil {
			// Same host, other origin (typically http -> https).
			if rules, err = c.fetchRobots(ctx, l, origin); err != nil {
				ex.err = err
				return ex
			}
		}
		l.crawlDelay = max(l.crawlDelay, rules.crawlDelay)
		if !rules.allowed(pathQuery) {
			c.robotsDenied.Add(1)
			return ex
		}
		c.redirects.Add(1)
		ex.redirects = append(ex.redirects, ex.finalURL)
		ex.finalURL = target
	}
}

// deliver hands the outcome of a task to the sinks and counts it.
func (c *Crawler) deliver(ctx context.Context, t Task, ex exchange) {
	if ex.err != nil {
		c.countError(errorKind(ex.err))
		return
	}
	r := ex.resp
	if k := statusKind(r.status); k != "" {
		c.countError(k)
	}
	if ex.tooMany {
		c.countError("too_many_redirects")
	}
	p := &Page{
		Task:        t,
		FinalURL:    ex.finalURL,
		Redirects:   ex.redirects,
		Status:      r.status,
		ContentType: r.header.Get("Content-Type"),
		Header:      r.header,
		Body:        r.body,
		Truncated:   r.truncated,
		FetchedAt:   c.now(),
		Duration:    ex.duration,
	}
	if t.Depth < c.cfg.MaxDepth {
		switch {
		case ex.handoff != "":
			p.Links = []string{ex.handoff}
		case r.status >= 200 && r.status < 300 && IsHTML(p.ContentType, r.body):
			links, err := ExtractLinks(r.body, mustParse(ex.finalURL), c.token)
			if err != nil {
				c.countError("parse")
			}
			p.Links = links
		}
	}
	c.fetched.Add(1)
	if err := c.pages.StorePage(ctx, p); err != nil {
		c.countError("store")
	}
	if len(p.Links) == 0 {
		return
	}
	tasks := make([]Task, len(p.Links))
	for i, u := range p.Links {
		tasks[i] = Task{URL: u, Depth: t.Depth + 1}
	}
	c.linksReported.Add(int64(len(tasks)))
	c.links.Discovered(ctx, t, tasks)
}

// splitOrigin splits a normalised URL into its origin (scheme://host:port),
// the unit robots.txt applies to, and its path and query.
func splitOrigin(u string) (origin, pathQuery string) {
	scheme, authority, rest, err := splitURL(u)
	if err != nil {
		return "", "/"
	}
	if rest == "" || rest[0] != '/' {
		rest = "/" + rest
	}
	return scheme + "://" + authority, rest
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
