package ring

import (
	"context"
	"errors"
	"runtime"
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
	c := newCluster(t, size, 41, nil)
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
		if CheckRing(c.nodes) == nil && c.fingersOK() == nil {
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
