package route_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
)

// candidateOf is the candidate of index i of machine m, at a place only
// its name and i fix.
func candidateOf(m string) func(int) ring.Peer {
	return func(i int) ring.Peer {
		a := m
		if i > 0 {
			a += "/" + strconv.Itoa(i)
		}
		return ring.Peer{ID: ring.HashID([]byte(a)), Addr: a}
	}
}

// wholeRing is a probe for a machine that sees no other member: every
// key's arc is the whole ring.
func wholeRing(_ context.Context, keys []ring.ID) ([]ring.Arc, []error) {
	arcs := make([]ring.Arc, len(keys))
	for i := range arcs {
		arcs[i] = ring.Arc{Pred: 7, Succ: 7}
	}
	return arcs, make([]error, len(keys))
}

// largestGap is the longest arc between consecutive ids, as a share of
// the ring.
func largestGap(ids []ring.ID) float64 {
	s := slices.Clone(ids)
	slices.Sort(s)
	var top uint64
	for i, id := range s {
		next := s[(i+1)%len(s)]
		top = max(top, uint64(next-id))
	}
	return float64(top) / (1 << 64)
}

// A machine alone places its positions against one another: each takes
// the candidate nearest the middle of the longest gap the others leave.
// Over 50 machines of 16 positions the largest gap between a machine's
// positions is 0.141 of the ring on average, against 0.218 for the
// first candidates (where the identity alone puts them; 0.2 for 16
// random points). Each position is one of its 4 candidates, of index
// i + j·V, and position 0 stays where the identity puts it.
func TestPlacePositionsAloneSpreadsThem(t *testing.T) {
	const v, machines = 16, 50
	var placedGaps, drawnGaps float64
	for m := range machines {
		at := candidateOf(fmt.Sprintf("m%d", m))
		got, err := route.PlacePositions(context.Background(), at(0).ID, v, at, wholeRing)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != v-1 {
			t.Fatalf("%d positions placed, want %d", len(got), v-1)
		}
		placed, drawn := []ring.ID{at(0).ID}, []ring.ID{at(0).ID}
		for i, p := range got {
			slot := i + 1
			_, idx, _ := strings.Cut(p.Addr, "/")
			n, err := strconv.Atoi(idx)
			if err != nil || (n-slot)%v != 0 || n >= route.PlaceChoices*v || p != at(n) {
				t.Fatalf("position %d is %s: not one of its candidates %d, %d, %d, %d", slot, p, slot, slot+v, slot+2*v, slot+3*v)
			}
			placed, drawn = append(placed, p.ID), append(drawn, at(slot).ID)
		}
		placedGaps += largestGap(placed) / machines
		drawnGaps += largestGap(drawn) / machines
	}
	t.Logf("largest gap between a machine's positions, mean of %d machines: placed %.3f, drawn %.3f of the ring", machines, placedGaps, drawnGaps)
	if placedGaps > 0.7*drawnGaps {
		t.Errorf("placed alone, the largest gap between a machine's positions is %.3f of the ring on average, drawn %.3f: placing spreads them too little", placedGaps, drawnGaps)
	}
}

// A machine that sees no arc of a position's candidates takes the first
// of them, where its identity alone puts it, and says why; a probe that
// answers for other keys than asked is refused.
func TestPlacePositionsBlind(t *testing.T) {
	at := candidateOf("m")
	down := errors.New("no route")
	blind := func(_ context.Context, keys []ring.ID) ([]ring.Arc, []error) {
		errs := make([]error, len(keys))
		for i := range errs {
			errs[i] = down
		}
		return make([]ring.Arc, len(keys)), errs
	}
	got, err := route.PlacePositions(context.Background(), at(0).ID, 4, at, blind)
	if !errors.Is(err, down) {
		t.Errorf("blind placing: error %v, want one wrapping %v", err, down)
	}
	want := []ring.Peer{at(1), at(2), at(3)}
	if !slices.Equal(got, want) {
		t.Errorf("blind placing gave %v, want the first candidates %v", got, want)
	}
	short := func(_ context.Context, keys []ring.ID) ([]ring.Arc, []error) {
		return make([]ring.Arc, len(keys)-1), make([]error, len(keys)-1)
	}
	if _, err := route.PlacePositions(context.Background(), at(0).ID, 4, at, short); err == nil {
		t.Error("a probe that answered one key short was taken")
	}
	if got, err := route.PlacePositions(context.Background(), at(0).ID, 1, at, blind); err != nil || len(got) != 0 {
		t.Errorf("one position: %v, %v; want nothing to place", got, err)
	}
}
