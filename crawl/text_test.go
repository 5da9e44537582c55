package crawl

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/internal/fuzzcorpus"
)

func TestExtractText(t *testing.T) {
	const html = "text/html; charset=utf-8"
	tests := []struct {
		name        string
		contentType string
		body        string
		title, text string
	}{
		{
			name:        "document",
			contentType: html,
			body: `<!DOCTYPE html><html><head><title>  My
				Page </title><style>p { color: red }</style>
				<script>var s = "<p>not text</p>";</script></head>
				<body><h1>Heading</h1><p>Hello <b>big</b>   world</p>
				<ul><li>one</li><li>two</li></ul></body></html>`,
			title: "My Page",
			text:  "Heading\nHello big world\none\ntwo",
		},
		{
			name:        "character references",
			contentType: html,
			body:        `<p>Fish &amp; chips &lt;3 &eacute;t&eacute; &#x1F600; a&nbsp;&nbsp;b</p>`,
			text:        "Fish & chips <3 été 😀 a b",
		},
		{
			name:        "invisible elements",
			contentType: html,
			body: `<p>a</p><noscript>enable js</noscript><template><p>tpl<template>inner</template>still tpl</template>
				<svg><title>icon</title><text>svg text</text></svg><math><mi>x</mi></math>
				<iframe>fallback</iframe><noembed>ne</noembed><noframes>nf</noframes><!-- comment --><p>b</p>`,
			text: "a\nb",
		},
		{
			name:        "title inside svg is not the title",
			contentType: html,
			body:        `<body><svg><title>icon</title></svg><title>Real</title><p>x</p>`,
			title:       "Real",
			text:        "x",
		},
		{
			name:        "first non-empty title wins",
			contentType: html,
			body:        `<title> </title><title>One</title><title>Two</title>`,
			title:       "One",
		},
		{
			name:        "tables and line breaks",
			contentType: html,
			body:        `<table><tr><td>a</td><td>b</td></tr><tr><th>c</th></tr></table>x<br>y<hr>z`,
			text:        "a b\nc\nx\ny\nz",
		},
		{
			name:        "inline elements join",
			contentType: html,
			body:        `<p><span>a</span><span>b</span> <em>c</em>d</p>`,
			text:        "ab cd",
		},
		{
			name:        "pre keeps lines",
			contentType: html,
			body:        "<pre>line one\n    line   two\n\n</pre><p>after</p>",
			text:        "line one\nline two\nafter",
		},
		{
			name:        "unclosed script hides the rest",
			contentType: html,
			body:        `<p>before</p><script>never closed <p>hidden`,
			text:        "before",
		},
		{
			name:        "self-closing script is still raw",
			contentType: html,
			body:        `<SCRIPT/>hidden</script><P>shown`,
			text:        "shown",
		},
		{
			name:        "stray end tags",
			contentType: html,
			body:        `</script></svg></template></title><p>ok</p></pre>`,
			text:        "ok",
		},
		{
			name:        "control characters dropped, invalid UTF-8 replaced",
			contentType: html,
			body:        "<p>a\x01b\x7fc \xff d</p>",
			text:        "abc \uFFFD d",
		},
		{
			name:        "charset from Content-Type",
			contentType: "text/html; charset=windows-1252",
			body:        "<p>caf\xe9 \x93quoted\x94</p>",
			text:        "café “quoted”",
		},
		{
			name:        "charset from meta",
			contentType: "text/html",
			body:        "<meta charset=\"iso-8859-1\"><title>Fran\xe7ais</title><p>\xe0 bient\xf4t</p>",
			title:       "Français",
			text:        "à bientôt",
		},
		{
			name:        "sniffed HTML",
			contentType: "",
			body:        `<html><body><p>sniffed</p><script>x</script></body></html>`,
			text:        "sniffed",
		},
		{
			name:        "xhtml",
			contentType: "application/xhtml+xml",
			body:        `<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><body><p>x</p></body></html>`,
			text:        "x",
		},
		{
			name:        "plain text passes through",
			contentType: "text/plain; charset=utf-8",
			body:        "  first line\r\n\r\n  <b>not html</b>  \n",
			text:        "first line\n\n  <b>not html</b>",
		},
		{
			name:        "plain text in latin-1",
			contentType: "text/plain; charset=iso-8859-1",
			body:        "gar\xe7on",
			text:        "garçon",
		},
		{
			name:        "sniffed plain text",
			contentType: "",
			body:        "just words",
			text:        "just words",
		},
		{
			name:        "other types have no text",
			contentType: "application/pdf",
			body:        "%PDF-1.4 <p>not html</p>",
		},
		{
			name:        "image",
			contentType: "image/png",
			body:        "\x89PNG\r\n\x1a\n<p>x</p>",
		},
		{
			name:        "malformed media type parameter",
			contentType: "text/html; charset",
			body:        "<p>still html</p>",
			text:        "still html",
		},
		{
			name:        "empty body",
			contentType: html,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			title, text := ExtractText([]byte(tc.body), tc.contentType)
			if title != tc.title {
				t.Errorf("title = %q, want %q", title, tc.title)
			}
			if text != tc.text {
				t.Errorf("text = %q, want %q", text, tc.text)
			}
		})
	}
}

func TestExtractTextCapsHugePages(t *testing.T) {
	// A page far larger than the cap, made of multi-byte characters so the
	// cut has to land on a character boundary.
	body := "<title>" + strings.Repeat("τίτλος ", 1000) + "</title><p>" + strings.Repeat("ωμέγα ", 120_000) + "</p>"
	title, text := ExtractText([]byte(body), "text/html; charset=utf-8")
	if len(text) > MaxTextBytes || len(text) < MaxTextBytes-16 {
		t.Errorf("text is %d bytes, want just under %d", len(text), MaxTextBytes)
	}
	if len(title) > maxTitleBytes || len(title) < maxTitleBytes-16 {
		t.Errorf("title is %d bytes, want just under %d", len(title), maxTitleBytes)
	}
	if !utf8.ValidString(text) || !utf8.ValidString(title) {
		t.Error("capped text is not valid UTF-8")
	}
	if !strings.HasPrefix(text, "ωμέγα ωμέγα") {
		t.Errorf("text starts %q", text[:20])
	}

	plain := strings.Repeat("ü", MaxTextBytes) // twice the cap in bytes
	if _, text := ExtractText([]byte(plain), "text/plain"); len(text) > MaxTextBytes || !utf8.ValidString(text) {
		t.Errorf("plain text: %d bytes, valid UTF-8 %v", len(text), utf8.ValidString(text))
	}
}

func TestExtractTextPathologicalHTML(t *testing.T) {
	// Shapes that hurt tree builders or quadratic scanners: very deep
	// nesting, a huge attribute, thousands of unclosed elements, and a
	// tag that never ends. Each must finish and keep the visible text.
	const n = 50_000
	cases := map[string]struct {
		body string
		want string
	}{
		"deep nesting":      {strings.Repeat("<div>", n) + "deep" + strings.Repeat("</div>", n), "deep"},
		"huge attribute":    {`<p title="` + strings.Repeat("x", 1<<20) + `">after attr</p>`, "after attr"},
		"unclosed elements": {strings.Repeat("<span><b><i>", n) + "end", "end"},
		"unterminated tag":  {"<p>visible</p><a href='" + strings.Repeat("y", 1<<20), "visible"},
		"nested svg":        {strings.Repeat("<svg>", 1000) + "hidden" + strings.Repeat("</svg>", 1000) + "shown", "shown"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, text := ExtractText([]byte(tc.body), "text/html")
			if text != tc.want {
				if len(text) > 40 {
					text = text[:40] + "..."
				}
				t.Errorf("text = %q, want %q", text, tc.want)
			}
		})
	}
}

func FuzzExtractText(f *testing.F) {
	f.Add([]byte("<html><title>t</title><p>a<br>b</p><script>x</script></html>"), "text/html")
	f.Add([]byte("<pre>a\n b</pre><svg><title>i</title></svg>"), "text/html; charset=windows-1252")
	f.Add([]byte("plain\r\ntext"), "text/plain")
	f.Add([]byte("\xff\xfe<\x00p\x00>\x00"), "")
	// The committed corpus: pages of the synthetic web, and text in the
	// charsets and types servers send.
	fuzzcorpus.Write(f, func() map[string][]any {
		out := map[string][]any{
			"latin1":    {[]byte("<html><title>Caf\xe9</title><p>cr\xe8me br\xfbl\xe9e</p></html>"), "text/html; charset=ISO-8859-1"},
			"meta-sjis": {[]byte("<meta charset=\"shift_jis\"><title>\x83e\x83X\x83g</title><p>\x93\xfa\x96{</p>"), "text/html"},
			"utf16":     {[]byte("\xff\xfe<\x00p\x00>\x00h\x00i\x00"), ""},
			"plain":     {[]byte("plain\r\ntext\twith  spaces\n\n"), "text/plain; charset=utf-8"},
			"pre-svg":   {[]byte("<pre>a\n b</pre><svg><title>i</title></svg><noscript>n</noscript>"), "application/xhtml+xml"},
		}
		for name, body := range synthBodies(f, func(w *synthweb.Web) []string { return append(w.Seeds(), w.Pages()[:3]...) }) {
			out["synth-"+name] = []any{body, "text/html; charset=utf-8"}
		}
		return out
	})
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		// The single pass a worker makes finds what the text-only and the
		// links-only scans it replaced found (oracle_test.go).
		got, want := parsePage(body, contentType, parseOncePageURL, "swarmcrawl", 3), oracleContent(body, contentType)
		if isHTML := IsHTML(contentType, body); got.html != isHTML || isHTML != (textKind(contentType, body) == kindHTML) {
			t.Fatalf("HTML: single pass %v, IsHTML %v, textKind %d", got.html, isHTML, textKind(contentType, body))
		}
		var wantLinks []string
		var wantCapped int
		if got.html {
			wantLinks, wantCapped, _ = oracleLinks(body, parseOncePageURL, "swarmcrawl", 3)
		}
		if got.content != want || !slices.Equal(got.links, wantLinks) || got.capped != wantCapped || got.err != nil {
			t.Fatalf("single pass and the scans it replaced differ: %s", diffParse(got, want, wantLinks, wantCapped, got.html))
		}
		title, text := ExtractText(body, contentType)
		if !utf8.ValidString(title) || !utf8.ValidString(text) {
			t.Fatalf("invalid UTF-8: title %q text %q", title, text)
		}
		if len(text) > MaxTextBytes || len(title) > maxTitleBytes {
			t.Fatalf("over the cap: title %d text %d bytes", len(title), len(text))
		}
		if strings.ContainsAny(title, "\n\t\r") || title != strings.TrimSpace(title) || strings.Contains(title, "  ") {
			t.Fatalf("title whitespace not collapsed: %q", title)
		}
		if textKind(contentType, body) == kindHTML {
			if text != strings.TrimSpace(text) || strings.Contains(text, "\n\n") || strings.Contains(text, "  ") ||
				strings.Contains(text, " \n") || strings.Contains(text, "\n ") || strings.ContainsAny(text, "\t\r") {
				t.Fatalf("HTML text whitespace not collapsed: %q", text)
			}
		}
	})
}

// TestMainTextLeavesOutBoilerplate: the main text of a page is its text
// without header, nav, footer and aside, and only what is inside <main>
// when there is one; a page that is all boilerplate keeps its whole text.
func TestMainTextLeavesOutBoilerplate(t *testing.T) {
	for _, tc := range []struct{ html, main string }{
		{`<header>Site name</header><nav><a href="/">home</a></nav><p>The article.</p><aside>Ads</aside><footer>© site</footer>`, "The article."},
		{`<nav>menu</nav><p>intro outside main</p><main><h1>Title</h1><p>body</p><nav>pages</nav></main><footer>f</footer>`, "Title\nbody"},
		{`<header>only a header</header><footer>and a footer</footer>`, "only a header\nand a footer"},
		{`<p>no boilerplate at all</p>`, "no boilerplate at all"},
	} {
		c := extractContent([]byte("<html><body>"+tc.html+"</body></html>"), "text/html")
		if c.main != tc.main {
			t.Errorf("%s: main text %q, want %q", tc.html, c.main, tc.main)
		}
	}
}

// TestFingerprintOfMainContent: pages that share a long header, navigation
// and footer but differ in their main content are not near-duplicates,
// and pages with the same main content under different boilerplate are:
// the fingerprint a crawl records is that of the page's own content.
func TestFingerprintOfMainContent(t *testing.T) {
	words := func(seed string, n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "%s%d ", seed, (i*7919)%997)
		}
		return b.String()
	}
	shared := words("menu", 400)
	pages := map[string][2]string{ // path: boilerplate, main
		"/a": {shared, words("alpha", 80)},
		"/b": {shared, words("beta", 80)},
		"/c": {words("other", 400), words("alpha", 80)},
	}
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if robotsAllowAll(w, r) {
			return
		}
		p := pages[r.URL.Path]
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<html><body><header>%s</header><nav>%s</nav><main><p>%s</p></main><footer>%s</footer></body></html>", p[0], p[0], p[1], p[0])
	})
	rec := newRecorder()
	cfg := testConfig()
	cfg.Workers = 1
	c := newTestCrawler(t, cfg, rec, nil)
	for _, p := range []string{"/a", "/b", "/c"} {
		c.Enqueue(frontier.Task{URL: srv.URL + p})
	}
	crawlUntilIdle(t, c, 10*time.Second)
	a, b, cp := rec.page(srv.URL+"/a"), rec.page(srv.URL+"/b"), rec.page(srv.URL+"/c")
	if a == nil || b == nil || cp == nil {
		t.Fatal("pages not fetched")
	}
	if d := SimhashDistance(a.Simhash, b.Simhash); d <= cfg.NearDupDistance || b.NearDuplicateOf != "" {
		t.Errorf("different articles under the same boilerplate: distance %d, near-duplicate of %q", d, b.NearDuplicateOf)
	}
	if a.Simhash != cp.Simhash || cp.NearDuplicateOf != a.Task.URL {
		t.Errorf("the same article under different boilerplate: distance %d, near-duplicate of %q",
			SimhashDistance(a.Simhash, cp.Simhash), cp.NearDuplicateOf)
	}
}

// TestPlainRun8 holds the eight-byte test of a text run to its byte-wise
// definition, over every byte value in each position and random mixes of
// the bytes that matter (spaces, printable ASCII, DEL, controls, high).
func TestPlainRun8(t *testing.T) {
	def := func(b [8]byte) bool {
		for k, c := range b {
			if c < ' ' || c > '~' || c == ' ' && (k == 7 || b[k+1] == ' ') {
				return false
			}
		}
		return true
	}
	check := func(b [8]byte) {
		if got, want := plainRun8(binary.LittleEndian.Uint64(b[:])), def(b); got != want {
			t.Fatalf("plainRun8(%q) = %v, want %v", b[:], got, want)
		}
	}
	base := [8]byte{'a', 'b', ' ', 'c', 'd', 'e', ' ', 'f'}
	for k := range base {
		for c := range 256 {
			b := base
			b[k] = byte(c)
			check(b)
		}
	}
	r := rand.New(rand.NewPCG(7, 8))
	picks := []byte{' ', ' ', ' ', 'a', 'Z', '~', '!', 0x7f, 0x1f, 0, '\t', 0x80, 0xff, 0xa0}
	for range 200000 {
		var b [8]byte
		for k := range b {
			b[k] = picks[r.IntN(len(picks))]
		}
		check(b)
	}
}
