package crawl

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
)

// IsHTML reports whether a response is an HTML document worth parsing for
// links. The Content-Type header decides; only when it is missing is the
// body sniffed, because servers that send a type usually mean it and
// sniffing a PDF or an image for links is wasted work.
func IsHTML(contentType string, body []byte) bool {
	if strings.TrimSpace(contentType) == "" {
		contentType = http.DetectContentType(body)
	}
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt == "text/html" || mt == "application/xhtml+xml"
}

// ExtractLinks parses an HTML document fetched from pageURL and returns its
// followable links, normalised, deduplicated and in document order: at
// most maxLinks of them (maxLinks < 1: no cap), with the number of link
// elements dropped beyond the cap.
//
// Links come from <a href> and <area href> (xlink:href in SVG), and from
// <frame src> and <iframe src> because framed documents are pages too. They
// are resolved against <base href> when the document has one. A link is
// skipped when its rel contains "nofollow", when it is empty (the page
// itself), when it is not http(s) (mailto:, javascript:, tel:, data: ...)
// or when it does not normalise; every link is skipped when a
// <meta name="robots"> or <meta name="uaToken"> says nofollow or none.
//
// The cap counts distinct references as written: the page's first
// maxLinks distinct hrefs (after the rel and scheme filters) are kept, and
// each later link element whose href is not among them counts as capped.
// The scan goes on to the end of the document for <base> and <meta>, which
// apply to every link wherever they are, but keeps nothing else.
//
// The document is read in one pass of the HTML tokeniser (or of
// fastTokens, which read the same tokens) and no tree is built, so memory
// does not grow with the number of elements: the parse
// holds the token being read (the longest tag or run of text, at most the
// body), the references kept and the links returned. It finds what the
// HTML5 tree parser finds (raw-text elements such as script, textarea and
// noscript hold no links; the first of two attributes of a name wins),
// except that a <frame> outside a <frameset>, and links after a
// </frameset>, which the tree drops, are links here, and that inside SVG
// and MathML the scan reads as in HTML what the tree reads as foreign
// content: the content of <style>, <title> and the other raw-text elements
// is text here and markup there, a CDATA section is a comment here, and an
// href wins over an xlink:href here and not there (FuzzExtractLinks
// compares both outside those cases). Malformed HTML never panics and
// never fails.
func ExtractLinks(body []byte, pageURL *url.URL, uaToken string, maxLinks int) (links []string, capped int, err error) {
	s := newLinkScan(uaToken, maxLinks)
	if err := scanBody(body, nil, s); err != nil {
		return nil, 0, err
	}
	links, capped = s.resolve(pageURL)
	return links, capped, nil
}

// maxRefBytes is the longest href worth keeping: urls.Normalize refuses
// anything longer before looking at it.
const maxRefBytes = 8 * urls.MaxURLLength

// linkScan is what one pass over a document finds.
type linkScan struct {
	refs     []string            // distinct followable references, in document order
	kept     map[string]struct{} // refs, as a set
	max      int                 // cap on refs; 0: none
	capped   int                 // link elements dropped beyond the cap
	base     string              // the first <base href>
	hasBase  bool
	nofollow bool   // a <meta> forbids following the page's links
	uaToken  string // the robots token a <meta name> may address
}

func newLinkScan(uaToken string, maxLinks int) *linkScan {
	return &linkScan{kept: make(map[string]struct{}), max: max(maxLinks, 0), uaToken: uaToken}
}

// tag takes the current token, a start or self-closing tag of element a,
// and collects its link reference, its first <base href> and its robots
// <meta>, in the way the HTML5 tree parser would see them (the contents of
// script, style, textarea, title, noscript and the other raw-text elements
// are text to the tokeniser, and an element's first attribute of a name
// wins over later ones). The tag is told from its raw bytes by the
// caller, and only the attributes of the few tags that matter are read.
func (s *linkScan) tag(a atom.Atom, z tokenSource) {
	switch a {
	case atom.A, atom.Area, atom.Frame, atom.Iframe:
		s.link(a, z.attrs())
	case atom.Base:
		if attr := z.attrs(); attr.has&hasHref != 0 && !s.hasBase {
			s.base, s.hasBase = string(attr.href), true
		}
	case atom.Meta:
		if attr := z.attrs(); metaSaysNofollow(string(attr.name), string(attr.content), s.uaToken) {
			s.nofollow = true
		}
	}
}

// reset forgets what the scan found, for a scan of the document again
// from the start; a nil scan stays nil.
func (s *linkScan) reset() {
	if s == nil {
		return
	}
	clear(s.kept)
	*s = linkScan{refs: s.refs[:0], kept: s.kept, max: s.max, uaToken: s.uaToken}
}

// resolve returns the links the scan found, resolved against the <base
// href> or pageURL, normalised and deduplicated, and the number capped;
// none when a <meta> forbids following them.
func (s *linkScan) resolve(pageURL *url.URL) (links []string, capped int) {
	if s.nofollow {
		return nil, 0
	}
	resolveAgainst := pageURL
	if s.hasBase {
		resolveAgainst = resolveBase(s.base, pageURL)
	}
	seen := make(map[string]struct{}, len(s.refs))
	for _, ref := range s.refs {
		n, err := urls.Normalize(resolveAgainst, ref)
		if err != nil {
			continue // unusable links are normal on the web, not errors
		}
		if _, dup := seen[n]; dup {
			continue
		}
		seen[n] = struct{}{}
		links = append(links, n)
	}
	return links, s.capped
}

// link takes the reference of a link element (<a> and <area> href, or
// xlink:href in SVG; <frame> and <iframe> src), unless it has none, or its
// rel says nofollow, or the reference is not followable or already kept;
// past the cap it only counts it.
func (s *linkScan) link(a atom.Atom, attr tagAttrs) {
	var ref []byte
	switch {
	case a == atom.Frame || a == atom.Iframe:
		if attr.has&hasSrc == 0 {
			return
		}
		ref = attr.src
	case attr.has&hasHref != 0:
		ref = attr.href
	case attr.has&hasXlinkHref != 0:
		ref = attr.xlinkHref
	default:
		return
	}
	if len(bytes.TrimSpace(ref)) == 0 || relNofollow(attr.rel) || skipScheme(ref) || len(ref) > maxRefBytes {
		return
	}
	if _, dup := s.kept[string(ref)]; dup {
		return
	}
	if s.max > 0 && len(s.refs) >= s.max {
		s.capped++
		return
	}
	r := string(ref)
	s.kept[r] = struct{}{}
	s.refs = append(s.refs, r)
}

// tagAttrs are the attributes of a tag the scan looks at; has says which
// are present. The values are valid until the next token is read.
type tagAttrs struct {
	href, xlinkHref, src, rel, name, content []byte
	class, id, role, style, ariaHidden       []byte // for the main text (see mainScan)
	has                                      uint8
}

// Bits of tagAttrs.has.
const (
	hasHref = 1 << iota
	hasXlinkHref
	hasSrc
	hasHidden // the hidden attribute
)

// readAttrs reads the current tag's attributes. The tokeniser keeps only
// the first attribute of each name, as the tree parser does.
func readAttrs(z *html.Tokenizer) (a tagAttrs) {
	for more := true; more; {
		var k, v []byte
		k, v, more = z.TagAttr()
		switch string(k) {
		case "href":
			a.href, a.has = v, a.has|hasHref
		case "xlink:href":
			a.xlinkHref, a.has = v, a.has|hasXlinkHref
		case "src":
			a.src, a.has = v, a.has|hasSrc
		case "rel":
			a.rel = v
		case "name":
			a.name = v
		case "content":
			a.content = v
		case "class":
			a.class = v
		case "id":
			a.id = v
		case "role":
			a.role = v
		case "style":
			a.style = v
		case "aria-hidden":
			a.ariaHidden = v
		case "hidden":
			a.has |= hasHidden
		}
	}
	return a
}

// metaSaysNofollow reports whether one <meta name content> addresses us
// ("robots" or our token) and contains nofollow or none.
func metaSaysNofollow(name, content, uaToken string) bool {
	name = strings.ToLower(strings.TrimSpace(name))
	if name != "robots" && (uaToken == "" || name != uaToken) {
		return false
	}
	for _, d := range strings.FieldsFunc(strings.ToLower(content), isDirectiveSep) {
		if d == "nofollow" || d == "none" {
			return true
		}
	}
	return false
}

func isDirectiveSep(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }

// resolveBase returns the URL relative links resolve against: the <base
// href> (itself resolved against the page) if it is a usable http(s) URL,
// the page URL otherwise.
func resolveBase(href string, pageURL *url.URL) *url.URL {
	n, err := urls.Normalize(pageURL, href)
	if err != nil {
		return pageURL
	}
	u, err := url.Parse(n)
	if err != nil {
		return pageURL
	}
	return u
}

// relNofollow reports whether a rel attribute contains the nofollow token.
func relNofollow(rel []byte) bool {
	for len(rel) > 0 {
		i := bytes.IndexFunc(rel, func(r rune) bool { return !unicode.IsSpace(r) })
		if i < 0 {
			return false
		}
		rel = rel[i:]
		j := bytes.IndexFunc(rel, unicode.IsSpace)
		if j < 0 {
			j = len(rel)
		}
		if bytes.EqualFold(rel[:j], []byte("nofollow")) {
			return true
		}
		rel = rel[j:]
	}
	return false
}

// skipScheme filters the non-web schemes that are common in hrefs before
// they reach Normalize, where they would only produce errors to discard.
func skipScheme(ref []byte) bool {
	ref = bytes.TrimLeft(ref, " \t\r\n")
	if len(ref) < 4 {
		return false
	}
	for _, p := range [...]string{"mailto:", "javascript:", "tel:", "data:"} {
		if len(ref) >= len(p) && strings.EqualFold(string(ref[:len(p)]), p) {
			return true
		}
	}
	return false
}

// tokenSource is what scanTokens reads a document from: the tokeniser
// (htmlTokens), or fastTokens, which read the same tokens faster from a
// body held in memory. What a source returns is valid until its next
// call to next.
type tokenSource interface {
	// next reads the next token and returns its type; html.ErrorToken at
	// the end.
	next() html.TokenType
	// raw returns the current token's bytes as written.
	raw() []byte
	// text returns the text of the current text token (see tokenText).
	text() []byte
	// attrs returns the link attributes of the current start or
	// self-closing tag (see readAttrs).
	attrs() tagAttrs
}

// htmlTokens is x/net/html's tokeniser as a tokenSource.
type htmlTokens struct{ z *html.Tokenizer }

func (t htmlTokens) next() html.TokenType { return t.z.Next() }
func (t htmlTokens) raw() []byte          { return t.z.Raw() }
func (t htmlTokens) text() []byte         { return tokenText(t.z) }
func (t htmlTokens) attrs() tagAttrs      { return readAttrs(t.z) }

// scanHTML reads the tokens of an HTML document once and hands them to a
// text scan, a link scan or both (either may be nil), as scanTokens does.
// No tree is built, so memory does not grow with the number of elements:
// the tokeniser holds the token being read (the longest tag or run of
// text, at most the body), and the scans what they keep. The tokeniser is
// not known to panic; should it ever, the scans keep what they took
// before, and the panic is returned as an error.
func scanHTML(r io.Reader, text *textScan, links *linkScan) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("parse html: panic: %v", p)
		}
	}()
	scanTokens(htmlTokens{html.NewTokenizer(r)}, text, links)
	return nil
}

// scanTokens reads tokens from z and hands them to a text scan, a link
// scan or both (either may be nil): to the end of the document when it
// has a link scan, else until the text is full.
func scanTokens(z tokenSource, text *textScan, links *linkScan) {
	tag := &tagOnce{tokenSource: z}
	for links != nil || !text.done() {
		switch tt := z.next(); tt {
		case html.ErrorToken:
			return
		case html.TextToken:
			if !text.done() {
				text.textToken(z)
			}
		case html.StartTagToken, html.SelfClosingTagToken, html.EndTagToken:
			a := tagAtom(z.raw())
			tag.read = false
			if !text.done() {
				text.tagToken(tt, a, tag)
			}
			if links != nil && tt != html.EndTagToken {
				links.tag(a, tag)
			}
		}
	}
}

// tagOnce is a tokenSource that reads the attributes of the current tag
// once for both scans: the tokeniser gives them only once.
type tagOnce struct {
	tokenSource
	read bool // attr holds the current tag's attributes
	attr tagAttrs
}

func (t *tagOnce) attrs() tagAttrs {
	if !t.read {
		t.attr, t.read = t.tokenSource.attrs(), true
	}
	return t.attr
}

// parsed is what parsePage finds in a response body.
type parsed struct {
	content          // title, text and main text
	html    bool     // the body is HTML (see IsHTML)
	links   []string // followable links, when asked for (see ExtractLinks)
	capped  int      // link elements dropped beyond the cap
	err     error    // the link scan failed: links is nil
}

// parsePage extracts what a worker needs of a response body: its title,
// text and main text (see extractContent) and, when pageURL is not nil
// and the body is HTML, its links, as ExtractLinks(body, pageURL, uaToken,
// maxLinks) finds them. It reads the tokens of an HTML page once, feeding
// both; only when the page has to be transcoded to UTF-8 for its text is
// it read twice, since its links are taken from the bytes as sent, as
// ExtractLinks takes them.
func parsePage(body []byte, contentType string, pageURL *url.URL, uaToken string, maxLinks int) parsed {
	return parsePageWith(scanBody, body, contentType, pageURL, uaToken, maxLinks)
}

// A bodyScanner scans an HTML document held in memory for a text scan, a
// link scan or both, as scanHTML does: scanBody (or, in tests, the
// tokeniser alone).
type bodyScanner func(body []byte, text *textScan, links *linkScan) error

// parsePageWith is parsePage, reading the bytes of the page as sent with
// scan.
func parsePageWith(scan bodyScanner, body []byte, contentType string, pageURL *url.URL, uaToken string, maxLinks int) (p parsed) {
	kind := textKind(contentType, body)
	p.html = kind == kindHTML
	if !p.html || pageURL == nil {
		p.content = contentOf(kind, body, contentType, scan)
		return p
	}
	text, links := newTextScan(), newLinkScan(uaToken, maxLinks)
	if r, transcoded := utf8Reader(body, contentType); transcoded {
		_ = scanHTML(r, text, nil)
		p.err = scan(body, nil, links)
	} else {
		p.err = scan(body, text, links)
	}
	p.content = text.result()
	if p.err == nil {
		p.links, p.capped = links.resolve(pageURL)
	}
	return p
}
