package ring

import (
	"sync"
	"time"
)

// Clock is the node's only source of time, so tests and the simulator can
// drive maintenance without waiting on the wall clock.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTicker returns a ticker that fires every d; d must be positive.
	NewTicker(d time.Duration) Ticker
}

// Ticker delivers ticks like time.Ticker: a slow receiver misses ticks
// rather than queueing them.
type Ticker interface {
	// C returns the channel ticks arrive on.
	C() <-chan time.Time
	// Stop turns the ticker off; no tick is delivered after it returns.
	Stop()
}

// RealClock returns a Clock backed by package time.
func RealClock() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time { return r.t.C }
func (r realTicker) Stop()               { r.t.Stop() }

// FakeClock is a Clock that moves only when Advance is called. Tickers fire
// during Advance and, like time.Ticker, drop ticks their receiver has not
// consumed yet. The zero value is a clock stopped at the zero time. It is
// safe for concurrent use.
type FakeClock struct {
	mu      sync.Mutex
	now     time.Time
	tickers []*fakeTicker
}

// NewFakeClock returns a FakeClock reading start.
func NewFakeClock(start time.Time) *FakeClock { return &FakeClock{now: start} }

// Now returns the clock's current reading.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTicker returns a ticker whose first tick is due d after the current
// reading. It panics if d is not positive, as time.NewTicker does.
func (c *FakeClock) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("ring: non-positive interval for FakeClock.NewTicker")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTicker{clock: c, c: make(chan time.Time, 1), period: d, next: c.now.Add(d)}
	c.tickers = append(c.tickers, t)
	return t
}

// Advance moves the clock forward by d and delivers every tick that falls
// due. Each ticker delivers at most one tick per Advance (its buffer holds
// one), so advance in steps no longer than the shortest interval to drive
// every loop once per step.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for _, t := range c.tickers {
		if t.next.After(c.now) {
			continue
		}
		// Compute the number of elapsed periods instead of looping, so a
		// large jump with a short period costs nothing.
		missed := c.now.Sub(t.next) / t.period
		last := t.next.Add(missed * t.period)
		select {
		case t.c <- last:
		default: // receiver is behind; drop like time.Ticker
		}
		t.next = last.Add(t.period)
	}
}

// Tickers reports how many tickers are live, so a test can wait until the
// loops it started are listening before it advances the clock.
func (c *FakeClock) Tickers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.tickers)
}

// PendingTicks reports how many tickers hold a tick their receiver has not
// taken yet. A test that waits for zero before each Advance never loses a
// tick, so every loop runs exactly once per period of fake time.
func (c *FakeClock) PendingTicks() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	pending := 0
	for _, t := range c.tickers {
		pending += len(t.c)
	}
	return pending
}

type fakeTicker struct {
	clock  *FakeClock
	c      chan time.Time
	period time.Duration
	next   time.Time
}

func (t *fakeTicker) C() <-chan time.Time { return t.c }

func (t *fakeTicker) Stop() {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, o := range c.tickers {
		if o == t {
			c.tickers = append(c.tickers[:i], c.tickers[i+1:]...)
			return
		}
	}
}
