package crawl

import (
	"fmt"
	"strings"
	"testing"
)

// mainTextPage is a page with the parts a site puts around an article:
// a header and navigation of links, a sidebar of teasers, a comment
// section and a hidden consent dialog that each hold more text than
// the article, a list of related links after it, and a footer.
func mainTextPage() (page string, article []string) {
	para := func(s string, n int) string { return strings.Repeat(s+" ", n) }
	article = []string{
		"How the river changed its course",
		para("The river left its old bed in the spring flood, and the town had to follow it.", 3),
		para("Engineers, farmers and the mayor argued for a year about the new bridge.", 3),
		"Why the bridge moved",
		para("In the end the bridge was built where the water wanted it, not where the map said.", 3),
	}
	var b strings.Builder
	b.WriteString(`<html><head><title>River</title></head><body>`)
	b.WriteString(`<header><a href="/">Town News</a><nav><ul>`)
	for i := range 20 {
		fmt.Fprintf(&b, `<li><a href="/s%d">Section %d</a></li>`, i, i)
	}
	b.WriteString(`</ul></nav></header>`)
	fmt.Fprintf(&b, `<div class="wrapper has-sidebar"><div class="sidebar"><h3>Most read</h3><p>%s</p></div>`,
		para("A sidebar story teaser that is long but is not this page's content at all.", 8))
	fmt.Fprintf(&b, `<div class="col"><div class="byline">By A. Writer, 3 May</div><h1>%s</h1><p>%s</p><p>%s</p><h2>%s</h2><p>%s</p></div>`,
		article[0], article[1], article[2], article[3], article[4])
	b.WriteString(`<div class="related"><ul>`)
	for i := range 8 {
		fmt.Fprintf(&b, `<li><a href="/r%d">Related story number %d about other rivers</a></li>`, i, i)
	}
	b.WriteString(`</ul></div>`)
	fmt.Fprintf(&b, `<div id="comments"><p>%s</p><p>%s</p></div>`,
		para("A reader comment that goes on and on about bridges and taxes in general.", 6),
		para("Another reader answers at length, as readers do, about the mayor.", 6))
	fmt.Fprintf(&b, `</div><div class="consent" style="display: none"><p>%s</p></div>`,
		para("We and our partners use cookies to store and access information on your device.", 12))
	b.WriteString(`<footer><p>© Town News</p><a href="/imprint">Imprint</a></footer></body></html>`)
	return b.String(), article
}

// TestMainTextChoosesContent: the main text of a page is its article,
// headings included, without the navigation, sidebar, byline, related
// links, comments, hidden dialog and footer around it, though the
// sidebar, the comments and the dialog each hold more text than the
// article. The whole visible text still holds all of them.
func TestMainTextChoosesContent(t *testing.T) {
	page, article := mainTextPage()
	c := extractContent([]byte(page), "text/html")
	want := make([]string, len(article))
	for i, a := range article {
		want[i] = strings.TrimSpace(a)
	}
	if got := strings.Join(want, "\n"); c.main != got {
		t.Errorf("main text:\n%s\nwant:\n%s", c.main, got)
	}
	for _, s := range []string{"Section 3", "Most read", "By A. Writer", "Related story", "reader comment", "cookies", "Imprint"} {
		if !strings.Contains(c.text, s) {
			t.Errorf("visible text lacks %q", s)
		}
	}
	// The single pass over fastTokens chooses as the tokeniser's pass does.
	if got := oracleContent([]byte(page), "text/html"); got.main != c.main {
		t.Errorf("the tokeniser's main text differs:\n%s", got.main)
	}
}

// TestClassHint: class and id names tell boilerplate, comments and
// content apart; a commentary is not a comment section, and content
// names outweigh other boilerplate names but not comments.
func TestClassHint(t *testing.T) {
	for _, tc := range []struct {
		class, id string
		want      int8
	}{
		{"sidebar-left", "", hintNamedBoiler},
		{"", "site-navigation", hintNamedBoiler},
		{"", "main-navigation", 0},
		{"site-footer", "", hintNamedBoiler},
		{"share-buttons", "", hintNamedBoiler},
		{"ad", "", hintNamedBoiler},
		{"col ads-top", "", hintNamedBoiler},
		{"entry-content", "", hintContent},
		{"Article-Body", "", hintContent},
		{"content-sidebar", "", 0},
		{"", "comments", hintBoiler},
		{"comment-content", "", hintBoiler},
		{"sect commentary", "", 0},
		{"headline downloads", "", 0}, // "ad" only as a word
		{"row", "x12", 0},
		{"", "", 0},
	} {
		if got := classHint([]byte(tc.class), []byte(tc.id)); got != tc.want {
			t.Errorf("class %q id %q: hint %d, want %d", tc.class, tc.id, got, tc.want)
		}
	}
}

// TestHiddenStyle: a style hides its element only with display: none.
func TestHiddenStyle(t *testing.T) {
	for style, want := range map[string]bool{
		"display:none":                 true,
		"color: red; DISPLAY : None ;": true,
		"display: block":               false,
		"max-display: 1":               false,
		"":                             false,
		"display":                      false,
	} {
		if got := hidden([]byte(style)); got != want {
			t.Errorf("hidden(%q) = %v, want %v", style, got, want)
		}
	}
}

// TestMainTextBounded: a page nested far deeper than maxDepth and with
// more blocks and containers than kept still has a main text, from a
// scan whose blocks and containers stay within their bounds.
func TestMainTextBounded(t *testing.T) {
	var b strings.Builder
	for range 3 * maxDepth {
		b.WriteString(`<div class="x">`)
	}
	n := maxBlocks + 1000
	for i := range n {
		fmt.Fprintf(&b, "<section><p>paragraph %d of words enough to count as text</p></section>", i)
	}
	body := []byte(b.String())
	s := newTextScan()
	if err := scanBody(body, s, nil); err != nil {
		t.Fatal(err)
	}
	if len(s.m.blocks) > maxBlocks || len(s.m.conts) > maxContainers {
		t.Errorf("%d blocks, %d containers kept", len(s.m.blocks), len(s.m.conts))
	}
	c := s.result()
	if !strings.HasPrefix(c.main, "paragraph 0 of") || !strings.HasSuffix(c.main, fmt.Sprintf("paragraph %d of words enough to count as text", n-1)) {
		t.Errorf("main text of %d bytes starts %.40q, ends %q", len(c.main), c.main, c.main[max(len(c.main)-60, 0):])
	}
}
