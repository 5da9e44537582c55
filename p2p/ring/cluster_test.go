package ring

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// cluster is an in-memory ring driven round by round from the test
// goroutine, so every run with the same seed takes the same path.
type cluster struct {
	tb    testing.TB
	net   *MemNet
	clock *FakeClock
	nodes []*Node
	down  map[string]bool // crashed or departed
}

func newCluster(tb testing.TB, size int, seed int64, tweak func(*Config)) *cluster {
	tb.Helper()
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	c := &cluster{
		tb:    tb,
		net:   NewMemNet(seed),
		clock: NewFakeClock(time.Unix(1_700_000_000, 0)),
		down:  make(map[string]bool),
	}
	used := make(map[ID]bool)
	for i := range size {
		id := ID(rng.Uint64())
		for used[id] {
			id = ID(rng.Uint64())
		}
		used[id] = true
		cfg := DefaultConfig()
		cfg.Clock = c.clock
		if tweak != nil {
			tweak(&cfg)
		}
		p := Peer{ID: id, Addr: fmt.Sprintf("n%04d", i)}
		n := NewNode(p, c.net.Transport(p), cfg)
		c.net.Register(p, n)
		c.nodes = append(c.nodes, n)
	}
	return c
}

// joinAll creates the ring at node 0 and joins the others one by one
// through it. After every batch of joins each member runs one Stabilize,
// as it would when joins are spaced a stabilize interval apart, and with
// fingers set also FixFingers, which large rings need so that joins do
// not walk the ring successor by successor.
func (c *cluster) joinAll(ctx context.Context, batch int, fingers bool) {
	c.tb.Helper()
	c.nodes[0].Create()
	for i := 1; i < len(c.nodes); i++ {
		if err := c.nodes[i].Join(ctx, c.nodes[0].Self()); err != nil {
			c.tb.Fatalf("join %s: %v", c.nodes[i].Self(), err)
		}
		if i%batch == 0 || i == len(c.nodes)-1 {
			for _, n := range c.nodes[:i+1] {
				n.Stabilize(ctx)
			}
			if fingers {
				for _, n := range c.nodes[:i+1] {
					n.FixFingers(ctx)
				}
			}
		}
	}
}

func (c *cluster) live() []*Node {
	var out []*Node
	for _, n := range c.nodes {
		if !c.down[n.Self().Addr] {
			out = append(out, n)
		}
	}
	return out
}

func (c *cluster) livePeers() []Peer {
	var out []Peer
	for _, n := range c.live() {
		out = append(out, n.Self())
	}
	return out
}

func (c *cluster) crash(n *Node) {
	c.net.Crash(n.Self().Addr)
	c.down[n.Self().Addr] = true
}

// round is one maintenance round on every live node: Stabilize, then
// CheckPredecessor, then (if fingers) FixFingers.
func (c *cluster) round(ctx context.Context, fingers bool) {
	live := c.live()
	for _, n := range live {
		n.Stabilize(ctx)
	}
	for _, n := range live {
		n.CheckPredecessor(ctx)
	}
	if fingers {
		for _, n := range live {
			n.FixFingers(ctx)
		}
	}
}

// converge runs rounds until CheckRing passes on the live nodes and
// returns how many it took, failing the test after max rounds.
func (c *cluster) converge(ctx context.Context, max int, fingers bool) int {
	c.tb.Helper()
	for r := 1; r <= max; r++ {
		c.round(ctx, fingers)
		if Converged(c.live()) {
			return r
		}
	}
	c.tb.Fatalf("ring did not converge in %d rounds:\n%v", max, firstLines(CheckRing(c.live()), 5))
	return 0
}

// checkFingers fails unless every live node's finger i is the true owner
// of self+2^i (or empty where that owner is the node itself).
func (c *cluster) checkFingers() {
	c.tb.Helper()
	peers := c.livePeers()
	for _, n := range c.live() {
		n.mu.Lock()
		fingers := n.fingers
		n.mu.Unlock()
		for i, f := range fingers {
			want := OwnerOf(peers, n.self.ID+ID(1)<<i)
			if want == n.self {
				want = Peer{}
			}
			if f != want {
				c.tb.Fatalf("%s finger %d = %s, want %s", n.self, i, f, want)
			}
		}
	}
}

type lookupStats struct {
	lookups, wrong, failed int
	hops, maxHops          int
}

func (s lookupStats) mean() float64 { return float64(s.hops) / float64(s.lookups) }

// lookups runs keysPerNode random lookups from every live node and
// compares each answer with the true owner among live nodes.
func (c *cluster) lookups(ctx context.Context, keysPerNode int, rng *rand.Rand) (lookupStats, []string) {
	peers := c.livePeers()
	var st lookupStats
	var problems []string
	for _, n := range c.live() {
		for range keysPerNode {
			key := ID(rng.Uint64())
			got, hops, err := n.Lookup(ctx, key)
			st.lookups++
			st.hops += hops
			st.maxHops = max(st.maxHops, hops)
			want := OwnerOf(peers, key)
			switch {
			case err != nil:
				st.failed++
				problems = append(problems, fmt.Sprintf("from %s: %v", n.Self(), err))
			case got != want:
				st.wrong++
				problems = append(problems, fmt.Sprintf("from %s: lookup %s = %s, want %s", n.Self(), key, got, want))
			}
		}
	}
	return st, problems
}

// requireLookups fails the test unless every lookup is correct.
func (c *cluster) requireLookups(ctx context.Context, keysPerNode int, seed uint64) lookupStats {
	c.tb.Helper()
	st, problems := c.lookups(ctx, keysPerNode, rand.New(rand.NewPCG(seed, 2)))
	if len(problems) > 0 {
		c.tb.Fatalf("%d of %d lookups wrong or failed, e.g.:\n%s", len(problems), st.lookups, joinFirst(problems, 5))
	}
	return st
}

func firstLines(err error, n int) string {
	if err == nil {
		return ""
	}
	return joinFirst(strings.Split(err.Error(), "\n"), n)
}

func joinFirst(lines []string, n int) string {
	if len(lines) > n {
		return strings.Join(lines[:n], "\n") + fmt.Sprintf("\n... and %d more", len(lines)-n)
	}
	return strings.Join(lines, "\n")
}

// pick returns k distinct nodes chosen by rng from candidates.
func pick(rng *rand.Rand, candidates []*Node, k int) []*Node {
	c := slices.Clone(candidates)
	rng.Shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] })
	return c[:k]
}

// byAddr returns the cluster's node at addr.
func (c *cluster) byAddr(addr string) *Node {
	c.tb.Helper()
	for _, n := range c.nodes {
		if n.Self().Addr == addr {
			return n
		}
	}
	c.tb.Fatalf("no node %s", addr)
	return nil
}
