package crawl

import (
	"bytes"
	"sort"
	"strings"
	"sync"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// mainScan finds a page's main content while its text is built, from the
// same tokens (see textScan), and chooses it once the scan is over. It is
// a streaming form of heuristics content extractors share: the container
// tree Readability scores, the block classes (content, short, links,
// boilerplate) and their context that jusText and Boilerpipe use, the
// class and id names trafilatura's rules discard.
//
//   - The text is cut into blocks at each block-level tag and table
//     cell; each block knows its kind of tag, how much of it is the text
//     of an <a href> and which container holds it.
//   - Containers are the elements that group blocks (div, section,
//     article, main, lists, tables, cells...), kept as a tree of spans of
//     the text. A container is boilerplate when its tag (nav, aside,
//     footer, a header outside content), role (navigation, banner...),
//     hidden, aria-hidden or display:none, or its class or id (comment,
//     sidebar, menu, share, cookie, breadcrumb, related, newsletter, ad,
//     ...) says so. A class or id that says so is believed only of a
//     container that is small or full of links (sites put such names on
//     wrappers: "has-sidebar", "with-ads"), and no mark of a container
//     holding a long content container (an <article> not made of links)
//     is believed.
//   - A block is content when it has some length and under a third of
//     links, and is worth its length less twice its links; a block of
//     links costs its length, one inside boilerplate a quarter of it.
//     The chosen container is the one whose blocks are worth the most
//     (an <article>, a content class a quarter more), inside <main> or
//     role=main when that holds content.
//   - In it the main text is the run of blocks worth the most that starts
//     and ends with content, boilerplate now at its full cost (what
//     trails the article past a block of links or boilerplate is left
//     out): its content blocks, short blocks amid content and headings
//     that lead to content.
//
// A page with no content block keeps the simpler reading: the text inside
// <main>, else the text outside header, nav, footer and aside, else all
// of it.
//
// Memory is bounded whatever the page: at most maxBlocks blocks and
// maxContainers containers are kept, and the open containers are a stack
// of at most maxDepth; what passes the bounds joins the last block or
// container kept.
type mainScan struct {
	stack  [maxDepth]frame
	depth  int // open containers on the stack
	extra  int // containers opened past maxDepth, not kept
	conts  []container
	blocks []block

	blockStart int32 // text offset where the current block starts
	blockLinks int32 // link bytes before the current block
	blockKind  atom.Atom
	links      int32 // text bytes written inside <a> so far
	inLink     bool  // inside an <a href>

	// choose's scratch, kept between pages with the rest.
	kinds                                   []int8
	sum                                     []int64
	lo, hi                                  []int
	inMain, boiler, inContent, holdsContent []bool
}

// reuse returns *s cleared and resized to n, growing it if need be.
func reuse[T any](s *[]T, n int) []T {
	if cap(*s) < n {
		*s = make([]T, n)
	}
	*s = (*s)[:n]
	clear(*s)
	return *s
}

// Bounds of a mainScan.
const (
	maxDepth      = 64
	maxContainers = 4096
	maxBlocks     = 16384
)

// frame is an open container.
type frame struct {
	a    atom.Atom
	cont int32 // its index in conts
}

// container is an element grouping blocks, and its span of the text.
type container struct {
	parent             int32 // index in conts; -1 for the root
	start, end         int32 // text offsets; end -1 while open
	linkStart, linkEnd int32 // link bytes before start and before end
	a                  atom.Atom
	hint               int8 // hintBoiler, hintNamedBoiler, hintHeader, hintContent or 0
	main               bool // a <main> or role=main
}

// Container hints.
const (
	hintBoiler      = -1 // by tag, role or a comment class
	hintNamedBoiler = -2 // by class or id
	hintHeader      = -3 // a header, boilerplate outside content
	hintContent     = 1
)

// block is a run of text between block-level tags.
type block struct {
	start, end int32 // text offsets
	links      int32 // bytes of link text in it
	cont       int32 // the innermost open container
	kind       atom.Atom
}

// mainBufs keeps mainScans' slices between pages.
var mainBufs = sync.Pool{New: func() any { return new(mainScan) }}

// start sets the scan going for a text that starts empty: the whole
// document is the root container.
func (m *mainScan) start() {
	keep := mainScan{conts: m.conts[:0], blocks: m.blocks[:0], kinds: m.kinds, sum: m.sum, lo: m.lo, hi: m.hi,
		inMain: m.inMain, boiler: m.boiler, inContent: m.inContent, holdsContent: m.holdsContent}
	*m = keep
	m.conts = append(m.conts, container{parent: -1, end: -1})
	m.stack[0] = frame{cont: 0}
	m.depth = 1
}

// containerElement reports whether an element groups blocks.
func containerElement(a atom.Atom) bool {
	switch a {
	case atom.Div, atom.Section, atom.Article, atom.Main, atom.Header, atom.Footer,
		atom.Nav, atom.Aside, atom.Ul, atom.Ol, atom.Dl, atom.Table, atom.Td, atom.Th,
		atom.Form, atom.Center, atom.Blockquote, atom.Figure, atom.Details, atom.Fieldset,
		atom.Menu, atom.Dialog:
		return true
	}
	return false
}

// wrote counts n bytes of text just written.
func (m *mainScan) wrote(n int) {
	if m.inLink {
		m.links += int32(n)
	}
}

// tag takes a tag (tt) of element a at text offset at; z gives the
// attributes of a start tag (of links and containers only).
func (m *mainScan) tag(tt html.TokenType, a atom.Atom, at int, z tokenSource) {
	switch {
	case a == atom.A:
		// An <a> ends the one before it; only one with an href is a link.
		switch tt {
		case html.StartTagToken:
			m.inLink = z.attrs().has&hasHref != 0
		case html.EndTagToken:
			m.inLink = false
		}
		return
	case containerElement(a):
		m.boundary(at, a, tt)
		if tt == html.StartTagToken {
			if (a == atom.Td || a == atom.Th) && m.depth > 1 {
				// A cell ends the cell before it, closed or not.
				if top := m.stack[m.depth-1].a; top == atom.Td || top == atom.Th {
					m.pop(m.depth-1, at)
				}
			}
			m.push(a, at, z)
		} else if tt == html.EndTagToken {
			m.close(a, at)
		}
	case blockElement(a):
		m.boundary(at, a, tt)
	}
}

// boundary ends the current block at offset at; a start tag of a names
// the kind of the next.
func (m *mainScan) boundary(at int, a atom.Atom, tt html.TokenType) {
	end := int32(at)
	if end > m.blockStart {
		if len(m.blocks) < maxBlocks {
			m.blocks = append(m.blocks, block{
				start: m.blockStart, end: end, links: m.links - m.blockLinks,
				cont: m.stack[m.depth-1].cont, kind: m.blockKind,
			})
		} else {
			// Past the bound the last block grows to hold the rest.
			b := &m.blocks[len(m.blocks)-1]
			b.end, b.links = end, b.links+m.links-m.blockLinks
		}
		m.blockStart, m.blockLinks = end, m.links
	}
	if tt == html.StartTagToken {
		m.blockKind = a
	} else {
		m.blockKind = 0
	}
}

// push opens a container a at offset at.
func (m *mainScan) push(a atom.Atom, at int, z tokenSource) {
	if m.depth == maxDepth || len(m.conts) == maxContainers {
		m.extra++
		return
	}
	attr := z.attrs()
	m.conts = append(m.conts, container{
		parent: m.stack[m.depth-1].cont, start: int32(at), end: -1,
		linkStart: m.links, a: a, hint: containerHint(a, attr),
		main: a == atom.Main || string(attr.role) == "main",
	})
	m.stack[m.depth] = frame{a: a, cont: int32(len(m.conts) - 1)}
	m.depth++
}

// close closes the innermost open container a, and those opened inside
// it and left open; an end tag that closes none is ignored.
func (m *mainScan) close(a atom.Atom, at int) {
	for i := m.depth - 1; i >= 1 && i >= m.depth-16; i-- {
		if m.stack[i].a == a {
			m.pop(i, at)
			return
		}
	}
	if m.extra > 0 {
		m.extra--
	}
}

// pop closes the containers from the top of the stack down to index i.
func (m *mainScan) pop(i, at int) {
	for m.depth > i {
		m.depth--
		c := &m.conts[m.stack[m.depth].cont]
		c.end, c.linkEnd = int32(at), m.links
	}
}

// finish ends the last block and closes every container at the end of a
// text of n bytes.
func (m *mainScan) finish(n int) {
	m.boundary(n, 0, html.EndTagToken)
	m.pop(0, n)
}

// containerHint tells boilerplate and content containers by their tag,
// role, class and id.
func containerHint(a atom.Atom, attr tagAttrs) int8 {
	switch a {
	case atom.Footer, atom.Nav, atom.Aside, atom.Menu, atom.Dialog:
		return hintBoiler
	case atom.Header:
		if classHint(attr.class, attr.id) == hintContent {
			return 0
		}
		return hintHeader
	case atom.Article, atom.Main:
		return hintContent
	}
	if attr.has&hasHidden != 0 || hidden(attr.style) || string(attr.ariaHidden) == "true" {
		return hintBoiler // not shown
	}
	switch string(attr.role) {
	case "navigation", "banner", "contentinfo", "complementary", "menu", "menubar", "search", "dialog":
		return hintBoiler
	case "main", "article":
		return hintContent
	}
	return classHint(attr.class, attr.id)
}

// hidden reports whether a style attribute hides its element.
func hidden(style []byte) bool {
	for i := 0; i+7 <= len(style); i++ {
		if style[i]|0x20 != 'd' || !equalASCIIFold(style[i:i+7], "display") {
			continue
		}
		rest := bytes.TrimLeft(style[i+7:], " \t\n\r\f")
		if len(rest) == 0 || rest[0] != ':' {
			continue
		}
		rest = bytes.TrimLeft(rest[1:], " \t\n\r\f")
		if len(rest) >= 4 && equalASCIIFold(rest[:4], "none") {
			return true
		}
	}
	return false
}

// classHint reads a container's class and id for what sites call their
// boilerplate and their content. Comment sections are boilerplate
// whatever else the names say; other boilerplate names lose to content
// names ("content-sidebar" is content).
func classHint(class, id []byte) int8 {
	if len(class) == 0 && len(id) == 0 {
		return 0
	}
	var buf [128]byte
	names := lowerInto(buf[:0], class)
	names = append(names, ' ')
	names = lowerInto(names, id)
	var found uint8
	for i := 0; i+1 < len(names); i++ {
		g := namePrefix[uint16(names[i])<<8|uint16(names[i+1])]
		if g == 0 {
			continue
		}
		for _, n := range nameGroups[g-1] {
			if len(names)-i < len(n.s) || string(names[i:i+len(n.s)]) != n.s {
				continue
			}
			if n.kind == nameComment && bytes.HasPrefix(names[i+len(n.s):], []byte("ary")) {
				continue // a commentary is an article
			}
			found |= n.kind
		}
	}
	if found&nameComment != 0 {
		return hintBoiler
	}
	if found&nameBoiler == 0 && hasWord(names, boilerWords) {
		found |= nameBoiler
	}
	switch found {
	case nameBoiler:
		return hintNamedBoiler
	case nameContent:
		return hintContent
	}
	return 0
}

// A class or id name's kinds.
const (
	nameComment = 1 << iota
	nameBoiler
	nameContent
)

// namePat is one of commentNames, boilerNames and contentNames.
type namePat struct {
	s    string
	kind uint8
}

// nameGroups holds the names by their first two letters, and namePrefix
// the index in nameGroups, plus one, of the group of two letters (0 for
// none): a class or id is read once for all the names, most of its
// letters with one look-up.
var nameGroups, namePrefix = func() (groups [][]namePat, prefix *[1 << 16]uint8) {
	prefix = new([1 << 16]uint8)
	for kind, list := range map[uint8][]string{nameComment: commentNames, nameBoiler: boilerNames, nameContent: contentNames} {
		for _, s := range list {
			k := uint16(s[0])<<8 | uint16(s[1])
			if prefix[k] == 0 {
				groups = append(groups, nil)
				prefix[k] = uint8(len(groups))
			}
			groups[prefix[k]-1] = append(groups[prefix[k]-1], namePat{s, kind})
		}
	}
	return groups, prefix
}()

var (
	// commentNames mark reader comments, boilerplate in any container.
	commentNames = []string{"comment", "komment", "disqus", "respond", "replies", "community"}
	// boilerNames mark boilerplate wherever they are in a name.
	boilerNames = []string{
		"footer", "sidebar", "menu", "navigation", "navbar", "breadcrumb", "share",
		"social", "cookie", "consent", "related", "advert",
		"sponsor", "promo", "newsletter", "subscri", "pagination", "pager",
		"popup", "modal", "masthead", "skyscraper", "shoutbox", "outbrain",
		"taboola", "recommend", "toolbar", "login", "signup", "copyright",
		"author", "byline", "button", "rating", "timestamp", "user-info",
		"profile", "attachment", "viral", "syndication", "embed", "tag-list",
		"popular", "-stories", "overlay", "paywall", "credit", "subnav", "teaser", "dateline", "meta", "tags", "disclaimer",
	}
	// boilerWords mark boilerplate as whole words of a name (split at
	// anything but letters and digits): short, they are parts of others.
	boilerWords = []string{"ad", "ads", "nav", "rss", "search", "date", "bio", "more"}
	// contentNames mark content.
	contentNames = []string{"article", "content", "post", "entry", "story", "main", "blog"}
)

// lowerInto appends b, ASCII-lowercased and cut to fit dst's capacity.
func lowerInto(dst, b []byte) []byte {
	for _, c := range b {
		if len(dst) == cap(dst) {
			break
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// hasWord reports whether s, split at anything but ASCII letters and
// digits, has one of words.
func hasWord(s []byte, words []string) bool {
	for i := 0; i < len(s); {
		for i < len(s) && !isAlnum(s[i]) {
			i++
		}
		j := i
		for j < len(s) && isAlnum(s[j]) {
			j++
		}
		if j > i {
			for _, x := range words {
				if string(s[i:j]) == x {
					return true
				}
			}
		}
		i = j
	}
	return false
}

func isAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// Tuning of the choice of content.
const (
	minGoodBlock   = 40  // bytes of text a block needs to count as content
	minContentHeld = 400 // bytes of text of a content container that outweighs a boilerplate mark around it
	boilerCost     = 4   // a block of boilerplate costs 1/boilerCost of its length
	contentBonus   = 4   // a content container is worth 1/contentBonus more
)

// choose returns the spans of text (start and end offsets, in order) that
// are the page's main content, or none when no block is content. It is
// called once, after finish.
func (m *mainScan) choose(text string) [][2]int32 {
	n := int32(len(text))
	conts, blocks := m.conts, m.blocks
	for i := range conts {
		if conts[i].end < 0 {
			conts[i].end, conts[i].linkEnd = n, m.links
		}
	}
	boiler := m.boilerplate(n)
	// Each block is worth its length when it is content, and costs it
	// when it is boilerplate or mostly links; sum[i] is the worth of the
	// blocks before block i.
	kinds := reuse(&m.kinds, len(blocks))
	sum := reuse(&m.sum, len(blocks)+1)
	good := false
	for i, b := range blocks {
		k, v := blockKind(b, text, boiler[b.cont])
		kinds[i] = k
		good = good || k == kindGood
		sum[i+1] = sum[i] + v
	}
	if !good {
		return nil
	}
	// The content is the container whose blocks are worth the most (the
	// innermost of equals), inside <main> when that holds content: the
	// page says where its content is, and what outside scores more is
	// a dialog or a list of other pages.
	best, bestWorth := 0, int64(0)
	bestMain, bestMainWorth := -1, int64(0)
	lo, hi := reuse(&m.lo, len(conts)), reuse(&m.hi, len(conts)) // each container's first block and past its last
	inMain := reuse(&m.inMain, len(conts))
	for i := range conts {
		c := &conts[i]
		inMain[i] = c.main || (c.parent >= 0 && inMain[c.parent])
		lo[i] = firstBlockAt(blocks, c.start)
		hi[i] = firstBlockAt(blocks, c.end)
		if boiler[i] {
			continue
		}
		w := sum[hi[i]] - sum[lo[i]]
		if c.hint == hintContent && w > 0 {
			w += w / contentBonus
		}
		if w >= bestWorth {
			best, bestWorth = i, w
		}
		if inMain[i] && w > 0 && w >= bestMainWorth {
			bestMain, bestMainWorth = i, w
		}
	}
	if bestMain >= 0 {
		best = bestMain
	}
	// Its blocks that are content, and the short ones between content.
	// Within the container, the run of blocks worth the most, with
	// boilerplate at its full cost: content set apart from the rest by
	// boilerplate or links (an author's note, a newsletter's pitch) is
	// left out unless it is worth more than what separates it.
	first, last := densestRun(blocks[lo[best]:hi[best]], kinds[lo[best]:hi[best]])
	if first < 0 {
		return nil
	}
	first, last = first+lo[best], last+lo[best]
	var spans [][2]int32
	for i := lo[best]; i < hi[best]; i++ {
		switch k := kinds[i]; {
		case k == kindGood:
		case k == kindShort && i > first && i < last && amidContent(kinds, i):
		case k == kindHeading && i < last && headsContent(kinds[i+1:last+1]):
		default:
			continue
		}
		b := blocks[i]
		if l := len(spans); l > 0 && spans[l-1][1] == b.start {
			spans[l-1][1] = b.end
		} else {
			spans = append(spans, [2]int32{b.start, b.end})
		}
	}
	return spans
}

// boilerplate tells which containers are boilerplate, in a text of n
// bytes.
func (m *mainScan) boilerplate(n int32) []bool {
	conts := m.conts
	// A container is boilerplate when it or one above is marked so: by
	// its tag, role or as comments, unless it holds most of the text; by
	// another class or id, when it holds under a quarter of the text or is
	// full of links (sites put such names on wrappers: "has-sidebar",
	// "with-ads"); as a header, outside content.
	boiler := reuse(&m.boiler, len(conts))
	inContent := reuse(&m.inContent, len(conts))
	// holdsContent: a container holds a content container of some length
	// that is not a list of links (not the teasers of other pages): a
	// boilerplate mark around it is a mistake or markup left open.
	holdsContent := reuse(&m.holdsContent, len(conts))
	for i := len(conts) - 1; i > 0; i-- {
		c := &conts[i]
		l := c.end - c.start
		if holdsContent[i] || (c.hint == hintContent && l >= minContentHeld && 4*(c.linkEnd-c.linkStart) < l) {
			holdsContent[c.parent] = true
		}
	}
	for i := range conts {
		c := &conts[i]
		l := c.end - c.start
		var own, parentContent bool
		if c.parent >= 0 {
			parentContent = inContent[c.parent]
		}
		switch {
		case holdsContent[i]:
		case c.hint == hintBoiler:
			own = 4*l < 3*n
		case c.hint == hintNamedBoiler:
			own = 4*l < n || 4*(c.linkEnd-c.linkStart) > l
		case c.hint == hintHeader:
			own = !parentContent && 4*l < 3*n
		}
		inContent[i] = parentContent || c.hint == hintContent
		boiler[i] = own || (c.parent >= 0 && boiler[c.parent])
	}
	return boiler
}

// Kinds of block.
const (
	kindBad = iota
	kindGood
	kindShort
	kindHeading
	kindLinks // mostly links
)

// blockKind classifies a block and tells its worth.
func blockKind(b block, text string, boiler bool) (kind int8, worth int64) {
	l := int64(b.end - b.start)
	switch {
	case boiler:
		// Left out of the main text whatever container is chosen.
		return kindBad, -l / boilerCost
	case b.kind == atom.Figcaption:
		// Captions are mostly credits and the pictures' own.
		return kindBad, -l
	case 3*int64(b.links) > l:
		return kindLinks, -l
	case isHeading(b.kind):
		return kindHeading, 0
	case l-int64(b.links) < minGoodBlock:
		return kindShort, 0
	}
	return kindGood, l - 2*int64(b.links)
}

// densestRun returns the first and last block of the run of blocks worth
// the most that starts and ends with content, or -1, -1 when there is no
// content.
func densestRun(blocks []block, kinds []int8) (first, last int) {
	first, last = -1, -1
	var best, cur int64
	start := -1
	for i, b := range blocks {
		k := kinds[i]
		if start < 0 {
			if k != kindGood {
				continue
			}
			start, cur = i, 0
		}
		l := int64(b.end - b.start)
		switch k {
		case kindGood:
			cur += l - 2*int64(b.links)
		case kindBad, kindLinks:
			cur -= l
		}
		if cur <= 0 {
			start = -1
		} else if k == kindGood && cur > best {
			best, first, last = cur, start, i
		}
	}
	return first, last
}

// amidContent reports whether the short block i is among content: the
// blocks on either side of it are neither boilerplate nor links.
func amidContent(kinds []int8, i int) bool {
	ok := func(k int8) bool { return k != kindBad && k != kindLinks }
	return ok(kinds[i-1]) && ok(kinds[i+1])
}

// headsContent reports whether the blocks after a heading start with
// content, after any headings and short blocks.
func headsContent(after []int8) bool {
	for _, k := range after {
		switch k {
		case kindGood:
			return true
		case kindBad, kindLinks:
			return false
		}
	}
	return false
}

// firstBlockAt returns the index of the first block that starts at or
// after offset at.
func firstBlockAt(blocks []block, at int32) int {
	return sort.Search(len(blocks), func(i int) bool { return blocks[i].start >= at })
}

func isHeading(a atom.Atom) bool {
	switch a {
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		return true
	}
	return false
}

// joinSpans joins the spans of t, trimmed, one line each. A single span
// is a substring of t, not a copy.
func joinSpans[T int | int32](t string, sp [][2]T) string {
	n, parts, one := 0, 0, ""
	for _, s := range sp {
		if part := strings.TrimSpace(t[s[0]:s[1]]); part != "" {
			n, parts, one = n+len(part)+1, parts+1, part
		}
	}
	if parts <= 1 {
		return one
	}
	var b strings.Builder
	b.Grow(n)
	for _, s := range sp {
		part := strings.TrimSpace(t[s[0]:s[1]])
		if part == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(part)
	}
	return b.String()
}
