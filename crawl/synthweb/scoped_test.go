package synthweb

import (
	"net/url"
	"slices"
	"testing"
)

// Scoped is GroundTruth cut to a scope: everything with a scope that
// admits all, and with the seeds' hosts alone, only pages of those hosts,
// every one reachable from a seed without leaving them.
func TestScoped(t *testing.T) {
	w, err := New(Config{Seed: 3, Hosts: 30, PagesPerHost: 6, Seeds: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if got, want := w.Scoped("swarmcrawl", func(string) bool { return true }), w.GroundTruth("swarmcrawl"); !slices.Equal(got, want) {
		t.Fatalf("Scoped with everything in scope: %d URLs, GroundTruth %d", len(got), len(want))
	}
	hostOf := func(u string) string {
		p, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		return p.Hostname()
	}
	seedHosts := map[string]bool{}
	for _, s := range w.Seeds() {
		seedHosts[hostOf(s)] = true
	}
	got := w.Scoped("swarmcrawl", func(u string) bool { return seedHosts[hostOf(u)] })
	all := w.GroundTruth("swarmcrawl")
	if len(got) <= len(seedHosts) || len(got) >= len(all) {
		t.Fatalf("%d URLs in the seeds' hosts, of %d in all: want more than the seeds, fewer than all", len(got), len(all))
	}
	for _, u := range got {
		if !seedHosts[hostOf(u)] || !slices.Contains(all, u) {
			t.Errorf("%s in Scoped: not of a seed host, or not in GroundTruth", u)
		}
	}
	for _, s := range w.Seeds() {
		if !slices.Contains(got, s) {
			t.Errorf("seed %s not in Scoped", s)
		}
	}
}
