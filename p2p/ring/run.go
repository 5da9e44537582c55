package ring

import (
	"context"
	"sync"
	"time"
)

// Run drives Stabilize, FixFingers and CheckPredecessor on Clock tickers at
// their configured intervals until ctx is done, then returns nil once all
// of its goroutines have exited. Each loop runs its task to completion
// before waiting for the next tick, so a slow network delays ticks rather
// than piling up work. Run returns ErrRunning if it is already running.
func (n *Node) Run(ctx context.Context) error {
	if !n.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer n.running.Store(false)

	var wg sync.WaitGroup
	every := func(d time.Duration, task func(context.Context)) {
		t := n.cfg.Clock.NewTicker(d)
		wg.Go(func() {
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C():
					task(ctx)
				}
			}
		})
	}
	every(n.cfg.StabilizeInterval, n.Stabilize)
	every(n.cfg.CheckPredecessorInterval, n.CheckPredecessor)
	every(n.cfg.FixFingersInterval, n.FixFingers)
	wg.Wait()
	return nil
}
