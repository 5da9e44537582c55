package crawl

import (
	"bytes"
	"encoding/binary"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"
)

// MaxTextBytes caps the text ExtractText returns. Text beyond it is
// dropped, cut at a character boundary: a page's first megabyte of prose is
// plenty for fingerprints and search, and the cap keeps a huge page from
// making a huge WARC conversion record.
const MaxTextBytes = 1 << 20

// maxTitleBytes caps the title ExtractText returns.
const maxTitleBytes = 1024

// ExtractText returns the title and the visible text of a response body.
//
// HTML (text/html or application/xhtml+xml, or a body that sniffs as HTML
// when contentType is empty) is decoded to UTF-8 from the charset its
// Content-Type, byte order mark or <meta> declares, and tokenised once, so
// the cost is linear in the size of the body whatever its shape. The text
// leaves out the contents of script, style, noscript, template, svg, math,
// iframe, noembed and noframes elements and the title; each block-level
// element (p, div, li, h1-h6, tr, br, section, article...) starts a new
// line, table cells are separated by a space, runs of whitespace collapse to
// one space (newlines are kept inside pre), lines are trimmed and empty lines
// dropped, and character references are decoded. The title is the first
// <title> outside svg, with whitespace collapsed, capped at 1 KiB.
//
// text/plain is decoded to UTF-8 the same way, CRLF line ends become LF, and
// the result is trimmed. Any other type returns "", "".
//
// Both results are valid UTF-8 and the text is capped at MaxTextBytes.
// Malformed, truncated or binary input never panics; it yields whatever text
// the HTML tokeniser recovers from it.
func ExtractText(body []byte, contentType string) (title, text string) {
	c := extractContent(body, contentType)
	return c.title, c.text
}

// content is what extractContent finds in a body: ExtractText's title and
// text, and the page's main text, the part of the text that is the page's
// own rather than what it shares with the other pages of its site.
type content struct {
	title, text, main string
}

// extractContent extracts a body's title, text and main text in one pass.
// The main text of an HTML page is the part of its text that is its
// content, without the navigation, headers, footers, sidebars, comments,
// link lists and hidden dialogs around it (see mainScan); a page without
// content blocks has its text inside <main>, else outside header, nav,
// footer and aside, else its whole text as main text. Plain text is all
// main text.
func extractContent(body []byte, contentType string) content {
	return contentOf(textKind(contentType, body), body, contentType, scanBody)
}

// contentOf is extractContent of a body of the kind given, whose bytes as
// sent, when they need no transcoding, are read with scan.
func contentOf(kind int, body []byte, contentType string, scan bodyScanner) content {
	switch kind {
	case kindHTML:
		// The tokeniser is not known to panic; should it ever, the text
		// gathered so far is still the best answer.
		s := newTextScan()
		if r, transcoded := utf8Reader(body, contentType); transcoded {
			_ = scanHTML(r, s, nil)
		} else {
			_ = scan(body, s, nil)
		}
		return s.result()
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

// Kinds of body ExtractText knows.
const (
	kindOther = iota
	kindHTML
	kindPlain
)

// textKind classifies a body by its media type, sniffing only when the type
// is missing (as IsHTML does).
func textKind(contentType string, body []byte) int {
	if strings.TrimSpace(contentType) == "" {
		contentType = http.DetectContentType(body)
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		// A malformed parameter does not hide a usable media type.
		mt, _, _ = strings.Cut(contentType, ";")
		mt = strings.ToLower(strings.TrimSpace(mt))
	}
	switch mt {
	case "text/html", "application/xhtml+xml":
		return kindHTML
	case "text/plain":
		return kindPlain
	default:
		return kindOther
	}
}

// toUTF8 transcodes body to UTF-8 when its declared or detected charset is
// another one. The result may still hold invalid UTF-8, which the text
// builder replaces.
func toUTF8(body []byte, contentType string) []byte {
	enc, name, _ := charset.DetermineEncoding(body, contentType)
	if enc == nil || !transcodes(name, body) {
		return body
	}
	out, err := enc.NewDecoder().Bytes(body)
	if err != nil {
		return body
	}
	return out
}

// utf8Reader reads body as UTF-8 (see toUTF8), transcoding it on the fly
// as the tokeniser asks for more: a page is never copied whole, and a
// scan for text alone stops reading once the text is full. transcoded
// says whether the reader decodes, or reads body as it is.
func utf8Reader(body []byte, contentType string) (r io.Reader, transcoded bool) {
	enc, name, _ := charset.DetermineEncoding(body, contentType)
	if enc == nil || !transcodes(name, body) {
		return bytes.NewReader(body), false
	}
	return enc.NewDecoder().Reader(bytes.NewReader(body)), true
}

// transcodes reports whether a body in the charset named needs converting
// to UTF-8: not when it is UTF-8, nor when the charset agrees with ASCII
// on ASCII bytes (all but UTF-16 do) and the body is all ASCII, as most
// pages without a declaration are.
func transcodes(name string, body []byte) bool {
	return name != "utf-8" && (strings.HasPrefix(name, "utf-16") || !isASCII(body))
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// extractPlain cleans up a text/plain body.
func extractPlain(body []byte) string {
	if len(body) > MaxTextBytes+4096 {
		// Leave room for the CR and whitespace that are trimmed below.
		body = body[:MaxTextBytes+4096]
	}
	s := strings.ToValidUTF8(string(body), "\uFFFD")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.TrimSpace(s)
	return truncateUTF8(s, MaxTextBytes)
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Elements whose contents are not visible text. The raw ones make the
// tokeniser read everything up to their end tag as one text token, even
// when written self-closing; the others nest normally.
func skippedRaw(a atom.Atom) bool {
	switch a {
	case atom.Script, atom.Style, atom.Noscript, atom.Iframe, atom.Noembed, atom.Noframes:
		return true
	}
	return false
}

func skippedNested(a atom.Atom) bool {
	switch a {
	case atom.Template, atom.Svg, atom.Math:
		return true
	}
	return false
}

// blockElement reports whether an element starts and ends a line of text.
func blockElement(a atom.Atom) bool {
	switch a {
	case atom.Address, atom.Article, atom.Aside, atom.Blockquote, atom.Body,
		atom.Br, atom.Caption, atom.Center, atom.Dd, atom.Details, atom.Dialog,
		atom.Dir, atom.Div, atom.Dl, atom.Dt, atom.Fieldset, atom.Figcaption,
		atom.Figure, atom.Footer, atom.Form, atom.H1, atom.H2, atom.H3, atom.H4,
		atom.H5, atom.H6, atom.Head, atom.Header, atom.Hgroup, atom.Hr, atom.Html,
		atom.Legend, atom.Li, atom.Main, atom.Menu, atom.Nav, atom.Ol,
		atom.Option, atom.P, atom.Pre, atom.Section, atom.Summary, atom.Table,
		atom.Tbody, atom.Tfoot, atom.Thead, atom.Tr, atom.Ul, atom.Textarea,
		atom.Select, atom.Plaintext, atom.Xmp, atom.Listing:
		return true
	}
	return false
}

// boilerplate reports whether an element holds what a site repeats around
// each page's own content: its header, navigation, footer and asides.
func boilerplate(a atom.Atom) bool {
	return a == atom.Header || a == atom.Nav || a == atom.Footer || a == atom.Aside
}

// textScan collects the title, visible text and main text of an HTML
// document (see extractContent) from its tokens, as scanHTML reads them.
// Memory stays bounded whatever the page: the builders hold at most
// MaxTextBytes each and maxTitleBytes, the spans at most maxSpans, and
// nothing is kept per element.
type textScan struct {
	text, title textBuilder
	buf         *[]byte // text's buffer, from textBufs
	// The main text is kept as spans of the text: outside those outside
	// boilerplate elements, inMain those also inside <main>.
	outside, inMain spans
	open            [16]int // open skipped elements, by slot
	skipping        int     // sum of open
	pre             int     // open pre/listing/plaintext elements
	inTitle         bool
	titleDone       bool
	boiler          int       // open boilerplate elements
	mains           int       // open main elements
	m               *mainScan // the blocks and containers, from mainBufs
}

func newTextScan() *textScan {
	buf := textBufs.Get().(*[]byte)
	s := &textScan{buf: buf, m: mainBufs.Get().(*mainScan)}
	s.start((*buf)[:0])
	return s
}

// start sets the scan going, with nothing taken, writing the text into b.
func (s *textScan) start(b []byte) {
	*s = textScan{text: textBuilder{b: b, limit: MaxTextBytes}, title: textBuilder{limit: maxTitleBytes}, buf: s.buf, m: s.m}
	s.outside.open(0)
	s.m.start()
}

// reset forgets what the scan took, for a scan of the document again from
// the start; a nil scan stays nil.
func (s *textScan) reset() {
	if s != nil {
		s.start(s.text.b[:0])
	}
}

// textBufs holds text builders' buffers between pages: the text of a page
// is copied out of its buffer once, and the next page writes into the
// same buffer instead of growing a new one by copies, so that a page's
// text costs one allocation of its size. A buffer grows to MaxTextBytes
// at most.
var textBufs = sync.Pool{New: func() any { return new([]byte) }}

// done reports whether the text is full, or there is no text scan: no
// later token changes the result, and a scan for text alone stops reading.
func (s *textScan) done() bool { return s == nil || s.text.full }

// textToken takes the current token of z, a text token.
func (s *textScan) textToken(z tokenSource) {
	switch {
	case s.skipping > 0:
	case s.inTitle:
		if !s.titleDone {
			s.title.write(z.text(), false)
		}
	default:
		n := len(s.text.b)
		s.text.write(z.text(), s.pre > 0)
		s.m.wrote(len(s.text.b) - n)
	}
}

// tagToken takes the current token of z, a start, self-closing or end
// tag (tt) of element a. It reads the attributes of the start tags of
// links and containers (see mainScan).
func (s *textScan) tagToken(tt html.TokenType, a atom.Atom, z tokenSource) {
	start := tt != html.EndTagToken
	if s.skipping == 0 && !s.inTitle {
		s.m.tag(tt, a, len(s.text.b), z)
	}
	switch {
	case skippedRaw(a):
		// A raw element's contents run to its end tag even when it is
		// written self-closing.
		if start {
			s.open[slot(a)]++
			s.skipping++
		} else if s.open[slot(a)] > 0 {
			s.open[slot(a)]--
			s.skipping--
		}
	case skippedNested(a):
		if tt == html.StartTagToken {
			s.open[slot(a)]++
			s.skipping++
		} else if tt == html.EndTagToken && s.open[slot(a)] > 0 {
			s.open[slot(a)]--
			s.skipping--
		}
	case a == atom.Title:
		// <title> is raw text to the tokeniser wherever it is, so its
		// contents always end at </title>. One inside a skipped element
		// (an svg icon's) is dropped with it.
		if start {
			s.inTitle = true
		} else if s.inTitle {
			s.inTitle = false
			s.titleDone = s.titleDone || len(s.title.b) > 0
		}
	case a == atom.Td || a == atom.Th:
		s.text.space()
	case blockElement(a):
		s.text.lineBreak()
		switch {
		case boilerplate(a) && tt == html.StartTagToken:
			s.boiler++
		case boilerplate(a) && tt == html.EndTagToken && s.boiler > 0:
			s.boiler--
		case a == atom.Main && tt == html.StartTagToken:
			s.mains++
		case a == atom.Main && tt == html.EndTagToken && s.mains > 0:
			s.mains--
		}
		at := len(s.text.b)
		s.outside.set(s.boiler == 0, at)
		s.inMain.set(s.boiler == 0 && s.mains > 0, at)
		if a == atom.Pre || a == atom.Listing || a == atom.Plaintext {
			if tt == html.StartTagToken {
				s.pre++
			} else if tt == html.EndTagToken && s.pre > 0 {
				s.pre--
			}
		}
	}
}

// result returns the title, text and main text taken so far (the main
// text a substring of the text when it is one span of it), and gives the
// text's buffer back to textBufs: it is called once, after the scan.
func (s *textScan) result() content {
	c := content{title: s.title.String(), text: s.text.String()}
	*s.buf = s.text.b[:0]
	textBufs.Put(s.buf)
	s.text.b, s.buf = nil, nil
	s.m.finish(len(c.text))
	c.main = joinSpans(c.text, s.m.choose(c.text))
	mainBufs.Put(s.m)
	s.m = nil
	if c.main != "" {
		return c
	}
	s.outside.close(len(c.text))
	s.inMain.close(len(c.text))
	c.main = s.inMain.text(c.text)
	if c.main == "" {
		c.main = s.outside.text(c.text)
	}
	if c.main == "" {
		c.main = c.text
	}
	return c
}

// spans marks parts of a text being built: the main text of a page.
type spans struct {
	done  [][2]int // closed spans, start and end offsets
	start int      // start of the open span, when isOpen
	isOpen,
	full bool // too many spans: the open one runs to the end
}

// maxSpans bounds the spans of a page, whose markup could switch in and
// out of boilerplate at every tag.
const maxSpans = 1024

func (s *spans) open(at int) { s.start, s.isOpen = at, true }

func (s *spans) close(at int) {
	if s.isOpen && at > s.start {
		s.done = append(s.done, [2]int{s.start, at})
	}
	s.isOpen = false
}

// set opens a span at `at` when in turns true and closes it when it turns
// false.
func (s *spans) set(in bool, at int) {
	switch {
	case s.full, in == s.isOpen:
	case in:
		s.open(at)
	default:
		s.close(at)
		s.full = len(s.done) >= maxSpans
		if s.full {
			s.open(at) // the rest counts: a page this busy is not trimmed
		}
	}
}

// text joins the spans of t, trimmed, one line each (joinSpans).
func (s *spans) text(t string) string { return joinSpans(t, s.done) }

// tokenText returns the text of the current text token. The tokeniser's
// Text allocates a copy for every token; most text has no character
// references or NULs to replace, and its raw bytes are the text.
func tokenText(z *html.Tokenizer) []byte {
	raw := z.Raw()
	if bytes.IndexByte(raw, '&') < 0 && bytes.IndexByte(raw, 0) < 0 {
		return raw
	}
	return z.Text()
}

// tagAtom returns the atom of the tag whose raw bytes ("<div ...>",
// "</P>") are given, or 0 for unknown names. The tokeniser's TagName
// allocates for every tag; this does not.
func tagAtom(raw []byte) atom.Atom {
	i := 1 // past '<'
	if i < len(raw) && raw[i] == '/' {
		i++
	}
	var name [16]byte
	n := 0
	for ; i < len(raw); i++ {
		c := raw[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '/' || c == '>' {
			break
		}
		if n == len(name) {
			return 0 // longer than any atom we look for
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		name[n] = c
		n++
	}
	return atom.Lookup(name[:n])
}

// slot maps a skipped element's atom to a counter index.
func slot(a atom.Atom) int {
	switch a {
	case atom.Script:
		return 0
	case atom.Style:
		return 1
	case atom.Noscript:
		return 2
	case atom.Iframe:
		return 3
	case atom.Noembed:
		return 4
	case atom.Noframes:
		return 5
	case atom.Template:
		return 6
	case atom.Svg:
		return 7
	case atom.Math:
		return 8
	}
	return 15
}

// textBuilder accumulates text with collapsed whitespace and line breaks,
// up to a byte limit.
type textBuilder struct {
	b        []byte
	limit    int
	full     bool // the limit was reached; further text is dropped
	spaceDue bool // a space is due before the next character
	lineDue  bool // a line break is due before the next character
}

// String returns the text so far.
func (t *textBuilder) String() string { return string(t.b) }

// space asks for a space before the next character.
func (t *textBuilder) space() { t.spaceDue = true }

// lineBreak asks for a line break before the next character.
func (t *textBuilder) lineBreak() { t.lineDue = true }

// write appends text, collapsing whitespace. With keepLines, newlines
// become line breaks instead of spaces. Control characters are dropped and
// invalid UTF-8 becomes U+FFFD.
func (t *textBuilder) write(s []byte, keepLines bool) {
	for i := 0; i < len(s) && !t.full; {
		c := s[i]
		if ' ' < c && c < 0x7f {
			// Most text is runs of printable ASCII words separated by
			// single spaces, which are appended as they are, a whole run
			// at a time rather than word by word.
			j := i + 1
			for j < len(s) {
				if j+8 <= len(s) && plainRun8(binary.LittleEndian.Uint64(s[j:])) {
					j += 8
					continue
				}
				if ' ' < s[j] && s[j] < 0x7f {
					j++
				} else if s[j] == ' ' && j+1 < len(s) && ' ' < s[j+1] && s[j+1] < 0x7f {
					j += 2
				} else {
					break
				}
			}
			t.appendASCII(s[i:j])
			i = j
			continue
		}
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

// plainRun8 reports whether the eight bytes of v (little-endian) may all
// join a run of printable ASCII and single spaces that so far ends with a
// printable character: each is printable ASCII or a space, no space
// follows a space, and the last is not a space (whether one may follow
// it depends on the next byte).
func plainRun8(v uint64) bool {
	const ones, highs uint64 = 0x0101010101010101, 0x8080808080808080
	// Any byte below ' ', at or above 0x80, or DEL (0x7f): the classic
	// "has a byte less than n" and "has a zero byte" tests, exact for
	// whether there is any.
	if (v-ones*' ')&^v&highs != 0 || v&highs != 0 {
		return false
	}
	if del := v ^ (ones * 0x7f); (del-ones)&^del&highs != 0 {
		return false
	}
	// The spaces, one high bit each, exactly: no borrow crosses bytes.
	sp := v ^ (ones * ' ')
	sp = ^((sp&^highs + ^highs) | sp | ^highs)
	return sp&(sp<<8) == 0 && sp>>63 == 0
}

// grow makes room for n more bytes, doubling the buffer up to the limit
// rather than growing a large one by a quarter at a time as append does:
// the copies of a text as it grows cost at most its final size.
func (t *textBuilder) grow(n int) {
	if len(t.b)+n <= cap(t.b) {
		return
	}
	b := make([]byte, len(t.b), max(min(2*cap(t.b), t.limit), len(t.b)+n, 256))
	copy(b, t.b)
	t.b = b
}

// appendASCII appends a run of printable ASCII and single spaces, which
// starts and ends with a printable character, after any due separator, as
// appendRune would one character at a time: what passes the limit is
// dropped.
func (t *textBuilder) appendASCII(run []byte) {
	sep := len(t.b) > 0 && (t.lineDue || t.spaceDue)
	room := t.limit - len(t.b)
	if sep {
		room--
	}
	if room <= 0 {
		t.full = true
		return
	}
	if len(run) > room {
		// A run cut just after a space ends before it: text never ends
		// with a separator.
		run, t.full = run[:room], true
		if run[len(run)-1] == ' ' {
			run = run[:len(run)-1]
		}
	}
	t.grow(len(run) + 1)
	t.separate(sep)
	t.b = append(t.b, run...)
}

// separate writes the due separator (a line break over a space) if sep,
// and clears what was due.
func (t *textBuilder) separate(sep bool) {
	if sep {
		if t.lineDue {
			t.b = append(t.b, '\n')
		} else {
			t.b = append(t.b, ' ')
		}
	}
	t.lineDue, t.spaceDue = false, false
}

// appendRune appends r (encoded in size bytes, or invalid) after any due
// separator, unless that would pass the limit.
func (t *textBuilder) appendRune(r rune, size int) {
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
	t.grow(need)
	t.separate(sep)
	t.b = utf8.AppendRune(t.b, r)
}
