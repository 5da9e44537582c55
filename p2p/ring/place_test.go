package ring

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// placedCluster builds machines of v positions that join one after
// another, as nodes started a moment apart do: each machine's position 0
// goes where its identity puts it, and each further position is Place's
// pick among choices candidates (one candidate: where the identity puts
// it, as without Place). It returns the cluster, converged.
func placedCluster(t *testing.T, machines, v, choices int, seed uint64) *cluster {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 11))
	c := &cluster{
		tb:    t,
		net:   NewMemNet(int64(seed)),
		clock: NewFakeClock(time.Unix(1_700_000_000, 0)),
		down:  make(map[string]bool),
	}
	used := make(map[ID]bool)
	draw := func() ID {
		id := ID(rng.Uint64())
		for used[id] {
			id = ID(rng.Uint64())
		}
		used[id] = true
		return id
	}
	newPos := func(family *[]*Node, p Peer) *Node {
		cfg := DefaultConfig()
		cfg.Clock = c.clock
		cfg.Positions = v
		fam := family
		cfg.Siblings = func() []*Node { return *fam }
		n := NewNode(p, c.net.Transport(p), cfg)
		c.net.Register(p, n)
		*family = append(*family, n)
		c.nodes = append(c.nodes, n)
		return n
	}
	for m := range machines {
		// The machine's first position goes where its identity puts it;
		// it places the others, through a member as it has not joined
		// yet, before any joins, as a node does.
		family := new([]*Node)
		first := newPos(family, Peer{ID: draw(), Addr: fmt.Sprintf("m%03d", m)})
		var via Peer
		if m > 0 {
			via = c.nodes[0].Self()
		}
		// The arcs of every candidate are looked up at once, then each
		// position takes the best of its candidates, counting those
		// taken before (route.PlacePositions).
		cands := make([][]Peer, v)
		for slot := 1; slot < v; slot++ {
			for j := range choices {
				cands[slot] = append(cands[slot], Peer{ID: draw(), Addr: fmt.Sprintf("m%03d/%d", m, slot+j*v)})
			}
		}
		placed := []ID{first.Self().ID}
		var chosen []Peer
		arcs := make([][]Arc, v)
		known := make([][]bool, v)
		for slot := 1; slot < v; slot++ {
			for _, c := range cands[slot] {
				a, err := first.ArcAround(ctx, via, c.ID)
				arcs[slot], known[slot] = append(arcs[slot], a), append(known[slot], err == nil)
			}
		}
		for slot := 1; slot < v; slot++ {
			p, ok := Choose(cands[slot], arcs[slot], known[slot], placed)
			if !ok {
				t.Fatalf("no arc of slot %d of m%03d known", slot, m)
			}
			placed, chosen = append(placed, p.ID), append(chosen, p)
		}
		if m == 0 {
			first.Create()
		} else if err := first.Join(ctx, via); err != nil {
			t.Fatalf("join %s: %v", first.Self(), err)
		}
		for _, p := range chosen {
			if err := newPos(family, p).Join(ctx, first.Self()); err != nil {
				t.Fatalf("join %s: %v", p, err)
			}
		}
		c.runFor(ctx, 500*time.Millisecond, nil)
	}
	c.runFor(ctx, 5*time.Minute, func() bool { return Converged(c.live()) })
	if err := CheckRing(c.live()); err != nil {
		t.Fatalf("ring did not converge: %v", firstLines(err, 5))
	}
	return c
}

// shareSpread returns the busiest machine's share of the ring over the
// mean share.
func shareSpread(c *cluster) float64 {
	peers, _ := ringOrder(c.live())
	share := map[string]float64{}
	for i, p := range peers {
		pred := peers[(i+len(peers)-1)%len(peers)]
		share[p.Machine()] += float64(pred.ID.dist(p.ID))
	}
	var top, sum float64
	for _, s := range share {
		top, sum = max(top, s), sum+s
	}
	return top / (sum / float64(len(share)))
}

// Issue 28: a machine that places its positions, each among 4
// candidates, evens the machines' shares of the ring. 8 machines of 16
// positions join one after another; the busiest machine's share over the
// mean, for 8 identity sets (40 with -v, and 2 and 8 candidates too):
// drawn at random, median 1.35 and 9 of 40 sets over 1.5; placed among
// 4, median 1.20 and none over 1.5 (at most 1.42). Placement that picked
// any candidate (the first, say) is back at the drawn figures and fails.
func TestPlaceEvensMachines(t *testing.T) {
	const machines, v = 8, 16
	seeds, choices := 8, []int{1, 4}
	if testing.Verbose() {
		seeds, choices = 40, []int{1, 2, 4, 8}
	}
	medians := map[int]float64{}
	for _, ch := range choices {
		var r []float64
		for s := range uint64(seeds) {
			r = append(r, shareSpread(placedCluster(t, machines, v, ch, s+1)))
		}
		slices.Sort(r)
		over := 0
		for _, x := range r {
			if x > 1.5 {
				over++
			}
		}
		medians[ch] = r[len(r)/2]
		t.Logf("%d candidates: busiest machine's share over the mean: median %.3f, p90 %.3f, max %.3f; %d of %d sets over 1.5",
			ch, r[len(r)/2], r[len(r)*9/10], r[len(r)-1], over, len(r))
		if ch == 4 && over > 0 {
			t.Errorf("placed among 4 candidates, %d of %d identity sets have a machine owning over 1.5 times the mean share", over, len(r))
		}
	}
	if medians[4] > medians[1]-0.08 {
		t.Errorf("median busiest share %.3f placed among 4, %.3f drawn: placing gains too little", medians[4], medians[1])
	}
}

// Place takes the candidate that splits the longest arc nearest its
// middle, counts the machine's own positions placed but not joined as
// splits, and passes over a candidate it cannot look up.
func TestPlaceSplitsLongestArc(t *testing.T) {
	ctx := context.Background()
	net := NewMemNet(1)
	clock := NewFakeClock(time.Unix(1_700_000_000, 0))
	const q = ID(1) << 62 // a quarter of the ring
	var members []*Node
	for i, id := range []ID{0, q, 2 * q} { // arcs: (0, q], (q, 2q], and (2q, 0] of half the ring
		cfg := DefaultConfig()
		cfg.Clock = clock
		p := Peer{ID: id, Addr: fmt.Sprintf("m%d", i)}
		n := NewNode(p, net.Transport(p), cfg)
		net.Register(p, n)
		members = append(members, n)
	}
	members[0].Create()
	for _, n := range members[1:] {
		if err := n.Join(ctx, members[0].Self()); err != nil {
			t.Fatal(err)
		}
	}
	for range 10 {
		for _, n := range members {
			n.Stabilize(ctx)
		}
	}
	if !Converged(members) {
		t.Fatalf("ring did not converge: %v", CheckRing(members))
	}
	self := Peer{ID: 5, Addr: "x"}
	prober := NewNode(self, net.Transport(self), DefaultConfig())
	cand := func(id ID) Peer { return Peer{ID: id, Addr: fmt.Sprintf("x/%d", id)} }
	nearEdge, middle, short := cand(2*q+q/8), cand(3*q), cand(q/2)
	for _, tc := range []struct {
		name   string
		cands  []Peer
		placed []ID
		want   Peer
	}{
		{"the middle of the longest arc", []Peer{short, nearEdge, middle}, nil, middle},
		{"the longest arc, near its edge, over a short arc's middle", []Peer{short, nearEdge}, nil, nearEdge},
		// A position of the machine just after 3q leaves two arcs of a
		// quarter, and a candidate at 3q would take almost nothing from
		// the machine at 0: the middle of a quarter is best.
		{"placed positions split arcs", []Peer{middle, cand(3*q + q/16), short}, []ID{3*q + 1}, short},
	} {
		var arcs []Arc
		var known []bool
		for _, c := range tc.cands {
			a, err := prober.ArcAround(ctx, members[0].Self(), c.ID)
			if err != nil {
				t.Fatalf("%s: arc of %s: %v", tc.name, c.ID, err)
			}
			arcs, known = append(arcs, a), append(known, true)
		}
		got, ok := Choose(tc.cands, arcs, known, tc.placed)
		if !ok {
			t.Fatalf("%s: nothing chosen", tc.name)
		}
		if got != tc.want {
			t.Errorf("%s: placed at %s, want %s", tc.name, got.ID, tc.want.ID)
		}
	}
	// A candidate whose arc is not known is passed over; with none known
	// the first is taken, and Choose says so.
	a, _ := prober.ArcAround(ctx, members[0].Self(), middle.ID)
	if got, ok := Choose([]Peer{middle, short}, []Arc{a, {}}, []bool{true, false}, nil); !ok || got != middle {
		t.Errorf("one arc known: got %s, %v; want %s", got.ID, ok, middle.ID)
	}
	if got, ok := Choose([]Peer{short, middle}, []Arc{{}, {}}, []bool{false, false}, nil); ok || got != short {
		t.Errorf("no arc known: got %s, %v; want the first candidate, not chosen", got.ID, ok)
	}
	// Through a member that does not answer, the arc is not found.
	net.Crash("m1")
	if _, err := prober.ArcAround(ctx, members[1].Self(), middle.ID); err == nil {
		t.Error("arc found through a dead member")
	}
}
