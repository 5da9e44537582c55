package crawl

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
)

func TestExtractLinks(t *testing.T) {
	page, _ := url.Parse("http://example.com/dir/page.html")
	tests := []struct {
		name string
		html string
		want []string
	}{
		{
			name: "relative and absolute, in document order",
			html: `<a href="b.html">b</a><a href="/c">c</a><a href="http://Other.example:80/d#x">d</a>`,
			want: []string{"http://example.com/dir/b.html", "http://example.com/c", "http://other.example/d"},
		},
		{
			name: "base href",
			html: `<head><base href="http://cdn.example/root/"></head><body><a href="x">x</a><a href="/y">y</a></body>`,
			want: []string{"http://cdn.example/root/x", "http://cdn.example/y"},
		},
		{
			name: "relative base href",
			html: `<base href="../other/"><a href="x">x</a>`,
			want: []string{"http://example.com/other/x"},
		},
		{
			name: "only the first base counts",
			html: `<base href="/one/"><base href="/two/"><a href="x">x</a>`,
			want: []string{"http://example.com/one/x"},
		},
		{
			name: "unusable base ignored",
			html: `<base href="javascript:alert(1)"><a href="x">x</a>`,
			want: []string{"http://example.com/dir/x"},
		},
		{
			name: "rel nofollow skipped",
			html: `<a href="/a" rel="nofollow">a</a><a href="/b" rel="external NoFollow noopener">b</a><a href="/c" rel="noopener">c</a>`,
			want: []string{"http://example.com/c"},
		},
		{
			name: "meta robots nofollow",
			html: `<meta name="robots" content="noindex, nofollow"><a href="/a">a</a>`,
			want: nil,
		},
		{
			name: "meta robots none",
			html: `<meta name="ROBOTS" content="NONE"><a href="/a">a</a>`,
			want: nil,
		},
		{
			name: "meta for our token",
			html: `<meta name="swarmcrawl" content="nofollow"><a href="/a">a</a>`,
			want: nil,
		},
		{
			name: "meta for another bot",
			html: `<meta name="otherbot" content="nofollow"><meta name="robots" content="noindex"><a href="/a">a</a>`,
			want: []string{"http://example.com/a"},
		},
		{
			name: "non-web schemes skipped",
			html: `<a href="mailto:x@example.com">m</a><a href="JavaScript:void(0)">j</a><a href="tel:+1">t</a>` +
				`<a href="data:text/html,hi">d</a><a href="ftp://example.com/f">f</a><a href="/ok">ok</a>`,
			want: []string{"http://example.com/ok"},
		},
		{
			name: "deduplicated after normalisation",
			html: `<a href="/a">1</a><a href="/a#x">2</a><a href="http://EXAMPLE.com:80/a?utm_source=z">3</a><a href="./../dir/../a">4</a>`,
			want: []string{"http://example.com/a"},
		},
		{
			name: "area and iframe",
			html: `<map><area href="/area"></map><iframe src="/iframe"></iframe>`,
			want: []string{"http://example.com/area", "http://example.com/iframe"},
		},
		{
			name: "frameset",
			html: `<html><frameset><frame src="/left"><frame src="right"></frameset></html>`,
			want: []string{"http://example.com/left", "http://example.com/dir/right"},
		},
		{
			name: "ignored elements",
			html: `<img src="/img.png"><link href="/style.css"><script src="/s.js"></script><a name="anchor">no href</a>`,
			want: nil,
		},
		{
			name: "empty href skipped",
			html: `<a href="">self</a><a href=" ">blank</a>`,
			want: nil,
		},
		{
			name: "malformed html",
			html: `<html><body><a href="/one">one<a href=/two>two</b></i><div><a href='/three'<p><<<>>>` +
				"\x00\xff<a href=\"/four\">\n<table><tr><td><a href=\"/five\"></td></table></html></html><a href=\"/six",
			// Whatever the HTML5 parser recovers; the point is no panic, no error.
			want: []string{"http://example.com/one", "http://example.com/two", "http://example.com/three",
				"http://example.com/four", "http://example.com/five"},
		},
		{
			name: "svg links",
			html: `<svg><a xlink:href="/svg-x">x</a><a href="/svg-h">h</a></svg>`,
			want: []string{"http://example.com/svg-x", "http://example.com/svg-h"},
		},
		{
			// The tree parser drops both; a token scan cannot tell, and a
			// framed document is a page either way.
			name: "frame outside a frameset, link after one",
			html: `<body><frame src="/stray"></body><frameset></frameset><a href="/after">`,
			want: []string{"http://example.com/stray", "http://example.com/after"},
		},
		{
			name: "html entities in href",
			html: `<a href="/q?a=1&amp;b=2">q</a>`,
			want: []string{"http://example.com/q?a=1&b=2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := ExtractLinks([]byte(tt.html), page, "swarmcrawl", 0)
			if err != nil {
				t.Fatalf("ExtractLinks: %v", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("links = %q\nwant    %q", got, tt.want)
			}
		})
	}
}

// TestExtractLinksDeepNesting covers documents the HTML5 tree parser
// rejects (nesting beyond 512 elements): every rule still applies.
func TestExtractLinksDeepNesting(t *testing.T) {
	page, _ := url.Parse("http://example.com/dir/")
	deep := strings.Repeat("<div>", 600)
	tests := []struct {
		name string
		html string
		want []string
	}{
		{"links", `<base href="/b/">` + deep + `<a href="x">x</a><a rel="nofollow" href="/n">n</a><area href="/y"><iframe src="/z">`,
			[]string{"http://example.com/b/x", "http://example.com/y", "http://example.com/z"}},
		{"meta nofollow", `<meta name="robots" content="nofollow">` + deep + `<a href="/x">x</a>`, nil},
	}
	for _, tt := range tests {
		got, _, err := ExtractLinks([]byte(tt.html), page, "swarmcrawl", 0)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: links = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestExtractLinksGarbage(t *testing.T) {
	page, _ := url.Parse("http://example.com/")
	inputs := [][]byte{
		nil,
		[]byte("\x00\x01\x02"),
		[]byte(strings.Repeat("<div>", 10000)),
		[]byte(strings.Repeat("<a href='", 1000)),
		[]byte("<svg><a xlink:href='/x' href='/y'></a></svg><math><a href='/z'>"),
		[]byte("<!-- <a href='/commented'> -->"),
	}
	for _, in := range inputs {
		if _, _, err := ExtractLinks(in, page, "swarmcrawl", 0); err != nil {
			t.Errorf("ExtractLinks(%.20q): %v", in, err)
		}
	}
}

func TestIsHTML(t *testing.T) {
	tests := []struct {
		ctype string
		body  string
		want  bool
	}{
		{"text/html", "", true},
		{"text/html; charset=utf-8", "", true},
		{"TEXT/HTML;charset=ISO-8859-1", "", true},
		{"application/xhtml+xml", "", true},
		{"application/pdf", "<html><a href=/x>", false},
		{"image/png", "", false},
		{"text/plain", "<html>", false},
		{"", "<!DOCTYPE html><html><body>hi", true}, // sniffed
		{"", "%PDF-1.4", false},
		{"", "plain words", false},
	}
	for _, tt := range tests {
		if got := IsHTML(tt.ctype, []byte(tt.body)); got != tt.want {
			t.Errorf("IsHTML(%q, %.10q) = %v, want %v", tt.ctype, tt.body, got, tt.want)
		}
	}
}

// treeLinks is the reference for ExtractLinks: the links the HTML5 tree
// parser (through goquery) finds with the same rules, as the crawler
// extracted them before it switched to one tokeniser pass.
func treeLinks(t *testing.T, body []byte, pageURL *url.URL, uaToken string) []string {
	t.Helper()
	doc, err := goquery.NewDocumentFromReader(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("goquery: %v", err)
	}
	nofollow := false
	doc.Find("meta[name]").EachWithBreak(func(_ int, s *goquery.Selection) bool {
		nofollow = metaSaysNofollow(s.AttrOr("name", ""), s.AttrOr("content", ""), uaToken)
		return !nofollow
	})
	if nofollow {
		return nil
	}
	base := pageURL
	if href, ok := doc.Find("base[href]").First().Attr("href"); ok {
		base = resolveBase(href, pageURL)
	}
	var links []string
	seen := map[string]bool{}
	doc.Find("a[href], area[href], frame[src], iframe[src]").Each(func(_ int, s *goquery.Selection) {
		ref, ok := s.Attr("href")
		if !ok || goquery.NodeName(s) == "frame" || goquery.NodeName(s) == "iframe" {
			ref = s.AttrOr("src", "")
		}
		if strings.TrimSpace(ref) == "" || relNofollow([]byte(s.AttrOr("rel", ""))) || skipScheme([]byte(ref)) {
			return
		}
		if n, err := urls.Normalize(base, ref); err == nil && !seen[n] {
			seen[n] = true
			links = append(links, n)
		}
	})
	return links
}

// TestExtractLinksMatchesTreeParser compares ExtractLinks with the tree
// parser on every HTML page of two synthetic webs and on documents shaped
// to tell a token scan from a tree: they find the same links in the same
// order.
func TestExtractLinksMatchesTreeParser(t *testing.T) {
	page, _ := url.Parse("http://example.com/dir/page.html")
	docs := map[string]string{
		"late base":          `<a href="x">x</a><base href="/late/"><a href="y">y</a>`,
		"meta in body":       `<body><a href="/a">a</a><meta name="robots" content="nofollow"></body>`,
		"uppercase":          `<A HREF="/A" REL="NOFOLLOW">a</A><A HREF="/B">b</A><IFRAME SRC="/f"></IFRAME>`,
		"unquoted":           `<a href=/u1>u</a><a href=u2 rel=nofollow>u</a>`,
		"duplicate attrs":    `<a href="/first" href="/second" rel="x" rel="nofollow">d</a>`,
		"entities":           `<a href="/e?a=1&amp;b=2&lt;">e</a><a href="&#x2f;hex">h</a>`,
		"raw text":           `<script>var s = '<a href="/in-script">';</script><style>a[href="/in-style"]{}</style><textarea><a href="/in-textarea"></textarea><title><a href="/in-title"></title><a href="/after">a</a>`,
		"noscript":           `<head><noscript><a href="/ns-head"></noscript></head><body><noscript><a href="/ns-body"></a></noscript></body>`,
		"comments":           `<!-- <a href="/c1"> --><a href="/real">r</a><!--<a href="/c2">-->`,
		"template":           `<template><a href="/in-template">t</a></template>`,
		"iframe with href":   `<iframe href="/h" src="/s"></iframe>`,
		"whitespace":         "<a href=\"\n /w \t\">w</a><a href=\"\t\">empty</a>",
		"nested and broken":  `<p><a href="/1"><div><a href="/2"></div></a><table><a href="/3"><tr><td><a href="/4">`,
		"schemes":            `<a href=" JAVASCRIPT:x">j</a><a href="data:,x">d</a><a href="https://secure.example/">s</a>`,
		"meta for our token": `<meta name="swarmcrawl" content="noindex,nofollow"><a href="/x">x</a>`,
	}
	var names []string
	for n := range docs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		body := []byte(docs[name])
		got, _, err := ExtractLinks(body, page, "swarmcrawl", 0)
		if want := treeLinks(t, body, page, "swarmcrawl"); err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: links %q (err %v)\ntree parser    %q", name, got, err, want)
		}
	}

	for _, cfg := range []synthweb.Config{{Seed: 1, Hosts: 20}, {Seed: 3, Hosts: 5, Cases: true}} {
		w, err := synthweb.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		pages := 0
		for _, u := range w.Pages() {
			rec := httptest.NewRecorder()
			w.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, u, nil))
			body := rec.Body.Bytes()
			if rec.Code != http.StatusOK || !IsHTML(rec.Header().Get("Content-Type"), body) || rec.Header().Get("Content-Encoding") != "" {
				continue
			}
			pages++
			pu, _ := url.Parse(u)
			got, _, err := ExtractLinks(body, pu, "swarmcrawl", 0)
			if want := treeLinks(t, body, pu, "swarmcrawl"); err != nil || !slices.Equal(got, want) {
				t.Errorf("%s: links %q (err %v)\ntree parser %q", u, got, err, want)
			}
		}
		if pages < 20 {
			t.Errorf("synthetic web %+v: only %d HTML pages compared", cfg, pages)
		}
	}
}
