package ring

import (
	"context"
	"math/rand/v2"
	"testing"
)

// BenchmarkLookup measures one lookup from a random node of a converged
// 1,024-node in-memory ring, reporting hops and transport calls per lookup.
func BenchmarkLookup(b *testing.B) {
	ctx := context.Background()
	c := newCluster(b, 1024, 1024, nil)
	c.joinAll(ctx, 32, true)
	c.converge(ctx, 40, true)
	c.round(ctx, true)
	peers := c.livePeers()
	rng := rand.New(rand.NewPCG(1024, 0))
	hops := 0
	lookups := 0
	calls := c.net.Calls()
	b.ResetTimer()
	for b.Loop() {
		n := c.nodes[rng.IntN(len(c.nodes))]
		key := ID(rng.Uint64())
		owner, h, err := n.Lookup(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		if lookups%64 == 0 && owner != OwnerOf(peers, key) {
			b.Fatalf("lookup %s = %s, want %s", key, owner, OwnerOf(peers, key))
		}
		hops += h
		lookups++
	}
	b.ReportMetric(float64(hops)/float64(lookups), "hops/op")
	b.ReportMetric(float64(c.net.Calls()-calls)/float64(lookups), "calls/op")
}
