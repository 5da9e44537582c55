package localswarm_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/localswarm"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// balanceVNodes is the positions per node the balance test compares with
// one: 8 nodes of 8 positions are 64 ring members and shard managers in
// this one process, which a loaded 2-core machine still runs (16
// positions a node are not: docs/operations.md, "Virtual nodes").
const balanceVNodes = 8

// Issue 28, virtual nodes: 8 nodes crawl a 1,000-host synthetic web,
// with one ring position each and with balanceVNodes. Both crawls must
// fetch every page once. It reports the hosts the busiest node owns (its
// status's owned_hosts) over the mean, with one position (hosts-max/mean-v1)
// and with balanceVNodes (hosts-max/mean-vN), and the time the crawl took
// with balanceVNodes over that with one (crawl-time-vN/v1). The nodes'
// identities come from a fixed seed, so the positions, and the hosts'
// figures, are the same on every run. A benchmark, not a test: it takes
// about 5 minutes on a loaded 2-core machine, and over 10 under the race
// detector. Run it with
//
//	go test -run '^$' -bench VNodesSpreadHosts -benchtime 1x ./p2p/localswarm/
func BenchmarkVNodesSpreadHosts(b *testing.B) {
	cfg := synthweb.DefaultConfig()
	cfg.Seed = 28
	cfg.Hosts = 1000
	cfg.Seeds = 50
	web, err := synthweb.Start(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer web.Close()
	truth := web.GroundTruth(token)
	ratio := map[int]float64{}
	took := map[int]time.Duration{}
	for range b.N {
		for _, v := range []int{balanceVNodes, 1} {
			web.ResetLog()
			ratio[v], took[v] = crawlOwned(b, web, v)
			if m := web.Missing(token); len(m) > 0 {
				b.Fatalf("V=%d: %d of %d pages never fetched, e.g. %v", v, len(m), len(truth), m[:min(5, len(m))])
			}
			if d := web.Duplicates(); len(d) > 0 {
				b.Errorf("V=%d: %d pages fetched more than once, e.g. %v", v, len(d), d[:min(5, len(d))])
			}
		}
	}
	b.ReportMetric(ratio[1], "hosts-max/mean-v1")
	b.ReportMetric(ratio[balanceVNodes], "hosts-max/mean-vN")
	b.ReportMetric(took[balanceVNodes].Seconds()/took[1].Seconds(), "crawl-time-vN/v1")
	b.ReportMetric(0, "ns/op")
}

// crawlOwned crawls web with 8 nodes of v positions each and returns the
// hosts the busiest node owns over the mean, from the nodes' status, and
// the time from seeding to the last page.
func crawlOwned(t testing.TB, web *synthweb.Web, v int) (float64, time.Duration) {
	t.Helper()
	const nodes = 8
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(28, 2))
	for i := range nodes {
		writeIdentity(t, filepath.Join(dir, fmt.Sprintf("node-%02d", i)), rng)
	}
	cc := crawl.DefaultConfig()
	cc.Delay = 20 * time.Millisecond
	cc.MaxDepth = 1000
	start := time.Now()
	// Ring and shard maintenance at a node's own intervals, not the
	// faster ones a local swarm defaults to: all the nodes' positions
	// run in this process.
	rc, sc := ring.DefaultConfig(), node.DefaultConfig().Shard
	swarm, err := localswarm.Start(ctx, localswarm.Options{Nodes: nodes, Dir: dir, Crawl: cc, Proxy: web.Proxy(), VNodes: v, Ring: &rc, Shard: &sc})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := swarm.Close(); err != nil {
			t.Log(err)
		}
	}()
	if err := swarm.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	joined := time.Since(start)
	swarm.Nodes[nodes-1].Seed(ctx, web.Seeds())
	for len(web.Missing(token)) > 0 && ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	crawled := time.Since(start) - joined
	settle := time.Now().Add(10 * time.Second)
	for !swarm.Idle() && time.Now().Before(settle) {
		time.Sleep(100 * time.Millisecond)
	}
	var owned, fetched []int64
	var total int64
	for _, n := range swarm.Nodes {
		st := n.Status()
		if len(st.Positions) != v {
			t.Errorf("V=%d: node %s shows %d positions", v, st.PeerID, len(st.Positions))
		}
		owned = append(owned, st.OwnedHosts)
		fetched = append(fetched, st.Crawl.Fetched)
		total += st.OwnedHosts
	}
	hosts := int64(len(web.Hosts()))
	// Links to hosts outside the web are routed too: a few more keys.
	if total < hosts*9/10 || total > hosts*11/10 {
		t.Errorf("V=%d: the nodes own %d hosts together, of %d", v, total, hosts)
	}
	mean := float64(total) / nodes
	r := float64(slices.Max(owned)) / mean
	t.Logf("V=%d: joined in %v, crawled in %v; hosts owned %v (max/mean %.2f), pages fetched %v", v, joined.Round(time.Millisecond), crawled.Round(time.Millisecond), owned, r, fetched)
	return r, crawled
}

// writeIdentity puts a node identity drawn from rng in dir, as
// p2p.LoadOrCreateIdentity would have made one.
func writeIdentity(t testing.TB, dir string, rng *rand.Rand) {
	t.Helper()
	seed := make([]byte, 32)
	for i := range seed {
		seed[i] = byte(rng.Uint32())
	}
	key, _, err := crypto.GenerateEd25519Key(bytesReader(seed))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := crypto.MarshalPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, p2p.IdentityFile), raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

// bytesReader reads its bytes, then zeros.
type bytesReader []byte

func (b bytesReader) Read(p []byte) (int, error) {
	n := copy(p, b)
	clear(p[n:])
	return len(p), nil
}
