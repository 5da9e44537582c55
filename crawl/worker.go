package crawl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// maxRobotsRedirects is how many redirects a robots.txt fetch follows, the
// minimum RFC 9309 asks for.
const maxRobotsRedirects = 5

// lease is a worker's hold on one host, from Frontier.Next to Done. It
// remembers when the last request under it completed, so that a second
// request in the same lease (robots.txt, then the page) keeps the same gap
// as requests the frontier spaces.
type lease struct {
	host       string
	last       time.Time // completion of the last request; zero before the first
	crawlDelay time.Duration
	notBefore  time.Time // set by a Retry-After: the host stays closed until then
	// owns, when set, tells whether the task being handled is still this
	// node's, right before each request is written (see get).
	owns func() bool
}

// request waits until the lease's host may be contacted again, then GETs
// rawURL. The first request of a lease does not wait: the frontier only
// hands out hosts that are ready.
func (c *Crawler) request(ctx context.Context, l *lease, rawURL string, limit int64, extra http.Header) (*response, error) {
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
	r, err := c.get(ctx, rawURL, limit, extra, l.owns)
	l.last = c.now() // a failed request still counts as contact
	return r, err
}

// finish ends the lease with the frontier. A Retry-After closes the host
// durably until it has passed, and never sooner than the usual gap.
func (c *Crawler) finish(l *lease) {
	switch {
	case !l.notBefore.IsZero():
		until := l.notBefore
		if !l.last.IsZero() {
			if next := l.last.Add(c.gap(l.crawlDelay)); next.After(until) {
				until = next
			}
		}
		c.frontier.Slow(l.host, until)
	case l.last.IsZero():
		c.frontier.Release(l.host)
	default:
		c.frontier.Done(l.host, l.last, l.crawlDelay)
	}
}

// handle processes the task Next handed out, holding its host's lease.
func (c *Crawler) handle(ctx context.Context, t Task) {
	host, _ := urls.HostOf(t.URL) // Enqueue only admits URLs with a host
	l := &lease{host: host}
	if c.cfg.Owns != nil {
		l.owns = func() bool { return c.owns(t) } // t as it is when asked
	}
	var reserved bool
	for {
		if !c.owns(t) {
			// Not ours (any more): no request at all, robots.txt included.
			c.park(t, l)
			return
		}
		origin, pathQuery := urls.SplitOrigin(t.URL)
		rules := c.robots.get(origin, c.now())
		if rules == nil {
			// robots.txt first, through the same politeness slot.
			var err error
			if rules, err = c.fetchRobots(ctx, l, origin); err != nil {
				if errors.Is(err, errNotOwned) {
					c.park(t, l)
					return
				}
				c.requeue(t) // ctx ended
				c.finish(l)
				return
			}
		}
		l.crawlDelay = max(l.crawlDelay, rules.crawlDelay)
		if rules.unavailable && rules.attempt < maxRobotsAttempts {
			// No usable robots.txt yet: park the host until the retry
			// rather than drop work because of a passing outage.
			c.requeue(t)
			c.finishNotBefore(l, rules.expires)
			return
		}
		if !l.last.IsZero() && rules.allowed(pathQuery) {
			// robots.txt was fetched under this lease: the page waits for
			// the host's next turn instead of holding a worker.
			c.requeue(t)
			c.finish(l)
			return
		}
		var ok bool
		ok, reserved = c.admit(t, host, pathQuery, rules)
		if ok {
			break
		}
		// Dropping needed no request: look at the host's next task at once.
		next, more := c.frontier.NextFromHost(host)
		if !more {
			c.finish(l)
			return
		}
		t = next
	}

	if c.hot(host) && c.delegate(ctx, l, t, reserved) {
		return
	}
	f, fresh := c.prepare(t)
	if !fresh {
		c.finish(l)
		return
	}
	if !c.owns(t) {
		// Ownership moved while robots.txt and the URL's metadata were read.
		if reserved {
			c.frontier.Unreserve(host)
		}
		c.park(t, l)
		return
	}
	resp, err := c.request(ctx, l, t.URL, c.cfg.MaxBodyBytes, conditional(f.meta, f.hasMeta))
	if errors.Is(err, errNotOwned) {
		if reserved {
			c.frontier.Unreserve(host)
		}
		c.park(t, l)
		return
	}
	if err != nil && ctx.Err() != nil {
		// Stopped mid-fetch: the task was not crawled, keep it for later.
		if reserved {
			c.frontier.Unreserve(host)
		}
		c.requeue(t)
		c.finish(l)
		return
	}
	if d := c.retryAfter(resp, c.now()); d > 0 {
		l.notBefore = c.now().Add(d)
	}
	c.finish(l) // before the sinks: a slow store must not hold the host
	f.resp, f.err, f.notBefore = resp, err, l.notBefore
	o, terminal := c.process(ctx, &f)
	c.complete(t, o, terminal)
}

// admit decides whether t, taken under its host's lease, is fetched. A
// task robots.txt disallows is dropped, and so is the host's whole queue
// once its page budget is spent (recrawls and retries excepted); reserved
// reports a first fetch counted against the budget, for Unreserve should
// no request follow.
func (c *Crawler) admit(t Task, host, pathQuery string, rules *robotsRules) (ok, reserved bool) {
	switch {
	case !rules.allowed(pathQuery):
		// Disallowed (or robots.txt unavailable too often): drop it.
		c.robotsDenied.Add(1)
		c.complete(t, Outcome{}, true)
	case t.Recrawl || t.Attempts > 0:
		return true, false // counted against the budget at its first attempt
	case c.frontier.Reserve(host):
		return true, true
	default:
		// The host's page budget is spent: drop its queue, recrawls
		// excepted, in one go.
		n, err := c.frontier.dropHost(host, c.done)
		if err != nil {
			c.countError("store")
		}
		c.budgetDropped.Add(int64(n) + 1)
		c.complete(t, Outcome{}, true)
	}
	return false, false
}

// prepare looks up what is known of t's URL before a fetch. fresh is false
// when the task turned out to be a stale recrawl and was dropped: a
// recrawl of a URL that is queued twice is dropped when the other copy is
// being fetched right now or was fetched since this one was scheduled,
// since that copy schedules the URL's next recrawl. (In this order: a copy
// that completes in between has written its metadata.)
func (c *Crawler) prepare(t Task) (f fetched, fresh bool) {
	stale := t.Recrawl && c.frontier.TakenTwice(t)
	f.task = t
	f.ringKey, f.urlHash = c.keys(t.URL)
	f.meta, f.hasMeta = c.urlMeta(f.ringKey, f.urlHash)
	if stale || t.Recrawl && f.hasMeta && f.meta.NextCrawl.After(c.now()) {
		c.complete(t, Outcome{}, true)
		return f, false
	}
	return f, true
}

// finishNotBefore ends the lease and keeps the host closed until at least
// the given time, and at least the usual gap after the lease's last request.
func (c *Crawler) finishNotBefore(l *lease, until time.Time) {
	if l.notBefore.After(until) {
		c.finish(l) // a Retry-After beyond it: kept durably
		return
	}
	if !l.last.IsZero() {
		if next := l.last.Add(c.gap(l.crawlDelay)); next.After(until) {
			until = next
		}
	}
	c.frontier.Defer(l.host, until)
}

// requeue puts a task back under the lease. It stays in the store either
// way, so a failure only delays it until the next restart; count it.
func (c *Crawler) requeue(t Task) {
	if err := c.frontier.Requeue(t); err != nil {
		c.countError("other")
	}
}

// complete records the outcome of a task; a failure leaves the task in the
// store, to be fetched again after a restart. terminal marks an outcome
// that ends the task (anything but a retry): once it is recorded,
// Config.OnDone hears of it.
func (c *Crawler) complete(t Task, o Outcome, terminal bool) {
	if err := c.frontier.Complete(t, o); err != nil {
		c.countError("store")
		return
	}
	if terminal {
		c.doneWith(t, o.Meta)
	}
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

// fetchRobots fetches and caches the robots.txt of origin under lease l. It
// returns an error only when ctx ended; every other failure becomes rules
// (see robotsFromResponse).
func (c *Crawler) fetchRobots(ctx context.Context, l *lease, origin string) (*robotsRules, error) {
	u := origin + "/robots.txt"
	var rules *robotsRules
	for hop := 0; rules == nil; hop++ {
		c.robotsFetched.Add(1)
		resp, err := c.request(ctx, l, u, maxRobotsBytes, nil)
		if d := c.retryAfter(resp, c.now()); d > 0 {
			l.notBefore = c.now().Add(d) // slows the whole host, pages included
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
	l.crawlDelay = max(l.crawlDelay, rules.crawlDelay)
	c.robots.put(origin, rules, c.now())
	c.noteFreshRobots(l.host)
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

// fetched is the outcome of one fetch of a task, with what was known about
// the URL before it.
type fetched struct {
	task             Task
	resp             *response // nil when err is set
	err              error
	ringKey, urlHash uint64
	meta             store.URLMeta
	hasMeta          bool
	notBefore        time.Time // Retry-After, zero if none
}

// process turns a fetch into a page for the PageSink, links for the
// LinkSink, and the task's outcome: a retry, a dead letter, or the URL's
// new metadata and next recrawl. terminal is false for a retry.
func (c *Crawler) process(ctx context.Context, f *fetched) (o Outcome, terminal bool) {
	t, r := f.task, f.resp
	if t.Recrawl {
		c.recrawls.Add(1)
	}
	if f.err != nil {
		kind := errorKind(f.err)
		c.countError(kind)
		return c.fail(ctx, f, kind, f.err.Error(), retryable(f.err, kind))
	}
	if k := statusKind(r.status); k != "" {
		c.countError(k)
	}
	if r.status == http.StatusTooManyRequests || r.status >= 500 {
		return c.fail(ctx, f, statusKind(r.status), fmt.Sprintf("HTTP %d %s", r.status, http.StatusText(r.status)), true)
	}
	now := c.now()
	p := c.page(t, r, now)
	var (
		links   []Task
		hash    uint64
		changed bool
	)
	switch {
	case r.status == http.StatusNotModified:
		p.NotModified = true
		p.Body, p.RawBody = nil, nil
		c.notModified.Add(1)
		hash = f.meta.ContentHash
	case isRedirect(r.status):
		links, hash, changed, o.Dead = c.redirect(f, p, now)
	default:
		hash = contentHash(r.body) ^ uint64(r.status)
		changed = !f.hasMeta || f.meta.ContentHash != hash
		if r.status >= 200 && r.status < 300 && !r.undecodable {
			c.content(f, p)
			if changed && p.NearDuplicateOf == "" {
				links = c.pageLinks(t, p, r)
			}
		}
		if r.undecodable {
			c.countError("encoding")
		}
	}
	if f.hasMeta && changed {
		c.changed.Add(1)
	}
	meta := c.nextMeta(f, r, p, hash, changed, now)
	o.Meta = &meta
	if o.Dead == nil && c.cfg.MaxRecrawl > 0 {
		o.Reschedule = &Task{URL: t.URL, Depth: t.Depth, Redirects: t.Redirects, Recrawl: true}
		o.At = meta.NextCrawl
	}
	c.deliver(ctx, p, links)
	return o, true
}

// fail handles a failed attempt: another one after a backoff while retries
// remain and the failure is worth retrying, else a dead letter (and the
// final response, if there was one, to the PageSink).
func (c *Crawler) fail(ctx context.Context, f *fetched, kind, msg string, retry bool) (o Outcome, terminal bool) {
	t := f.task
	now := c.now()
	attempts := t.Attempts + 1
	if retry && attempts <= c.cfg.MaxRetries {
		c.retries.Add(1)
		next := t
		next.Attempts = attempts
		at := now.Add(c.backoff(t.Attempts))
		if f.notBefore.After(at) {
			at = f.notBefore
		}
		return Outcome{Reschedule: &next, At: at}, false
	}
	if f.resp != nil {
		c.deliver(ctx, c.page(t, f.resp, now), nil)
	}
	return Outcome{Dead: c.deadLetter(f, attempts, kind, msg, now)}, true
}

func (c *Crawler) deadLetter(f *fetched, attempts int, kind, msg string, now time.Time) *store.DeadLetter {
	host, _ := urls.HostOf(f.task.URL)
	return &store.DeadLetter{
		URL: f.task.URL, RingKey: f.ringKey, URLHash: f.urlHash, HostKey: urls.HostKey(host),
		Depth: f.task.Depth, Redirects: f.task.Redirects, Attempts: attempts,
		Kind: kind, LastError: msg, At: now,
	}
}

// page builds the Page of a response.
func (c *Crawler) page(t Task, r *response, now time.Time) *Page {
	return &Page{
		Task:        t,
		FinalURL:    t.URL,
		Status:      r.status,
		ContentType: r.header.Get("Content-Type"),
		Header:      r.header,
		Request:     r.reqHeader,
		Proto:       r.proto,
		RemoteAddr:  r.remoteAddr,
		RawBody:     r.raw,
		Body:        r.body,
		Truncated:   r.truncated,
		FetchedAt:   now,
		Duration:    r.duration,
	}
}

// redirect handles a 3xx: the normalised Location becomes a new task,
// reported like a discovered link so that it goes through its owner's seen
// set and its host's politeness, unless the chain is already MaxRedirects
// long (then the URL becomes a dead letter) or the target is a trap. The
// target is reported again on a recrawl only when it changed.
func (c *Crawler) redirect(f *fetched, p *Page, now time.Time) (links []Task, hash uint64, changed bool, dead *store.DeadLetter) {
	t := f.task
	target, err := urls.Normalize(mustParse(t.URL), p.Header.Get("Location"))
	if err != nil {
		hash = uint64(p.Status)
		return nil, hash, !f.hasMeta || f.meta.ContentHash != hash, nil
	}
	p.RedirectTo = target
	hash = urls.URLHash(target) ^ uint64(p.Status)
	changed = !f.hasMeta || f.meta.ContentHash != hash
	switch {
	case c.cfg.MaxRedirects == 0:
		// Redirects are not followed: the 3xx is the page.
	case t.Redirects >= c.cfg.MaxRedirects:
		c.countError("too_many_redirects")
		msg := fmt.Sprintf("redirect chain longer than %d hops, next %s", c.cfg.MaxRedirects, urls.Truncate(target, 200))
		dead = c.deadLetter(f, t.Attempts+1, "too_many_redirects", msg, now)
	case c.isTrap(target):
		c.countError("trap")
	case changed:
		links = []Task{{URL: target, Depth: t.Depth, Redirects: t.Redirects + 1}}
		c.redirects.Add(1)
	}
	return links, hash, changed, dead
}

// content fills in the title, text and fingerprint of a 2xx page, and
// checks the fingerprint against the pages seen before.
func (c *Crawler) content(f *fetched, p *Page) {
	p.Title, p.Text = ExtractText(p.Body, p.ContentType)
	if p.Text == "" {
		return
	}
	p.Simhash = Simhash(p.Text)
	if p.Simhash == 0 || c.cfg.NearDupDistance < 0 || !hasWords(p.Text, minNearDupWords) {
		return
	}
	// Check and add as one step: two near-copies processed at once must not
	// both miss each other.
	c.fpMu.Lock()
	defer c.fpMu.Unlock()
	if dup, found, err := c.db.NearDuplicate(p.Simhash, c.cfg.NearDupDistance, f.urlHash); err != nil {
		c.countError("store")
	} else if found && dup != p.Task.URL {
		p.NearDuplicateOf = dup
		c.nearDups.Add(1)
	}
	if err := c.db.AddFingerprint(f.ringKey, f.urlHash, p.Simhash, p.Task.URL); err != nil {
		c.countError("store")
	}
}

// minNearDupWords is the least text a page needs to be judged a
// near-duplicate. Short texts (an app shell's "Loading…", a login wall)
// collide on their fingerprints, and their links, often the only way into
// a site, would be withheld.
const minNearDupWords = 50

// hasWords reports whether text holds at least n space-separated words.
func hasWords(text string, n int) bool {
	words, inWord := 0, false
	for i := 0; i < len(text); i++ {
		space := text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r'
		if !space && !inWord {
			if words++; words >= n {
				return true
			}
		}
		inWord = !space
	}
	return false
}

// pageLinks extracts the followable links of an HTML page, unless the page
// is as deep as links are followed, and leaves out traps.
func (c *Crawler) pageLinks(t Task, p *Page, r *response) []Task {
	if t.Depth >= c.cfg.MaxDepth || !IsHTML(p.ContentType, r.body) {
		return nil
	}
	found, err := ExtractLinks(r.body, mustParse(t.URL), c.token)
	if err != nil {
		c.countError("parse")
	}
	tasks := make([]Task, 0, len(found))
	for _, u := range found {
		if c.isTrap(u) {
			c.countError("trap")
			continue
		}
		tasks = append(tasks, Task{URL: u, Depth: t.Depth + 1})
	}
	return tasks
}

// nextMeta is the URL's metadata after this fetch.
func (c *Crawler) nextMeta(f *fetched, r *response, p *Page, hash uint64, changed bool, now time.Time) store.URLMeta {
	m := f.meta
	m.URL = f.task.URL
	if r.status >= 200 && r.status < 300 {
		m.ETag, m.LastModified = r.header.Get("ETag"), r.header.Get("Last-Modified")
		m.Fingerprint = p.Simhash
	} else if r.status == http.StatusNotModified {
		// A 304 may carry updated validators.
		if v := r.header.Get("ETag"); v != "" {
			m.ETag = v
		}
		if v := r.header.Get("Last-Modified"); v != "" {
			m.LastModified = v
		}
	} else {
		m.ETag, m.LastModified, m.Fingerprint = "", "", 0
	}
	m.ContentHash = hash
	m.Status = r.status
	m.LastFetch = now
	if f.hasMeta && changed {
		m.Changes++
	}
	m.Fetches++
	if c.cfg.MaxRecrawl > 0 {
		m.Interval = c.nextInterval(f.meta.Interval, !f.hasMeta, changed)
		m.NextCrawl = now.Add(m.Interval)
	} else {
		m.Interval, m.NextCrawl = 0, time.Time{}
	}
	return m
}

// deliver hands a page to the PageSink and its links to the LinkSink.
func (c *Crawler) deliver(ctx context.Context, p *Page, links []Task) {
	if len(links) > 0 {
		p.Links = make([]string, len(links))
		for i, l := range links {
			p.Links[i] = l.URL
		}
	}
	c.fetched.Add(1)
	if err := c.pages.StorePage(ctx, p); err != nil {
		c.countError("store")
	}
	if len(links) == 0 {
		return
	}
	c.linksReported.Add(int64(len(links)))
	c.links.Discovered(ctx, p.Task, links)
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
