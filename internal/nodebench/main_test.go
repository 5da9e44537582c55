package main

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
)

// TestBound: the politeness bound is the largest, over hosts, of their
// reachable pages times max(delay, the host's Crawl-delay).
func TestBound(t *testing.T) {
	w, err := synthweb.New(synthweb.Config{Seed: 1, Hosts: 30, CrawlDelayHosts: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	truth := w.Within("swarmcrawl", crawl.DefaultConfig().MaxDepth)
	perHost := map[string]int{}
	for _, u := range truth {
		h, _, _ := strings.Cut(strings.TrimPrefix(u, "http://"), "/")
		perHost[h]++
	}
	var slowest, largest time.Duration
	for h, n := range perHost {
		if cd := w.CrawlDelay(h); cd > 0 {
			slowest = max(slowest, time.Duration(n)*cd)
		}
		largest = max(largest, time.Duration(n)*time.Second)
	}
	if slowest == 0 {
		t.Fatal("no reachable page on a host with a Crawl-delay")
	}
	if got := bound(w, truth, 0); got != slowest {
		t.Errorf("no delay: bound %v, want %v (the Crawl-delay hosts)", got, slowest)
	}
	if got := bound(w, truth, time.Second); got != max(largest, slowest) {
		t.Errorf("1 s delay: bound %v, want %v", got, max(largest, slowest))
	}
}

// TestBoundAt: the bound for a coverage level is the least time by which,
// every host fetched once per delay, at most the rest of the pages are
// left; for 100% it is bound.
func TestBoundAt(t *testing.T) {
	w, err := synthweb.New(synthweb.Config{Seed: 1, Hosts: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// Host a has 10 pages, b one, on hosts without a Crawl-delay: at 1 s,
	// pages are done at 1 s (two), 2 s, ..., 10 s.
	var truth []string
	for i := range 10 {
		truth = append(truth, fmt.Sprintf("http://a.example/%d", i))
	}
	truth = append(truth, "http://b.example/")
	for _, c := range []struct {
		level float64
		want  time.Duration
	}{{0.5, 5 * time.Second}, {0.9, 9 * time.Second}, {0.99, 10 * time.Second}, {1, 10 * time.Second}} {
		if got := boundAt(w, truth, time.Second, c.level); got != c.want {
			t.Errorf("%g%%: bound %v, want %v", 100*c.level, got, c.want)
		}
	}
	if got := bound(w, truth, time.Second); got != 10*time.Second {
		t.Errorf("bound %v, want 10s", got)
	}
}

// TestReport: medians per binary and delay, and new/base ratios, in
// aligned columns; a level not reached shows as NaN.
func TestReport(t *testing.T) {
	w, err := synthweb.New(synthweb.Config{Seed: 1, Hosts: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	truth := make([]string, 1000)
	res := func(d time.Duration, cpu time.Duration, t90 float64) result {
		return result{delay: d, fetched: 1000, reached: []float64{t90, 2 * t90, math.NaN()}, cpu: cpu, coverage: 0.995,
			server: cpu / 4, requests: 2000}
	}
	results := map[string][]result{
		"new":  {res(0, 1*time.Second, 1), res(0, 3*time.Second, 1), res(0, 2*time.Second, 1), res(20*time.Millisecond, time.Second, 9)},
		"base": {res(0, 4*time.Second, 2), res(20*time.Millisecond, 2*time.Second, 9)},
	}
	var out bytes.Buffer
	report(&out, w, truth, []string{"new", "base"}, results, 3)
	lines := strings.Split(out.String(), "\n")
	find := func(prefix string) []string {
		for _, l := range lines {
			if strings.HasPrefix(strings.TrimSpace(l), prefix) {
				return strings.Fields(strings.TrimPrefix(strings.TrimSpace(l), prefix))
			}
		}
		t.Fatalf("no line %q in\n%s", prefix, out.String())
		return nil
	}
	// No delay: CPU medians 2 s and 4 s per 1,000 pages, 900 pages in 1 s
	// and 2 s to 90%.
	if got := find("new pages/s to 90%"); strings.Join(got, " ") != "900 450 2.00" {
		t.Errorf("pages/s: %q\n%s", got, out.String())
	}
	if got := find("CPU s per 1,000 pages"); strings.Join(got, " ") != "2 4 0.50" {
		t.Errorf("CPU: %q\n%s", got, out.String())
	}
	// The server: a quarter of the node's CPU, for twice as many requests.
	if got := find("server CPU s per 1,000 requests"); strings.Join(got, " ") != "0.25 0.5 0.50" {
		t.Errorf("server CPU: %q\n%s", got, out.String())
	}
	if got := find("s to 100% coverage"); got[0] != "NaN" {
		t.Errorf("100%% not reached: %q", got)
	}
	var header, cpu int
	for _, l := range lines {
		if strings.Contains(l, "new/base") {
			header = strings.Index(l, "new/base")
		}
		if strings.Contains(l, "CPU s per") && cpu == 0 {
			cpu = strings.LastIndex(l, "0.50")
		}
	}
	if header != cpu {
		t.Errorf("ratio column at %d, its header at %d:\n%s", cpu, header, out.String())
	}
}

// TestLogWatch: following the log from the first unsettled request finds
// the answered URLs firstFetches finds, reading each request about once.
func TestLogWatch(t *testing.T) {
	w, err := synthweb.New(synthweb.Config{Seed: 1, Hosts: 5})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	pages := w.Pages()
	want := map[string]bool{}
	for _, u := range pages[:len(pages)/2] {
		want[u] = true
	}
	var lw logWatch
	for i, u := range pages {
		w.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, u, nil))
		if i%3 == 0 {
			if n := lw.update(w, want); n != i+1 || lw.from != n {
				t.Fatalf("after %d requests: log length %d, read up to %d", i+1, n, lw.from)
			}
		}
	}
	lw.update(w, want)
	if got, exp := len(lw.answered), len(firstFetches(w.Log(), want)); got != exp || got != len(want) {
		t.Errorf("%d answered URLs, firstFetches finds %d, want %d", got, exp, len(want))
	}
}

// TestLogWatchInProgress: a request still in progress is read again until
// it is answered.
func TestLogWatchInProgress(t *testing.T) {
	w, err := synthweb.New(synthweb.Config{Seed: 1, Hosts: 5, Latency: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	pages := w.Pages()
	want := map[string]bool{pages[0]: true, pages[1]: true}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, pages[0], nil))
	}()
	for len(w.Log()) == 0 {
		time.Sleep(time.Millisecond)
	}
	var lw logWatch
	if n := lw.update(w, want); n != 1 || lw.from != 0 || len(lw.answered) != 0 {
		t.Fatalf("in progress: log length %d, read up to %d, %d answered", n, lw.from, len(lw.answered))
	}
	<-done
	w.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, pages[1], nil))
	if n := lw.update(w, want); n != 2 || lw.from != 2 || len(lw.answered) != 2 {
		t.Fatalf("both answered: log length %d, read up to %d, %d answered", n, lw.from, len(lw.answered))
	}
}
