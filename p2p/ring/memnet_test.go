package ring

import (
	"context"
	"errors"
	"testing"
	"time"
)

// countingHandler records how often it is pinged.
type countingHandler struct{ pings int }

func (h *countingHandler) HandleFindSuccessorStep(ID) Step       { return Step{} }
func (h *countingHandler) HandleNeighbours(string) Neighbours    { return Neighbours{} }
func (h *countingHandler) HandleNotify(string, Peer) error       { return nil }
func (h *countingHandler) HandlePing()                           { h.pings++ }
func (h *countingHandler) HandleLeave(string, LeaveNotice) error { return nil }

func TestMemNetFaults(t *testing.T) {
	ctx := context.Background()
	m := NewMemNet(1)
	a, b, c := Peer{ID: 1, Addr: "a"}, Peer{ID: 2, Addr: "b"}, Peer{ID: 3, Addr: "c"}
	ha, hb, hc := &countingHandler{}, &countingHandler{}, &countingHandler{}
	m.Register(a, ha)
	m.Register(b, hb)
	m.Register(c, hc)
	ta, tb := m.Transport(a), m.Transport(b)

	reach := func(tr Transport, to Peer) bool { return tr.Ping(ctx, to) == nil }
	if !reach(ta, b) || !reach(tb, a) {
		t.Fatal("healthy net unreachable")
	}

	m.Crash("b")
	if err := ta.Ping(ctx, b); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("call to crashed peer: %v", err)
	}
	if reach(tb, a) {
		t.Fatal("crashed peer could still call out")
	}
	m.Restore("b")
	if !reach(ta, b) {
		t.Fatal("restore did not restore")
	}

	m.Partition([]string{"a", "b"}) // c is in no group: isolated
	if !reach(ta, b) || reach(ta, c) || reach(m.Transport(c), a) {
		t.Fatal("partition wrong")
	}
	m.Heal()
	if !reach(ta, c) {
		t.Fatal("heal did not heal")
	}

	m.Unregister("c")
	if err := ta.Ping(ctx, c); !errors.Is(err, ErrUnreachable) {
		t.Fatalf("call to unregistered peer: %v", err)
	}

	before := m.Calls()
	ta.Ping(ctx, b)
	if m.Calls() != before+1 {
		t.Fatalf("Calls did not count: %d -> %d", before, m.Calls())
	}
}

func TestMemNetDropsAreSeededAndHalfLoseTheReply(t *testing.T) {
	ctx := context.Background()
	run := func() (drops int, handled int, pattern []bool) {
		m := NewMemNet(7)
		a, b := Peer{ID: 1, Addr: "a"}, Peer{ID: 2, Addr: "b"}
		hb := &countingHandler{}
		m.Register(b, hb)
		m.SetDropRate(0.3)
		tr := m.Transport(a)
		for range 2000 {
			err := tr.Ping(ctx, b)
			if err != nil && !errors.Is(err, ErrDropped) {
				t.Fatalf("unexpected error %v", err)
			}
			pattern = append(pattern, err != nil)
			if err != nil {
				drops++
			}
		}
		return drops, hb.pings, pattern
	}
	d1, h1, p1 := run()
	d2, _, p2 := run()
	if d1 != d2 || len(p1) != len(p2) {
		t.Fatal("same seed, different drops")
	}
	for i := range p1 {
		if p1[i] != p2[i] {
			t.Fatal("same seed, different drop pattern")
		}
	}
	if d1 < 500 || d1 > 700 {
		t.Fatalf("%d of 2000 dropped at rate 0.3", d1)
	}
	// Handler ran for every delivered call plus the lost replies.
	if lostReplies := h1 - (2000 - d1); lostReplies < d1/3 || lostReplies > 2*d1/3 {
		t.Fatalf("%d of %d drops lost the reply, want about half", lostReplies, d1)
	}
}

func TestMemNetDelayHonoursContext(t *testing.T) {
	m := NewMemNet(1)
	a, b := Peer{ID: 1, Addr: "a"}, Peer{ID: 2, Addr: "b"}
	m.Register(b, &countingHandler{})
	m.SetDelay(time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := m.Transport(a).Ping(ctx, b); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want deadline exceeded", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("delay ignored the context")
	}
}
