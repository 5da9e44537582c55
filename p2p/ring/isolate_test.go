package ring

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// keysIn returns the ends and some random keys of the arc (from, to].
func keysIn(rng *rand.Rand, from, to ID, n int) []ID {
	keys := []ID{from + 1, to}
	for range n {
		keys = append(keys, from+1+ID(rng.Uint64N(from.dist(to))))
	}
	return keys
}

// A key in a node's own arc is answered by the node itself: no hop, no
// call. It used to take the walk round the ring to the predecessor.
func TestLookupOwnKeyTakesNoHop(t *testing.T) {
	ctx := context.Background()
	c := buildConverged(t, 47, nil)
	rng := rand.New(rand.NewPCG(47, 47))
	for _, n := range c.nodes {
		pred := n.Predecessor()
		for _, key := range keysIn(rng, pred.ID, n.Self().ID, 8) {
			calls := c.net.Calls()
			owner, hops, err := n.Lookup(ctx, key)
			if err != nil || owner != n.Self() || hops != 0 {
				t.Fatalf("%s: Lookup(%s) in its own arc = %s, %d hops, %v; want itself, 0 hops", n.Self(), key, owner, hops, err)
			}
			if d := c.net.Calls() - calls; d != 0 {
				t.Fatalf("%s: Lookup(%s) in its own arc made %d remote calls", n.Self(), key, d)
			}
		}
	}
	// Other keys still go out and come back right.
	c.requireLookups(ctx, 20, 47)
}

// Config.Siblings lets one process answer for all of its ring positions.
func TestLookupSiblingKeyTakesNoHop(t *testing.T) {
	ctx := context.Background()
	var c *cluster
	siblings := func() []*Node {
		if c == nil {
			return nil // still building
		}
		return c.nodes[:4]
	}
	c = buildConverged(t, 53, func(cfg *Config) { cfg.Siblings = siblings })
	rng := rand.New(rand.NewPCG(53, 53))
	from := c.nodes[0]
	for _, s := range c.nodes[1:4] {
		for _, key := range keysIn(rng, s.Predecessor().ID, s.Self().ID, 4) {
			calls := c.net.Calls()
			owner, hops, err := from.Lookup(ctx, key)
			if err != nil || owner != s.Self() || hops != 0 || c.net.Calls() != calls {
				t.Fatalf("Lookup(%s) in sibling %s's arc = %s, %d hops, %d calls, %v; want the sibling, 0 hops, no call",
					key, s.Self(), owner, hops, c.net.Calls()-calls, err)
			}
		}
	}
	c.requireLookups(ctx, 20, 53)
}

// isolate cuts n off from every other node and runs rounds until it has
// lost every neighbour. The others form a ring of their own.
func (c *cluster) isolate(ctx context.Context, n *Node) []*Node {
	c.tb.Helper()
	var rest []string
	var restNodes []*Node
	for _, m := range c.live() {
		if m != n {
			rest, restNodes = append(rest, m.Self().Addr), append(restNodes, m)
		}
	}
	c.net.Partition([]string{n.Self().Addr}, rest)
	for r := 0; ; r++ {
		if r == 20 {
			c.tb.Fatalf("%s still has neighbours after %d rounds: %+v", n.Self(), r, n.State())
		}
		c.round(ctx, true)
		if st := n.State(); st.Successors[0] == n.Self() && st.Predecessor.IsZero() {
			break
		}
	}
	return restNodes
}

// A node that had neighbours and lost them all is isolated, not alone: it
// does not take itself for a ring of one that owns every key, nor tell
// others so, and it rejoins when the network heals.
func TestIsolatedNodeKeepsOnlyItsArc(t *testing.T) {
	ctx := context.Background()
	c := buildConverged(t, 59, nil)
	rng := rand.New(rand.NewPCG(59, 59))
	x := c.nodes[7]
	pred, succ := x.Predecessor(), x.Successors()[0]
	rest := c.isolate(ctx, x)

	st := x.State()
	if !st.Isolated || !x.Isolated() || x.Alone() {
		t.Fatalf("cut-off node: State.Isolated %v, Isolated() %v, Alone() %v; want isolated", st.Isolated, x.Isolated(), x.Alone())
	}
	// It holds the arc it had and nothing more.
	for _, key := range keysIn(rng, pred.ID, x.Self().ID, 16) {
		if !x.Owns(key) {
			t.Fatalf("isolated node gave up %s in its own arc (%s, %s]", key, pred.ID, x.Self().ID)
		}
	}
	for _, key := range keysIn(rng, x.Self().ID, pred.ID, 64) {
		if x.Owns(key) {
			t.Fatalf("isolated node claims %s outside its arc (%s, %s]", key, pred.ID, x.Self().ID)
		}
		if owner, _, err := x.Lookup(ctx, key); err == nil || owner == x.Self() {
			t.Fatalf("isolated node resolves %s to %s, %v; want an error", key, owner, err)
		}
	}
	// Asked by a peer that still reaches it, it does not answer "mine".
	if step := x.HandleFindSuccessorStep(succ.ID); step.Found || step.Next == x.Self() || len(step.Successors) > 0 {
		t.Fatalf("isolated node answers a lookup step with %+v", step)
	}
	// The others close the ring without it.
	for r := 0; ; r++ {
		if err := CheckRing(rest); err == nil {
			break
		} else if r == 30 {
			t.Fatalf("the others did not close the ring: %v", firstLines(err, 3))
		}
		c.round(ctx, true)
	}
	// Rejoin needs no notify from the others: stop them from reaching x
	// by keeping their rounds off while x alone works.
	c.net.Heal()
	for range 3 {
		x.Stabilize(ctx)
	}
	if x.Isolated() {
		t.Fatalf("isolated node did not rejoin on its own after the heal: %+v", x.State())
	}
	rounds := c.converge(ctx, 40, true)
	c.requireLookups(ctx, 20, 59)
	t.Logf("rejoined and converged %d rounds after the heal", rounds)
}

// An isolated node whose remembered peers are all gone rejoins through
// Config.Bootstrap.
func TestIsolatedNodeRejoinsThroughBootstrap(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 5, 61, nil)
	y, others := c.nodes[0], c.nodes[1:]
	// x knows, from the start, a peer of a separate ring of four that it
	// never meets otherwise: its bootstrap peer.
	cfg := DefaultConfig()
	cfg.Clock = c.clock
	cfg.Bootstrap = []Peer{others[0].Self()}
	xp := Peer{ID: ID(rand.New(rand.NewPCG(61, 61)).Uint64()), Addr: "x"}
	x := NewNode(xp, c.net.Transport(xp), cfg)
	c.net.Register(xp, x)
	c.nodes = append(c.nodes, x)
	others[0].Create()
	for _, n := range others[1:] {
		if err := n.Join(ctx, others[0].Self()); err != nil {
			t.Fatal(err)
		}
	}
	x.Create()
	if err := y.Join(ctx, x.Self()); err != nil {
		t.Fatal(err)
	}
	for r := 0; ; r++ {
		if errors.Join(CheckRing([]*Node{x, y}), CheckRing(others)) == nil {
			break
		} else if r == 20 {
			t.Fatal("rings did not form")
		}
		c.round(ctx, true)
	}
	// y dies for good while x is cut off from the other ring.
	c.net.Partition([]string{x.Self().Addr, y.Self().Addr}, []string{others[0].Self().Addr, others[1].Self().Addr, others[2].Self().Addr, others[3].Self().Addr})
	c.crash(y)
	for range 5 {
		c.round(ctx, true)
	}
	if !x.Isolated() || x.Owns(y.Self().ID) {
		t.Fatalf("x after losing y: isolated %v, owns y's key %v; want isolated, not owning it", x.Isolated(), x.Owns(y.Self().ID))
	}
	c.net.Heal()
	c.net.Crash(y.Self().Addr) // Heal keeps crashes; be explicit
	// Nobody in the other ring knows x: only x can bring itself in.
	rounds := c.converge(ctx, 20, true)
	if x.Isolated() {
		t.Fatalf("x did not rejoin through its bootstrap peer: %+v", x.State())
	}
	c.requireLookups(ctx, 20, 61)
	t.Logf("rejoined through the bootstrap peer and converged in %d rounds", rounds)
}

// A node that Create made and that never had another member is alone, not
// isolated: it owns the whole ring and answers every lookup itself, and
// stays so across maintenance.
func TestCreatedNodeAloneOwnsRing(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 1, 67, nil)
	n := c.nodes[0]
	n.Create()
	rng := rand.New(rand.NewPCG(67, 67))
	for range 5 {
		c.round(ctx, true)
		c.clock.Advance(time.Second)
	}
	if n.Isolated() || !n.Alone() || n.State().Isolated {
		t.Fatalf("created node: isolated %v, alone %v", n.Isolated(), n.Alone())
	}
	for range 64 {
		key := ID(rng.Uint64())
		if owner, hops, err := n.Lookup(ctx, key); !n.Owns(key) || owner != n.Self() || hops != 0 || err != nil {
			t.Fatalf("alone node: Owns(%s) %v, Lookup = %s, %d, %v", key, n.Owns(key), owner, hops, err)
		}
	}
}

// A leave notice makes the receiver alone only if the leaver knew nobody
// else: a leaver whose successor list wraps round to the receiver before
// going on to others (as on the far side of a partition) leaves it cut
// off, and it must not then claim the whole ring.
func TestLeaveNoticeWrappingRoundIsNotAlone(t *testing.T) {
	_, a, b, d := threeNodeRing(t, 71)
	// a has lost its predecessor and all successors but b, as a node
	// whose other neighbours are on the far side of a partition has.
	a.mu.Lock()
	a.pred, a.succs = Peer{}, []Peer{b.Self()}
	a.succGen++
	a.mu.Unlock()
	if err := a.HandleLeave(b.Self().Addr, LeaveNotice{Leaving: b.Self(), Predecessor: a.Self(), Successors: []Peer{a.Self(), d.Self()}}); err != nil {
		t.Fatal(err)
	}
	if a.Alone() || !a.Isolated() || a.Owns(d.Self().ID) {
		t.Fatalf("after the leave: alone %v, isolated %v, owns %s's key %v; want isolated, not owning it",
			a.Alone(), a.Isolated(), d.Self(), a.Owns(d.Self().ID))
	}
}

// Nor does the leave of the one peer left on this side of a partition: the
// leaver's view was cut by the same partition, which the peers that
// stopped answering (suspects) show.
func TestLeaveOfLastReachablePeerIsNotAlone(t *testing.T) {
	ctx := context.Background()
	c, a, b, d := threeNodeRing(t, 73)
	c.net.Partition([]string{a.Self().Addr, b.Self().Addr}, []string{d.Self().Addr})
	c.down[d.Self().Addr] = true
	c.converge(ctx, 10, true) // a and b: a ring of two
	if err := b.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	c.net.Unregister(b.Self().Addr)
	if a.Alone() || !a.Isolated() || a.Owns(d.Self().ID) {
		t.Fatalf("after the leave: alone %v, isolated %v, owns %s's key %v; want isolated, not owning it",
			a.Alone(), a.Isolated(), d.Self(), a.Owns(d.Self().ID))
	}
	c.net.Heal()
	delete(c.down, d.Self().Addr)
	c.down[b.Self().Addr] = true
	rounds := c.converge(ctx, 20, true)
	t.Logf("a and d rejoined %d rounds after the heal", rounds)
}

// A lookup from a position with siblings (the virtual nodes of one peer)
// starts from the sibling that precedes the key most closely, with its
// tables: with 16 positions a process (4 processes), lookups take less
// than half the hops they take from one position alone (answering the
// siblings' own keys at once saves about a quarter), and still answer
// the true owner.
func TestLookupStartsFromNearestSibling(t *testing.T) {
	ctx := context.Background()
	var c *cluster
	group := func(n *Node) []*Node { // the 16 positions of n's process
		for i, m := range c.nodes {
			if m == n {
				g := i / 16 * 16
				return c.nodes[g : g+16]
			}
		}
		return nil
	}
	var self *Node
	siblings := func() []*Node {
		if c == nil || self == nil {
			return nil
		}
		return group(self)
	}
	c = buildConverged(t, 61, func(cfg *Config) { cfg.Siblings = siblings })
	rng := rand.New(rand.NewPCG(61, 61))
	hops := func(with bool) (sum, n int) {
		for i := 0; i < 400; i++ {
			from := c.nodes[rng.IntN(len(c.nodes))]
			key := ID(rng.Uint64())
			self = nil
			if with {
				self = from
			}
			owner, h, err := from.Lookup(ctx, key)
			if want := successorOf(c.nodes, key); err != nil || owner != want {
				t.Fatalf("Lookup(%s) = %s, %v; want %s", key, owner, err, want)
			}
			sum += h
			n++
		}
		return sum, n
	}
	without, n := hops(false)
	with, _ := hops(true)
	t.Logf("mean hops over %d lookups: %.2f from one position, %.2f from the nearest of 16", n, float64(without)/float64(n), float64(with)/float64(n))
	if with >= without/2 {
		t.Errorf("siblings saved too little: %d hops against %d", with, without)
	}
}

// successorOf returns the node at or after key among nodes.
func successorOf(nodes []*Node, key ID) Peer {
	var best Peer
	for _, n := range nodes {
		p := n.Self()
		if best.IsZero() || uint64(p.ID-key) < uint64(best.ID-key) {
			best = p
		}
	}
	return best
}

// threeNodeRing builds a converged ring of three nodes, a first.
func threeNodeRing(t *testing.T, seed int64) (c *cluster, a, b, d *Node) {
	t.Helper()
	ctx := context.Background()
	c = newCluster(t, 3, seed, nil)
	a, b, d = c.nodes[0], c.nodes[1], c.nodes[2]
	a.Create()
	for _, n := range []*Node{b, d} {
		if err := n.Join(ctx, a.Self()); err != nil {
			t.Fatal(err)
		}
	}
	c.converge(ctx, 10, true)
	return c, a, b, d
}
