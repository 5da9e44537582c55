package ring

import (
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// fingersOK reports the first wrong finger on any live node.
func (c *cluster) fingersOK() error {
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
				return errors.New(n.self.String() + ": stale finger")
			}
		}
	}
	return nil
}

// settle waits until every maintenance loop has taken its last tick, so
// the next Advance delivers a tick to every loop instead of dropping some.
func settle(clock *FakeClock, tickers int) {
	for clock.Tickers() != tickers || clock.PendingTicks() != 0 {
		runtime.Gosched()
	}
}

// TestRunWithFakeClock drives whole nodes through Run: joins happen while
// other nodes' loops are live, only fake time moves maintenance forward,
// and cancelling the context stops every goroutine.
func TestRunWithFakeClock(t *testing.T) {
	defer goleak.VerifyNone(t)
	const size = 32
	var changes atomic.Int64
	c := newCluster(t, size, 41, func(cfg *Config) {
		cfg.OnChange = func(State) { changes.Add(1) }
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	done := make(chan error, size)
	start := func(n *Node) {
		go func() { done <- n.Run(ctx) }()
	}
	c.nodes[0].Create()
	start(c.nodes[0])
	for i, n := range c.nodes[1:] {
		if err := n.Join(ctx, c.nodes[0].Self()); err != nil {
			t.Fatalf("join %s: %v", n.Self(), err)
		}
		start(n)
		settle(c.clock, 3*(i+2))
		c.clock.Advance(500 * time.Millisecond)
	}
	if err := c.nodes[0].Run(ctx); !errors.Is(err, ErrRunning) {
		t.Fatalf("second Run: err = %v, want ErrRunning", err)
	}

	const step = 500 * time.Millisecond
	var elapsed time.Duration
	for {
		settle(c.clock, 3*size)
		if Converged(c.nodes) && c.fingersOK() == nil {
			break
		}
		if elapsed > 2*time.Minute {
			t.Fatalf("not converged after %v of fake time: %v", elapsed, firstLines(CheckRing(c.nodes), 3))
		}
		c.clock.Advance(step)
		elapsed += step
	}
	t.Logf("Run loops converged the ring %v of fake time after the last join", elapsed)

	// Lookups race with live maintenance loops; the ring is stable, so
	// answers must still be right.
	lookupsDone := make(chan struct{})
	go func() {
		defer close(lookupsDone)
		for range 20 {
			settle(c.clock, 3*size)
			c.clock.Advance(step)
		}
	}()
	c.requireLookups(ctx, 50, 41)
	<-lookupsDone

	// Chaos while the loops run: a quarter of the nodes crash (their loops
	// keep running, cut off, like a partitioned process) and fake time
	// alone must repair the ring around them.
	for _, n := range pick(rand.New(rand.NewPCG(41, 41)), c.nodes[1:], size/4) {
		c.crash(n)
	}
	elapsed = 0
	for {
		settle(c.clock, 3*size)
		if Converged(c.live()) && c.fingersOK() == nil {
			break
		}
		if elapsed > 2*time.Minute {
			t.Fatalf("not repaired after %v of fake time: %v", elapsed, firstLines(CheckRing(c.live()), 3))
		}
		c.clock.Advance(step)
		elapsed += step
	}
	c.requireLookups(ctx, 50, 42)
	t.Logf("%d crashes repaired by the Run loops in %v of fake time", size/4, elapsed)
	if changes.Load() == 0 {
		t.Error("OnChange never fired")
	}

	cancel()
	for range size {
		if err := <-done; err != nil {
			t.Errorf("Run returned %v", err)
		}
	}
	if n := c.clock.Tickers(); n != 0 {
		t.Fatalf("%d tickers still live after Run returned", n)
	}
}

// A peer slower than RPCTimeout counts as failed: the lookup gives up on
// it within the timeout and reports why, instead of hanging.
func TestRPCTimeout(t *testing.T) {
	ctx := context.Background()
	// Successor lists shorter than the ring, so that they cannot name the
	// owner of a far key without asking anyone.
	c := newCluster(t, 8, 43, func(cfg *Config) { cfg.RPCTimeout, cfg.SuccessorListLen = 20*time.Millisecond, 2 })
	c.joinAll(ctx, 1, false)
	c.converge(ctx, 10, true)
	n := c.nodes[0]
	far := n.Predecessor().ID // owned by the predecessor: only a walk round the ring gets there
	c.net.SetDelay(time.Hour)
	defer c.net.SetDelay(0)
	start := time.Now()
	_, hops, err := n.Lookup(ctx, far)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrNoRoute) {
		t.Fatalf("err = %v, want ErrNoRoute wrapping a deadline", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("lookup took %v with a 20ms RPC timeout", took)
	}
	if len(n.State().Suspects) == 0 {
		t.Fatal("timed-out peers not marked suspect")
	}
	t.Logf("gave up after %d timed-out hops: %v", hops, err)
}
