package crawl

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
	"github.com/swarmcrawl/swarmcrawl/store/warc"
)

// Turning a response into what the sinks receive (the Page, its links)
// and into the task's outcome: a retry, a dead letter, or the URL's new
// metadata and next recrawl. Both the crawl loop and FetchBatch use it.

// fetch is one fetch of a task: its response or error, with what was
// known about the URL before it.
type fetch struct {
	task             frontier.Task
	resp             *response // nil when err is set
	err              error
	ringKey, urlHash uint64
	meta             store.URLMeta
	hasMeta          bool
	notBefore        time.Time // Retry-After, zero if none
	// refetch marks a fetch of a page fetched before whose links this node
	// does not know (see reopen): its links are followed whether or not
	// the page changed.
	refetch bool
}

// process turns a fetch into a page for the PageSink, links for the
// LinkSink, and the task's outcome: a retry, a dead letter, or the URL's
// new metadata and next recrawl. finished is false for a retry.
func (c *Crawler) process(ctx context.Context, f *fetch) (o frontier.Outcome, finished bool) {
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
		links   []frontier.Task
		hash    uint64
		changed bool
		// out is what becomes of the page's links, nil when the URL's
		// metadata keeps what it had (the page did not change).
		out = &store.Outlinks{Known: true, Followed: true, Depth: t.Depth}
	)
	switch {
	case r.status == http.StatusNotModified:
		p.NotModified = true
		p.Body, p.RawBody = nil, nil
		c.notModified.Add(1)
		hash = f.meta.ContentHash
		out = nil
	case isRedirect(r.status):
		links, hash, changed, o.Dead = c.redirect(f, p, now)
		if !changed && !f.refetch {
			out = nil
		} else if len(links) > 0 {
			out.Links = []string{links[0].URL}
		}
	default:
		hash = contentHash(r.body) ^ uint64(r.status)
		changed = !f.hasMeta || f.meta.ContentHash != hash
		if r.status >= 200 && r.status < 300 && !r.undecodable {
			// One parse for the text, the fingerprint and, of a new or
			// changed page, the links.
			follow := changed || f.refetch
			var pageURL *url.URL
			if follow {
				pageURL = mustParse(t.URL)
			}
			doc := parsePage(r.body, p.ContentType, pageURL, c.token, c.cfg.MaxLinksPerPage)
			c.content(f, p, doc.content)
			switch {
			case !follow:
				out = nil
			case !doc.html && !c.cfg.IgnoreSitemaps && mayBeSitemap(p.ContentType, r.body):
				var ok bool
				if links, ok = c.sitemapLinks(f, r.body); ok {
					// Too many links to keep with the URL: a shorter
					// path to a sitemap fetches it again.
					out = &store.Outlinks{}
					if t.Depth >= c.cfg.MaxDepth {
						links = nil
					}
					break
				}
				links, out = c.pageLinks(f, p, &doc, hash)
			default:
				links, out = c.pageLinks(f, p, &doc, hash)
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
	if out != nil {
		meta.Outlinks = *out
	}
	o.Meta = &meta
	if o.Dead == nil && c.cfg.MaxRecrawl > 0 {
		o.Reschedule = &frontier.Task{URL: t.URL, Depth: t.Depth, Redirects: t.Redirects, Recrawl: true}
		o.At = meta.NextCrawl
	}
	c.deliver(ctx, p, links)
	return o, true
}

// fail handles a failed attempt: another one after a backoff while retries
// remain and the failure is worth retrying, else a dead letter (and the
// final response, if there was one, to the PageSink).
func (c *Crawler) fail(ctx context.Context, f *fetch, kind, msg string, retry bool) (o frontier.Outcome, finished bool) {
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
		return frontier.Outcome{Reschedule: &next, At: at}, false
	}
	if f.resp != nil {
		c.deliver(ctx, c.page(t, f.resp, now), nil)
	}
	return frontier.Outcome{Dead: c.deadLetter(f, attempts, kind, msg, now)}, true
}

func (c *Crawler) deadLetter(f *fetch, attempts int, kind, msg string, now time.Time) *store.DeadLetter {
	host, _ := urls.HostOf(f.task.URL)
	return &store.DeadLetter{
		URL: f.task.URL, RingKey: f.ringKey, URLHash: f.urlHash, HostKey: urls.HostKey(host),
		Depth: f.task.Depth, Redirects: f.task.Redirects, Attempts: attempts,
		Kind: kind, LastError: msg, At: now,
	}
}

// page builds the Page of a response.
func (c *Crawler) page(t frontier.Task, r *response, now time.Time) *Page {
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
func (c *Crawler) redirect(f *fetch, p *Page, now time.Time) (links []frontier.Task, hash uint64, changed bool, dead *store.DeadLetter) {
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
		c.traps.repeated(target)
	case changed || f.refetch:
		links = []frontier.Task{{URL: target, Depth: t.Depth, Redirects: t.Redirects + 1}}
		c.redirects.Add(1)
	}
	return links, hash, changed, dead
}

// content fills in the title, text, main text and fingerprint of a 2xx page from
// what parsePage found, and checks the fingerprint against the pages seen
// before. The fingerprint is that of the page's main text (see
// extractContent), so that pages that share only a site's header,
// navigation and footer do not look alike. Being a near-duplicate changes
// nothing about the page's links.
func (c *Crawler) content(f *fetch, p *Page, text content) {
	p.Title, p.Text = text.title, text.text
	if p.Text == "" {
		return
	}
	p.MainText = text.main
	p.Simhash = Simhash(text.main)
	if p.Simhash == 0 || c.cfg.NearDupDistance < 0 || !hasWords(text.main, minNearDupWords) {
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
	// The URL's metadata holds the fingerprint recorded last, which spares
	// the store a read.
	if err := c.db.UpdateFingerprint(f.ringKey, f.urlHash, f.meta.Fingerprint, p.Simhash, p.Task.URL); err != nil {
		c.countError("store")
	}
}

// minNearDupWords is the least main text a page needs to be judged a
// near-duplicate: short texts (an app shell's "Loading…", a login wall)
// collide on their fingerprints without being copies of each other.
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

// pageLinks takes the followable links parsePage found in a new or
// changed HTML page, at most MaxLinksPerPage of them, leaves out traps,
// and returns those to report and what became of them (kept in the URL's
// metadata). A page as deep as links are followed reports none, but keeps them for a shorter
// path to it (see reopen); so does a byte-identical copy of a page whose
// links were followed from as shallow a depth (see exactCopy).
func (c *Crawler) pageLinks(f *fetch, p *Page, doc *parsed, hash uint64) ([]frontier.Task, *store.Outlinks) {
	t := f.task
	out := &store.Outlinks{Known: true, Followed: true, Depth: t.Depth}
	if !doc.html {
		return nil, out
	}
	if doc.err != nil {
		c.countError("parse")
	}
	c.linksCapped.Add(int64(doc.capped))
	tasks := make([]frontier.Task, 0, len(doc.links))
	for _, u := range doc.links {
		if c.isTrap(u) {
			c.countError("trap")
			c.traps.repeated(u)
			continue
		}
		tasks = append(tasks, frontier.Task{URL: u, Depth: t.Depth + 1})
	}
	solid := p.Simhash // a chain of pages is judged on enough text only
	if solid != 0 && !hasWords(p.MainText, minNearDupWords) {
		solid = 0
	}
	if host, err := urls.HostOf(t.URL); err == nil {
		c.traps.page(host, t.URL, p.Simhash, solid)
	}
	tasks = c.traps.filter(t.URL, solid, tasks)
	c.dust.page(t.URL, hash)
	tasks = c.dust.rewrite(tasks)
	if len(tasks) > 0 {
		out.Links = make([]string, len(tasks))
		for i, l := range tasks {
			out.Links[i] = l.URL
		}
	}
	switch {
	case t.Depth >= c.cfg.MaxDepth:
		if len(tasks) > 0 {
			c.depthCut.Add(1)
		}
		out.Followed = false
		return nil, out
	case len(tasks) > 0 && c.exactCopy(f, hash, out.Links):
		return nil, out
	}
	return tasks, out
}

// exactCopy reports whether a page with the same body and the same links
// had its links followed from as shallow a depth as f's page, and if not,
// records f's page as the one whose links were followed for this content.
// The content is identified by 128 bits: the body hash and a hash of the
// links (which may differ between copies when relative links resolve
// against different URLs), so that a collision that would withhold links
// is out of reach.
func (c *Crawler) exactCopy(f *fetch, hash uint64, links []string) bool {
	check := uint64(fnvOffset64)
	for _, l := range links {
		for i := 0; i < len(l); i++ {
			check = (check ^ uint64(l[i])) * fnvPrime64
		}
		check = (check ^ '\n') * fnvPrime64
	}
	first, dup, err := c.db.FollowContent(hash, fmix64(check), f.task.Depth, f.task.URL)
	if err != nil {
		c.countError("store")
		return false
	}
	if dup && first != f.task.URL {
		c.exactCopies.Add(1)
		return true
	}
	return false
}

// nextMeta is the URL's metadata after this fetch.
func (c *Crawler) nextMeta(f *fetch, r *response, p *Page, hash uint64, changed bool, now time.Time) store.URLMeta {
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
	if c.cfg.CaptureHolder != "" && r.status != http.StatusNotModified {
		// A 304 archives no body: the previous capture stays the page's.
		if id, err := warc.NewRecordID(); err == nil {
			p.ResponseID, p.PayloadDigest = id, warc.PayloadDigest(p.RawBody)
			m.Captures = store.AddCapture(f.meta.Captures, store.Capture{
				Holder: c.cfg.CaptureHolder, RecordID: id, Digest: p.PayloadDigest, Time: p.FetchedAt})
		}
	}
	if c.cfg.MaxRecrawl > 0 {
		m.Interval = c.nextInterval(f.meta.Interval, !f.hasMeta, changed)
		m.NextCrawl = now.Add(m.Interval)
	} else {
		m.Interval, m.NextCrawl = 0, time.Time{}
	}
	return m
}

// deliver hands a page to the PageSink and its links to the LinkSink.
func (c *Crawler) deliver(ctx context.Context, p *Page, links []frontier.Task) {
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
	if back, again := c.dust.restored(); len(back)+len(again) > 0 {
		// Variants a DUST hint rewrote: a probe, or on a host where the
		// hint proved wrong.
		if len(back) > 0 {
			c.linksReported.Add(int64(len(back)))
			c.links.Discovered(ctx, frontier.Task{}, back)
		}
		c.Enqueue(again...)
	}
	if len(links) == 0 {
		return
	}
	c.linksReported.Add(int64(len(links)))
	c.links.Discovered(ctx, p.Task, links)
}
