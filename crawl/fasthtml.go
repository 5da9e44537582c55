package crawl

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
)

// scanBody is scanHTML of a body held in memory. It reads the body with
// fastTokens, and only when they give up does it reset the scans and read
// the body again from the start with the tokeniser: either way the scans
// end as scanHTML would leave them (FuzzFastScan compares the two).
func scanBody(body []byte, text *textScan, links *linkScan) error {
	if scanFast(body, text, links) == "" {
		return nil
	}
	text.reset()
	links.reset()
	return scanHTML(bytes.NewReader(body), text, links)
}

// scanFast scans body with fastTokens and returns "" when they read it to
// the point the scans needed, or else why they gave up, in which case the
// scans hold a partial result to be reset.
func scanFast(body []byte, text *textScan, links *linkScan) (gaveUp string) {
	return readFast(&fastTokens{b: body}, text, links)
}

// readFast scans the tokens f reads and returns why they gave up, or "".
// fastTokens are not known to panic (FuzzFastScan); should they ever, on
// some hostile page, they give up there, and the page is read again by
// the tokeniser instead of the panic ending the worker.
func readFast(f *fastTokens, text *textScan, links *linkScan) (gaveUp string) {
	defer func() {
		if p := recover(); p != nil {
			gaveUp = fmt.Sprintf("panic: %v", p)
		}
	}()
	scanTokens(f, text, links)
	return f.gaveUp
}

// fastTokens reads the tokens of an HTML document held in memory the way
// x/net/html's Tokenizer reads them from a reader, for scanTokens: the same
// text tokens, cut at the same places and with the same text, the same
// start, self-closing and end tags with the same bytes and attributes,
// and comments and doctypes where the tokeniser has them (both reported
// as comments, which scanTokens skips). Where the tokeniser reads a byte
// at a time, fastTokens jumps to the next '<' of a text, or to the end of
// a raw-text element's contents, and parses a tag in place, copying
// nothing unless a text or an attribute value has character references,
// NULs or carriage returns to replace.
//
// They follow the tokeniser's rules (token.go) step by step, and give up
// instead where that would take more than it is worth (gaveUp says why;
// scanBody then reads the document again with the tokeniser): on "</" at
// the very end of the document, and on a start tag of more than
// maxFastAttrs attributes. Character references are
// decoded as the tokeniser decodes them: numeric ones and those of a table
// of common names (knownRefs) in place; a text with another by
// html.UnescapeString, the tokeniser's own decoder, and a tag whose link
// attributes have another by the tokeniser reading the tag alone, up to
// maxRareRefs of them, beyond which the tokens give up too. Everything
// stays within the body and the scratch buffers; nothing is kept per
// element, and hostile input neither panics nor grows memory beyond the
// length of its longest token.
type fastTokens struct {
	b          []byte // the document
	pos        int    // where the next token starts
	start, end int    // the current token is b[start:end]
	// rawText is the raw-text or RCDATA element ("script", "title"...)
	// whose contents the next token is, after its start tag, as the
	// tokeniser's rawTag.
	rawText string
	// How the current text token's text is decoded, as the tokeniser's
	// Text decodes it: textIsRaw leaves character references as they
	// are, convertNUL replaces NUL bytes with U+FFFD.
	textIsRaw, convertNUL bool
	// attr holds the attributes of the current start tag that the
	// tokeniser keeps: each with a name, the first of a name (compared in
	// ASCII lower case).
	attr    []attrSpan
	attrBuf [8]attrSpan
	scratch [2][]byte // decoded texts and attribute values
	rare    int       // texts and tags decoded by the tokeniser (spendRare)
	gaveUp  string    // why the tokens gave up, or ""
}

// attrSpan locates an attribute's name and value, as written, in the
// document: b[k0:k1] and b[v0:v1].
type attrSpan struct{ k0, k1, v0, v1 int }

// maxFastAttrs bounds the attributes of a start tag that fastTokens
// compare names for; a tag with more is left to the tokeniser.
const maxFastAttrs = 64

// giveUp records why the tokens gave up and ends them.
func (f *fastTokens) giveUp(why string) html.TokenType {
	f.gaveUp = why
	f.pos = len(f.b)
	return html.ErrorToken
}

// next reads the next token and returns its type: html.ErrorToken at the
// end of the document and once the tokens gave up.
func (f *fastTokens) next() html.TokenType {
	if f.gaveUp != "" {
		return html.ErrorToken
	}
	f.start, f.end = f.pos, f.pos
	if f.rawText != "" {
		if f.rawTextToken() {
			return html.TextToken
		}
		if f.gaveUp != "" {
			return html.ErrorToken
		}
	}
	f.textIsRaw, f.convertNUL = false, false
	b := f.b
	for i := f.pos; ; {
		j := bytes.IndexByte(b[i:], '<')
		if j < 0 || i+j+1 >= len(b) {
			// No markup to the end: text, as a '<' that ends it is.
			f.end, f.pos = len(b), len(b)
			if f.start < f.end {
				return html.TextToken
			}
			return html.ErrorToken
		}
		lt := i + j
		if c := b[lt+1]; !isASCIILetter(c) && c != '/' && c != '!' && c != '?' {
			i = lt + 1 // a '<' that opens nothing is text
			continue
		}
		if f.start < lt {
			f.end, f.pos = lt, lt
			return html.TextToken
		}
		return f.markup(lt)
	}
}

// rawTextToken reads the contents of the raw-text or RCDATA element whose
// start tag was the last token, up to its end tag (or to the end of the
// document; a plaintext element has no end tag), as the tokeniser's
// readRawOrRCDATA does, and reports whether they are a token: not when
// they are empty.
func (f *fastTokens) rawTextToken() bool {
	name := f.rawText
	f.rawText = ""
	end := len(f.b)
	if name != "plaintext" {
		if i := indexEndTag(f.b[f.pos:], name); i >= 0 {
			end = f.pos + i
		}
	}
	// The first "</script" that ends the script is its end tag, unless an
	// earlier "<!--" makes the tokeniser read on by the script-data escape
	// states.
	if name == "script" && bytes.Contains(f.b[f.pos:end], []byte("<!--")) {
		end = f.pos + scriptEnd(f.b[f.pos:])
	}
	if end == f.pos {
		return false
	}
	f.end, f.pos = end, end
	f.textIsRaw = name != "textarea" && name != "title"
	f.convertNUL = true
	return true
}

// scriptEnd returns the length of the contents of a script element that
// starts b: the index of its end tag, or len(b). It is the tokeniser's
// readScript, state by state, over b: the contents end at the first
// "</script" and white space, '/' or '>' outside the escapes that "<!--"
// opens and "-->" closes, and outside the double escapes that a "<script"
// opens within them and a "</script" closes.
func scriptEnd(b []byte) int {
	p := 0
	// endTag reads on from "</" and reports whether it is the script's end
	// tag; p is then at its '<', else after the bytes that matched.
	endTag := func() (match, eof bool) {
		for i := range len("script") {
			if p >= len(b) {
				return false, true
			}
			if c := b[p]; c != "script"[i] && c != "SCRIPT"[i] {
				return false, false
			}
			p++
		}
		if p >= len(b) {
			return false, true
		}
		switch b[p] {
		case ' ', '\n', '\r', '\t', '\f', '/', '>':
			p -= len("</script")
			return true, false
		}
		return false, false
	}
	var c byte
	// Each state reads a byte (the end of b ends the contents there), or
	// "unreads" it (p--) for the next state to read again.

scriptData:
	if i := bytes.IndexByte(b[p:], '<'); i >= 0 {
		p += i + 1
		goto scriptDataLessThanSign
	}
	return len(b)

scriptDataLessThanSign:
	if p >= len(b) {
		return len(b)
	}
	c, p = b[p], p+1
	switch c {
	case '/':
		goto scriptDataEndTagOpen
	case '!':
		goto scriptDataEscapeStart
	}
	p--
	goto scriptData

scriptDataEndTagOpen:
	if match, eof := endTag(); match {
		return p
	} else if eof {
		return len(b)
	}
	goto scriptData

scriptDataEscapeStart:
	if p >= len(b) {
		return len(b)
	}
	if c, p = b[p], p+1; c == '-' {
		goto scriptDataEscapeStartDash
	}
	p--
	goto scriptData

scriptDataEscapeStartDash:
	if p >= len(b) {
		return len(b)
	}
	if c, p = b[p], p+1; c == '-' {
		goto scriptDataEscapedDashDash
	}
	p--
	goto scriptData

scriptDataEscaped:
	if p >= len(b) {
		return len(b)
	}
	c, p = b[p], p+1
	switch c {
	case '-':
		goto scriptDataEscapedDash
	case '<':
		goto scriptDataEscapedLessThanSign
	}
	goto scriptDataEscaped

scriptDataEscapedDash:
	if p >= len(b) {
		return len(b)
	}
	c, p = b[p], p+1
	switch c {
	case '-':
		goto scriptDataEscapedDashDash
	case '<':
		goto scriptDataEscapedLessThanSign
	}
	goto scriptDataEscaped

scriptDataEscapedDashDash:
	if p >= len(b) {
		return len(b)
	}
	c, p = b[p], p+1
	switch c {
	case '-':
		goto scriptDataEscapedDashDash
	case '<':
		goto scriptDataEscapedLessThanSign
	case '>':
		goto scriptData
	}
	goto scriptDataEscaped

scriptDataEscapedLessThanSign:
	if p >= len(b) {
		return len(b)
	}
	c, p = b[p], p+1
	if c == '/' {
		goto scriptDataEscapedEndTagOpen
	}
	if isASCIILetter(c) {
		goto scriptDataDoubleEscapeStart
	}
	p--
	goto scriptData

scriptDataEscapedEndTagOpen:
	if match, eof := endTag(); match {
		return p
	} else if eof {
		return len(b)
	}
	goto scriptDataEscaped

scriptDataDoubleEscapeStart:
	p--
	for i := range len("script") {
		if p >= len(b) {
			return len(b)
		}
		if c, p = b[p], p+1; c != "script"[i] && c != "SCRIPT"[i] {
			p--
			goto scriptDataEscaped
		}
	}
	if p >= len(b) {
		return len(b)
	}
	c, p = b[p], p+1
	switch c {
	case ' ', '\n', '\r', '\t', '\f', '/', '>':
		goto scriptDataDoubleEscaped
	}
	p--
	goto scriptDataEscaped

scriptDataDoubleEscaped:
	if p >= len(b) {
		return len(b)
	}
	c, p = b[p], p+1
	switch c {
	case '-':
		goto scriptDataDoubleEscapedDash
	case '<':
		goto scriptDataDoubleEscapedLessThanSign
	}
	goto scriptDataDoubleEscaped

scriptDataDoubleEscapedDash:
	if p >= len(b) {
		return len(b)
	}
	c, p = b[p], p+1
	switch c {
	case '-':
		goto scriptDataDoubleEscapedDashDash
	case '<':
		goto scriptDataDoubleEscapedLessThanSign
	}
	goto scriptDataDoubleEscaped

scriptDataDoubleEscapedDashDash:
	if p >= len(b) {
		return len(b)
	}
	c, p = b[p], p+1
	switch c {
	case '-':
		goto scriptDataDoubleEscapedDashDash
	case '<':
		goto scriptDataDoubleEscapedLessThanSign
	case '>':
		goto scriptData
	}
	goto scriptDataDoubleEscaped

scriptDataDoubleEscapedLessThanSign:
	if p >= len(b) {
		return len(b)
	}
	if c, p = b[p], p+1; c == '/' {
		goto scriptDataDoubleEscapeEnd
	}
	p--
	goto scriptDataDoubleEscaped

scriptDataDoubleEscapeEnd:
	if match, eof := endTag(); match {
		p += len("</script>")
		goto scriptDataEscaped
	} else if eof {
		return len(b)
	}
	goto scriptDataDoubleEscaped
}

// indexEndTag returns the index in b of the first end tag of the element
// name (lower case): "</", the name in any ASCII case, and white space,
// '/' or '>'; or -1.
func indexEndTag(b []byte, name string) int {
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte("</"))
		if j < 0 {
			return -1
		}
		at := i + j
		k := at + 2 + len(name)
		if k < len(b) && equalASCIIFold(b[at+2:k], name) {
			if c := b[k]; isHTMLSpace(c) || c == '/' || c == '>' {
				return at
			}
		}
		i = at + 2
	}
}

// markup reads the token at b[lt], a '<' followed by a letter, '/', '!'
// or '?': a tag, or a comment or doctype.
func (f *fastTokens) markup(lt int) html.TokenType {
	b := f.b
	switch c := b[lt+1]; {
	case isASCIILetter(c):
		return f.tag(lt+1, true)
	case c == '/':
		if lt+2 >= len(b) {
			return f.giveUp("</ at the end")
		}
		if isASCIILetter(b[lt+2]) {
			return f.tag(lt+2, false)
		}
		return f.untilCloseAngle(lt + 2) // a bogus comment; "</>" an empty one
	case c == '!':
		if lt+3 < len(b) && b[lt+2] == '-' && b[lt+3] == '-' {
			return f.comment(lt + 4)
		}
		// A doctype, or a bogus comment (CDATA included): either ends at
		// the first '>', since "DOCTYPE" and white space hold none.
		return f.untilCloseAngle(lt + 2)
	default: // '?': a processing instruction is a bogus comment
		return f.untilCloseAngle(lt + 1)
	}
}

// untilCloseAngle ends the current token, a comment, after the first '>'
// at or after from, or at the end of the document.
func (f *fastTokens) untilCloseAngle(from int) html.TokenType {
	f.pos = len(f.b)
	if i := bytes.IndexByte(f.b[from:], '>'); i >= 0 {
		f.pos = from + i + 1
	}
	f.end = f.pos
	return html.CommentToken
}

// comment ends the current token, a comment whose data starts at from
// (after "<!--"), where the tokeniser's readComment ends it: at "-->",
// "--!>", a '>' after nothing but dashes, or the end of the document.
func (f *fastTokens) comment(from int) html.TokenType {
	b := f.b
	f.end, f.pos = len(b), len(b)
	dashes, beginning := 0, true
	for k := from; k < len(b); k++ {
		switch b[k] {
		case '-':
			dashes++
			continue
		case '>':
			if dashes >= 2 || beginning {
				f.end, f.pos = k+1, k+1
				return html.CommentToken
			}
		case '!':
			if dashes >= 2 {
				k++
				if k >= len(b) {
					return html.CommentToken
				}
				if b[k] == '>' {
					f.end, f.pos = k+1, k+1
					return html.CommentToken
				}
				if b[k] == '-' {
					dashes, beginning = 1, false
					continue
				}
			}
		}
		dashes, beginning = 0, false
	}
	return html.CommentToken
}

// tag reads a start (start) or end tag whose name begins at b[k], with
// its attributes, as the tokeniser's readTag, readTagName,
// readTagAttrKey and readTagAttrVal do, and returns its type: a start tag
// is self-closing when it ends with "/>" and that '/' does not end the
// value of its last attribute. A tag the document ends in is not a token:
// there the tokeniser stops.
func (f *fastTokens) tag(k int, start bool) html.TokenType {
	b, n := f.b, len(f.b)
	f.attr = f.attrBuf[:0]
	name := k
	for k++; k < n && !isHTMLSpace(b[k]) && b[k] != '/' && b[k] != '>'; k++ {
	}
	nameEnd := k
	for k = skipHTMLSpace(b, k); ; k = skipHTMLSpace(b, k) {
		if k >= n {
			return f.atEnd()
		}
		if b[k] == '>' {
			k++
			break
		}
		// The name runs to '=', white space, '/' or '>'; a leading '=' is
		// part of it.
		a := attrSpan{k0: k}
		if b[k] == '=' {
			k++
		}
		for k < n && !isHTMLSpace(b[k]) && b[k] != '/' && b[k] != '>' && b[k] != '=' {
			k++
		}
		a.k1, a.v0, a.v1 = k, k, k
		if k = skipHTMLSpace(b, k); k >= n {
			return f.atEnd()
		}
		switch b[k] {
		case '/':
			k++ // an attribute without a value, and the '/' is gone
		case '=':
			if k = skipHTMLSpace(b, k+1); k >= n {
				return f.atEnd()
			}
			switch q := b[k]; q {
			case '>': // no value
			case '"', '\'':
				i := bytes.IndexByte(b[k+1:], q)
				if i < 0 {
					return f.atEnd()
				}
				a.v0, a.v1 = k+1, k+1+i
				k = a.v1 + 1
			default:
				a.v0 = k
				for k++; k < n && !isHTMLSpace(b[k]) && b[k] != '>'; k++ {
				}
				if k >= n {
					return f.atEnd()
				}
				a.v1 = k
				if b[k] != '>' {
					k++
				}
			}
		}
		if start && a.k1 > a.k0 && !f.keep(a) {
			return html.ErrorToken
		}
	}
	f.end, f.pos = k, k
	if !start {
		return html.EndTagToken
	}
	if raw := rawTextElement(b[name:nameEnd]); raw != "" {
		f.rawText = raw
	}
	if b[k-2] == '/' && (len(f.attr) == 0 || k-2 != f.attr[len(f.attr)-1].v1-1) {
		return html.SelfClosingTagToken
	}
	return html.StartTagToken
}

// keep adds a to the current tag's attributes unless it has one of its
// name already, and reports false when the tokens gave up on a tag with
// too many.
func (f *fastTokens) keep(a attrSpan) bool {
	key := f.b[a.k0:a.k1]
	for _, o := range f.attr {
		if o.k1-o.k0 == len(key) && equalASCIIFoldBytes(f.b[o.k0:o.k1], key) {
			return true
		}
	}
	if len(f.attr) == maxFastAttrs {
		f.giveUp("too many attributes")
		return false
	}
	f.attr = append(f.attr, a)
	return true
}

// atEnd ends the tokens at the end of the document inside a tag, where
// the tokeniser returns an error token and drops the tag.
func (f *fastTokens) atEnd() html.TokenType {
	f.pos = len(f.b)
	f.end = f.start
	return html.ErrorToken
}

// raw returns the bytes of the current token as written.
func (f *fastTokens) raw() []byte { return f.b[f.start:f.end] }

// text returns the text of the current text token, as tokenText returns
// it from the tokeniser: its bytes as written when they hold no '&' and
// no NUL, else with CRLF and CR made LF, NULs made U+FFFD in the contents
// of raw-text and RCDATA elements, and character references decoded
// outside raw-text elements.
func (f *fastTokens) text() []byte {
	raw := f.raw()
	if bytes.IndexByte(raw, '&') < 0 && bytes.IndexByte(raw, 0) < 0 {
		return raw
	}
	s := cleanInto(f.scratch[0][:0], raw, f.convertNUL)
	f.scratch[0] = s
	if f.textIsRaw || bytes.IndexByte(s, '&') < 0 {
		return s
	}
	out, ok := unescapeInto(f.scratch[1][:0], s, false)
	if !ok {
		if !f.spendRare() {
			return nil
		}
		return []byte(html.UnescapeString(string(s)))
	}
	f.scratch[1] = out
	return out
}

// attrs returns the link attributes of the current start tag, as
// readAttrs reads them from the tokeniser.
func (f *fastTokens) attrs() (a tagAttrs) {
	f.scratch[0] = f.scratch[0][:0]
	for _, at := range f.attr {
		key := f.b[at.k0:at.k1]
		var field *[]byte
		switch {
		case equalASCIIFold(key, "href"):
			field, a.has = &a.href, a.has|hasHref
		case equalASCIIFold(key, "xlink:href"):
			field, a.has = &a.xlinkHref, a.has|hasXlinkHref
		case equalASCIIFold(key, "src"):
			field, a.has = &a.src, a.has|hasSrc
		case equalASCIIFold(key, "rel"):
			field = &a.rel
		case equalASCIIFold(key, "name"):
			field = &a.name
		case equalASCIIFold(key, "content"):
			field = &a.content
		case equalASCIIFold(key, "class"):
			field = &a.class
		case equalASCIIFold(key, "id"):
			field = &a.id
		case equalASCIIFold(key, "role"):
			field = &a.role
		case equalASCIIFold(key, "style"):
			field = &a.style
		case equalASCIIFold(key, "aria-hidden"):
			field = &a.ariaHidden
		case equalASCIIFold(key, "hidden"):
			a.has |= hasHidden
			continue
		default:
			continue
		}
		v, ok := f.attrValue(f.b[at.v0:at.v1])
		if !ok {
			if !f.spendRare() {
				return tagAttrs{}
			}
			return f.tagAlone()
		}
		*field = v
	}
	return a
}

// attrValue decodes an attribute value as the tokeniser's TagAttr does:
// NULs made U+FFFD, CRLF and CR made LF, character references decoded. It
// reports false for a reference outside unescapeInto's table.
func (f *fastTokens) attrValue(v []byte) ([]byte, bool) {
	if bytes.IndexByte(v, '&') < 0 && bytes.IndexByte(v, 0) < 0 && bytes.IndexByte(v, '\r') < 0 {
		return v, true
	}
	// The values of a tag share scratch[0], one after the other; scratch[1]
	// holds one before decoding. A value that grows scratch[0] leaves the
	// earlier ones in its old array, where they stay valid.
	clean := cleanInto(f.scratch[1][:0], v, true)
	f.scratch[1] = clean
	at := len(f.scratch[0])
	out, ok := unescapeInto(f.scratch[0], clean, true)
	if !ok {
		return nil, false
	}
	f.scratch[0] = out
	return out[at:len(out):len(out)], true
}

// spendRare counts a text or a tag whose character references are left
// to the tokeniser, which costs allocations, and reports false when there
// were too many, and the tokens gave up.
func (f *fastTokens) spendRare() bool {
	if f.rare++; f.rare > maxRareRefs {
		f.giveUp("too many rare character references")
		return false
	}
	return true
}

// maxRareRefs bounds the texts and tags of a document whose character
// references fastTokens leave to the tokeniser, one at a time; a document
// with more is left to the tokeniser whole.
const maxRareRefs = 64

// tagAlone reads the attributes of the current start tag with the
// tokeniser, from the tag's bytes alone: a tag reads the same wherever it
// is, since the tokeniser keeps no state from one tag to the next but the
// raw-text element it opens.
func (f *fastTokens) tagAlone() tagAttrs {
	z := html.NewTokenizer(bytes.NewReader(f.raw()))
	z.Next()
	return readAttrs(z)
}

// rawTextElement returns the name, in lower case, of the raw-text or
// RCDATA element whose start tag has the name given (in any ASCII case),
// or "": the elements whose contents the tokeniser reads as text up to
// their end tag.
func rawTextElement(name []byte) string {
	for _, e := range [...]string{"iframe", "noembed", "noframes", "noscript", "plaintext", "script", "style", "textarea", "title", "xmp"} {
		if equalASCIIFold(name, e) {
			return e
		}
	}
	return ""
}

// cleanInto appends s to dst with CRLF and CR made LF and, if nul, NUL
// bytes made U+FFFD, as the tokeniser's convertNewlines and its NUL
// replacement do.
func cleanInto(dst, s []byte, nul bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\r':
			if i+1 < len(s) && s[i+1] == '\n' {
				i++
			}
			dst = append(dst, '\n')
		case c == 0 && nul:
			dst = append(dst, "\uFFFD"...)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// knownRefs maps the names unescapeInto decodes itself, as written
// after the '&', to what they decode to: common named references with
// their semicolon, and the single letters and digits, which are no
// reference without one. The values are the tokeniser's own, from
// html.UnescapeString; TestKnownRefs checks that each name with a
// semicolon is a reference, which decodes alike in text and attributes.
var knownRefs = func() map[string]string {
	m := map[string]string{}
	for _, name := range strings.Fields(`amp; lt; gt; quot; apos; nbsp; copy; reg; trade;
		mdash; ndash; hellip; lsquo; rsquo; ldquo; rdquo; laquo; raquo; middot; bull;
		times; divide; deg; plusmn; euro; pound; yen; cent; sect; para; shy; hearts;
		larr; rarr; uarr; darr; harr; le; ge; ne; minus; frac12; frac14; frac34;
		sup2; sup3; iexcl; iquest; szlig; ccedil; Ccedil; ntilde; Ntilde;
		aacute; eacute; iacute; oacute; uacute; Aacute; Eacute; Iacute; Oacute; Uacute;
		agrave; egrave; igrave; ograve; ugrave; Agrave; Egrave;
		acirc; ecirc; icirc; ocirc; ucirc; auml; euml; iuml; ouml; uuml; Auml; Ouml; Uuml;
		aring; Aring; aelig; AElig; oslash; Oslash; thinsp; ensp; emsp; zwnj; zwj; lrm; rlm;
		num; excl; dollar; percnt; lpar; rpar; ast; plus; comma; period; sol; colon; semi;
		equals; quest; commat; lsqb; rsqb; lowbar; grave; lcub; rcub; verbar; tilde; hyphen;
		check; star; starf; infin; micro; ordm; ordf; not; dagger; Dagger; permil; prime; Prime;`) {
		m[name] = html.UnescapeString("&" + name)
	}
	for c := byte('0'); c <= 'z'; c++ {
		if isASCIIAlnum(c) {
			if name := string(c); html.UnescapeString("&"+name) == "&"+name {
				m[name] = "&" + name
			}
		}
	}
	return m
}()

// windows1252 replaces numeric references to 0x80-0x9F, as the
// tokeniser's replacementTable does.
var windows1252 = [32]rune{
	'\u20AC', '\u0081', '\u201A', '\u0192', '\u201E', '\u2026', '\u2020', '\u2021',
	'\u02C6', '\u2030', '\u0160', '\u2039', '\u0152', '\u008D', '\u017D', '\u008F',
	'\u0090', '\u2018', '\u2019', '\u201C', '\u201D', '\u2022', '\u2013', '\u2014',
	'\u02DC', '\u2122', '\u0161', '\u203A', '\u0153', '\u009D', '\u017E', '\u0178',
}

// unescapeInto appends s to dst with its character references decoded,
// as the tokeniser's unescape (in an attribute value if attribute)
// decodes them: numeric ones, the names of knownRefs, and an '&' that
// starts none (followed by no name, or in an attribute by a name without
// ';' and then '='). It reports false for any other name, which only the
// tokeniser's full table can tell.
func unescapeInto(dst, s []byte, attribute bool) ([]byte, bool) {
	for len(s) > 0 {
		amp := bytes.IndexByte(s, '&')
		if amp < 0 {
			return append(dst, s...), true
		}
		dst = append(dst, s[:amp]...)
		s = s[amp:]
		if r, n := numericRef(s); n > 0 {
			dst = utf8.AppendRune(dst, r)
			s = s[n:]
			continue
		}
		d, n, known := namedRef(s, attribute)
		if !known {
			return dst, false
		}
		dst = append(dst, d...)
		s = s[n:]
	}
	return dst, true
}

// numericRef decodes the numeric character reference s starts with ("&#",
// decimal or 'x' and hex digits, and an optional ';'), as the tokeniser's
// unescapeEntity does, and returns it and its length; '&' and 1 when s
// starts with "&#" and no digits; 0 when s does not start with "&#".
func numericRef(s []byte) (rune, int) {
	if len(s) < 2 || s[1] != '#' {
		return 0, 0
	}
	if len(s) == 2 {
		return '&', 1
	}
	i, hex := 2, false
	if s[i] == 'x' || s[i] == 'X' {
		hex = true
		i++
	}
	i0, x := i, rune(0)
digits:
	for ; i < len(s); i++ {
		c, d, mult := s[i], rune(0), rune(10)
		switch {
		case '0' <= c && c <= '9':
			d = rune(c - '0')
		case hex && 'a' <= c && c <= 'f':
			d = rune(c-'a') + 10
		case hex && 'A' <= c && c <= 'F':
			d = rune(c-'A') + 10
		default:
			break digits
		}
		if hex {
			mult = 16
		}
		if x <= 0x10FFFF {
			x = mult*x + d
		}
	}
	if i == i0 {
		return '&', 1
	}
	if i < len(s) && s[i] == ';' {
		i++
	}
	switch {
	case 0x80 <= x && x <= 0x9F:
		x = windows1252[x-0x80]
	case x == 0 || 0xD800 <= x && x <= 0xDFFF || x > 0x10FFFF:
		x = utf8.RuneError
	}
	return x, i
}

// namedRef decodes the named character reference s starts with ('&',
// letters and digits, and ';' if there is one), as the tokeniser's
// unescapeEntity does, and returns it and its length ("&" and 1 when it
// is no reference), or known false when its name is not in knownRefs
// and the tokeniser's table decides.
func namedRef(s []byte, attribute bool) (d string, n int, known bool) {
	i := 1
	for i < len(s) && isASCIIAlnum(s[i]) {
		i++
	}
	if i < len(s) && s[i] == ';' {
		i++
	}
	name := s[1:i]
	switch {
	case len(name) == 0:
		return "&", 1, true
	case attribute && name[len(name)-1] != ';' && i < len(s) && s[i] == '=':
		return "&", 1, true
	}
	d, known = knownRefs[string(name)]
	return d, i, known
}

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

func isASCIIAlnum(c byte) bool { return isASCIILetter(c) || '0' <= c && c <= '9' }

// isHTMLSpace reports whether c is white space to the tokeniser.
func isHTMLSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f'
}

// skipHTMLSpace returns the index of the first byte at or after k that is
// not white space, or len(b).
func skipHTMLSpace(b []byte, k int) int {
	for k < len(b) && isHTMLSpace(b[k]) {
		k++
	}
	return k
}

// equalASCIIFold reports whether b is s (lower case) in any ASCII case.
// Unlike bytes.EqualFold it folds no other letter, as the tokeniser does.
func equalASCIIFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// equalASCIIFoldBytes reports whether a and b are equal in ASCII lower
// case.
func equalASCIIFoldBytes(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
