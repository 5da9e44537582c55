package localswarm_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/localswarm"
)

const token = "swarmcrawl"

// TestSwarmCrawlsSyntheticWeb is the foundation's end-to-end promise: five
// real libp2p peers, joined through one bootstrap peer and seeded over the
// seed protocol, crawl every robots-allowed page reachable from the seeds,
// each exactly once, never against robots.txt and never faster than the
// per-host delay — all judged from the web server's own request log. It
// holds with one ring position per node and with four (virtual nodes:
// one store, crawler and politeness state per node, whatever its
// positions).
func TestSwarmCrawlsSyntheticWeb(t *testing.T) {
	if testing.Short() {
		t.Skip("crawls a 60-host synthetic web")
	}
	for _, v := range []int{1, 4} {
		t.Run(fmt.Sprintf("vnodes=%d", v), func(t *testing.T) { testSwarmCrawlsSyntheticWeb(t, v) })
	}
}

func testSwarmCrawlsSyntheticWeb(t *testing.T, vnodes int) {
	const delay = 100 * time.Millisecond
	cfg := synthweb.DefaultConfig()
	cfg.Seed = 7
	cfg.Hosts = 60
	cfg.CrawlDelayHosts = 2
	web, err := synthweb.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	truth := web.GroundTruth(token)
	if len(truth) < 200 {
		t.Fatalf("synthetic web too small for the test: %d ground-truth pages", len(truth))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cc := crawl.DefaultConfig()
	cc.Delay = delay
	// Crawl order across hosts is not breadth-first, so a page can first
	// arrive by a long path; a depth cap of 16 could then cut links that a
	// shorter path would have followed. Full coverage needs a loose cap.
	cc.MaxDepth = 100
	swarm, err := localswarm.Start(ctx, localswarm.Options{Nodes: 5, Dir: t.TempDir(), Crawl: cc, Proxy: web.Proxy(), VNodes: vnodes})
	if err != nil {
		t.Fatal(err)
	}
	defer swarm.Close()
	if err := swarm.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}

	// Seeds arrive the way a user sends them: from an outside client over
	// the seed protocol, to a member that is not the bootstrap peer.
	client, err := libp2p.New(libp2p.NoListenAddrs)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	res, err := p2p.SubmitSeeds(ctx, client, swarm.Nodes[3].Addrs()[0], web.Seeds())
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted+res.Pending != len(web.Seeds()) || len(res.Rejected) > 0 {
		t.Fatalf("seeds: %+v, want all %d accepted", res, len(web.Seeds()))
	}

	for len(web.Missing(token)) > 0 {
		select {
		case <-ctx.Done():
			missing := web.Missing(token)
			t.Fatalf("crawl incomplete: %d of %d ground-truth pages never fetched, e.g. %v; totals %+v",
				len(missing), len(truth), missing[:min(5, len(missing))], swarm.Totals())
		case <-time.After(200 * time.Millisecond):
		}
	}
	// Let in-flight work settle so late duplicates would show up.
	settle := time.Now().Add(10 * time.Second)
	for !swarm.Idle() && time.Now().Before(settle) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	// Every link was delivered: an acknowledgement the sender could not
	// check (receipts from replicas of another position than the one it
	// sent to, say) leaves its tasks in the outbox for good.
	if tot := swarm.Totals(); !swarm.Idle() {
		t.Errorf("swarm not idle 10 s after the crawl: %d links wait in the outboxes", tot.Outbox)
	}

	if d := web.Duplicates(); len(d) > 0 {
		t.Errorf("%d pages fetched more than once, e.g. %v", len(d), d[:min(5, len(d))])
	}
	if v := web.CheckRobots(token); len(v) > 0 {
		t.Errorf("%d robots.txt violations, e.g. %v", len(v), v[:min(5, len(v))])
	}
	if v := web.CheckPoliteness(delay); len(v) > 0 {
		t.Errorf("%d politeness violations, e.g. %v", len(v), v[:min(5, len(v))])
	}
	// Links to hosts outside the synthetic web are legitimately followed
	// (the proxy answers 404); anything else outside the ground truth,
	// such as a non-canonical spelling of a page, is a crawler bug.
	var unexpected []string
	for _, u := range web.Unexpected(token) {
		if strings.Contains(u, ".synth.test") {
			unexpected = append(unexpected, u)
		}
	}
	if len(unexpected) > 0 {
		t.Errorf("%d requests outside the ground truth, e.g. %v", len(unexpected), unexpected[:min(5, len(unexpected))])
	}
	robots := map[string]int{}
	for _, r := range web.Log() {
		if r.Path == "/robots.txt" {
			robots[r.Host]++
		}
	}
	for host, n := range robots {
		if n > 1 {
			t.Errorf("robots.txt of %s fetched %d times, want once", host, n)
		}
	}

	// Work was spread over the swarm, and every fetched page is stored.
	var stored int64
	busy := 0
	for _, n := range swarm.Nodes {
		st := n.Status()
		stored += st.Pages
		if st.Crawl.Fetched > 0 {
			busy++
		}
		if len(st.Successors) == 0 || st.Predecessor == nil {
			t.Errorf("node %s has no neighbours in status: %+v", st.PeerID, st)
		}
		if len(st.Positions) != vnodes {
			t.Errorf("node %s shows %d ring positions, want %d", st.PeerID, len(st.Positions), vnodes)
		}
	}
	if busy < 3 {
		t.Errorf("only %d of 5 nodes fetched anything: ownership is not spread", busy)
	}
	if want := int64(len(truth)); stored < want {
		t.Errorf("%d pages stored, want at least the %d ground-truth pages", stored, want)
	}
	t.Logf("crawled %d pages on %d hosts with 5 nodes of %d positions; totals %+v", len(truth), len(web.Hosts()), vnodes, swarm.Totals())
}

// TestSeedProtocolRejectsBadURLs checks that malformed seeds are refused
// one by one with a reason, while good ones in the same request go through.
func TestSeedProtocolRejectsBadURLs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cc := crawl.DefaultConfig()
	swarm, err := localswarm.Start(ctx, localswarm.Options{Nodes: 2, Dir: t.TempDir(), Crawl: cc,
		Proxy: func(*http.Request) (*url.URL, error) { return nil, errors.New("no web in this test") }})
	if err != nil {
		t.Fatal(err)
	}
	defer swarm.Close()
	if err := swarm.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	client, err := libp2p.New(libp2p.NoListenAddrs)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	seeds := []string{"http://good.test/", "ftp://bad.test/", "not a url", "http://good.test/#same-page"}
	res, err := p2p.SubmitSeeds(ctx, client, swarm.Nodes[1].Addrs()[0], seeds)
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 1 || res.Duplicates != 1 || len(res.Rejected) != 2 {
		t.Fatalf("got %+v; want 1 accepted, 1 duplicate (same page after normalisation), 2 rejected", res)
	}
	for _, r := range res.Rejected {
		if r.Reason == "" || !strings.Contains(strings.Join(seeds, " "), r.URL) {
			t.Errorf("rejection without reason or for an unknown URL: %+v", r)
		}
	}
}
