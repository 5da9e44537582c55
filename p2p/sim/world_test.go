package sim

import (
	"math/rand/v2"
	"testing"
	"time"
)

// The event loop runs events in time order, and events due at one
// instant in the order they were scheduled, whatever the order of
// scheduling: the simulation's determinism rests on it.
func TestEventsRunInTimeThenSchedulingOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var w world
	type ran struct {
		at  time.Duration
		seq int
	}
	var order []ran
	seq := 0
	var schedule func(n int)
	schedule = func(n int) {
		for range n {
			seq++
			at, s := time.Duration(rng.IntN(50))*time.Millisecond, seq
			w.at(at, func() {
				order = append(order, ran{w.now, s})
				if rng.IntN(4) == 0 {
					schedule(2) // events scheduled while running, at or after now
				}
			})
		}
	}
	schedule(5000)
	w.runUntil(time.Hour, nil)
	if len(order) < 5000 || int64(len(order)) != w.events {
		t.Fatalf("ran %d events, counted %d, want at least 5000", len(order), w.events)
	}
	for i := 1; i < len(order); i++ {
		a, b := order[i-1], order[i]
		if b.at < a.at || (b.at == a.at && b.seq < a.seq) {
			t.Fatalf("event %d ran at %v (scheduled %d) after one at %v (scheduled %d)", i, b.at, b.seq, a.at, a.seq)
		}
	}
}
