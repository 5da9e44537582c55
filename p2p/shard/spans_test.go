package shard

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

const mx = ring.ID(maxPoint)

func TestRangeContains(t *testing.T) {
	cases := []struct {
		r    Range
		in   []ring.ID
		out  []ring.ID
		name string
	}{
		{Range{10, 20}, []ring.ID{11, 15, 20}, []ring.ID{10, 21, 0, mx}, "plain"},
		{Range{20, 10}, []ring.ID{21, mx, 0, 10}, []ring.ID{20, 11, 15}, "wrap"},
		{Range{mx, 5}, []ring.ID{0, 5}, []ring.ID{mx, 6}, "from top"},
		{Range{5, mx}, []ring.ID{6, mx}, []ring.ID{5, 0}, "to top"},
		{Range{7, 7}, []ring.ID{0, 7, 8, mx}, nil, "whole"},
		{Range{0, 0}, []ring.ID{0, 1, mx}, nil, "whole at zero"},
	}
	for _, tc := range cases {
		for _, k := range tc.in {
			if !tc.r.Contains(k) {
				t.Errorf("%s: %s should contain %s", tc.name, tc.r, k)
			}
		}
		for _, k := range tc.out {
			if tc.r.Contains(k) {
				t.Errorf("%s: %s should not contain %s", tc.name, tc.r, k)
			}
		}
	}
	if !(Range{3, 3}).Whole() || (Range{3, 4}).Whole() {
		t.Error("Whole wrong")
	}
}

func TestSpansOfEdges(t *testing.T) {
	cases := []struct {
		r    Range
		want spanSet
	}{
		{Range{10, 20}, spanSet{{11, 20}}},
		{Range{20, 10}, spanSet{{0, 10}, {21, maxPoint}}},
		{Range{mx, 5}, spanSet{{0, 5}}},
		{Range{5, mx}, spanSet{{6, maxPoint}}},
		{Range{mx, 0}, spanSet{{0, 0}}},
		{Range{1, 0}, spanSet{{0, 0}, {2, maxPoint}}},
		{Range{9, 9}, spanSet{{0, maxPoint}}},
	}
	for _, tc := range cases {
		got := spansOf(tc.r)
		if !slices.Equal(got, tc.want) {
			t.Errorf("spansOf(%s) = %v, want %v", tc.r, got, tc.want)
		}
		// Back to one arc that contains the same points.
		rs := got.ranges()
		if len(rs) != 1 {
			t.Fatalf("ranges(%v) = %v, want one arc", got, rs)
		}
		if !slices.Equal(spansOf(rs[0]), got) {
			t.Errorf("round trip %s -> %v -> %s", tc.r, got, rs[0])
		}
	}
	// Ring order starts just after From and wraps.
	if got := ringOrder(Range{20, 10}); !slices.Equal(got, []span{{21, maxPoint}, {0, 10}}) {
		t.Errorf("ringOrder wrap = %v", got)
	}
	if got := ringOrder(Range{9, 9}); !slices.Equal(got, []span{{10, maxPoint}, {0, 9}}) {
		t.Errorf("ringOrder whole = %v", got)
	}
	if got := ringOrder(Range{mx, mx}); !slices.Equal(got, []span{{0, maxPoint}}) {
		t.Errorf("ringOrder whole at top = %v", got)
	}
}

// interesting are the endpoints random ranges draw from. Membership is
// constant between consecutive probes (each endpoint and its neighbours),
// so checking the probes checks every point.
var interesting = []ring.ID{0, 1, 2, 3, 1 << 62, 1<<63 - 1, 1 << 63, 1<<63 + 1, mx - 2, mx - 1, mx}

func probes() []ring.ID {
	var out []ring.ID
	for _, p := range interesting {
		out = append(out, p-1, p, p+1)
	}
	return out
}

func randRange(rng *rand.Rand) Range {
	return Range{interesting[rng.IntN(len(interesting))], interesting[rng.IntN(len(interesting))]}
}

func randSet(rng *rand.Rand) spanSet {
	var s spanSet
	for range rng.IntN(3) {
		s = union(s, spansOf(randRange(rng)))
	}
	return s
}

func wellFormed(s spanSet) bool {
	for i, x := range s {
		if x.lo > x.hi {
			return false
		}
		if i > 0 && (s[i-1].hi == maxPoint || s[i-1].hi+1 >= x.lo) {
			return false // unsorted, overlapping or adjacent
		}
	}
	return true
}

// TestSetAlgebra checks union, intersection, subtraction and the
// conversion back to arcs against point-wise membership, over arcs that
// wrap, touch the ends of the space or cover the whole ring.
func TestSetAlgebra(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	in := func(s spanSet, k ring.ID) bool { return s.contains(uint64(k)) }
	for i := range 5000 {
		a, b := randSet(rng), randSet(rng)
		u, x, d := union(a, b), intersect(a, b), subtract(a, b)
		for _, s := range []spanSet{a, b, u, x, d} {
			if !wellFormed(s) {
				t.Fatalf("case %d: malformed set %v", i, s)
			}
		}
		var back spanSet
		for _, r := range u.ranges() {
			back = union(back, spansOf(r))
		}
		for _, k := range probes() {
			ia, ib := in(a, k), in(b, k)
			if in(u, k) != (ia || ib) || in(x, k) != (ia && ib) || in(d, k) != (ia && !ib) {
				t.Fatalf("case %d: point %s: a=%v b=%v union=%v inter=%v sub=%v", i, k, a, b, u, x, d)
			}
			if in(back, k) != in(u, k) {
				t.Fatalf("case %d: ranges() of %v = %v loses point %s", i, u, u.ranges(), k)
			}
			anyRange := false
			for _, r := range u.ranges() {
				anyRange = anyRange || r.Contains(k)
			}
			if anyRange != in(u, k) {
				t.Fatalf("case %d: ranges() of %v disagree with Contains at %s", i, u, k)
			}
		}
		if subsetOf(a, b) != d.empty() || overlaps(a, b) != !x.empty() {
			t.Fatalf("case %d: subset/overlap wrong for %v, %v", i, a, b)
		}
	}
}

// TestSegMap checks the interval map (epoch table, claim sets) against a
// point-wise model.
func TestSegMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		var m segMap
		model := map[ring.ID]Epoch{}
		for step := range 6 {
			r := spansOf(randRange(rng))
			e := Epoch{N: uint64(rng.IntN(4) + 1), Owner: []string{"a", "b"}[rng.IntN(2)]}
			op := rng.IntN(3)
			switch op {
			case 0:
				m = m.raise(r, e)
			case 1:
				m = m.set(r, e)
			case 2:
				m = m.remove(r)
			}
			for _, k := range probes() {
				if !r.contains(uint64(k)) {
					continue
				}
				switch op {
				case 0:
					if model[k].Less(e) {
						model[k] = e
					}
				case 1:
					model[k] = e
				case 2:
					delete(model, k)
				}
			}
			for j, g := range m {
				if g.lo > g.hi || g.e.IsZero() || (j > 0 && m[j-1].hi >= g.lo) {
					t.Fatalf("case %d step %d: malformed map %v", i, step, m)
				}
				if j > 0 && m[j-1].hi+1 == g.lo && m[j-1].e == g.e {
					t.Fatalf("case %d step %d: uncoalesced map %v", i, step, m)
				}
			}
			for _, k := range probes() {
				if got := m.get(uint64(k)); got != model[k] {
					t.Fatalf("case %d step %d op %d: get(%s) = %v, want %v; map %v", i, step, op, k, got, model[k], m)
				}
				if m.covers(uint64(k)) != !model[k].IsZero() {
					t.Fatalf("case %d: covers(%s) wrong", i, k)
				}
			}
		}
		// maxOver and pieces against the model.
		q := spansOf(randRange(rng))
		var want Epoch
		for _, k := range probes() {
			if q.contains(uint64(k)) && want.Less(model[k]) {
				want = model[k]
			}
		}
		if got := m.maxOver(q); got != want {
			t.Fatalf("case %d: maxOver = %v, want %v", i, got, want)
		}
		e := Epoch{N: uint64(rng.IntN(4) + 1), Owner: "a"}
		atLeast, above := true, false
		for _, k := range probes() {
			if q.contains(uint64(k)) {
				atLeast = atLeast && !model[k].Less(e)
				above = above || e.Less(model[k])
			}
		}
		if m.atLeast(q, e) != atLeast || m.anyAbove(q, e) != above {
			t.Fatalf("case %d: atLeast/anyAbove(%v, %v) = %v/%v, want %v/%v; map %v", i, q, e, m.atLeast(q, e), m.anyAbove(q, e), atLeast, above, m)
		}
		ps := m.pieces(q)
		var covered []span
		for _, p := range ps {
			covered = append(covered, span{p.lo, p.hi})
			for _, k := range probes() {
				if uint64(k) >= p.lo && uint64(k) <= p.hi && model[k] != p.e {
					t.Fatalf("case %d: piece %v disagrees at %s", i, p, k)
				}
			}
		}
		if !slices.Equal(normalize(covered), q) {
			t.Fatalf("case %d: pieces %v do not tile %v", i, ps, q)
		}
		// claims() round trip.
		var back segMap
		for _, c := range m.claims() {
			back = back.set(spansOf(c.Range), c.Epoch)
		}
		if !slices.Equal(back, m) {
			t.Fatalf("case %d: claims() %v does not rebuild %v", i, m.claims(), m)
		}
	}
}

func TestEpochOrder(t *testing.T) {
	a, b, c := Epoch{1, "z"}, Epoch{2, "a"}, Epoch{2, "b"}
	if !a.Less(b) || !b.Less(c) || c.Less(b) || b.Less(b) || !(Epoch{}).Less(a) {
		t.Fatal("epoch order wrong")
	}
}
