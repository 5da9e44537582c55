package crawl

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/internal/fuzzcorpus"
)

// synthBodies returns what the synthetic web (seed 1, with the case hosts)
// answers for each of the given URLs with a 200, by name: the host's first
// label and the path, made a file name.
func synthBodies(tb testing.TB, pick func(w *synthweb.Web) []string) map[string][]byte {
	tb.Helper()
	w, err := synthweb.New(synthweb.Config{Seed: 1, Hosts: 4, Cases: true})
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Close()
	out := map[string][]byte{}
	for _, u := range pick(w) {
		rec := httptest.NewRecorder()
		w.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, u, nil))
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Encoding") != "" {
			continue
		}
		pu, _ := url.Parse(u)
		name := strings.SplitN(pu.Hostname(), ".", 2)[0] + strings.NewReplacer("/", "-", "?", "-", "=", "-", "&", "-").Replace(pu.RequestURI())
		out[strings.TrimSuffix(name, "-")] = rec.Body.Bytes()
	}
	return out
}

// linkDocs are documents shaped to tell a token scan from a tree, and the
// hostile ones: they seed FuzzExtractLinks with the synthetic web's pages.
var linkDocs = map[string]string{
	"late-base":         `<a href="x">x</a><base href="/late/"><a href="y">y</a>`,
	"meta-nofollow":     `<body><a href="/a">a</a><meta name="robots" content="nofollow"></body>`,
	"uppercase":         `<A HREF="/A" REL="NOFOLLOW">a</A><A HREF="/B">b</A><IFRAME SRC="/f"></IFRAME>`,
	"duplicate-attrs":   `<a href="/first" href="/second" rel="x" rel="nofollow">d</a>`,
	"entities":          `<a href="/e?a=1&amp;b=2&lt;">e</a><a href="&#x2f;hex">h</a>`,
	"raw-text":          `<script>var s = '<a href="/in-script">';</script><style>a[href="/s"]{}</style><textarea><a href="/t"></textarea><title><a href="/ti"></title><a href="/after">a</a>`,
	"comments":          `<!-- <a href="/c1"> --><a href="/real">r</a><!--<a href="/c2">-->`,
	"svg-math":          `<svg><a xlink:href='/x' href='/y'></a></svg><math><a href='/z'>`,
	"nested-and-broken": `<p><a href="/1"><div><a href="/2"></div></a><table><a href="/3"><tr><td><a href="/4">`,
	"schemes":           `<a href=" JAVASCRIPT:x">j</a><a href="data:,x">d</a><a href="mailto:a@b">m</a><a href="https://secure.example/">s</a>`,
	"repeats-and-cap":   strings.Repeat(`<a href="/p0">0</a><a href="/p1">1</a><a href="/p2" rel=nofollow>2</a><area href="/p3">`, 5),
}

// linkSeeds returns the seeds of the fuzzers of link extraction, each a
// body and a link cap: a tenth of the pages of the synthetic webs and
// their seeds (named "synth-" and the page), and linkDocs (named
// docPrefix and the document's name).
func linkSeeds(tb testing.TB, docPrefix string) map[string][]any {
	out := map[string][]any{}
	for name, body := range synthBodies(tb, func(w *synthweb.Web) []string {
		var pick []string
		for i, u := range w.Pages() {
			if i%10 == 0 && !strings.HasSuffix(u, ".bin") {
				pick = append(pick, u)
			}
		}
		return append(pick, w.Seeds()...)
	}) {
		out["synth-"+name] = []any{body, uint8(3)}
	}
	for name, doc := range linkDocs {
		out[docPrefix+name] = []any{[]byte(doc), uint8(2)}
	}
	return out
}

// FuzzExtractLinks extracts the links of arbitrary HTML on a page, with a
// cap of maxLinks%8 (0: none), as a worker does with every page it
// fetches. It never fails, returns at most the cap, distinct and
// normalised URLs, and what it keeps under a cap is the start of what it
// keeps without one: a cap of n keeps the first n distinct references,
// counts the rest, and changes nothing else (capped is 0 exactly when the
// uncapped scan found no more than that). The single pass a worker makes
// (parsePage, for text/html) finds the same links as the links-only scan
// it replaced (oracleLinks), with and without the cap.
func FuzzExtractLinks(f *testing.F) {
	const page = "http://example.com/dir/page.html"
	pageURL, _ := url.Parse(page)
	seeds := func() map[string][]any { return linkSeeds(f, "") }
	for _, args := range seeds() {
		f.Add(args[0].([]byte), args[1].(uint8))
	}
	fuzzcorpus.Write(f, seeds)
	f.Fuzz(func(t *testing.T, body []byte, maxLinks uint8) {
		limit := int(maxLinks % 8)
		all, allCapped, err := ExtractLinks(body, pageURL, "swarmcrawl", 0)
		if err != nil || allCapped != 0 {
			t.Fatalf("uncapped: %d capped, error %v", allCapped, err)
		}
		for _, max := range []int{0, limit} {
			want, wantCapped, _ := oracleLinks(body, pageURL, "swarmcrawl", max)
			got := parsePage(body, "text/html", pageURL, "swarmcrawl", max)
			if !slices.Equal(got.links, want) || got.capped != wantCapped || got.err != nil {
				t.Fatalf("cap %d: single pass %q (%d capped, error %v), links-only scan %q (%d)", max, got.links, got.capped, got.err, want, wantCapped)
			}
		}
		seen := map[string]bool{}
		for _, l := range all {
			if n, err := urls.Normalize(nil, l); err != nil || n != l || len(l) > urls.MaxURLLength {
				t.Fatalf("link %q not normalised (%q, %v)", l, n, err)
			}
			if seen[l] {
				t.Fatalf("link %q twice", l)
			}
			seen[l] = true
		}
		if treeComparable(body) {
			if want := treeLinks(t, body, pageURL, "swarmcrawl"); !slices.Equal(all, want) {
				t.Fatalf("links %q\ntree parser %q", all, want)
			}
		}
		if limit == 0 {
			return
		}
		links, capped, err := ExtractLinks(body, pageURL, "swarmcrawl", limit)
		switch {
		case err != nil:
			t.Fatalf("cap %d: %v", limit, err)
		case len(links) > limit:
			t.Fatalf("cap %d: %d links", limit, len(links))
		case !slices.Equal(links, all[:len(links)]):
			t.Fatalf("cap %d: %q is not the start of %q", limit, links, all)
		case capped < 0 || capped == 0 && len(links) != len(all):
			t.Fatalf("cap %d: %d of %d links kept, %d counted as capped", limit, len(links), len(all), capped)
		}
	})
}

// treeComparable reports whether ExtractLinks should find exactly what the
// tree parser finds in body (treeLinks): not where its documentation says
// they differ, around <frame> and <frameset>, and not in SVG or MathML
// content, where the tree parser reads the content of <style>, <title> and
// the other raw-text elements as markup, CDATA sections as text, and
// xlink:href as href.
func treeComparable(body []byte) bool {
	lower := bytes.ToLower(body)
	for _, s := range []string{"<frame", "svg", "math", "xlink"} {
		if bytes.Contains(lower, []byte(s)) {
			return false
		}
	}
	return true
}
