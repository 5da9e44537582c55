package synthweb

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
)

// goldenConfigs are configurations whose complete output was fingerprinted
// before Config.Cases existed; with Cases off it must not change by a byte.
var goldenConfigs = []struct {
	name string
	cfg  Config
	want string
}{
	{"default", DefaultConfig(), "f88e1205ad49373b21a718c3537d2183304ecc258868fa713d44b31f678815d1"},
	{"seed7-delay", Config{Seed: 7, CrawlDelayHosts: 4}, "4e832e4c0ac41b7242c57848a586e3435f6a9f3f2ab5820818b7a74efa49e048"},
	{"seed3-200x3", Config{Seed: 3, Hosts: 200, PagesPerHost: 3, Seeds: 5, PageBytes: 4096}, "41869e4efcb466903bedf630c3222aced286f960570230987d2bf16d1bccc4b7"},
	{"1001-hosts", Config{Hosts: 1001, PagesPerHost: 2, Seeds: 10, PageBytes: 2048}, "36342f7327f72ad0b0b6050d7e9a6cb6b48e18fb05333c6040cc92da17f5b8da"},
}

// fingerprint hashes everything a crawler or a test can observe of a web
// without a crawl: host, seed and page lists, stats, ground truth for
// several tokens, and the full response (status, headers, body) to every
// page, broken link target, robots.txt and a few unknown paths, through
// ServeHTTP.
func fingerprint(t *testing.T, w *Web) string {
	t.Helper()
	h := sha256.New()
	fmt.Fprintf(h, "hosts %q\nseeds %q\npages %q\nstats %+v\n", w.Hosts(), w.Seeds(), w.Pages(), w.Stats())
	for _, tok := range []string{"swarmcrawl", "otherbot", "badbot"} {
		fmt.Fprintf(h, "truth %s %q\n", tok, w.GroundTruth(tok))
	}
	var urls []string
	for _, p := range w.g.pages {
		urls = append(urls, p.url)
	}
	for _, hn := range w.Hosts() {
		urls = append(urls, "http://"+hn+"/robots.txt", "http://"+hn+"/no/such/page")
	}
	urls = append(urls, "http://elsewhere.invalid/")
	for _, u := range urls {
		rec := httptest.NewRecorder()
		w.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, u, nil))
		var hdr []string
		for k, v := range rec.Header() {
			hdr = append(hdr, k+": "+strings.Join(v, ","))
		}
		sort.Strings(hdr)
		fmt.Fprintf(h, "%s %d %q %d\n", u, rec.Code, hdr, rec.Body.Len())
		h.Write(rec.Body.Bytes())
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestDefaultOutputUnchanged pins the output of configurations without
// Cases to the fingerprints recorded before the case hosts were added.
func TestDefaultOutputUnchanged(t *testing.T) {
	for _, gc := range goldenConfigs {
		w, err := New(gc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := fingerprint(t, w); got != gc.want {
			t.Errorf("%s: fingerprint %s, want %s", gc.name, got, gc.want)
		}
	}
}
