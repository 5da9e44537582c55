package crawl

import (
	"net/url"
	"slices"
	"strings"
	"testing"
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
			name: "html entities in href",
			html: `<a href="/q?a=1&amp;b=2">q</a>`,
			want: []string{"http://example.com/q?a=1&b=2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ExtractLinks([]byte(tt.html), page, "swarmcrawl")
			if err != nil {
				t.Fatalf("ExtractLinks: %v", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("links = %q\nwant    %q", got, tt.want)
			}
		})
	}
}

// TestExtractLinksDeepNesting covers documents the tree parser rejects
// (nesting beyond 512 elements): the tokenizer fallback must still apply
// every rule.
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
		got, err := ExtractLinks([]byte(tt.html), page, "swarmcrawl")
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
		if _, err := ExtractLinks(in, page, "swarmcrawl"); err != nil {
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
