package node_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p/localswarm"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// scrape reads a node's /metrics with the Prometheus text parser of the
// official client library.
func scrape(t *testing.T, n *node.Node) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + n.APIAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics does not parse as the Prometheus text format: %v", err)
	}
	return families
}

// value sums the samples of a family whose labels include want (a counter,
// a gauge, or a histogram's count).
func value(families map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := families[name]
	if f == nil {
		return -1
	}
	var sum float64
	for _, m := range f.Metric {
		ok := true
		for k, v := range want {
			found := false
			for _, l := range m.Label {
				found = found || l.GetName() == k && l.GetValue() == v
			}
			ok = ok && found
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

// TestMetricsMoveDuringCrawl scrapes /metrics of a node of a crawling
// swarm before and after the crawl: the counters that describe a crawl
// move (pages, responses by class, latency, URLs offered and their
// duplicates, lookups, WARC bytes), and libp2p's own metrics (swarm,
// resource manager) and the Go runtime's are on the same page.
func TestMetricsMoveDuringCrawl(t *testing.T) {
	cfg := synthweb.DefaultConfig()
	cfg.Seed, cfg.Hosts, cfg.Seeds = 9, 12, 3
	web, err := synthweb.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cc := crawl.DefaultConfig()
	cc.Delay = 10 * time.Millisecond
	swarm := startTaggedSwarm(ctx, t, localswarm.Options{Nodes: 3, Crawl: cc, Proxy: web.Proxy()})
	// The owner of the first seed's host: a node may own none of the
	// web's 12 hosts (about one run in seven for node 0), and then fetches
	// nothing.
	seedHost, err := urls.HostOf(web.Seeds()[0])
	if err != nil {
		t.Fatal(err)
	}
	n := swarm.Nodes[0]
	for _, m := range swarm.Nodes {
		if m.Ring().Owns(ring.ID(urls.HostKey(seedHost))) {
			n = m
		}
	}
	before := scrape(t, n)
	for _, name := range []string{"swarmcrawl_pages_fetched_total", "swarmcrawl_fetch_latency_seconds", "swarmcrawl_urls_offered_total", "swarmcrawl_lookup_hops", "go_goroutines"} {
		if before[name] == nil {
			t.Errorf("%s missing before the crawl", name)
		}
	}
	libp2p := 0
	for name := range before {
		if strings.HasPrefix(name, "libp2p_") {
			libp2p++
		}
	}
	if libp2p == 0 {
		t.Error("no libp2p metrics on /metrics")
	}

	n.Seed(ctx, web.Seeds())
	token := crawl.ProductToken(cc.UserAgent)
	for len(web.Missing(token)) > 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("crawl incomplete: %d pages missing", len(web.Missing(token)))
		case <-time.After(100 * time.Millisecond):
		}
	}
	var after map[string]*dto.MetricFamily
	moved := func(name string, labels map[string]string) bool {
		return value(after, name, labels) > value(before, name, labels)
	}
	// The seed host's owner fetched some of the web: its counters move.
	deadline := time.Now().Add(10 * time.Second)
	for {
		after = scrape(t, n)
		if moved("swarmcrawl_pages_fetched_total", nil) && moved("swarmcrawl_urls_offered_total", map[string]string{"outcome": "duplicate"}) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{
		{"swarmcrawl_pages_fetched_total", nil},
		{"swarmcrawl_responses_total", map[string]string{"class": "2xx"}},
		{"swarmcrawl_fetch_latency_seconds", nil},
		{"swarmcrawl_fetched_bytes_total", nil},
		{"swarmcrawl_urls_offered_total", map[string]string{"outcome": "accepted"}},
		{"swarmcrawl_urls_offered_total", map[string]string{"outcome": "duplicate"}},
		{"swarmcrawl_robots_fetched_total", nil},
		{"swarmcrawl_warc_bytes_total", nil},
		{"swarmcrawl_seen_urls", nil},
	} {
		if !moved(c.name, c.labels) {
			t.Errorf("%s%v did not move during the crawl: %v then %v", c.name, c.labels, value(before, c.name, c.labels), value(after, c.name, c.labels))
		}
	}
}

// TestStatusJSONIsSnakeCase checks issue 13's status JSON: every key of a
// live node's status, at every depth, is snake_case, and the latency
// percentiles carry their unit (fetch_p50_ms) instead of raw nanoseconds.
func TestStatusJSONIsSnakeCase(t *testing.T) {
	s := startSwarm(t, 1)
	b, err := json.Marshal(s.Nodes[0].Status())
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	key := regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				// Maps keyed by data (error kinds, status classes)
				// hold data, not field names: kinds are snake_case
				// too, "2xx" is not a name.
				if !key.MatchString(k) && !strings.HasSuffix(path, ".responses") {
					t.Errorf("key %s.%s is not snake_case", path, k)
				}
				walk(path+"."+k, e)
			}
		case []any:
			for _, e := range v {
				walk(path+"[]", e)
			}
		}
	}
	walk("status", doc)
	crawlDoc, _ := doc.(map[string]any)["crawl"].(map[string]any)
	if _, ok := crawlDoc["fetch_p50_ms"]; !ok {
		t.Errorf("crawl status without fetch_p50_ms: %v", crawlDoc)
	}
}
