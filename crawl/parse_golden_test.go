package crawl

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
)

// TestParseOnceGolden: for every 200 answer of two synthetic webs (one
// with hot and trap hosts, one with the case hosts), the single pass
// (parsePage) finds the same title, text and main text (so the same
// fingerprint) as the text-only scan it replaced, and of an HTML page the
// same links and count of capped links as the links-only scan, with the
// default cap, a cap of 3 and none; and without a page URL it looks for no
// links. The two scans it replaced are the oracle (oracle_test.go).
func TestParseOnceGolden(t *testing.T) {
	for _, web := range []synthweb.Config{
		parseWeb,
		{Seed: 2, Hosts: 6, Cases: true},
	} {
		responses := synthResponses(t, web)
		var html, links, capped int
		for _, r := range responses {
			want := oracleContent(r.body, r.contentType)
			isHTML := IsHTML(r.contentType, r.body)
			if got := parsePage(r.body, r.contentType, nil, "swarmcrawl", 0); got.content != want || got.html != isHTML || got.links != nil {
				t.Errorf("%s without a page URL: %s", r.url, diffParse(got, want, nil, 0, isHTML))
			}
			for _, max := range []int{DefaultConfig().MaxLinksPerPage, 3, 0} {
				got := parsePage(r.body, r.contentType, r.pageURL, "swarmcrawl", max)
				var wantLinks []string
				var wantCapped int
				if isHTML {
					var err error
					if wantLinks, wantCapped, err = oracleLinks(r.body, r.pageURL, "swarmcrawl", max); err != nil {
						t.Fatalf("%s: oracle: %v", r.url, err)
					}
				}
				if got.content != want || got.html != isHTML || got.err != nil ||
					!slices.Equal(got.links, wantLinks) || got.capped != wantCapped {
					t.Errorf("%s, cap %d: %s", r.url, max, diffParse(got, want, wantLinks, wantCapped, isHTML))
				}
				switch max {
				case 0:
					links += len(wantLinks)
				case 3:
					capped += wantCapped
				}
			}
			if isHTML {
				html++
			}
		}
		name := fmt.Sprintf("seed %d, %d hosts, cases %v", web.Seed, web.Hosts, web.Cases)
		t.Logf("%s: %d answers, %d HTML, %d links, %d capped at 3", name, len(responses), html, links, capped)
		// A walk that found little would prove little.
		if html < 100 || links < 2*html || capped == 0 {
			t.Errorf("%s: only %d HTML pages with %d links, %d capped at 3", name, html, links, capped)
		}
	}
}

// diffParse describes how a parse differs from the oracle's.
func diffParse(got parsed, want content, links []string, capped int, html bool) string {
	s := ""
	if got.title != want.title {
		s += fmt.Sprintf("title %q, want %q; ", got.title, want.title)
	}
	if got.text != want.text {
		s += "text " + firstDiff(got.text, want.text) + "; "
	}
	if got.main != want.main {
		s += "main text " + firstDiff(got.main, want.main) + "; "
	}
	if got.html != html {
		s += fmt.Sprintf("html %v, want %v; ", got.html, html)
	}
	if got.err != nil {
		s += fmt.Sprintf("error %v; ", got.err)
	}
	if !slices.Equal(got.links, links) || got.capped != capped {
		s += fmt.Sprintf("links %q (%d capped), want %q (%d)", got.links, got.capped, links, capped)
	}
	return s
}

// firstDiff shows where two texts first differ.
func firstDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(i-20, 0)
	return fmt.Sprintf("of %d bytes differs at %d: %.40q, want %.40q (of %d)", len(got), i, got[from:], want[from:], len(want))
}

// parseOncePageURL is the page the fuzz targets' documents come from.
var parseOncePageURL, _ = url.Parse("http://example.com/dir/page.html")

// TestParsePageLinksAfterFullText: the single pass goes on reading a page
// for its links once its text is full, as the links-only scan did, while
// the text and title stay what the text-only scan took before it stopped.
func TestParsePageLinksAfterFullText(t *testing.T) {
	var b strings.Builder
	b.WriteString(`<html><body><a href="first">first</a><p>`)
	for b.Len() < MaxTextBytes+1000 {
		b.WriteString("words of prose ")
	}
	b.WriteString(`</p><title>late title</title><a href="last">last</a><base href="/base/"></body></html>`)
	body := []byte(b.String())
	got := parsePage(body, "text/html", parseOncePageURL, "swarmcrawl", 0)
	wantLinks := []string{"http://example.com/base/first", "http://example.com/base/last"}
	if want := oracleContent(body, "text/html"); got.content != want || len(got.text) < MaxTextBytes-20 || got.title != "" ||
		!slices.Equal(got.links, wantLinks) {
		t.Errorf("text of %d bytes (title %q), links %q; want %d bytes, no title, links %q",
			len(got.text), got.title, got.links, len(want.text), wantLinks)
	}
}

// TestParsePageTranscodedLinksAsSent: a page whose text has to be
// transcoded to UTF-8 keeps the links of its bytes as sent, as
// ExtractLinks takes them (a windows-1252 é in an href is the byte E9,
// and a UTF-16 page has no tags to a byte scan), while its text is
// decoded.
func TestParsePageTranscodedLinksAsSent(t *testing.T) {
	latin1 := []byte("<p>Caf\xe9</p><a href=\"/caf\xe9\">x</a><a href=\"/plain\">y</a>")
	utf16 := []byte("\xff\xfe<\x00a\x00 \x00h\x00r\x00e\x00f\x00=\x00/\x00x\x00>\x00h\x00i\x00")
	for _, tc := range []struct {
		name, contentType string
		body              []byte
		text              string
	}{
		{"windows-1252", "text/html; charset=windows-1252", latin1, "Café\nxy"},
		{"utf-16", "text/html", utf16, "\ufeffhi"},
	} {
		got := parsePage(tc.body, tc.contentType, parseOncePageURL, "swarmcrawl", 0)
		want, _, _ := oracleLinks(tc.body, parseOncePageURL, "swarmcrawl", 0)
		if got.text != tc.text || !slices.Equal(got.links, want) || len(want) == 0 && tc.name != "utf-16" {
			t.Errorf("%s: text %q, links %q; want %q, %q", tc.name, got.text, got.links, tc.text, want)
		}
	}
}

// TestTextBuilderMatchesOracle: the text builder, which appends runs of
// printable ASCII at once, builds what the oracle's builder, which
// appends one character at a time, builds from the same writes, up to
// the limit too: random runs of ASCII words, whitespace, multi-byte,
// invalid and control characters, with line breaks and spaces asked for
// in between, under limits from 0 to 60 bytes.
func TestTextBuilderMatchesOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 3))
	pieces := []string{"word", "a", "longer-word,", " ", "  ", "\n", "\t", "é", "日本", "\xff", "\x01", "\u00a0", "\r\n", "x\ny", "\u2003"}
	for i := range 20_000 {
		limit := i % 61
		got, want := textBuilder{limit: limit}, oracleTextBuilder{limit: limit}
		for range 1 + r.IntN(12) {
			switch r.IntN(6) {
			case 0:
				got.space()
				want.space()
			case 1:
				got.lineBreak()
				want.lineBreak()
			default:
				var s []byte
				for range 1 + r.IntN(4) {
					s = append(s, pieces[r.IntN(len(pieces))]...)
				}
				keep := r.IntN(3) == 0
				got.write(s, keep)
				want.write(s, keep)
			}
		}
		if string(got.b) != string(want.b) || got.full != want.full {
			t.Fatalf("limit %d: built %q (full %v), oracle %q (full %v)", limit, got.b, got.full, want.b, want.full)
		}
	}
}
