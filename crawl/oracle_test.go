package crawl

// The oracle of the single pass: ExtractLinks and extractContent as they
// were before one pass of the tokeniser fed both (commit 29fbdf6), a
// links-only scan of the raw body and a text-only scan of the body decoded
// to UTF-8, kept verbatim with their own text builder. The golden and
// differential tests compare the single pass with them.

import (
	"bytes"
	"fmt"
	"io"
	"net/url"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
)

// oracleLinks is ExtractLinks before the single pass.
func oracleLinks(body []byte, pageURL *url.URL, uaToken string, maxLinks int) (links []string, capped int, err error) {
	defer func() {
		if r := recover(); r != nil {
			links, capped, err = nil, 0, fmt.Errorf("parse html: panic: %v", r)
		}
	}()
	s := oracleScanLinks(body, uaToken, maxLinks)
	if s.nofollow {
		return nil, 0, nil
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
	return links, s.capped, nil
}

// oracleLinkScan is what one pass over a document finds.
type oracleLinkScan struct {
	refs     []string            // distinct followable references, in document order
	kept     map[string]struct{} // refs, as a set
	max      int                 // cap on refs; 0: none
	capped   int                 // link elements dropped beyond the cap
	base     string              // the first <base href>
	hasBase  bool
	nofollow bool // a <meta> forbids following the page's links
}

// oracleScanLinks is scanLinks before the single pass.
func oracleScanLinks(body []byte, uaToken string, maxLinks int) *oracleLinkScan {
	s := &oracleLinkScan{kept: make(map[string]struct{}), max: max(maxLinks, 0)}
	z := html.NewTokenizer(bytes.NewReader(body))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return s
		case html.StartTagToken, html.SelfClosingTagToken:
		default:
			continue
		}
		// The tokeniser's TagName and TagAttr copy what they return; the
		// tag is told from its raw bytes, and only the attributes of the
		// few tags that matter are read.
		switch a := tagAtom(z.Raw()); a {
		case atom.A, atom.Area, atom.Frame, atom.Iframe:
			s.link(a, readAttrs(z))
		case atom.Base:
			if attr := readAttrs(z); attr.has&hasHref != 0 && !s.hasBase {
				s.base, s.hasBase = string(attr.href), true
			}
		case atom.Meta:
			if attr := readAttrs(z); metaSaysNofollow(string(attr.name), string(attr.content), uaToken) {
				s.nofollow = true
			}
		}
	}
}

// link takes the reference of a link element (<a> and <area> href, or
// xlink:href in SVG; <frame> and <iframe> src), unless it has none, or its
// rel says nofollow, or the reference is not followable or already kept;
// past the cap it only counts it.
func (s *oracleLinkScan) link(a atom.Atom, attr tagAttrs) {
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

// oracleContent is extractContent before the single pass.
func oracleContent(body []byte, contentType string) content {
	switch textKind(contentType, body) {
	case kindHTML:
		r, _ := utf8Reader(body, contentType)
		return oracleHTML(r)
	case kindPlain:
		// Two bytes per character are enough input for the cap in any
		// charset a server would send.
		if len(body) > 2*MaxTextBytes+4096 {
			body = body[:2*MaxTextBytes+4096]
		}
		t := extractPlain(toUTF8(body, contentType))
		return content{text: t, main: t}
	default:
		return content{}
	}
}

// oracleHTML is extractHTML before the single pass. The main text it
// chooses with the same mainScan (it has no older form to compare with),
// fed from this token loop: what it shows is that the single pass hands
// mainScan the same tags, attributes and text offsets. What mainScan
// chooses is held to the annotated set (TestMainTextAnnotatedSet) and to
// TestMainText* cases.
func oracleHTML(body io.Reader) (c content) {
	textBuf := oracleTextBuilder{limit: MaxTextBytes}
	titleBuf := oracleTextBuilder{limit: maxTitleBytes}
	// The main text is kept as spans of the text: outside those outside
	// boilerplate elements, inMain those also inside <main>, for a page
	// where mainScan finds no content.
	var outside, inMain spans
	m := mainBufs.Get().(*mainScan)
	m.start()
	result := func() content {
		c := content{title: titleBuf.String(), text: textBuf.String()}
		m.finish(len(c.text))
		c.main = joinSpans(c.text, m.choose(c.text))
		mainBufs.Put(m)
		if c.main != "" {
			return c
		}
		outside.close(len(textBuf.b))
		inMain.close(len(textBuf.b))
		c.main = oracleSpansText(&inMain, textBuf.b)
		if c.main == "" {
			c.main = oracleSpansText(&outside, textBuf.b)
		}
		if c.main == "" {
			c.main = c.text
		}
		return c
	}
	defer func() {
		// The tokeniser is not known to panic; should it ever, the text
		// gathered so far is still the best answer.
		if recover() != nil {
			c = result()
		}
	}()
	z := html.NewTokenizer(body)
	var (
		open      [16]int // open skipped elements, by slot
		skipping  int     // sum of open
		pre       int     // open pre/listing/plaintext elements
		inTitle   bool
		titleDone bool
		boiler    int // open boilerplate elements
		mains     int // open main elements
	)
	outside.open(0)
	for !textBuf.full {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return result()
		case html.TextToken:
			switch {
			case skipping > 0:
			case inTitle:
				if !titleDone {
					titleBuf.write(tokenText(z), false)
				}
			default:
				n := len(textBuf.b)
				textBuf.write(tokenText(z), pre > 0)
				m.wrote(len(textBuf.b) - n)
			}
		case html.StartTagToken, html.SelfClosingTagToken, html.EndTagToken:
			a := tagAtom(z.Raw())
			start := tt != html.EndTagToken
			if skipping == 0 && !inTitle {
				m.tag(tt, a, len(textBuf.b), htmlTokens{z})
			}
			switch {
			case skippedRaw(a):
				// A raw element's contents run to its end tag even when
				// it is written self-closing.
				if start {
					open[slot(a)]++
					skipping++
				} else if open[slot(a)] > 0 {
					open[slot(a)]--
					skipping--
				}
			case skippedNested(a):
				if tt == html.StartTagToken {
					open[slot(a)]++
					skipping++
				} else if tt == html.EndTagToken && open[slot(a)] > 0 {
					open[slot(a)]--
					skipping--
				}
			case a == atom.Title:
				// <title> is raw text to the tokeniser wherever it is,
				// so its contents always end at </title>. One inside a
				// skipped element (an svg icon's) is dropped with it.
				if start {
					inTitle = true
				} else if inTitle {
					inTitle = false
					titleDone = titleDone || len(titleBuf.b) > 0
				}
			case a == atom.Td || a == atom.Th:
				textBuf.space()
			case blockElement(a):
				textBuf.lineBreak()
				switch {
				case boilerplate(a) && tt == html.StartTagToken:
					boiler++
				case boilerplate(a) && tt == html.EndTagToken && boiler > 0:
					boiler--
				case a == atom.Main && tt == html.StartTagToken:
					mains++
				case a == atom.Main && tt == html.EndTagToken && mains > 0:
					mains--
				}
				at := len(textBuf.b)
				outside.set(boiler == 0, at)
				inMain.set(boiler == 0 && mains > 0, at)
				if a == atom.Pre || a == atom.Listing || a == atom.Plaintext {
					if tt == html.StartTagToken {
						pre++
					} else if tt == html.EndTagToken && pre > 0 {
						pre--
					}
				}
			}
		}
	}
	return result()
}

// oracleTextBuilder accumulates text with collapsed whitespace and line breaks,
// up to a byte limit.
type oracleTextBuilder struct {
	b        []byte
	limit    int
	full     bool // the limit was reached; further text is dropped
	spaceDue bool // a space is due before the next character
	lineDue  bool // a line break is due before the next character
}

// String returns the text so far.
func (t *oracleTextBuilder) String() string { return string(t.b) }

// space asks for a space before the next character.
func (t *oracleTextBuilder) space() { t.spaceDue = true }

// lineBreak asks for a line break before the next character.
func (t *oracleTextBuilder) lineBreak() { t.lineDue = true }

// write appends text, collapsing whitespace. With keepLines, newlines
// become line breaks instead of spaces. Control characters are dropped and
// invalid UTF-8 becomes U+FFFD.
func (t *oracleTextBuilder) write(s []byte, keepLines bool) {
	for i := 0; i < len(s) && !t.full; {
		c := s[i]
		r, size := rune(c), 1
		if c >= utf8.RuneSelf {
			r, size = utf8.DecodeRune(s[i:])
		}
		i += size
		switch {
		case r == '\n' && keepLines:
			t.lineDue = true
		case r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == '\v' ||
			(r >= utf8.RuneSelf && unicode.IsSpace(r)):
			t.spaceDue = true
		case r < ' ' || r == 0x7f || (r >= 0x80 && r < 0xa0):
			// Control characters are invisible.
		default:
			t.appendRune(r, size)
		}
	}
}

// appendRune appends r (encoded in size bytes, or invalid) after any due
// separator, unless that would pass the limit.
func (t *oracleTextBuilder) appendRune(r rune, size int) {
	if r == utf8.RuneError {
		size = 3 // written as the encoded U+FFFD
	}
	sep := len(t.b) > 0 && (t.lineDue || t.spaceDue)
	need := size
	if sep {
		need++
	}
	if len(t.b)+need > t.limit {
		t.full = true
		return
	}
	if sep {
		if t.lineDue {
			t.b = append(t.b, '\n')
		} else {
			t.b = append(t.b, ' ')
		}
	}
	t.lineDue, t.spaceDue = false, false
	t.b = utf8.AppendRune(t.b, r)
}

// oracleSpansText is spans.text before the single pass.
func oracleSpansText(s *spans, b []byte) string {
	n := 0
	for _, sp := range s.done {
		n += sp[1] - sp[0] + 1
	}
	out := make([]byte, 0, n)
	for _, sp := range s.done {
		part := bytes.TrimSpace(b[sp[0]:sp[1]])
		if len(part) == 0 {
			continue
		}
		if len(out) > 0 {
			out = append(out, '\n')
		}
		out = append(out, part...)
	}
	return string(out)
}
