package node_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/p2p/localswarm"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
)

// token is the robots.txt token of every test node's User-Agent.
const token = "swarmcrawl"

// nodeTag finds the node that sent a request in its User-Agent.
var nodeTag = regexp.MustCompile(`\((node-\d+)\)$`)

// startTaggedSwarm starts a local swarm whose node i sends the User-Agent
// "swarmcrawl/0.1 (node-i)", closed when the test ends, and waits until it
// converged.
func startTaggedSwarm(ctx context.Context, t *testing.T, opts localswarm.Options) *localswarm.Swarm {
	t.Helper()
	opts.Dir = t.TempDir()
	opts.Configure = func(i int, c *node.Config) {
		c.Crawl.UserAgent = fmt.Sprintf("%s/0.1 (node-%d)", token, i)
	}
	swarm, err := localswarm.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { swarm.Close() })
	if err := swarm.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	return swarm
}

// Hot hosts end to end: four real peers crawl a synthetic web of a few
// large hosts with a small HotQueue, so every host's owner hands fetch
// batches to its successors. Every page is fetched, requests to a hot host
// come from more than one node, yet each host sees one request at a time
// with the delay between them, and nothing is fetched twice but for a
// handful of batches cut short. The swarm asks for ring work.
func TestHotHostsDelegated(t *testing.T) {
	if testing.Short() {
		t.Skip("crawls a synthetic web of large hosts")
	}
	const (
		delay = 20 * time.Millisecond
		nodes = 4
	)
	cfg := synthweb.DefaultConfig()
	cfg.Seed = 5
	cfg.Hosts = 4
	cfg.Seeds = 4
	cfg.PagesPerHost = 120
	cfg.LinksPerPage = 8
	cfg.PageBytes = 2048
	web, err := synthweb.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	truth := web.GroundTruth(token)
	if len(truth) < 250 {
		t.Fatalf("synthetic web too small for the test: %d ground-truth pages", len(truth))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cc := crawl.DefaultConfig()
	cc.Delay = delay
	cc.MaxDepth = 1000
	cc.HotQueue = 10
	// The members ask each other for ring work, as an open swarm's do:
	// tasks, replication and fetch batches all pass its check.
	swarm := startTaggedSwarm(ctx, t, localswarm.Options{Nodes: nodes, Crawl: cc, Proxy: web.Proxy(), RingWork: 8})
	start := time.Now()
	swarm.Nodes[1].Seed(ctx, web.Seeds())
	for len(web.Missing(token)) > 0 {
		select {
		case <-ctx.Done():
			missing := web.Missing(token)
			t.Fatalf("crawl incomplete: %d of %d ground-truth pages never fetched, e.g. %v; totals %+v",
				len(missing), len(truth), missing[:min(5, len(missing))], swarm.Totals())
		case <-time.After(100 * time.Millisecond):
		}
	}
	took := time.Since(start)
	// Let batches in flight end, so late duplicates would show.
	settle := time.Now().Add(10 * time.Second)
	for !swarm.Idle() && time.Now().Before(settle) {
		time.Sleep(100 * time.Millisecond)
	}

	var delegated, helped, fails int64
	for i, n := range swarm.Nodes {
		d := n.Status().Delegation
		t.Logf("node-%d: %+v", i, d)
		delegated += d.Delegated
		helped += d.Helped
		fails += d.DelegateFails
	}
	if delegated == 0 || helped == 0 {
		t.Errorf("no delegation: %d tasks delegated, %d helped", delegated, helped)
	}
	if helped != delegated {
		// Every helped task whose result reached its owner is delegated
		// there; a batch that failed after requests explains a gap.
		t.Logf("helped %d != delegated %d (%d failed batches)", helped, delegated, fails)
	}

	// Which nodes fetched from each host, by User-Agent.
	fetchers := map[string]map[string]int{}
	for _, r := range web.Log() {
		m := nodeTag.FindStringSubmatch(r.UserAgent)
		if m == nil {
			t.Fatalf("request without a node tag: %q", r.UserAgent)
		}
		if fetchers[r.Host] == nil {
			fetchers[r.Host] = map[string]int{}
		}
		fetchers[r.Host][m[1]]++
	}
	shared := 0
	for _, h := range web.Hosts() {
		t.Logf("%s: requests by node %v", h, fetchers[h])
		if len(fetchers[h]) >= 2 {
			shared++
		}
	}
	if shared == 0 {
		t.Errorf("every host was fetched by one node only: %v", fetchers)
	}

	if v := web.CheckPoliteness(delay); len(v) > 0 {
		t.Errorf("%d politeness violations, e.g. %v", len(v), v[:min(5, len(v))])
	}
	for h, n := range web.MaxInFlightPerHost() {
		if n > 1 {
			t.Errorf("%s had %d requests in flight at once", h, n)
		}
	}
	if v := web.CheckRobots(token); len(v) > 0 {
		t.Errorf("%d robots.txt violations, e.g. %v", len(v), v[:min(5, len(v))])
	}
	dups := web.Duplicates()
	if len(dups) > 5 {
		t.Errorf("%d pages fetched more than once, e.g. %v", len(dups), dups[:min(5, len(dups))])
	}
	var stored int64
	for _, n := range swarm.Nodes {
		stored += n.Status().Pages
	}
	if stored < int64(len(truth)) {
		t.Errorf("%d pages stored, want at least the %d ground-truth pages", stored, len(truth))
	}
	hosts := web.Hosts()
	slices.Sort(hosts)
	t.Logf("%d pages on %d hosts (%s) in %v with %d nodes: %d tasks delegated, %d helped, %d failed batches, %d duplicates",
		len(truth), len(hosts), strings.Join(hosts, " "), took.Round(time.Millisecond), nodes, delegated, helped, fails, len(dups))
}
