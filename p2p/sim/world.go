package sim

import (
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// epoch0 is the wall-clock reading of virtual time zero. Epochs follow
// the clock in milliseconds (shard), so it must lie well after 1970.
var epoch0 = time.Unix(1_700_000_000, 0)

// event is one scheduled action.
type event struct {
	at  time.Duration
	seq uint64 // ties at one instant run in scheduling order
	fn  func()
}

// eventHeap is a 4-ary min-heap of events by (at, seq), typed rather
// than through container/heap: that boxed every event pushed into an
// interface (an allocation per event) and called Less through one. With
// 100,000 positions ticking every 100 ms the queue holds hundreds of
// thousands of events, and a wider node halves the levels a pop walks.
type eventHeap []event

func (e *event) before(o *event) bool {
	if e.at != o.at {
		return e.at < o.at
	}
	return e.seq < o.seq
}

// push adds e.
func (h *eventHeap) push(e event) {
	q := append(*h, e)
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !q[i].before(&q[p]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
	*h = q
}

// pop removes and returns the earliest event; the heap must not be empty.
func (h *eventHeap) pop() event {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q[last] = event{}
	q = q[:last]
	i := 0
	for {
		first := 4*i + 1
		if first >= len(q) {
			break
		}
		m := first
		for c := first + 1; c < first+4 && c < len(q); c++ {
			if q[c].before(&q[m]) {
				m = c
			}
		}
		if !q[m].before(&q[i]) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}

// world is the event loop and the virtual clock. It is used from one
// goroutine only.
type world struct {
	now    time.Duration // the running event's time
	charge time.Duration // time the running event has spent so far
	q      eventHeap
	seq    uint64
	events int64
	// stop, when closed, halts runUntil between two events (checked
	// every stopEvery events); halted says it did.
	stop   <-chan struct{}
	halted bool
}

// stopEvery is how many events runUntil runs between two looks at stop.
const stopEvery = 1024

// at schedules fn at virtual time t (not before now).
func (w *world) at(t time.Duration, fn func()) {
	if t < w.now {
		t = w.now
	}
	w.seq++
	w.q.push(event{at: t, seq: w.seq, fn: fn})
}

// after schedules fn d after the current instant, charge included.
func (w *world) after(d time.Duration, fn func()) { w.at(w.now+w.charge+d, fn) }

// runUntil runs events in order until the next one is due after end or
// stop returns true (checked between events); the clock then reads end,
// or the time of the last event run if stop ended it, or the world was
// halted (w.stop closed).
func (w *world) runUntil(end time.Duration, stop func() bool) {
	for len(w.q) > 0 && w.q[0].at <= end {
		if stop != nil && stop() {
			return
		}
		if w.halted {
			return
		}
		if w.stop != nil && w.events%stopEvery == 0 {
			select {
			case <-w.stop:
				w.halted = true
				return
			default:
			}
		}
		e := w.q.pop()
		w.now, w.charge = e.at, 0
		e.fn()
		w.events++
	}
	w.now, w.charge = end, 0
}

// elapsed is the current instant: the event's time plus its charge.
func (w *world) elapsed() time.Duration { return w.now + w.charge }

// every runs step at start and then periodically, as ring.Node.Run's
// tickers do: the next run is due one period after the previous began,
// or, when the step took longer, at the first tick after it ended (missed
// ticks are dropped). It stops when alive reports false.
func (w *world) every(start, period time.Duration, alive func() bool, step func()) {
	var tick func()
	due := start
	tick = func() {
		if !alive() {
			return
		}
		step()
		end := w.elapsed()
		due += period
		if end > due {
			due += (end - due + period - 1) / period * period
		}
		w.at(due, tick)
	}
	w.at(start, tick)
}

// clock is the ring.Clock of every simulated node: the virtual time of
// the running event, charge included.
type clock struct{ w *world }

var _ ring.Clock = clock{}

// Now implements ring.Clock.
func (c clock) Now() time.Time { return epoch0.Add(c.w.elapsed()) }

// NewTicker implements ring.Clock with ticks delivered by the event loop
// (dropped, as time.Ticker's, when the receiver has not taken the last
// one). The simulator itself calls maintenance directly and uses none.
func (c clock) NewTicker(d time.Duration) ring.Ticker {
	if d <= 0 {
		panic("sim: non-positive interval for NewTicker")
	}
	t := &ticker{c: make(chan time.Time, 1)}
	c.w.every(c.w.elapsed()+d, d, func() bool { return !t.stopped }, func() {
		select {
		case t.c <- c.Now():
		default:
		}
	})
	return t
}

type ticker struct {
	c       chan time.Time
	stopped bool
}

func (t *ticker) C() <-chan time.Time { return t.c }
func (t *ticker) Stop()               { t.stopped = true }
