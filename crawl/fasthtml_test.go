package crawl

import (
	"bytes"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/internal/fuzzcorpus"
)

// fastDocs are documents shaped to catch fastTokens reading a token
// otherwise than the tokeniser: character references, raw-text and
// RCDATA elements and what may end them, tags and attributes written in
// every way the tokeniser accepts, comments, doctypes and bogus comments,
// NULs, CRs and the ends of documents in the middle of things.
var fastDocs = map[string]string{
	"entities":         `<title>a &amp; b &lt;c&gt; &quot;d&quot; &apos;e&apos; f&nbsp;g &#65;&#x42;&#X43 &#128;&#0;&#xD800;&#1114112; &copy; &copy2 &notit; &AMP; &; & x</title><p>AT&T &amp &ampx &lt3 &#; &#x; &</p><a href="/e?a=1&amp;b=2&lt;&c=3&copy=4&d&e;">e</a><a href="&#x2f;hex&#47;dec">h</a><a href='/n&notin;'>n</a>`,
	"script-comment":   `<p>before</p><script><!-- if (a < b) document.write("</script>") --></script><p>after</p><a href="/after">a</a>`,
	"script-double":    `<script><!--<script>x</script>--></script><a href="/s">s</a>`,
	"script-escapes":   `<script><!-- a --></script><a href="/s1">1</a><script><!--<script></script>--></script><a href="/s2">2</a><script><!--<SCRIPT x>-- </Script/>--></script><a href="/s3">3</a><script><!-- </script> -->x</script><a href="/s4">4</a><script><!--<scripts></script><a href="/s5">5</a><script><!--<script>--><b></script><a href="/s6">6</a><script><!--<script>-<</x></script>x--></script><a href="/s7">7</a><script><!---></script><a href="/s8">8</a><script><!--<p></p>---></script><a href="/s9">9</a><script><!--<1<script></script>x</script><a href="/s10">10</a><script><!--<script></script></script><a href="/s11">11</a><script><!--<!--<script>--></script>`,
	"script-tricky":    `<script>if (a</b) x = "</scripty>"; y = '</SCRIPT '; </script x><a href="/t">t</a>`,
	"textarea-title":   `<textarea>&lt;a href="/in">&amp;</textarea><title>T&eacute;st &amp; <b>bold</b></title><TITLE>second</TITLE><a href="/x">x</a>`,
	"raw-elements":     `<style>p{}</style ><xmp><a href="/x">&amp;</xmp><noscript><a href="/ns"></noscript><iframe src="/f"><a href="/if"></iframe><noembed>&lt;</noembed><noframes>x</noframes>`,
	"self-closing-raw": `<script/><a href="/in-script"></script><title/>t&amp;</title><a href="/out">o</a>`,
	"plaintext":        `<p>a</p><plaintext><a href="/p">&amp; </plaintext> rest`,
	"unquoted":         `<a href=/u1>1</a><a href=/u2/>2</a><a href = '/u3' >3</a><a href=/u4 rel=nofollow>4</a><a href="/u5"/><br/><br / ><div/>x</div>`,
	"odd-attributes":   `<a =x href="/o1">1</a><a href/="/o2">2</a><a "q"=1 href=/o3>3</a><a href="/o4" x=/>4<a x=/ href="/o5"/>5<a x="y"/>6<a hReF='/o7' HREF="/o8">7<a ="a>b" href="/o9">9</a><a = "c>d" href="/o10">10</a>`,
	"self-closing-value": `<svg viewBox=0/>hidden</svg><p>shown</p><math x=1 x=/>m</math><p>2</p><main class=m/>main text</main><pre x=/> a  b
 c</pre><template x= />t</template><svg x="/"/>shown too<template/>t2<p x/>p</p><nav a=b/>n</nav>`,
	"numeric-refs":      "<p>&#128;</p><p>&#0;</p><p>&#xD800;</p><p>&#x110000;</p><p>&#9999999999;</p><p>&#x80</p><p>&#65</p><p>&#X41;</p><p>&#;</p><p>&#x;</p><p>&#</p><p>&</p><a href=\"/&#128;&#0;&#xdfff;&#1114111;&#x9F;&#65&#x;&#\">n</a>",
	"table-refs":        `<p>&amp;&lt;&gt;&quot;&apos;&nbsp;</p><p>a & b &= c</p><a href="/q?a=1&b=2&amp;c=3&d==4&amp=5&lt;=6">q</a><a href='&;'>x</a>`,
	"duplicate-attrs":   `<a href="/first" href="/second" rel="x" rel="nofollow">d</a><a x=1 x=2/>p</a><div a=/ a=1/>q</div>`,
	"uppercase":         `<HTML><BODY><A HREF="/A" REL="NOFOLLOW">a</A><A HREF="/B">b</A><IFRAME SRC="/f"></IFRAME><SCRIPT>x</SCRIPT><P>t</P><PRE>a  b</PRE></BODY></HTML>`,
	"svg":               `<svg><title>icon</title><a xlink:href="/x" href="/y"></a><style>a{}</style></svg><math><a href="/z">z</a></math><p>text</p>`,
	"comments":          `<!-- <a href="/c1"> --><a href="/r1">r</a><!--><a href="/r2">r</a><!---><a href="/r3">r</a><!-- --!><a href="/r4">r</a><!-- --!- x --><a href="/r5">r</a><!-- -- ! --!x> --><a href="/r6">r</a><!-- --!--><a href="/r7">r</a>-->`,
	"bogus-comments":    `<!DOCTYPE html><!doctype><!><!-><![CDATA[<a href="/cd">]]><a href="/r">r</a><?php echo "<a href='/pi'>" ?></><//x><a href="/r2">2</a></ x><a href="/r3">3</a><?><a href="/r4">4</a><?x?><a href="/r5">5</a>`,
	"nul":               "<p>a\x00b</p><title>t\x00</title><a href=\"/n\x00ul\" hr\x00ef=\"/k\">n</a><script>\x00</script><textarea>\x00&amp;</textarea><x\x00y>z</x\x00y>",
	"crlf":              "<pre>\r\na\r\nb\rc</pre><p>d &amp;\r\ne</p><a href=\"/c\r\nr\">c</a><textarea>x\r\ny&amp;\r</textarea>",
	"base-meta":         `<head><base href="/b/"><base href="/other/"><meta name="robots" content="noindex, nofollow"></head><a href="x">x</a>`,
	"meta-ua":           `<META NAME="SwarmCrawl" CONTENT="NONE"><a href="/m">m</a>`,
	"less-than":         `<p>a < b <3 <> <<a href="/lt">x</a> <1 <=</p>`,
	"boilerplate":       `<header>head</header><nav>menu</nav><main><h1>Title</h1><p>body</p></main><aside>ads</aside><footer>foot</footer>`,
	"utf8":              "<title>Caf\xc3\xa9 \xe2\x80\x94 \xff</title><p>\xe6\x97\xa5\xe6\x9c\xac\xc2\xa0x</p><a href=\"/caf\xc3\xa9\">c</a>",
	"eof-in-tag":        `<p>text</p><a href="/x`,
	"eof-in-tag-name":   `<p>text</p><ab`,
	"eof-in-comment":    `<p>text</p><!-- never ends <a href="/x">`,
	"eof-end-tag-start": `<p>text</p></`,
	"eof-lt":            `<p>text</p><`,
	"eof-script":        `<p>t</p><script>var x = 1; </scr`,
	"eof-title":         `<title>never closed &amp; <a href="/x">`,
	"frames":            `<frameset><frame src="/f1"><frame src="javascript:x"></frameset><frame src="/f2">`,
	"many-attributes":   "<a " + strings.Repeat("x ", 70) + `href="/many">m</a>`,
	"many-distinct":     "<a " + manyDistinctAttrs(70) + ` href="/many">m</a>`,
	"rare-refs":         `<p>AT&T R&D &copy2 &notit; &eacute &frac13; &ffllig; &NotNestedGreaterGreater;</p><a href="/r?x=1&y&copy=2&copy">r</a><a href="/&frac13;">f</a>`,
	"many-rare-refs":    strings.Repeat(`<a href="/x&frac13;">x</a><p>&frac13;</p>`, 40),
}

// manyDistinctAttrs returns n attributes of distinct names.
func manyDistinctAttrs(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, " a%d=%d", i, i)
	}
	return b.String()
}

// FuzzFastScan: for any body, a worker's parse (parsePage) finds the
// same title, text, main text, links, capped links and error with
// fastTokens as without them (the tokeniser alone), and so does a scan
// for the text alone (ExtractText) and for the links alone
// (ExtractLinks); and when fastTokens read a body to the end without
// giving up, a scan with them alone finds what the tokeniser finds.
func FuzzFastScan(f *testing.F) {
	seeds := func() map[string][]any {
		out := linkSeeds(f, "links-")
		for name, doc := range fastDocs {
			out[name] = []any{[]byte(doc), uint8(2)}
		}
		return out
	}
	for _, args := range seeds() {
		f.Add(args[0].([]byte), args[1].(uint8))
	}
	fuzzcorpus.Write(f, seeds)
	f.Fuzz(func(t *testing.T, body []byte, maxLinks uint8) {
		checkFastScan(t, body, int(maxLinks%8))
		checkUnescape(t, body)
	})
}

// checkFastScan fails t when fastTokens change what is found in body.
func checkFastScan(t *testing.T, body []byte, maxLinks int) {
	t.Helper()
	const contentType = "text/html; charset=utf-8" // no transcoding: the fast path for text too
	for _, pageURL := range []*url.URL{parseOncePageURL, nil} {
		got := parsePageWith(scanBody, body, contentType, pageURL, "swarmcrawl", maxLinks)
		want := parsePageWith(scanBodySlow, body, contentType, pageURL, "swarmcrawl", maxLinks)
		if got.content != want.content || got.html != want.html || !slices.Equal(got.links, want.links) ||
			got.capped != want.capped || fmt.Sprint(got.err) != fmt.Sprint(want.err) {
			t.Fatalf("page URL %v: with fastTokens %s\nwithout: links %q, %d capped, error %v, title %q, text %q, main %q",
				pageURL, diffParse(got, want.content, want.links, want.capped, want.html),
				want.links, want.capped, want.err, want.title, want.text, want.main)
		}
	}
	links, capped, err := ExtractLinks(body, parseOncePageURL, "swarmcrawl", maxLinks)
	wantLinks, wantCapped, wantErr := extractLinksSlow(body, maxLinks)
	if !slices.Equal(links, wantLinks) || capped != wantCapped || fmt.Sprint(err) != fmt.Sprint(wantErr) {
		t.Fatalf("links only: with fastTokens %q, %d capped, error %v; without %q, %d, %v", links, capped, err, wantLinks, wantCapped, wantErr)
	}
	if text := newTextScan(); scanFast(body, text, nil) == "" {
		// Read to the end of the text alone, fastTokens took what the
		// tokeniser takes.
		want := newTextScan()
		_ = scanBodySlow(body, want, nil)
		if got, want := text.result(), want.result(); got != want {
			t.Fatalf("text only, fastTokens alone: %+v, tokeniser %+v", got, want)
		}
	}
}

// checkUnescape fails t when unescapeInto decodes s otherwise than the
// tokeniser does, as text and as an attribute value; where it decodes
// it: a reference outside its table is the tokeniser's to decode.
func checkUnescape(t *testing.T, s []byte) {
	t.Helper()
	if got, ok := unescapeInto(nil, s, false); ok && string(got) != html.UnescapeString(string(s)) {
		t.Fatalf("text %q: decoded %q, tokeniser %q", s, got, html.UnescapeString(string(s)))
	}
	if bytes.IndexByte(s, '"') >= 0 {
		return
	}
	z := html.NewTokenizer(strings.NewReader(`<a x="` + string(s) + `">`))
	z.Next()
	_, want, _ := z.TagAttr()
	if got, ok := unescapeInto(nil, cleanInto(nil, s, true), true); ok && !bytes.Equal(got, want) {
		t.Fatalf("attribute %q: decoded %q, tokeniser %q", s, got, want)
	}
}

// TestUnescape: unescapeInto decodes the references of fastDocs as the
// tokeniser does, and leaves to the tokeniser no reference of the kinds
// common in pages and links: those of its table, numeric ones, a bare
// '&', and the '&' of a query string in an attribute.
func TestUnescape(t *testing.T) {
	for _, doc := range fastDocs {
		checkUnescape(t, []byte(doc))
	}
	for _, tc := range []struct {
		s         string
		attribute bool
	}{
		{"a &amp; b &lt;&gt;&quot;&apos;&nbsp;", false},
		{"&#65;&#x42;&#X43&#128;&#0; & x &", false},
		{"/p?a=1&b=2&amp;c=&#47;&sort=asc&page=2", true},
	} {
		if _, ok := unescapeInto(nil, []byte(tc.s), tc.attribute); !ok {
			t.Errorf("%q (attribute %v) left to the tokeniser", tc.s, tc.attribute)
		}
	}
}

// scanBodySlow is scanBody without the fast path: scanHTML of the body.
func scanBodySlow(body []byte, text *textScan, links *linkScan) error {
	return scanHTML(bytes.NewReader(body), text, links)
}

// extractLinksSlow is ExtractLinks without fastTokens.
func extractLinksSlow(body []byte, maxLinks int) ([]string, int, error) {
	s := newLinkScan("swarmcrawl", maxLinks)
	if err := scanBodySlow(body, nil, s); err != nil {
		return nil, 0, err
	}
	links, capped := s.resolve(parseOncePageURL)
	return links, capped, nil
}

// TestFastScanDocs runs checkFastScan on fastDocs, and checks that
// fastTokens give up on the documents they are meant to leave to the
// tokeniser and read the others to the end.
func TestFastScanDocs(t *testing.T) {
	gives := map[string]bool{"eof-end-tag-start": true, "many-distinct": true, "many-rare-refs": true}
	for name, doc := range fastDocs {
		for _, max := range []int{0, 2} {
			checkFastScan(t, []byte(doc), max)
		}
		why := scanFast([]byte(doc), newTextScan(), newLinkScan("swarmcrawl", 0))
		if (why != "") != gives[name] {
			t.Errorf("%s: fastTokens gave up: %q; want giving up %v", name, why, gives[name])
		}
	}
}

// TestFastScanReadsSyntheticWeb: fastTokens read every HTML page of the
// synthetic webs of the golden test (TestParseOnceGolden) to the end
// without giving up, so that parsePage reads each of them once, fast.
func TestFastScanReadsSyntheticWeb(t *testing.T) {
	for _, web := range []synthweb.Config{parseWeb, {Seed: 2, Hosts: 6, Cases: true}} {
		pages := 0
		for _, r := range synthResponses(t, web) {
			if textKind(r.contentType, r.body) != kindHTML {
				continue
			}
			pages++
			text, links := newTextScan(), newLinkScan("swarmcrawl", DefaultConfig().MaxLinksPerPage)
			if why := scanFast(r.body, text, links); why != "" {
				t.Errorf("%s: fastTokens gave up: %s", r.url, why)
			}
			text.result()
		}
		if pages < 100 {
			t.Errorf("seed %d: only %d HTML pages", web.Seed, pages)
		}
		t.Logf("seed %d: %d HTML pages read by fastTokens alone", web.Seed, pages)
	}
}

// TestKnownRefs: each name of knownRefs with a semicolon is a character
// reference to the tokeniser, as text and in an attribute value, so that
// what html.UnescapeString decodes it to at start-up is what the
// tokeniser decodes it to anywhere; and each name without one is a single
// letter or digit, which is none.
func TestKnownRefs(t *testing.T) {
	for name, d := range knownRefs {
		if !strings.HasSuffix(name, ";") {
			if len(name) != 1 || d != "&"+name {
				t.Errorf("&%s: decodes to %q", name, d)
			}
			continue
		}
		z := html.NewTokenizer(strings.NewReader(`<a x="&` + name + `">`))
		z.Next()
		// In an attribute a name is looked up whole, or not decoded.
		if _, attr, _ := z.TagAttr(); string(attr) == "&"+name || string(attr) != d {
			t.Errorf("&%s: decoded to %q as text, %q in an attribute", name, d, attr)
		}
	}
}

// TestFastScanPanicGivesUp: should fastTokens panic on a page, they give
// up instead, and scanBody reads the page with the tokeniser. Tokens
// whose position is past the end of the document panic at once.
func TestFastScanPanicGivesUp(t *testing.T) {
	body := []byte(`<p>text</p><a href="/x">x</a>`)
	broken := &fastTokens{b: body, pos: len(body) + 1}
	why := readFast(broken, newTextScan(), newLinkScan("swarmcrawl", 0))
	if !strings.HasPrefix(why, "panic: ") {
		t.Fatalf("fastTokens past the end of the document: gave up %q, want a panic given up on", why)
	}
}
