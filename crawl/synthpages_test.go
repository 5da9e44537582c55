package crawl

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
)

// synthResponse is one 200 answer of a synthetic web, as a worker receives
// it: the URL asked for, its Content-Type and its body.
type synthResponse struct {
	url, contentType string
	pageURL          *url.URL
	body             []byte
}

// maxTrapPages bounds the pages synthResponses takes from each trap
// section, which never ends.
const maxTrapPages = 40

// synthResponses walks a synthetic web breadth-first from its seeds
// through its handler, as a crawler that ignores robots.txt would, and
// returns every 200 answer: the generated hosts' pages (orphans aside),
// the case hosts' and at most maxTrapPages of each trap section. Links
// are found with oracleLinks (the links-only scan); redirects are followed, slow pages skipped.
func synthResponses(tb testing.TB, cfg synthweb.Config) []synthResponse {
	tb.Helper()
	w, err := synthweb.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Close()
	slow := w.SlowURLs()
	seen := map[string]bool{}
	trapPages := map[string]int{}
	queue := slices.Clone(w.Seeds())
	for _, u := range queue {
		seen[u] = true
	}
	var out []synthResponse
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		rec := httptest.NewRecorder()
		w.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, u, nil))
		pu, err := url.Parse(u)
		if err != nil {
			tb.Fatal(err)
		}
		var next []string
		switch {
		case rec.Code >= 300 && rec.Code < 400:
			next = []string{rec.Header().Get("Location")}
		case rec.Code == http.StatusOK:
			r := synthResponse{url: u, contentType: rec.Header().Get("Content-Type"), pageURL: pu, body: rec.Body.Bytes()}
			out = append(out, r)
			if IsHTML(r.contentType, r.body) {
				next, _, _ = oracleLinks(r.body, pu, "swarmcrawl", 0)
			}
		}
		for _, l := range next {
			n, err := url.Parse(l)
			if err != nil {
				continue
			}
			n = pu.ResolveReference(n)
			l = n.String()
			if seen[l] || !strings.HasSuffix(n.Hostname(), ".synth.test") || slices.Contains(slow, l) {
				continue
			}
			if w.IsTrapURL(l) {
				if trapPages[n.Host] >= maxTrapPages {
					continue
				}
				trapPages[n.Host]++
			}
			seen[l] = true
			queue = append(queue, l)
		}
	}
	return out
}
