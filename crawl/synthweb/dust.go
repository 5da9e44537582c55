package synthweb

import (
	"fmt"
	"html"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// DUST hosts (Config.DustHosts) and look-alike hosts
// (Config.LookalikeHosts): "different URLs with similar text".
//
// Links to a page of a DUST host come, about half of the time, in a variant
// form that the host answers with the page's very body: a default document
// appended to a directory (/ as /index.html, /index.php or /default.aspx),
// a trailing slash appended (/p/3 as /p/3/), or a parameter that changes
// nothing (?ref=nav, ?sort=asc). Normalisation cannot know these to be
// equal (on other hosts they are not), so a crawler that does not learn
// them fetches pages twice. DustRequests counts such variant fetches.
//
// A look-alike host has links of the same forms, but there each variant is
// a page of its own with a body unlike its twin's: the crawler must fetch
// them all (Lookalikes lists them). Every link on a page of either kind of
// host is absolute, so that the variants' bodies resolve alike.

// dustMode is what a host does with variant URLs.
type dustMode uint8

const (
	dustNone      dustMode = iota
	dustTwins              // variants serve the twin's body
	dustLookalike          // variants are pages of their own
)

// dustDocs are the default documents variants append to a directory.
var dustDocs = []string{"index.html", "index.php", "default.aspx"}

// dustParams are the parameters variants add.
var dustParams = []string{"ref=nav", "sort=asc"}

// chooseDustHosts picks the DUST and look-alike hosts among the hosts
// after the seeds that are neither hot nor trap hosts, with a generator of
// their own so that a web without them is unchanged.
func (g *graph) chooseDustHosts() {
	if g.cfg.DustHosts == 0 && g.cfg.LookalikeHosts == 0 {
		return
	}
	g.dust = map[int]dustMode{}
	r := rand.New(rand.NewPCG(uint64(g.cfg.Seed), 0xd057d057))
	nd, nl := 0, 0
	for _, h := range r.Perm(len(g.hosts)) {
		if h < g.cfg.Seeds || g.hot[h] || g.traps[h] != TrapNone {
			continue
		}
		switch {
		case nd < g.cfg.DustHosts:
			g.dust[h] = dustTwins
			nd++
		case nl < g.cfg.LookalikeHosts:
			g.dust[h] = dustLookalike
			nl++
		}
	}
}

// dustVariant returns a variant of path+query pq chosen by r, "" for none.
func dustVariant(r *rand.Rand, pq string) string {
	path, query, hasQuery := strings.Cut(pq, "?")
	switch {
	case strings.HasSuffix(path, "/"):
		v := path + dustDocs[r.IntN(len(dustDocs))]
		if hasQuery {
			v += "?" + query
		}
		return v
	case !hasQuery && r.IntN(2) == 0 && strings.HasPrefix(path, "/p/"):
		return path + "/"
	case !hasQuery:
		return path + "?" + dustParams[r.IntN(len(dustParams))]
	default:
		return pq + "&" + dustParams[r.IntN(len(dustParams))]
	}
}

// decorateDust makes every link on a page of a DUST or look-alike host
// absolute, turns about half of the links to a DUST host's HTML pages
// into variants and adds a link to a look-alike beside about half of the
// links to a look-alike host's.
func (g *graph) decorateDust() {
	if len(g.dust) == 0 {
		return
	}
	g.variants, g.variantFrom = map[string]int{}, map[string][]int{}
	r := rand.New(rand.NewPCG(uint64(g.cfg.Seed), 0x0a1ea11e))
	for _, p := range g.pages {
		var extra []link
		for i := range p.links {
			l := &p.links[i]
			if l.target < 0 {
				continue
			}
			t := g.pages[l.target]
			mode := g.dust[t.host]
			if g.dust[p.host] != dustNone {
				_, frag, _ := strings.Cut(l.href, "#")
				l.href = t.url
				if frag != "" {
					l.href += "#" + frag
				}
			}
			if mode == dustNone || !t.kind.html() || t.broken || r.IntN(2) == 0 {
				continue
			}
			_, pq := splitHostURL(t.url)
			v := dustVariant(r, pq)
			u := "http://" + g.hosts[t.host].name + v
			if mode == dustLookalike {
				// The look-alike is another page: the link to the twin
				// stays, and one to the look-alike is added.
				extra = append(extra, link{href: u, target: t.id, nofollow: l.nofollow, rel: l.rel, text: l.text})
			} else {
				l.href = u
			}
			g.variants[u] = t.id
			if !l.nofollow && p.metaNofollow == "" {
				g.variantFrom[u] = append(g.variantFrom[u], p.id)
			}
		}
		p.links = append(p.links, extra...)
	}
}

// splitHostURL splits an absolute page URL into its origin and path+query.
func splitHostURL(u string) (origin, pq string) {
	i := strings.Index(u, "://")
	j := strings.IndexByte(u[i+3:], '/')
	return u[:i+3+j], u[i+3+j:]
}

// respondDust answers a variant URL of a DUST or look-alike host, ok false
// when pq is none.
func (w *Web) respondDust(host, pq string) (response, bool) {
	u := "http://" + host + pq
	id, ok := w.g.variants[u]
	if !ok {
		return response{}, false
	}
	hi := w.g.index[host]
	if w.g.dust[hi] == dustTwins {
		ct, b, buf := w.g.pooledBody(w.g.pages[id])
		return response{status: http.StatusOK, ctype: ct, body: b, buf: buf}, true
	}
	body := fmt.Sprintf("<!DOCTYPE html>\n<html><head><title>%s</title></head><body>\n<main><h1>%s</h1><p>This address looks like a copy of %s but is a page of its own, with its own text.</p>\n<p><a href=\"http://%s/\">home</a></p></main></body></html>\n",
		html.EscapeString(pq), html.EscapeString(pq), html.EscapeString(w.g.pages[id].url), html.EscapeString(host))
	return response{status: http.StatusOK, ctype: "text/html; charset=utf-8", body: []byte(body)}, true
}

// VariantOf returns the page URL that rawURL is a variant of on a DUST
// host (same body), ok false for any other URL, look-alikes included.
func (w *Web) VariantOf(rawURL string) (page string, ok bool) {
	id, found := w.g.variants[rawURL]
	if !found {
		u, err := url.Parse(rawURL)
		if err != nil {
			return "", false
		}
		id, found = w.g.variants["http://"+strings.ToLower(u.Host)+u.RequestURI()]
	}
	if !found || w.g.dust[w.g.pages[id].host] != dustTwins {
		return "", false
	}
	return w.g.pages[id].url, true
}

// Lookalikes returns the variant URLs of look-alike hosts that robots.txt
// allows to token and that a page of Within(token, maxDepth) links
// followably (so the look-alike itself is at most maxDepth+1 links deep):
// pages of their own that a crawler must fetch, sorted.
func (w *Web) Lookalikes(token string, maxDepth int) []string {
	truth := map[string]bool{}
	for _, u := range w.Within(token, maxDepth-1) {
		truth[u] = true
	}
	var out []string
	for u, id := range w.g.variants {
		if w.g.dust[w.g.pages[id].host] != dustLookalike || !w.Allowed(token, u) {
			continue
		}
		for _, from := range w.g.variantFrom[u] {
			if truth[w.g.pages[from].url] {
				out = append(out, u)
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// DustRequests returns the number of logged requests to variant URLs of
// DUST hosts and the number of page requests (robots.txt excluded) since
// the last ResetLog.
func (w *Web) DustRequests() (variant, pages int) {
	for _, r := range w.Log() {
		if w.isRobots(r) {
			continue
		}
		pages++
		if _, ok := w.VariantOf(r.URL); ok {
			variant++
		}
	}
	return variant, pages
}

// FetchedPages returns the set of page URLs answered with a response, a
// DUST variant's fetch counting for its page.
func (w *Web) FetchedPages() map[string]bool {
	got := map[string]bool{}
	for _, r := range w.Log() {
		if r.Status == 0 {
			continue
		}
		u := r.URL
		if p, ok := w.VariantOf(u); ok {
			u = p
		} else if c, err := Canonical(u); err == nil {
			u = c
		}
		got[u] = true
	}
	return got
}
