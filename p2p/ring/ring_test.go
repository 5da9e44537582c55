package ring

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestSingleNodeRing(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 1, 1, nil)
	n := c.nodes[0]
	n.Create()
	n.Stabilize(ctx)
	n.CheckPredecessor(ctx)
	n.FixFingers(ctx)
	for _, key := range []ID{0, n.Self().ID, n.Self().ID + 1, math.MaxUint64} {
		got, hops, err := n.Lookup(ctx, key)
		if err != nil || got != n.Self() || hops != 0 {
			t.Fatalf("Lookup(%s) = %s, %d, %v; want self, 0, nil", key, got, hops, err)
		}
		if !n.Owns(key) {
			t.Fatalf("alone node does not own %s", key)
		}
	}
	if err := CheckRing(c.nodes); err != nil {
		t.Fatal(err)
	}
	if c.net.Calls() != 0 {
		t.Fatalf("a node alone made %d remote calls", c.net.Calls())
	}
}

func TestTwoNodeRing(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 2, 2, nil)
	a, b := c.nodes[0], c.nodes[1]
	a.Create()
	if err := b.Join(ctx, a.Self()); err != nil {
		t.Fatal(err)
	}
	rounds := c.converge(ctx, 5, true)
	t.Logf("two-node ring converged in %d rounds", rounds)
	if a.Successors()[0] != b.Self() || b.Successors()[0] != a.Self() {
		t.Fatalf("successors: a→%v b→%v", a.Successors(), b.Successors())
	}
	c.requireLookups(ctx, 100, 2)
	// Ownership splits the ring exactly in two.
	for _, key := range []ID{a.Self().ID, b.Self().ID, a.Self().ID + 1, b.Self().ID + 1} {
		if a.Owns(key) == b.Owns(key) {
			t.Fatalf("key %s: a owns %v, b owns %v", key, a.Owns(key), b.Owns(key))
		}
	}
}

// buildConverged returns a 64-node ring whose pointers and fingers are
// all correct.
func buildConverged(t *testing.T, seed int64, tweak func(*Config)) *cluster {
	t.Helper()
	ctx := context.Background()
	c := newCluster(t, 64, seed, tweak)
	c.joinAll(ctx, 1, false)
	rounds := c.converge(ctx, 20, true)
	c.round(ctx, true) // fingers computed from a converged ring
	c.checkFingers()
	t.Logf("64 nodes converged %d rounds after the last join", rounds)
	return c
}

func TestLookup64Nodes(t *testing.T) {
	ctx := context.Background()
	c := buildConverged(t, 64, nil)
	before := c.net.Calls()
	st := c.requireLookups(ctx, 200, 64)
	t.Logf("%d lookups from every node: mean %.2f hops, max %d, %.2f calls/lookup",
		st.lookups, st.mean(), st.maxHops, float64(c.net.Calls()-before)/float64(st.lookups))
	if limit := math.Log2(64); st.mean() > limit {
		t.Fatalf("mean hops %.2f > log2(64) = %.0f", st.mean(), limit)
	}
	// checkFingers proved every entry right; this shows the table size is
	// O(log N), as the hop count depends on it.
	total := 0
	for _, n := range c.nodes {
		total += len(n.State().Fingers)
	}
	t.Logf("mean distinct fingers per node: %.1f", float64(total)/float64(len(c.nodes)))
}

func TestCrashQuarter(t *testing.T) {
	ctx := context.Background()
	c := buildConverged(t, 25, nil)
	rng := rand.New(rand.NewPCG(25, 25))
	for _, n := range pick(rng, c.nodes, len(c.nodes)/4) {
		c.crash(n)
	}
	rounds := c.converge(ctx, 10, true)
	st := c.requireLookups(ctx, 200, 25)
	t.Logf("after 16 of 64 crashed: converged in %d rounds; mean %.2f hops, max %d", rounds, st.mean(), st.maxHops)
	c.round(ctx, true)
	c.checkFingers()
}

// With fingers left pointing at dead peers, lookups must still be right:
// fingers only affect speed.
func TestStaleFingersLookupsStillCorrect(t *testing.T) {
	ctx := context.Background()
	c := buildConverged(t, 7, nil)
	rng := rand.New(rand.NewPCG(7, 7))
	dead := pick(rng, c.nodes, len(c.nodes)/4)
	for _, n := range dead {
		c.crash(n)
	}
	rounds := c.converge(ctx, 10, false)

	stale := 0
	for _, n := range c.live() {
		n.mu.Lock()
		for _, f := range n.fingers {
			if c.down[f.Addr] {
				stale++
			}
		}
		n.mu.Unlock()
	}
	if stale == 0 {
		t.Fatal("no stale fingers left; the test would prove nothing")
	}
	st := c.requireLookups(ctx, 200, 7)
	t.Logf("successors repaired in %d rounds; %d stale finger entries; mean %.2f hops, max %d",
		rounds, stale, st.mean(), st.maxHops)
}

// Lookups issued right after the crash, before any repair, may name a dead
// owner or fail, but must never loop beyond MaxHops or hang.
func TestLookupRightAfterCrashTerminates(t *testing.T) {
	ctx := context.Background()
	c := buildConverged(t, 9, nil)
	rng := rand.New(rand.NewPCG(9, 9))
	for _, n := range pick(rng, c.nodes, len(c.nodes)/4) {
		c.crash(n)
	}
	st, _ := c.lookups(ctx, 50, rng)
	if st.maxHops > DefaultConfig().MaxHops {
		t.Fatalf("a lookup made %d hops", st.maxHops)
	}
	t.Logf("before repair: %d lookups, %d wrong, %d failed, mean %.2f hops, max %d",
		st.lookups, st.wrong, st.failed, st.mean(), st.maxHops)
}

func TestHopLimit(t *testing.T) {
	ctx := context.Background()
	c := buildConverged(t, 11, nil)
	for _, n := range c.nodes {
		n.cfg.MaxHops = 1
	}
	st, problems := c.lookups(ctx, 50, rand.New(rand.NewPCG(11, 11)))
	if st.failed == 0 {
		t.Fatal("no lookup hit a hop limit of 1")
	}
	if st.wrong != 0 || st.maxHops > 1 {
		t.Fatalf("wrong=%d maxHops=%d with MaxHops=1", st.wrong, st.maxHops)
	}
	_, _, err := c.nodes[0].Lookup(ctx, c.nodes[0].Self().ID-1) // far side of the ring
	if err != nil && !errors.Is(err, ErrTooManyHops) {
		t.Fatalf("err = %v, want ErrTooManyHops", err)
	}
	t.Logf("%d of %d lookups stopped at the hop limit, e.g. %s", st.failed, st.lookups, problems[0])
}

func TestGracefulLeave(t *testing.T) {
	ctx := context.Background()
	c := buildConverged(t, 13, nil)
	rng := rand.New(rand.NewPCG(13, 13))
	for _, n := range pick(rng, c.nodes, 8) {
		pred, succ := n.Predecessor(), n.Successors()[0]
		if err := n.Leave(ctx); err != nil {
			t.Fatalf("%s leave: %v", n.Self(), err)
		}
		c.net.Unregister(n.Self().Addr)
		c.down[n.Self().Addr] = true
		// No maintenance has run: the notices alone must close the ring.
		nodes := map[Peer]*Node{}
		for _, m := range c.nodes {
			nodes[m.Self()] = m
		}
		if got := nodes[pred].Successors()[0]; got != succ {
			t.Fatalf("after %s left, its predecessor's successor is %s, want %s", n.Self(), got, succ)
		}
		if got := nodes[succ].Predecessor(); got != pred {
			t.Fatalf("after %s left, its successor's predecessor is %s, want %s", n.Self(), got, pred)
		}
		if st := n.State(); st.Successors[0] != n.Self() || !st.Predecessor.IsZero() {
			t.Fatalf("left node still has neighbours: %+v", st)
		}
	}
	// Lookups are right before any maintenance (stale fingers fall back) ...
	c.requireLookups(ctx, 50, 13)
	// ... and maintenance restores full successor lists.
	rounds := c.converge(ctx, 10, true)
	c.requireLookups(ctx, 100, 14)
	t.Logf("8 nodes left; successor lists full again after %d rounds", rounds)
}

func TestLeaveTwoNodeRing(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 2, 3, nil)
	a, b := c.nodes[0], c.nodes[1]
	a.Create()
	if err := b.Join(ctx, a.Self()); err != nil {
		t.Fatal(err)
	}
	c.converge(ctx, 5, true)
	if err := b.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	c.net.Unregister(b.Self().Addr)
	c.down[b.Self().Addr] = true
	if err := CheckRing([]*Node{a}); err != nil {
		t.Fatalf("survivor is not alone: %v", err)
	}
	if got, _, _ := a.Lookup(ctx, b.Self().ID); got != a.Self() {
		t.Fatalf("survivor resolves the leaver's key to %s", got)
	}
	// The leaver said it left: the survivor is alone, not cut off, and
	// owns the whole ring.
	if !a.Alone() || a.Isolated() || !a.Owns(b.Self().ID) {
		t.Fatalf("survivor: alone %v, isolated %v, owns the leaver's key %v", a.Alone(), a.Isolated(), a.Owns(b.Self().ID))
	}
}

func TestPartitionHeal(t *testing.T) {
	ctx := context.Background()
	c := buildConverged(t, 17, nil)
	var left, right []string
	var leftNodes, rightNodes []*Node
	for i, n := range c.nodes {
		if i%2 == 0 {
			left, leftNodes = append(left, n.Self().Addr), append(leftNodes, n)
		} else {
			right, rightNodes = append(right, n.Self().Addr), append(rightNodes, n)
		}
	}
	c.net.Partition(left, right)
	// Each side repairs into a ring of its own.
	var err error
	for r := 0; r < 30; r++ {
		c.round(ctx, true)
		if err = errors.Join(CheckRing(leftNodes), CheckRing(rightNodes)); err == nil {
			t.Logf("partitioned halves formed separate rings in %d rounds", r+1)
			break
		}
	}
	if err != nil {
		t.Fatalf("halves did not form rings: %v", firstLines(err, 5))
	}

	c.net.Heal()
	rounds := c.converge(ctx, 100, true)
	st := c.requireLookups(ctx, 100, 17)
	t.Logf("after heal the rings merged in %d rounds; mean %.2f hops", rounds, st.mean())
}

func TestDropRate(t *testing.T) {
	ctx := context.Background()
	c := buildConverged(t, 19, nil)
	c.net.SetDropRate(0.2)
	for range 10 {
		c.round(ctx, true)
	}
	st, _ := c.lookups(ctx, 50, rand.New(rand.NewPCG(19, 19)))
	t.Logf("with 20%% drops: %d lookups, %d wrong, %d failed, mean %.2f hops",
		st.lookups, st.wrong, st.failed, st.mean())
	if ok := st.lookups - st.wrong - st.failed; ok < st.lookups*95/100 {
		t.Errorf("only %d of %d lookups correct under 20%% drops", ok, st.lookups)
	}
	c.net.SetDropRate(0)
	rounds := c.converge(ctx, 40, true)
	c.requireLookups(ctx, 100, 20)
	t.Logf("drops stopped: converged in %d rounds", rounds)
}

// Joins in bursts through a ring that has not settled used to leave
// interleaved cycles that plain Chord stabilization never merges; the
// position check in FixFingers must fold them into one ring quickly.
func TestBurstJoinsConverge(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 256, 37, nil)
	c.joinAll(ctx, 64, true)
	// 5-7 rounds across seeds; without the position check, 18-33.
	rounds := c.converge(ctx, 10, true)
	st := c.requireLookups(ctx, 20, 37)
	t.Logf("256 nodes joined 64 at a time converged in %d rounds; mean %.2f hops, max %d", rounds, st.mean(), st.maxHops)
}

func TestJoinErrors(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 3, 23, nil)
	a, b := c.nodes[0], c.nodes[1]
	a.Create()
	c.net.Crash(a.Self().Addr)
	if err := b.Join(ctx, a.Self()); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("join via crashed bootstrap: err = %v, want ErrUnreachable", err)
	}
	c.net.Restore(a.Self().Addr)
	if err := b.Join(ctx, Peer{}); err == nil {
		t.Fatal("join via zero peer succeeded")
	}
	// A second peer claiming a's position must be refused.
	twin := Peer{ID: a.Self().ID, Addr: "twin"}
	tn := NewNode(twin, c.net.Transport(twin), DefaultConfig())
	c.net.Register(twin, tn)
	if err := tn.Join(ctx, a.Self()); !errors.Is(err, ErrIDTaken) {
		t.Fatalf("join with a taken ID: err = %v, want ErrIDTaken", err)
	}
}

// A node that was cut off keeps its old pointers; when it comes back it
// must be folded in again and the ring must end up exactly right.
func TestCrashAndRestore(t *testing.T) {
	ctx := context.Background()
	c := buildConverged(t, 29, nil)
	victims := c.nodes[10:14]
	for _, n := range victims {
		c.crash(n)
	}
	c.converge(ctx, 10, true)
	for _, n := range victims {
		c.net.Restore(n.Self().Addr)
		delete(c.down, n.Self().Addr)
	}
	rounds := c.converge(ctx, 60, true)
	c.requireLookups(ctx, 50, 29)
	t.Logf("restored nodes folded back in after %d rounds", rounds)
}

func TestOnChangeVersions(t *testing.T) {
	ctx := context.Background()
	var got []State
	c := newCluster(t, 8, 31, nil)
	c.nodes[3].cfg.OnChange = func(s State) { got = append(got, s) }
	c.joinAll(ctx, 1, false)
	c.converge(ctx, 20, true)
	if len(got) == 0 {
		t.Fatal("OnChange never called")
	}
	last := got[len(got)-1]
	now := c.nodes[3].State()
	if last.Predecessor != now.Predecessor || last.Successors[0] != now.Successors[0] {
		t.Fatalf("last OnChange snapshot %+v disagrees with state %+v", last, now)
	}
	if !slices.IsSortedFunc(got, func(a, b State) int { return int(a.Version) - int(b.Version) }) {
		t.Fatal("versions not increasing in a single-threaded run")
	}
}

// TestForgedMembershipNoticesRefused: a peer cannot announce another's
// departure (the attack made node 0 adopt the attacker as
// successor) nor propose another as a node's predecessor. The notices are
// refused with ErrNotSender and the ring is untouched; the same notices
// from the peer they name are taken.
func TestForgedMembershipNoticesRefused(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 4, 21, nil)
	c.joinAll(ctx, 1, false)
	c.converge(ctx, 10, true)
	victim := c.nodes[0]
	succ, pred := victim.Successors()[0], victim.Predecessor()
	attacker := Peer{ID: succ.ID - 1, Addr: "attacker"}
	c.net.Register(attacker, newCluster(t, 1, 99, nil).nodes[0])
	tr := c.net.Transport(attacker)

	// A forged leave of the victim's successor, naming the attacker as
	// the successor to splice in.
	err := tr.Leave(ctx, victim.Self(), LeaveNotice{Leaving: succ, Predecessor: victim.Self(), Successors: []Peer{attacker}})
	if !errors.Is(err, ErrNotSender) {
		t.Fatalf("forged leave: err = %v, want ErrNotSender", err)
	}
	// A forged notify proposing a third peer as predecessor.
	third := Peer{ID: victim.Self().ID - 1, Addr: "third"}
	if err := tr.Notify(ctx, victim.Self(), third); !errors.Is(err, ErrNotSender) {
		t.Fatalf("forged notify: err = %v, want ErrNotSender", err)
	}
	if got := victim.Successors()[0]; got != succ {
		t.Fatalf("successor changed from %s to %s after forged notices", succ, got)
	}
	if got := victim.Predecessor(); got != pred {
		t.Fatalf("predecessor changed from %s to %s after forged notices", pred, got)
	}

	// The genuine article: the successor announces its own departure.
	succNode := c.byAddr(succ.Addr)
	if err := succNode.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if got := victim.Successors()[0]; got == succ {
		t.Fatalf("successor %s still listed after its own leave notice", succ)
	}
}
