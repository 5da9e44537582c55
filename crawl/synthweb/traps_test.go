package synthweb

import (
	"html"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// serve answers one GET through the handler.
func serve(w *Web, u string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	w.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, u, nil))
	return rec
}

// TestTrapAndHotHosts: trap hosts link an endless section from their root
// that stays out of the ground truth, the session host's own links carry
// fresh session ids, hot hosts are large, and the choice of both leaves
// the rest of the web as it was.
func TestTrapAndHotHosts(t *testing.T) {
	cfg := Config{Seed: 2, Hosts: 60, HotHosts: 2, HotPages: 100, TrapHosts: 5}
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	truth := map[string]bool{}
	for _, u := range w.GroundTruth("swarmcrawl") {
		truth[u] = true
		if w.IsTrapURL(u) {
			t.Errorf("trap URL %s in the ground truth", u)
		}
	}
	kinds := map[TrapKind]string{}
	for _, h := range w.Hosts() {
		if k := w.TrapKindOf(h); k != TrapNone {
			kinds[k] = h
			if !truth["http://"+h+"/"] {
				t.Errorf("trap host %s: root not in the ground truth", h)
			}
		}
	}
	if len(kinds) != 5 {
		t.Fatalf("trap kinds %v, want all five", kinds)
	}
	// Each section goes on for ever: follow its first link 50 times.
	for _, k := range []TrapKind{TrapCalendar, TrapPagination, TrapDeep, TrapFacets} {
		host := kinds[k]
		root := serve(w, "http://"+host+"/").Body.String()
		entry := "http://" + host + trapEntry(k)
		if !strings.Contains(root, `href="`+entry+`"`) {
			t.Fatalf("%s: root does not link %s", k, entry)
		}
		u := entry
		for i := 0; i < 50; i++ {
			rec := serve(w, u)
			if rec.Code != 200 || !w.IsTrapURL(u) {
				t.Fatalf("%s: %s answered %d (trap URL %v)", k, u, rec.Code, w.IsTrapURL(u))
			}
			m := regexp.MustCompile(`<li><a href="([^"]+)"`).FindStringSubmatch(rec.Body.String())
			if m == nil {
				t.Fatalf("%s: %s has no link", k, u)
			}
			next, err := resolve(u, html.UnescapeString(m[1]))
			if err != nil || next == u {
				t.Fatalf("%s: %s links %q", k, u, m[1])
			}
			u = next
		}
	}
	if rec := serve(w, "http://"+kinds[TrapDeep]+"/tree/n1/n3/"); rec.Code != 404 {
		t.Errorf("deep: a path that is not in the section answered %d", rec.Code)
	}
	// Session: links to the host's own pages carry a fresh id.
	host := kinds[TrapSession]
	a, b := serve(w, "http://"+host+"/").Body.String(), serve(w, "http://"+host+"/").Body.String()
	ids := regexp.MustCompile(`(?i)(sessionid|sid|phpsessid)=[0-9a-f]{16}`)
	if len(ids.FindAllString(a, -1)) == 0 || a == b {
		t.Errorf("session host root does not carry fresh session ids:\n%s", a)
	}
	for _, h := range w.HotHosts() {
		n := 0
		for _, u := range w.Pages() {
			if strings.HasPrefix(u, "http://"+h+"/") {
				n++
			}
		}
		if n < cfg.HotPages/2 {
			t.Errorf("hot host %s has %d pages, want at least %d", h, n, cfg.HotPages/2)
		}
	}
	if len(w.HotHosts()) != 2 {
		t.Errorf("hot hosts %v, want 2", w.HotHosts())
	}
	// Within: depth 0 is the seeds, and the whole ground truth is within
	// some depth.
	if got := w.Within("swarmcrawl", 0); len(got) != cfg.withSeeds() {
		t.Errorf("Within(0) = %v, want the %d seeds", got, cfg.withSeeds())
	}
	if got := len(w.Within("swarmcrawl", 1000)); got != len(truth) {
		t.Errorf("Within(1000) has %d URLs, the ground truth %d", got, len(truth))
	}
}

func (c Config) withSeeds() int {
	d, _ := c.withDefaults()
	return d.Seeds
}

func resolve(base, ref string) (string, error) {
	req := httptest.NewRequest(http.MethodGet, base, nil)
	u, err := req.URL.Parse(ref)
	if err != nil {
		return "", err
	}
	return Canonical(u.String())
}
