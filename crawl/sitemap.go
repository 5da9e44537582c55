package crawl

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"mime"
	"net/url"
	"strings"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
)

// Sitemaps (https://www.sitemaps.org/protocol.html) feed the frontier:
// the Sitemap lines of a host's robots.txt (and, with Config.GuessSitemap,
// /sitemap.xml when it names none) are queued like links once the
// robots.txt is fetched; a fetched
// sitemap (XML, gzip-compressed or not) reports its URLs as links, a
// sitemap index its sitemaps. Only URLs on the sitemap's own host are
// taken, as the protocol asks (cross-host submission through robots.txt is
// not followed). A listed URL whose lastmod is later than this node's last
// fetch of it is queued for a recrawl at once.

const (
	// maxSitemapURLs is the most entries taken from one sitemap file: the
	// protocol's own limit.
	maxSitemapURLs = 50_000
	// maxSitemapBytes is the most a compressed sitemap may inflate to: the
	// protocol's limit of 50 MB, and never more than Config.MaxBodyBytes.
	maxSitemapBytes = 50 << 20
	// maxRobotsSitemaps is the most Sitemap lines taken from a robots.txt.
	maxRobotsSitemaps = 50
	// maxSitemapField is the most of a loc or lastmod kept: longer URLs
	// are cut (and then fail normalisation or lead nowhere).
	maxSitemapField = 4096
)

// sitemapEntry is one <url> of a sitemap or one <sitemap> of an index.
type sitemapEntry struct {
	loc     string
	lastmod time.Time // zero when absent or unreadable
}

// sitemap is a parsed sitemap file.
type sitemap struct {
	index   bool // a sitemap index: entries are sitemaps
	entries []sitemapEntry
}

// errNotSitemap is parseSitemap's answer for a body whose root element is
// neither urlset nor sitemapindex.
var errNotSitemap = errors.New("not a sitemap")

// mayBeSitemap reports whether a response is worth trying as a sitemap: an
// XML or gzip media type, or, with none or a generic one, a body that
// starts like XML or gzip.
func mayBeSitemap(contentType string, body []byte) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt, _, _ = strings.Cut(strings.ToLower(contentType), ";")
		mt = strings.TrimSpace(mt)
	}
	switch {
	case strings.HasSuffix(mt, "/xml") || strings.HasSuffix(mt, "+xml"):
		return true
	case mt == "application/gzip" || mt == "application/x-gzip":
		return true
	case mt == "" || mt == "application/octet-stream" || mt == "text/plain":
		return isGzip(body) || bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n\ufeff"), []byte("<"))
	}
	return false
}

func isGzip(b []byte) bool { return len(b) >= 2 && b[0] == 0x1f && b[1] == 0x8b }

// parseSitemap reads a sitemap or sitemap index from body, inflating it
// first if it is gzip-compressed (to at most limit bytes). It keeps at most
// maxSitemapURLs entries and stops at the first XML error, keeping what it
// read: a cut or damaged sitemap still gives its first entries. It returns
// errNotSitemap when the root element is another one.
func parseSitemap(body []byte, limit int64) (sitemap, error) {
	var sm sitemap
	var r io.Reader = bytes.NewReader(body)
	if isGzip(body) {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return sm, errNotSitemap
		}
		defer zr.Close()
		r = io.LimitReader(zr, min(limit, maxSitemapBytes))
	}
	d := xml.NewDecoder(r)
	d.Strict = false
	d.CharsetReader = func(_ string, in io.Reader) (io.Reader, error) { return in, nil }
	var (
		root  bool
		entry *sitemapEntry
		field string // "loc" or "lastmod" while inside one
		text  strings.Builder
	)
	for len(sm.entries) < maxSitemapURLs {
		tok, err := d.Token()
		if err != nil {
			if !root {
				return sm, errNotSitemap
			}
			return sm, nil // the end, or damage: keep what was read
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := strings.ToLower(t.Name.Local)
			switch {
			case !root:
				if name != "urlset" && name != "sitemapindex" {
					return sm, errNotSitemap
				}
				root, sm.index = true, name == "sitemapindex"
			case name == "url" && !sm.index || name == "sitemap" && sm.index:
				entry = &sitemapEntry{}
			case entry != nil && (name == "loc" || name == "lastmod"):
				field = name
				text.Reset()
			}
		case xml.CharData:
			if field != "" {
				text.Write(t[:min(len(t), maxSitemapField-text.Len())])
			}
		case xml.EndElement:
			name := strings.ToLower(t.Name.Local)
			switch {
			case field != "" && name == field:
				v := strings.TrimSpace(text.String())
				if field == "loc" {
					entry.loc = v
				} else {
					entry.lastmod = parseW3CDate(v)
				}
				field = ""
			case entry != nil && (name == "url" || name == "sitemap"):
				if entry.loc != "" {
					sm.entries = append(sm.entries, *entry)
				}
				entry = nil
			}
		}
	}
	return sm, nil
}

// parseW3CDate reads a sitemap's lastmod (W3C Datetime: a date, or a date
// and time with a zone); zero when it is none of those.
func parseW3CDate(s string) time.Time {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02", "2006-01", "2006"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t
		}
	}
	return time.Time{}
}

// sitemapLinks turns a fetched sitemap into the tasks to report (its URLs,
// or an index's sitemaps, on its own host, one level deeper) and queues at
// once a recrawl of each listed URL this node owns and last fetched before
// its lastmod. ok is false when the body is not a sitemap.
func (c *Crawler) sitemapLinks(f *fetch, body []byte) (links []frontier.Task, ok bool) {
	sm, err := parseSitemap(body, c.cfg.MaxBodyBytes)
	if err != nil {
		return nil, false
	}
	c.sitemaps.Add(1)
	t := f.task
	base := mustParse(t.URL)
	host, _ := urls.HostOf(t.URL)
	var recrawls []frontier.Task
	for _, e := range sm.entries {
		u, err := urls.Normalize(base, e.loc)
		if err != nil {
			continue
		}
		if h, err := urls.HostOf(u); err != nil || h != host {
			continue // another host: not this sitemap's to list
		}
		if c.isTrap(u) {
			c.countError("trap")
			continue
		}
		task := frontier.Task{URL: u, Depth: t.Depth + 1}
		links = append(links, task)
		if !e.lastmod.IsZero() && !sm.index && c.changedSince(task, e.lastmod) {
			task.Recrawl = true
			recrawls = append(recrawls, task)
		}
	}
	if len(recrawls) > 0 {
		c.sitemapRecrawls.Add(int64(len(recrawls)))
		c.Enqueue(recrawls...)
	}
	return links, true
}

// changedSince reports whether t is a URL this node owns, fetched before
// lastmod: its sitemap says it changed since.
func (c *Crawler) changedSince(t frontier.Task, lastmod time.Time) bool {
	if !c.owns(t) {
		return false
	}
	ringKey, urlHash := c.keys(t.URL)
	m, ok := c.urlMeta(ringKey, urlHash)
	return ok && !m.LastFetch.IsZero() && m.LastFetch.Before(lastmod)
}

// discoverSitemaps reports the sitemaps of origin as links once its
// robots.txt was fetched under a lease whose task is t: the robots.txt's
// Sitemap lines on the same host, or else (Config.GuessSitemap)
// /sitemap.xml, one level deeper than t. Nothing when sitemaps are off or
// robots.txt was unavailable.
func (c *Crawler) discoverSitemaps(ctx context.Context, origin string, rules *robotsRules, t frontier.Task) {
	if c.cfg.IgnoreSitemaps || rules.unavailable {
		return
	}
	host, err := urls.HostOf(origin + "/")
	if err != nil {
		return
	}
	base := mustParse(origin + "/robots.txt")
	var links []frontier.Task
	for _, s := range rules.sitemaps {
		u, err := urls.Normalize(base, s)
		if err != nil {
			continue
		}
		if h, err := urls.HostOf(u); err == nil && h == host {
			links = append(links, frontier.Task{URL: u, Depth: t.Depth + 1})
		}
	}
	if len(rules.sitemaps) == 0 && c.cfg.GuessSitemap {
		links = append(links, frontier.Task{URL: origin + "/sitemap.xml", Depth: t.Depth + 1})
	}
	if len(links) == 0 || t.Depth+1 > c.cfg.MaxDepth {
		return
	}
	c.linksReported.Add(int64(len(links)))
	c.links.Discovered(ctx, frontier.Task{}, links)
}

// robotsSitemaps returns the Sitemap lines of a robots.txt (they belong to
// no group, RFC 9309 §2.2.4), at most maxRobotsSitemaps of them.
func robotsSitemaps(body []byte) []string {
	body = capRobots(body)
	text := strings.TrimPrefix(string(body), "\uFEFF")
	var out []string
	for len(text) > 0 && len(out) < maxRobotsSitemaps {
		line, rest := text, ""
		if i := strings.IndexAny(text, "\r\n"); i >= 0 {
			line, rest = text[:i], text[i+1:]
		}
		text = rest
		key, value, ok := robotsRecord(line)
		if !ok || key != "sitemap" || value == "" {
			continue
		}
		if u, err := url.Parse(value); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
			out = append(out, value)
		}
	}
	return out
}
