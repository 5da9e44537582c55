package synthweb

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// pageKind classifies a page by its path family and content type.
type pageKind uint8

const (
	kindRoot        pageKind = iota // "/"
	kindPage                        // /p/<n>
	kindList                        // /list?cat=<c>&page=<n>
	kindPrivate                     // /private/<n>
	kindPrivateOpen                 // /private/open/<n> (only on robotsAllow hosts)
	kindNoSwarm                     // /no-swarmcrawl/<n>
	kindPDF                         // /files/<n>.pdf
	kindPNG                         // /img/<n>.png
)

// html reports whether pages of this kind are HTML (and so carry links).
func (k pageKind) html() bool { return k != kindPDF && k != kindPNG }

// access says how a page is reachable by construction.
type access uint8

const (
	accessSpine  access = iota // followable chain of public pages from a seed
	accessHidden               // only linked in a way that may not count (see behind)
	accessOrphan               // never linked at all
)

// hiddenBehind says what hides an accessHidden page.
type hiddenBehind uint8

const (
	behindNofollowLink hiddenBehind = iota // only rel="nofollow" links
	behindMetaNofollow                     // only linked from meta-nofollow pages
	behindPrivate                          // only linked from /private/ pages
	behindNoSwarm                          // only linked from /no-swarmcrawl/ pages
)

// page is one URL of the synthetic web. Broken pages are link targets that
// the server answers with 404.
type page struct {
	id           int
	host         int
	path         string // canonical path plus query
	url          string // canonical URL
	kind         pageKind
	access       access
	behind       hiddenBehind
	broken       bool
	metaNofollow string // content of <meta name="robots">, "" if none
	base         string // <base href>, "" if none
	links        []link
}

// link is one <a href> on a page.
type link struct {
	href     string // raw href (before HTML escaping)
	target   int    // page id, -1 for targets outside the synthetic web
	nofollow bool
	rel      string // rel attribute value, "" if none
	text     string
}

// host is one virtual host.
type host struct {
	name       string
	robots     robotsPolicy
	robotsBody []byte // robots.txt as served, nil if it answers 404
	crawlDelay time.Duration
	pages      []int // page ids, root first; includes broken pages
}

// graph is the whole generated web.
type graph struct {
	cfg   Config
	hot   map[int]bool     // host index -> hot (Config.HotHosts)
	traps map[int]TrapKind // host index -> its trap section (Config.TrapHosts)
	dust  map[int]dustMode // host index -> DUST or look-alike (Config.DustHosts, LookalikeHosts)
	// variants maps a variant URL linked on the web to its page id.
	variants    map[string]int
	variantFrom map[string][]int // variant URL -> the pages linking it, followably
	hosts       []*host
	pages       []*page
	byURL       map[string]int // canonical URL -> page id (broken pages included)
	seeds       []int
	index       map[string]int           // host name -> host index
	pngs        []atomic.Pointer[[]byte] // page id -> its PNG body once made
}

// externalHrefs are links leading out of the synthetic web.
var externalHrefs = []string{
	"http://elsewhere.invalid/",
	"http://www.elsewhere.invalid/about?utm_source=synth",
	"mailto:webmaster@elsewhere.invalid",
	"javascript:void(0)",
}

// generator holds the state of one graph construction.
type generator struct {
	g *graph
	r *rand.Rand
}

// buildGraph generates the web for cfg (defaults already applied).
func buildGraph(cfg Config) (*graph, error) {
	g := &graph{cfg: cfg, byURL: map[string]int{}, index: map[string]int{}}
	gen := &generator{g: g, r: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5917e7eb))}
	gen.hostsAndRobots()
	g.chooseHotAndTrapHosts()
	g.chooseDustHosts()
	for h := range g.hosts {
		gen.hostPages(h)
	}
	for h := range g.hosts {
		gen.hostFlags(h)
	}
	for h := range g.hosts {
		gen.intraSpine(h)
	}
	for i := 0; i < cfg.Seeds; i++ {
		g.seeds = append(g.seeds, g.hosts[i].pages[0])
	}
	for h := cfg.Seeds; h < len(g.hosts); h++ {
		parent := gen.r.IntN(h)
		src := gen.pick(gen.spineSources(parent, len(g.pages)))
		gen.addLink(src, g.hosts[h].pages[0], false)
	}
	n := len(g.pages) // broken pages appended during filling are not filled themselves
	for id := 0; id < n; id++ {
		if g.pages[id].kind.html() {
			gen.fill(id)
		}
	}
	for _, p := range g.pages {
		gen.r.Shuffle(len(p.links), func(i, j int) { p.links[i], p.links[j] = p.links[j], p.links[i] })
		for i := range p.links {
			if err := gen.makeHref(p, &p.links[i]); err != nil {
				return nil, err
			}
		}
	}
	g.linkTraps()
	g.decorateDust()
	g.pngs = make([]atomic.Pointer[[]byte], len(g.pages))
	for _, h := range g.hosts {
		if !h.robots.notFound {
			h.robotsBody = []byte(h.robots.text(h.name))
		}
	}
	// The server looks pages up by their URL as requested before it
	// canonicalises it: that is right only if page URLs are canonical.
	for _, p := range g.pages {
		if c, err := Canonical(p.url); err != nil || c != p.url {
			return nil, fmt.Errorf("synthweb: internal error: page URL %q is not canonical (%q, %v)", p.url, c, err)
		}
	}
	return g, nil
}

// hostsAndRobots names the hosts and gives each its robots.txt.
func (gen *generator) hostsAndRobots() {
	g, r := gen.g, gen.r
	width := len(strconv.Itoa(g.cfg.Hosts - 1))
	if width < 3 {
		width = 3
	}
	for i := 0; i < g.cfg.Hosts; i++ {
		h := &host{name: fmt.Sprintf("h%0*d.synth.test", width, i)}
		g.index[h.name] = i
		var kind robotsKind
		switch x := r.Float64(); {
		case x < 0.48:
			kind = robotsPlain
		case x < 0.62:
			kind = robotsAgent
		case x < 0.70:
			kind = robotsAgentBoth
		case x < 0.82:
			kind = robotsNotFound
		default:
			kind = robotsAllow
		}
		h.robots.kind = kind
		g.hosts = append(g.hosts, h)
	}
	for _, i := range r.Perm(g.cfg.Hosts)[:g.cfg.CrawlDelayHosts] {
		if g.hosts[i].robots.kind == robotsNotFound {
			g.hosts[i].robots.kind = robotsPlain
		}
		g.hosts[i].crawlDelay = time.Second
	}
	for _, h := range g.hosts {
		p := &h.robots
		if p.kind == robotsNotFound {
			p.notFound = true
			continue
		}
		star := robotsGroup{agents: []string{"*"}, rules: []robotsRule{{path: "/private/"}}}
		if p.kind == robotsAllow {
			star.rules = append(star.rules, robotsRule{allow: true, path: "/private/open/"})
		}
		p.groups = append(p.groups, star)
		if p.kind == robotsAgent || p.kind == robotsAgentBoth {
			agent := []string{"swarmcrawl", "SwarmCrawl"}[r.IntN(2)]
			sg := robotsGroup{agents: []string{agent}, rules: []robotsRule{{path: "/no-swarmcrawl/"}}}
			if p.kind == robotsAgentBoth {
				sg.rules = append(sg.rules, robotsRule{path: "/private/"})
			}
			if r.IntN(2) == 0 { // group order must not matter
				p.groups = append([]robotsGroup{sg}, p.groups...)
			} else {
				p.groups = append(p.groups, sg)
			}
		}
		if r.Float64() < 0.3 {
			p.groups = append(p.groups, robotsGroup{agents: []string{"badbot", "evilbot"}, rules: []robotsRule{{path: "/"}}})
		}
		for i := range p.groups {
			p.groups[i].crawlDelay = h.crawlDelay
		}
	}
}

// addPage creates a page on host h.
func (gen *generator) addPage(h int, kind pageKind, path string, acc access) *page {
	g := gen.g
	p := &page{id: len(g.pages), host: h, path: path, kind: kind, access: acc}
	p.url = "http://" + g.hosts[h].name + path
	g.pages = append(g.pages, p)
	g.byURL[p.url] = p.id
	g.hosts[h].pages = append(g.hosts[h].pages, p.id)
	return p
}

// hostPages creates the pages of host h: the root plus 0..2*mean-2 others.
func (gen *generator) hostPages(h int) {
	r, mean := gen.r, gen.g.cfg.PagesPerHost
	n := 1
	switch hot := gen.g.cfg.HotPages; {
	case gen.g.hot[h]:
		n = max(hot/2, 1) + r.IntN(max(2*hot-hot/2, 1))
	case mean > 1:
		n = 1 + r.IntN(2*mean-1)
	}
	gen.addPage(h, kindRoot, "/", accessSpine)
	var pc, lc, prc, nsc, fc, ic int
	kind := gen.g.hosts[h].robots.kind
	for j := 1; j < n; j++ {
		switch x := r.Float64(); {
		case x < 0.60:
			pc++
			gen.addPage(h, kindPage, "/p/"+strconv.Itoa(pc), accessSpine)
		case x < 0.66:
			lc++
			gen.addPage(h, kindList, fmt.Sprintf("/list?cat=%d&page=%d", 1+r.IntN(4), lc), accessSpine)
		case x < 0.79:
			prc++
			if kind == robotsAllow && r.IntN(2) == 0 {
				gen.addPage(h, kindPrivateOpen, "/private/open/"+strconv.Itoa(prc), accessSpine)
			} else {
				gen.addPage(h, kindPrivate, "/private/"+strconv.Itoa(prc), accessSpine)
			}
		case x < 0.85:
			nsc++
			gen.addPage(h, kindNoSwarm, "/no-swarmcrawl/"+strconv.Itoa(nsc), accessSpine)
		case x < 0.92:
			fc++
			gen.addPage(h, kindPDF, "/files/"+strconv.Itoa(fc)+".pdf", accessSpine)
		case x < 0.965:
			ic++
			gen.addPage(h, kindPNG, "/img/"+strconv.Itoa(ic)+".png", accessSpine)
		default:
			pc++
			gen.addPage(h, kindPage, "/p/"+strconv.Itoa(pc), accessOrphan)
		}
	}
}

// hostFlags decides meta-nofollow pages, hidden pages and <base> tags.
func (gen *generator) hostFlags(h int) {
	g, r := gen.g, gen.r
	ids := g.hosts[h].pages
	var metas, privs, noswarms []int
	for _, id := range ids {
		p := g.pages[id]
		switch {
		case p.kind == kindPage && p.access == accessSpine && r.Float64() < 0.08:
			p.metaNofollow = []string{"nofollow", "noindex, nofollow"}[r.IntN(2)]
			metas = append(metas, id)
		case p.kind == kindPrivate && p.access == accessSpine:
			privs = append(privs, id)
		case p.kind == kindNoSwarm && p.access == accessSpine:
			noswarms = append(noswarms, id)
		}
	}
	for _, id := range ids {
		p := g.pages[id]
		if p.kind != kindPage || p.access != accessSpine || p.metaNofollow != "" || r.Float64() >= 0.1 {
			continue
		}
		options := []hiddenBehind{behindNofollowLink}
		if len(metas) > 0 {
			options = append(options, behindMetaNofollow)
		}
		if len(privs) > 0 {
			options = append(options, behindPrivate)
		}
		if len(noswarms) > 0 {
			options = append(options, behindNoSwarm)
		}
		p.access = accessHidden
		p.behind = options[r.IntN(len(options))]
	}
	for _, id := range ids {
		p := g.pages[id]
		if !p.kind.html() || r.Float64() >= 0.12 {
			continue
		}
		bh := h
		if r.Float64() < 0.25 && len(g.hosts) > 1 {
			bh = r.IntN(len(g.hosts))
		}
		dir := []string{"/p/", "/p/", "/"}[r.IntN(3)]
		p.base = "http://" + g.hosts[bh].name + dir
	}
}

// isSpineSource reports whether links on p are followed whenever p is reached
// and p is reached for every token that may fetch roots: a public HTML page
// without meta nofollow that is itself on the spine.
func (p *page) isSpineSource() bool {
	return (p.kind == kindRoot || p.kind == kindPage || p.kind == kindList) &&
		p.access == accessSpine && p.metaNofollow == "" && !p.broken
}

// spineSources lists the spine sources of host h with id below maxID.
func (gen *generator) spineSources(h, maxID int) []int {
	var out []int
	for _, id := range gen.g.hosts[h].pages {
		if id < maxID && gen.g.pages[id].isSpineSource() {
			out = append(out, id)
		}
	}
	return out
}

// pick returns a random element of ids.
func (gen *generator) pick(ids []int) int { return ids[gen.r.IntN(len(ids))] }

// intraSpine links every spine page of host h from an earlier spine source,
// and every hidden page from its hiding source.
func (gen *generator) intraSpine(h int) {
	g := gen.g
	for _, id := range g.hosts[h].pages[1:] {
		p := g.pages[id]
		if p.access != accessSpine {
			continue
		}
		gen.addLink(gen.pick(gen.spineSources(h, id)), id, false)
	}
	for _, id := range g.hosts[h].pages {
		p := g.pages[id]
		if p.access != accessHidden {
			continue
		}
		var from []int
		for _, sid := range g.hosts[h].pages {
			s := g.pages[sid]
			switch p.behind {
			case behindMetaNofollow:
				if s.metaNofollow != "" {
					from = append(from, sid)
				}
			case behindPrivate:
				if s.kind == kindPrivate && s.access == accessSpine {
					from = append(from, sid)
				}
			case behindNoSwarm:
				if s.kind == kindNoSwarm && s.access == accessSpine {
					from = append(from, sid)
				}
			}
		}
		if p.behind == behindNofollowLink {
			gen.addLink(gen.pick(gen.spineSources(h, len(g.pages))), id, true)
		} else {
			gen.addLink(gen.pick(from), id, false)
		}
	}
}

// addLink appends a link from page src to page dst; its href is made later.
func (gen *generator) addLink(src, dst int, nofollow bool) {
	p := gen.g.pages[src]
	l := link{target: dst, nofollow: nofollow}
	if nofollow {
		l.rel = []string{"nofollow", "nofollow noopener", "external nofollow"}[gen.r.IntN(3)]
	}
	p.links = append(p.links, l)
}

// linkable lists the pages of host h that random links may target: every
// spine page (private, binary and meta-nofollow ones included).
func (gen *generator) linkable(h int) []int {
	var out []int
	for _, id := range gen.g.hosts[h].pages {
		if p := gen.g.pages[id]; p.access == accessSpine && !p.broken {
			out = append(out, id)
		}
	}
	return out
}

// fill adds the random links of page id: extras (self, external, broken,
// nofollow to hidden) and then ordinary links up to LinksPerPage.
func (gen *generator) fill(id int) {
	g, r, cfg := gen.g, gen.r, gen.g.cfg
	p := g.pages[id]
	h := p.host
	if p.base == "" && r.Float64() < 0.1 {
		p.links = append(p.links, link{target: id, href: "#top"})
	}
	if r.Float64() < 0.1 {
		p.links = append(p.links, link{target: externalTarget, href: externalHrefs[r.IntN(len(externalHrefs))]})
	}
	if r.Float64() < 0.04 {
		bh := h
		if r.Float64() < cfg.CrossHostFraction && len(g.hosts) > 1 {
			bh = r.IntN(len(g.hosts))
		}
		bp := gen.addPage(bh, kindPage, fmt.Sprintf("/old/%d", len(g.hosts[bh].pages)), accessSpine)
		bp.broken = true
		gen.addLink(id, bp.id, false)
	}
	if r.Float64() < 0.15 {
		var hidden []int
		for _, hid := range g.hosts[h].pages {
			if g.pages[hid].access == accessHidden {
				hidden = append(hidden, hid)
			}
		}
		if len(hidden) > 0 {
			gen.addLink(id, gen.pick(hidden), true)
		}
	}
	for len(p.links) < cfg.LinksPerPage {
		th := h
		if len(g.hosts) > 1 && r.Float64() < cfg.CrossHostFraction {
			th = r.IntN(len(g.hosts) - 1)
			if th >= h {
				th++
			}
		}
		var dst int
		if th != h && r.Float64() < 0.3 {
			dst = g.hosts[th].pages[0]
		} else {
			dst = gen.pick(gen.linkable(th))
		}
		gen.addLink(id, dst, r.Float64() < 0.08)
	}
	for i := range p.links {
		if p.links[i].text == "" {
			p.links[i].text = fillerWords[r.IntN(len(fillerWords))] + " " + fillerWords[r.IntN(len(fillerWords))]
		}
	}
}

// makeHref chooses a textual form for link l on page p and checks that a
// browser-style resolution of it leads back to the intended target.
func (gen *generator) makeHref(p *page, l *link) error {
	g, r := gen.g, gen.r
	if l.href != "" && l.target < 0 {
		return nil
	}
	if l.href == "" {
		t := g.pages[l.target]
		baseHost, baseDir := g.hosts[p.host].name, dirOf(p.path)
		if p.base != "" {
			bu, _ := url.Parse(p.base)
			baseHost, baseDir = bu.Host, bu.Path
		}
		thost := g.hosts[t.host].name
		tpath, tquery, _ := strings.Cut(t.path, "?")
		same := thost == baseHost
		form := 0 // 0 absolute, 1 uppercase, 2 port, 3 root-relative, 4 relative
		x := r.Float64()
		if same {
			switch {
			case x < 0.35:
				form = 4
			case x < 0.6:
				form = 3
			case x < 0.8:
				form = 0
			case x < 0.9:
				form = 1
			default:
				form = 2
			}
		} else {
			switch {
			case x < 0.6:
				form = 0
			case x < 0.8:
				form = 1
			default:
				form = 2
			}
		}
		// Path decoration: duplicate slash or dot segment (never both).
		if form != 4 {
			switch x := r.Float64(); {
			case x < 0.07 && strings.Count(tpath, "/") >= 2:
				i := strings.LastIndexByte(tpath, '/')
				tpath = tpath[:i] + "/" + tpath[i:]
			case x < 0.14:
				if strings.Count(tpath, "/") >= 2 && r.IntN(2) == 0 {
					tpath = "/x/.." + tpath
				} else {
					i := strings.LastIndexByte(tpath, '/')
					tpath = tpath[:i] + "/." + tpath[i:]
				}
			}
		}
		var href string
		switch form {
		case 0:
			href = "http://" + thost + tpath
		case 1:
			href = "HTTP://" + strings.ToUpper(thost) + tpath
		case 2:
			href = "http://" + thost + ":80" + tpath
		case 3:
			href = tpath
		case 4:
			href = relativePath(baseDir, tpath)
			if !strings.HasPrefix(href, ".") && r.IntN(4) == 0 {
				href = "./" + href
			}
		}
		// Query decoration: tracking or session parameter somewhere in the query.
		q := tquery
		if r.Float64() < 0.12 {
			extra := []string{"utm_source=synth", "utm_medium=email&utm_campaign=spring", "gclid=Cj0KCQ", "fbclid=IwAR3x", "sessionid=abc123", "sid=42"}[r.IntN(6)]
			parts := []string{}
			if q != "" {
				parts = strings.Split(q, "&")
			}
			at := r.IntN(len(parts) + 1)
			parts = append(parts[:at], append([]string{extra}, parts[at:]...)...)
			q = strings.Join(parts, "&")
		}
		if q != "" {
			href += "?" + q
		}
		if r.Float64() < 0.1 {
			href += []string{"#top", "#section-2"}[r.IntN(2)]
		}
		l.href = href
	}
	// Verify.
	docURL, err := url.Parse(p.url)
	if err != nil {
		return err
	}
	if p.base != "" {
		b, err := url.Parse(p.base)
		if err != nil {
			return err
		}
		docURL = docURL.ResolveReference(b)
	}
	ref, err := url.Parse(l.href)
	if err != nil {
		return fmt.Errorf("synthweb: generated bad href %q on %s: %v", l.href, p.url, err)
	}
	got, err := Canonical(docURL.ResolveReference(ref).String())
	if err != nil || got != g.pages[l.target].url {
		return fmt.Errorf("synthweb: internal error: href %q on %s (base %q) resolves to %q, want %q (%v)",
			l.href, p.url, p.base, got, g.pages[l.target].url, err)
	}
	return nil
}

// dirOf returns the directory part of a path plus optional query: everything
// up to and including the last slash of the path.
func dirOf(pathQuery string) string {
	p, _, _ := strings.Cut(pathQuery, "?")
	return p[:strings.LastIndexByte(p, '/')+1]
}

// relativePath returns a relative reference from directory dir (ending in
// "/") to the absolute path target. It never returns "".
func relativePath(dir, target string) string {
	ds := strings.Split(strings.Trim(dir, "/"), "/")
	if dir == "/" {
		ds = nil
	}
	ts := strings.Split(target[1:], "/") // last element is the file name, maybe ""
	tdirs, name := ts[:len(ts)-1], ts[len(ts)-1]
	common := 0
	for common < len(ds) && common < len(tdirs) && ds[common] == tdirs[common] {
		common++
	}
	var b strings.Builder
	for i := common; i < len(ds); i++ {
		b.WriteString("../")
	}
	for _, s := range tdirs[common:] {
		b.WriteString(s + "/")
	}
	b.WriteString(name)
	if b.Len() == 0 {
		return "./"
	}
	return b.String()
}
