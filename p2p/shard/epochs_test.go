package shard

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestEpochTableRaiseMax(t *testing.T) {
	var tb epochTable
	e1, e2, e3 := Epoch{1, "a"}, Epoch{2, "b"}, Epoch{3, "c"}
	if !tb.raise(Range{100, 200}, e2) {
		t.Fatal("first raise reported no change")
	}
	if tb.raise(Range{100, 200}, e2) || tb.raise(Range{120, 150}, e1) {
		t.Fatal("raise to an equal or lower epoch reported a change")
	}
	if got := tb.max(Range{150, 150}); got != e2 {
		t.Fatalf("max over whole ring = %v", got)
	}
	if got := tb.max(Range{200, 300}); !got.IsZero() {
		t.Fatalf("max outside = %v, want zero", got)
	}
	// A wrapping raise covering part of the old entry.
	if !tb.raise(Range{150, 50}, e3) {
		t.Fatal("wrapping raise reported no change")
	}
	for k, want := range map[uint64]Epoch{101: e2, 150: e2, 151: e3, 200: e3, 0: e3, 50: e3, 51: {}, 99: {}} {
		if got := tb.m.get(k); got != want {
			t.Errorf("table at %d = %v, want %v", k, got, want)
		}
	}
	// A lower raise fills only the gaps.
	tb.raise(Range{40, 120}, e1)
	for k, want := range map[uint64]Epoch{45: e3, 51: e1, 100: e1, 101: e2} {
		if got := tb.m.get(k); got != want {
			t.Errorf("after gap fill, table at %d = %v, want %v", k, got, want)
		}
	}
	h := tb.higher(Range{90, 160}, e1)
	want := []Claim{{Range{100, 150}, e2}, {Range{150, 160}, e3}}
	if !slices.Equal(h, want) {
		t.Fatalf("higher = %v, want %v", h, want)
	}
	if got := tb.entries(Range{45, 55}); !slices.Equal(got, []Claim{{Range{45, 50}, e3}, {Range{50, 55}, e1}}) {
		t.Fatalf("entries = %v", got)
	}
}

func TestEpochTableEncoding(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		var tb epochTable
		for range rng.IntN(6) {
			tb.raise(randRange(rng), Epoch{N: rng.Uint64N(1 << 40), Owner: string(rune('a' + rng.IntN(26)))})
		}
		b, err := tb.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var back epochTable
		if err := back.UnmarshalBinary(b); err != nil {
			t.Fatalf("decode own encoding: %v", err)
		}
		if !slices.Equal(back.m, tb.m) {
			t.Fatalf("round trip: %v != %v", back.m, tb.m)
		}
		// Every truncation is refused.
		for n := 0; n < len(b); n++ {
			if err := back.UnmarshalBinary(b[:n]); err == nil {
				t.Fatalf("truncated to %d of %d bytes accepted", n, len(b))
			}
		}
		if err := back.UnmarshalBinary(append(slices.Clone(b), 0)); err == nil {
			t.Fatal("trailing byte accepted")
		}
	}
}

func TestEpochTableRejectsGarbage(t *testing.T) {
	valid := func(segs ...seg) []byte {
		b, _ := (&epochTable{m: segs}).MarshalBinary()
		return b
	}
	cases := map[string][]byte{
		"empty":        {},
		"version 0":    {0, 0},
		"version 2":    {2, 0},
		"huge count":   {1, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"zero epoch":   valid(seg{1, 2, Epoch{0, "a"}}),
		"lo above hi":  valid(seg{5, 2, Epoch{1, "a"}}),
		"overlap":      valid(seg{1, 5, Epoch{1, "a"}}, seg{5, 9, Epoch{2, "a"}}),
		"out of order": valid(seg{10, 20, Epoch{1, "a"}}, seg{1, 5, Epoch{2, "a"}}),
		"owner too long": func() []byte {
			b := valid(seg{1, 2, Epoch{1, string(bytes.Repeat([]byte("x"), maxOwnerLen+1))}})
			return b
		}(),
	}
	for name, b := range cases {
		var tb epochTable
		err := tb.UnmarshalBinary(b)
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if !errors.Is(err, errBadTable) {
			t.Errorf("%s: error %v does not wrap errBadTable", name, err)
		}
	}
	// Random bytes never panic, and whatever decodes re-encodes the same.
	rng := rand.New(rand.NewPCG(7, 8))
	for range 5000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if rng.IntN(2) == 0 && len(b) > 0 {
			b[0] = epochTableVersion
		}
		var tb epochTable
		if tb.UnmarshalBinary(b) == nil {
			again, _ := tb.MarshalBinary()
			var tb2 epochTable
			if err := tb2.UnmarshalBinary(again); err != nil || !slices.Equal(tb2.m, tb.m) {
				t.Fatalf("decoded garbage %x does not round trip: %v", b, err)
			}
		}
	}
}

// A restarted Manager reads the table its predecessor saved; a garbage
// table makes New fail rather than start with no fencing memory.
func TestEpochTableSurvivesRestart(t *testing.T) {
	c := newCluster(t, 11)
	c.build(3)
	n := c.nodes[1]
	claim := n.stats().Claims[0]
	c.crash(n)
	c.restart(n)
	if got := n.tableAt(uint64(claim.Range.To)); got != claim.Epoch {
		t.Fatalf("restarted table at %s = %v, want %v", claim.Range.To, got, claim.Epoch)
	}
	st := NewMemStorage()
	st.SaveEpochs([]byte{9, 9, 9})
	if _, err := New(NewOwnership(n.rn), c.snet.Transport(n.peer), st, newTestApp(st, nil), c.cfg); !errors.Is(err, errBadTable) {
		t.Fatalf("New on a garbage table: err = %v", err)
	}
}
