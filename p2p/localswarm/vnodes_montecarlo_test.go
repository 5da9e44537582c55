package localswarm_test

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// Issue 28, virtual nodes: how evenly 8 nodes of V positions each own the
// 1,000 hosts of the synthetic web BenchmarkVNodesSpreadHosts and
// cmd/swarmcrawl's BenchmarkBalanceEightProcesses crawl, over many random
// identity sets: the positions come from p2p.PositionID, the hosts' keys
// from urls.HostKey, and a host belongs to its key's successor, as in a
// converged ring. For each V it reports the median, over the sets, of the
// hosts the busiest node owns over the mean (max/mean-median), its 90th
// percentile (max/mean-p90) and the share of sets at most 1.5
// (share-le-1.5). The sets come from a fixed seed, so the figures are the
// same on every run; a real swarm is one sample of this distribution.
// Run it with
//
//	go test -run '^$' -bench VNodesHostSpreadMonteCarlo -benchtime 1x ./p2p/localswarm/
func BenchmarkVNodesHostSpreadMonteCarlo(b *testing.B) {
	const (
		nodes = 8
		sets  = 2000
	)
	cfg := synthweb.DefaultConfig()
	cfg.Seed = 28
	cfg.Hosts = 1000
	web, err := synthweb.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	var keys []ring.ID
	for _, h := range web.Hosts() {
		keys = append(keys, ring.ID(urls.HostKey(h)))
	}
	for _, v := range []int{1, 8, 16, 24, 32, 48, 64} {
		b.Run(fmt.Sprintf("V=%d", v), func(b *testing.B) {
			var ratios []float64
			for range b.N {
				rng := rand.New(rand.NewPCG(28, uint64(v)))
				ratios = ratios[:0]
				for range sets {
					ratios = append(ratios, hostSpread(b, rng, nodes, v, keys))
				}
			}
			slices.Sort(ratios)
			under := 0
			for _, r := range ratios {
				if r <= 1.5 {
					under++
				}
			}
			b.ReportMetric(ratios[len(ratios)/2], "max/mean-median")
			b.ReportMetric(ratios[len(ratios)*9/10], "max/mean-p90")
			b.ReportMetric(float64(under)/float64(len(ratios)), "share-le-1.5")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// hostSpread draws nodes random peer identities from rng, places v
// positions of each on the ring and returns the hosts (keys) the busiest
// node owns over the mean.
func hostSpread(b *testing.B, rng *rand.Rand, nodes, v int, keys []ring.ID) float64 {
	type position struct {
		id   ring.ID
		node int
	}
	var positions []position
	for n := range nodes {
		// An Ed25519 public key is any 32 bytes; the peer ID embeds it.
		var raw [32]byte
		for i := range raw {
			raw[i] = byte(rng.Uint32())
		}
		pub, err := crypto.UnmarshalEd25519PublicKey(raw[:])
		if err != nil {
			b.Fatal(err)
		}
		id, err := peer.IDFromPublicKey(pub)
		if err != nil {
			b.Fatal(err)
		}
		for i := range v {
			positions = append(positions, position{p2p.PositionID(id, i), n})
		}
	}
	slices.SortFunc(positions, func(a, b position) int { return cmp.Compare(a.id, b.id) })
	owned := make([]int, nodes)
	for _, k := range keys {
		// The successor: the first position at or after the key, else
		// the first of the ring.
		i, _ := slices.BinarySearchFunc(positions, k, func(p position, k ring.ID) int { return cmp.Compare(p.id, k) })
		owned[positions[i%len(positions)].node]++
	}
	return float64(slices.Max(owned)) * float64(nodes) / float64(len(keys))
}
