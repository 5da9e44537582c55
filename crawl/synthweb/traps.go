package synthweb

import (
	"bytes"
	"fmt"
	"html"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Trap hosts (Config.TrapHosts) and hot hosts (Config.HotHosts) of the
// generated web.

// TrapKind is the kind of endless section a trap host serves besides its
// ordinary pages. Every page of a section is built from the host's shared
// header, navigation and footer around a short main part that changes
// little from page to page, as generated pages on real sites are.
type TrapKind uint8

const (
	// TrapNone: an ordinary host.
	TrapNone TrapKind = iota
	// TrapCalendar serves /events/YYYY-MM-DD for every date, each page
	// linking the day before and the day after.
	TrapCalendar
	// TrapPagination serves /archive?page=N for every N, each page linking
	// the next (and the previous) one, all saying "no more posts".
	TrapPagination
	// TrapDeep serves /tree/n1/n2/.../nK/ for every K, each page linking
	// one level deeper: a path that grows without end and never repeats a
	// segment.
	TrapDeep
	// TrapFacets serves /shop?f=1&f=2&...&f=K for every K, each page
	// linking the query with one more filter: a query that grows without
	// end.
	TrapFacets
	// TrapSession has no section: every link between the host's own pages
	// carries a fresh session id (sessionid, sid or PHPSESSID), which a
	// crawler must strip. Its canonical pages are in GroundTruth; fetching
	// one twice under two ids shows up in Duplicates.
	TrapSession
)

// trapKinds is the order in which trap hosts get their kinds.
var trapKinds = []TrapKind{TrapCalendar, TrapPagination, TrapDeep, TrapFacets, TrapSession}

// String names the kind.
func (k TrapKind) String() string {
	switch k {
	case TrapCalendar:
		return "calendar"
	case TrapPagination:
		return "pagination"
	case TrapDeep:
		return "deep"
	case TrapFacets:
		return "facets"
	case TrapSession:
		return "session"
	}
	return "none"
}

// Link targets that are not pages of the graph.
const (
	externalTarget = -1 // a link out of the synthetic web
	trapTarget     = -2 // the entry of the host's trap section
)

// sessionCounter numbers the session ids of all webs in the process: ids
// need only be fresh, and a session host's pages are not byte-stable
// anyway.
var sessionCounter atomic.Uint64

// chooseHotAndTrapHosts picks the hot hosts and the trap hosts among the
// hosts after the seeds, hot ones only among hosts without a Crawl-delay,
// with a generator of their own so that a web without them is unchanged.
func (g *graph) chooseHotAndTrapHosts() {
	if g.cfg.HotHosts == 0 && g.cfg.TrapHosts == 0 {
		return
	}
	g.hot, g.traps = map[int]bool{}, map[int]TrapKind{}
	r := rand.New(rand.NewPCG(uint64(g.cfg.Seed), 0x7a9f0c3d))
	order := r.Perm(len(g.hosts))
	for _, h := range order {
		if h >= g.cfg.Seeds && len(g.hot) < g.cfg.HotHosts && g.hosts[h].crawlDelay == 0 {
			g.hot[h] = true
		}
	}
	for _, h := range order {
		if h >= g.cfg.Seeds && !g.hot[h] && len(g.traps) < g.cfg.TrapHosts {
			g.traps[h] = trapKinds[len(g.traps)%len(trapKinds)]
		}
	}
}

// linkTraps links each trap section from its host's root.
func (g *graph) linkTraps() {
	for h, kind := range g.traps {
		if entry := trapEntry(kind); entry != "" {
			// Absolute: the root may have a <base href> on another host.
			root := g.pages[g.hosts[h].pages[0]]
			root.links = append(root.links, link{target: trapTarget, href: "http://" + g.hosts[h].name + entry, text: kind.String()})
		}
	}
}

// trapEntry is the first page of a trap section, "" for none.
func trapEntry(k TrapKind) string {
	switch k {
	case TrapCalendar:
		return "/events/2026-01-01"
	case TrapPagination:
		return "/archive?page=1"
	case TrapDeep:
		return "/tree/n1/"
	case TrapFacets:
		return "/shop?f=1"
	}
	return ""
}

// inTrapSection reports whether path+query pq lies in the trap section of
// a host of kind k.
func inTrapSection(k TrapKind, pq string) bool {
	path, _, _ := strings.Cut(pq, "?")
	switch k {
	case TrapCalendar:
		return strings.HasPrefix(path, "/events/")
	case TrapPagination:
		return path == "/archive"
	case TrapDeep:
		return strings.HasPrefix(path, "/tree/")
	case TrapFacets:
		return path == "/shop"
	}
	return false
}

// withSession returns the href of link l on page p of a session trap host:
// a link to another page of the same host gets a fresh session id.
func (g *graph) withSession(p *page, l link) string {
	if l.target < 0 || g.pages[l.target].host != p.host || strings.HasPrefix(l.href, "#") {
		return l.href
	}
	n := sessionCounter.Add(1)
	id := pageRand(g.cfg.Seed, "session#"+strconv.FormatUint(n, 10)).Uint64()
	param := []string{"sessionid=%016x", "sid=%016x", "PHPSESSID=%016x"}[n%3]
	param = fmt.Sprintf(param, id)
	href, frag, hasFrag := strings.Cut(l.href, "#")
	if strings.Contains(href, "?") {
		href += "&" + param
	} else {
		href += "?" + param
	}
	if hasFrag {
		href += "#" + frag
	}
	return href
}

// TrapKindOf returns the kind of trap a host of the generated web serves,
// TrapNone for ordinary hosts and hosts outside the web.
func (w *Web) TrapKindOf(host string) TrapKind {
	if i, ok := w.g.index[strings.ToLower(host)]; ok {
		return w.g.traps[i]
	}
	return TrapNone
}

// HotHosts returns the names of the hot hosts (Config.HotHosts), in host
// order.
func (w *Web) HotHosts() []string {
	var out []string
	for i, h := range w.g.hosts {
		if w.g.hot[i] {
			out = append(out, h.name)
		}
	}
	return out
}

// IsTrapURL reports whether a URL lies in an endless section a correct
// crawler leaves mostly alone: a trap section of a trap host, or a page of
// the calendar and deep case hosts.
func (w *Web) IsTrapURL(rawURL string) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	host := strings.ToLower(u.Hostname())
	if h := w.cases.host(host); h != nil {
		return h.unbounded && !h.isRobotsPath(u.EscapedPath())
	}
	pq := u.EscapedPath()
	if u.RawQuery != "" {
		pq += "?" + u.RawQuery
	}
	return inTrapSection(w.TrapKindOf(host), pq)
}

// TrapRequests returns the number of logged requests to trap URLs (see
// IsTrapURL) and the number of page requests (robots.txt excluded) since
// the last ResetLog: a crawl's waste on traps is their ratio.
func (w *Web) TrapRequests() (trap, pages int) {
	for _, r := range w.Log() {
		if w.isRobots(r) {
			continue
		}
		pages++
		if w.IsTrapURL(r.URL) {
			trap++
		}
	}
	return trap, pages
}

// respondTrap serves a page of host hi's trap section, or 404 for a path
// of the section that does not exist.
func (w *Web) respondTrap(hi int, kind TrapKind, pq string) response {
	notFound := textResponse(http.StatusNotFound, "404 page not found")
	path, query, _ := strings.Cut(pq, "?")
	var title, main string
	var links [][2]string // href, text
	switch kind {
	case TrapCalendar:
		d, err := time.Parse("2006-01-02", strings.TrimPrefix(path, "/events/"))
		if err != nil {
			return notFound
		}
		title = "Events on " + d.Format("Monday 2 January 2006")
		main = "Nothing is scheduled for " + d.Format("2 January 2006") + "."
		links = [][2]string{{"/events/" + d.AddDate(0, 0, -1).Format("2006-01-02"), "previous day"},
			{"/events/" + d.AddDate(0, 0, 1).Format("2006-01-02"), "next day"}}
	case TrapPagination:
		q, err := url.ParseQuery(query)
		n, aerr := strconv.Atoi(q.Get("page"))
		if err != nil || aerr != nil || n < 1 || query != "page="+strconv.Itoa(n) {
			return notFound
		}
		title = "Archive, page " + strconv.Itoa(n)
		main = "There are no more posts in the archive."
		links = [][2]string{{"/archive?page=" + strconv.Itoa(n+1), "older posts"}}
		if n > 1 {
			links = append(links, [2]string{"/archive?page=" + strconv.Itoa(n-1), "newer posts"})
		}
	case TrapDeep:
		segs := strings.Split(strings.Trim(strings.TrimPrefix(path, "/tree/"), "/"), "/")
		for i, s := range segs {
			if s != "n"+strconv.Itoa(i+1) {
				return notFound
			}
		}
		if !strings.HasSuffix(path, "/") {
			return notFound
		}
		title = "Folder level " + strconv.Itoa(len(segs))
		main = "This folder holds one more folder."
		links = [][2]string{{"n" + strconv.Itoa(len(segs)+1) + "/", "open the folder"}}
	case TrapFacets:
		fs := strings.Split(query, "&")
		for i, f := range fs {
			if f != "f="+strconv.Itoa(i+1) {
				return notFound
			}
		}
		title = "Shop, " + strconv.Itoa(len(fs)) + " filters"
		main = "No product matches all of these filters."
		links = [][2]string{{"/shop?" + query + "&f=" + strconv.Itoa(len(fs)+1), "add a filter"}}
	default:
		return notFound
	}
	return response{status: http.StatusOK, ctype: "text/html; charset=utf-8", body: w.g.trapPage(hi, kind, title, main, links)}
}

// trapPage renders a page of a trap section: the host's header, navigation
// and footer (the same on every page of the host) around the page's own
// short main part.
func (g *graph) trapPage(hi int, kind TrapKind, title, main string, links [][2]string) []byte {
	name := g.hosts[hi].name
	fixed := pageRand(g.cfg.Seed, "trap-host "+name)
	header, intro, footer := fillerText(fixed, 12), fillerText(fixed, 150), fillerText(fixed, 150)
	var b bytes.Buffer
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>%s</title>\n</head>\n<body>\n", html.EscapeString(title))
	fmt.Fprintf(&b, "<header><p>%s: %s</p>\n<nav><a href=\"/\">home</a> <a href=\"%s\">%s</a></nav></header>\n",
		html.EscapeString(name), html.EscapeString(header), html.EscapeString(trapEntry(kind)), kind)
	fmt.Fprintf(&b, "<main>\n<h1>%s</h1>\n<p>%s %s</p>\n<ul>\n", html.EscapeString(title), html.EscapeString(main), html.EscapeString(intro))
	for _, l := range links {
		fmt.Fprintf(&b, "<li><a href=\"%s\">%s</a></li>\n", html.EscapeString(l[0]), html.EscapeString(l[1]))
	}
	fmt.Fprintf(&b, "</ul>\n</main>\n<footer><p>%s</p></footer>\n</body>\n</html>\n", html.EscapeString(footer))
	return b.Bytes()
}
