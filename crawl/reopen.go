package crawl

import (
	"context"
	"net/http"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
)

// Depth re-opening. The crawl is not breadth-first (many hosts, each at its
// own pace, on many nodes), so a page can be reached first by a path longer
// than its shortest one. The owner keeps the smallest depth it has seen of
// each URL and queues the URL again when a shorter path arrives; the
// crawler then has the page's links followed from the shorter depth
// without fetching the page again, from the links it kept in the URL's
// metadata (store.Outlinks). So a page whose links were cut at MaxDepth
// has them followed once it turns out to be shallower, and a page that is
// shallower than first thought passes that on to the pages it links to:
// every page within MaxDepth links of a seed is fetched.

// reopen handles t, a task for a URL whose metadata the store holds: a copy
// queued when a shorter path to it arrived, or queued twice. It reports the
// page's kept links from t's depth when they were not followed yet from as
// shallow a depth (a redirect's target keeps t's depth, page links go one
// deeper), and finishes t without a request. When this node does not know
// the page's links (its metadata came from another node with the page's
// range, or from a helper that fetched it for this node) and t's depth lets
// them be followed, it returns the fetch to make again, again set: an
// unconditional request whose links are followed whatever the page.
func (c *Crawler) reopen(ctx context.Context, l *frontier.Lease, t frontier.Task) (f fetch, again bool) {
	f.task = t
	f.ringKey, f.urlHash = c.keys(t.URL)
	f.meta, f.hasMeta = c.urlMeta(f.ringKey, f.urlHash)
	m := f.meta
	o := m.Outlinks
	redirect := isRedirect(m.Status)
	followable := t.Depth < c.cfg.MaxDepth
	if redirect {
		followable = c.cfg.MaxRedirects > 0 && t.Redirects < c.cfg.MaxRedirects
	}
	ok2xx := m.Status >= http.StatusOK && m.Status < http.StatusMultipleChoices
	switch {
	case !f.hasMeta:
		return f, true // gone meanwhile (a released range): an ordinary fetch
	case !o.Known && followable && (ok2xx || redirect):
		f.refetch = true
		c.refetched.Add(1)
		return f, true
	case !o.Known, !followable, o.Followed && o.Depth <= t.Depth:
		c.drop(l, t) // followed from as shallow a depth already, or still too deep
		return f, false
	}
	links := make([]frontier.Task, 0, len(o.Links))
	for _, u := range o.Links {
		if redirect {
			links = append(links, frontier.Task{URL: u, Depth: t.Depth, Redirects: t.Redirects + 1})
		} else {
			links = append(links, frontier.Task{URL: u, Depth: t.Depth + 1})
		}
	}
	m.Outlinks.Followed, m.Outlinks.Depth = true, t.Depth
	if !c.keep(l, t) {
		return f, false
	}
	l.End() // no request was made: the host is free at once
	c.reopened.Add(1)
	if len(links) > 0 {
		// Before the task is finished, as for a fetched page: the sink
		// holds them durably once Discovered returns.
		c.linksReported.Add(int64(len(links)))
		c.links.Discovered(ctx, t, links)
	}
	c.record(t, frontier.Outcome{Meta: &m}, true)
	return f, false
}
