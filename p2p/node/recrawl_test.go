package node_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/p2p/localswarm"
)

// etagWeb is a small web behind a proxy: hosts h0.test.. each with a root
// linking /p/1../p/3; every page sends an ETag and answers 304 to it. It
// logs every page request (robots.txt answers 404 and is not logged).
type etagWeb struct {
	*httptest.Server
	mu   sync.Mutex
	hits []etagHit
}

type etagHit struct {
	url, node   string
	conditional bool
	at          time.Time
}

func newETagWeb(t *testing.T) *etagWeb {
	w := &etagWeb{}
	w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(rw, r)
			return
		}
		u := "http://" + r.Host + r.URL.Path
		m := nodeTag.FindStringSubmatch(r.UserAgent())
		node := ""
		if m != nil {
			node = m[1]
		}
		etag := `"` + r.Host + r.URL.Path + `"`
		conditional := r.Header.Get("If-None-Match") != ""
		w.mu.Lock()
		w.hits = append(w.hits, etagHit{url: u, node: node, conditional: conditional, at: time.Now()})
		w.mu.Unlock()
		if r.Header.Get("If-None-Match") == etag {
			rw.WriteHeader(http.StatusNotModified)
			return
		}
		rw.Header().Set("ETag", etag)
		rw.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/" {
			fmt.Fprint(rw, `<a href="/p/1">1</a> <a href="/p/2">2</a> <a href="/p/3">3</a>`)
			return
		}
		fmt.Fprintf(rw, "<p>page %s</p>", u)
	}))
	t.Cleanup(w.Close)
	return w
}

func (w *etagWeb) log() []etagHit {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]etagHit(nil), w.hits...)
}

func (w *etagWeb) proxy() func(*http.Request) (*url.URL, error) {
	u, _ := url.Parse(w.URL)
	return http.ProxyURL(u)
}

// TestRecrawlScheduleTravelsWithRange: a node that leaves after its first
// crawl hands its ranges over with each fetched URL's state, so the next
// owner recrawls those pages when they are due, conditionally with the
// ETag the departed node saw, though it never fetched them itself.
func TestRecrawlScheduleTravelsWithRange(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a local swarm through a recrawl cycle")
	}
	const (
		hosts      = 12
		minRecrawl = 3 * time.Second
	)
	web := newETagWeb(t)
	var seeds []string
	for i := range hosts {
		seeds = append(seeds, fmt.Sprintf("http://h%d.test/", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cc := crawl.DefaultConfig()
	cc.Delay = 20 * time.Millisecond
	cc.MinRecrawl, cc.MaxRecrawl = minRecrawl, time.Hour
	swarm := startTaggedSwarm(ctx, t, localswarm.Options{Nodes: 3, Crawl: cc, Proxy: web.proxy()})
	swarm.Nodes[0].Seed(ctx, seeds)

	// The first crawl: every page once.
	first := map[string]etagHit{}
	for len(first) < hosts*4 {
		select {
		case <-ctx.Done():
			t.Fatalf("first crawl incomplete: %d of %d pages", len(first), hosts*4)
		case <-time.After(50 * time.Millisecond):
		}
		for _, h := range web.log() {
			if _, ok := first[h.url]; !ok && !h.conditional {
				first[h.url] = h
			}
		}
	}
	// The node that fetched the most leaves before any recrawl is due.
	byNode := map[string][]string{}
	for u, h := range first {
		byNode[h.node] = append(byNode[h.node], u)
	}
	leaver := 1
	for i := range swarm.Nodes {
		if len(byNode[fmt.Sprintf("node-%d", i)]) > len(byNode[fmt.Sprintf("node-%d", leaver)]) && i != 0 {
			leaver = i
		}
	}
	name := fmt.Sprintf("node-%d", leaver)
	left := time.Now()
	if err := swarm.Nodes[leaver].Close(); err != nil {
		t.Fatalf("close %s: %v", name, err)
	}
	if first := earliest(first, byNode[name]); left.Sub(first) >= minRecrawl {
		t.Fatalf("%s left %v after its first fetch, too late: its recrawls were due", name, left.Sub(first))
	}
	t.Logf("%s fetched %d of %d pages and left", name, len(byNode[name]), len(first))

	// Every page it fetched is recrawled by another node, conditionally,
	// no earlier than its schedule.
	deadline := time.Now().Add(30 * time.Second)
	for {
		recrawled := map[string]etagHit{}
		for _, h := range web.log() {
			if h.conditional {
				if _, ok := recrawled[h.url]; !ok {
					recrawled[h.url] = h
				}
			}
		}
		var missing []string
		for _, u := range byNode[name] {
			if _, ok := recrawled[u]; !ok {
				missing = append(missing, u)
			}
		}
		if len(missing) == 0 {
			for _, u := range byNode[name] {
				r := recrawled[u]
				if r.node == name || r.node == "" {
					t.Errorf("%s recrawled by %q", u, r.node)
				}
				if due := first[u].at.Add(minRecrawl); r.at.Before(due.Add(-100 * time.Millisecond)) {
					t.Errorf("%s recrawled %v after its first fetch, before its %v interval", u, r.at.Sub(first[u].at), minRecrawl)
				}
			}
			t.Logf("all %d pages recrawled conditionally by the next owners", len(byNode[name]))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the %d pages %s fetched were never recrawled after it left, e.g. %s",
				len(missing), len(byNode[name]), name, strings.Join(missing[:min(3, len(missing))], " "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// earliest is the first fetch among urls.
func earliest(hits map[string]etagHit, urls []string) time.Time {
	var t time.Time
	for _, u := range urls {
		if at := hits[u].at; t.IsZero() || at.Before(t) {
			t = at
		}
	}
	return t
}
