package shard

import (
	"math"
	"slices"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// Ring arithmetic works on linear intervals: an arc (From, To] becomes one
// or two inclusive intervals [lo, hi] of uint64, so wrap-around and the
// whole ring need no special cases past the conversion.

const maxPoint = math.MaxUint64

// span is the inclusive interval [lo, hi] of ring points, lo <= hi.
type span struct{ lo, hi uint64 }

// spanSet is a sorted list of disjoint, non-adjacent spans.
type spanSet []span

// spansOf converts an arc to its linear intervals.
func spansOf(r Range) spanSet {
	from, to := uint64(r.From), uint64(r.To)
	switch {
	case from == to:
		return spanSet{{0, maxPoint}}
	case from < to:
		return spanSet{{from + 1, to}}
	}
	s := spanSet{{0, to}}
	if from != maxPoint {
		s = append(s, span{from + 1, maxPoint})
	}
	return s
}

// ringOrder returns r's intervals in ring order starting just after From,
// the order scans must follow.
func ringOrder(r Range) []span {
	from, to := uint64(r.From), uint64(r.To)
	if from < to {
		return []span{{from + 1, to}}
	}
	// Wrapping arc or whole ring: (from, max] then [0, to].
	var out []span
	if from != maxPoint {
		out = append(out, span{from + 1, maxPoint})
	}
	return append(out, span{0, to})
}

// rangeOf converts one linear interval back to an arc.
func rangeOf(s span) Range { return Range{From: ring.ID(s.lo - 1), To: ring.ID(s.hi)} }

// ranges converts the set to arcs, joining an interval that ends at the
// top of the space with one that starts at zero.
func (s spanSet) ranges() []Range {
	if len(s) == 0 {
		return nil
	}
	first, last := s[0], s[len(s)-1]
	if len(s) > 1 && first.lo == 0 && last.hi == maxPoint {
		out := []Range{{From: ring.ID(last.lo - 1), To: ring.ID(first.hi)}}
		for _, x := range s[1 : len(s)-1] {
			out = append(out, rangeOf(x))
		}
		return out
	}
	out := make([]Range, len(s))
	for i, x := range s {
		out[i] = rangeOf(x)
	}
	return out
}

func (s spanSet) empty() bool { return len(s) == 0 }

// contains reports whether point k is in the set.
func (s spanSet) contains(k uint64) bool {
	i, _ := slices.BinarySearchFunc(s, k, func(x span, k uint64) int {
		switch {
		case x.hi < k:
			return -1
		case x.lo > k:
			return 1
		}
		return 0
	})
	return i < len(s) && s[i].lo <= k && k <= s[i].hi
}

// normalize sorts spans and merges overlapping or adjacent ones.
func normalize(in []span) spanSet {
	if len(in) == 0 {
		return nil
	}
	s := slices.Clone(in)
	slices.SortFunc(s, func(a, b span) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	out := spanSet{s[0]}
	for _, x := range s[1:] {
		last := &out[len(out)-1]
		if last.hi == maxPoint || x.lo <= last.hi+1 {
			last.hi = max(last.hi, x.hi)
			continue
		}
		out = append(out, x)
	}
	return out
}

func union(a, b spanSet) spanSet { return normalize(append(slices.Clone(a), b...)) }

func intersect(a, b spanSet) spanSet {
	var out spanSet
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		lo, hi := max(a[i].lo, b[j].lo), min(a[i].hi, b[j].hi)
		if lo <= hi {
			out = append(out, span{lo, hi})
		}
		if a[i].hi < b[j].hi {
			i++
		} else {
			j++
		}
	}
	return out
}

// subtract returns the points of a not in b.
func subtract(a, b spanSet) spanSet {
	var out spanSet
	j := 0
	for _, x := range a {
		lo := x.lo
		done := false
		for j < len(b) && b[j].hi < lo {
			j++
		}
		for k := j; k < len(b) && b[k].lo <= x.hi; k++ {
			if b[k].lo > lo {
				out = append(out, span{lo, b[k].lo - 1})
			}
			if b[k].hi >= x.hi {
				done = true
				break
			}
			lo = b[k].hi + 1
		}
		if !done {
			out = append(out, span{lo, x.hi})
		}
	}
	return out
}

// subsetOf reports whether every point of a is in b.
func subsetOf(a, b spanSet) bool { return subtract(a, b).empty() }

// overlaps reports whether a and b share a point.
func overlaps(a, b spanSet) bool { return !intersect(a, b).empty() }

// seg is one piece of an interval map: every point in [lo, hi] maps to e.
type seg struct {
	lo, hi uint64
	e      Epoch
}

// segMap maps ring points to epochs: sorted, disjoint segments, with
// adjacent equal segments merged. Points in no segment map to the zero
// Epoch. It backs the epoch table and the sets of active and releasing
// claims.
type segMap []seg

// update rewrites every point of s: f gets the point's current epoch (ok
// false for an unmapped point) and returns the new one (keep false to
// unmap it).
func (m segMap) update(s span, f func(e Epoch, ok bool) (ne Epoch, keep bool)) segMap {
	out := make(segMap, 0, len(m)+2)
	emit := func(lo, hi uint64, e Epoch, keep bool) {
		if keep {
			out = append(out, seg{lo, hi, e})
		}
	}
	cur, done := s.lo, false
	gapTo := func(end uint64) { // [cur, end] is unmapped
		if !done && cur <= end {
			e, keep := f(Epoch{}, false)
			emit(cur, end, e, keep)
		}
	}
	for _, g := range m {
		if g.hi < s.lo {
			out = append(out, g)
			continue
		}
		if g.lo > s.hi {
			gapTo(s.hi)
			done = true
			out = append(out, g)
			continue
		}
		if g.lo < s.lo {
			out = append(out, seg{g.lo, s.lo - 1, g.e})
		}
		lo, hi := max(g.lo, s.lo), min(g.hi, s.hi)
		if !done && cur < lo {
			gapTo(lo - 1)
		}
		e, keep := f(g.e, true)
		emit(lo, hi, e, keep)
		if hi == s.hi {
			done = true
		} else {
			cur = hi + 1
		}
		if g.hi > s.hi {
			out = append(out, seg{s.hi + 1, g.hi, g.e})
		}
	}
	gapTo(s.hi)
	return out.coalesce()
}

func (m segMap) coalesce() segMap {
	if len(m) < 2 {
		return m
	}
	out := m[:1]
	for _, g := range m[1:] {
		last := &out[len(out)-1]
		if last.e == g.e && last.hi != maxPoint && last.hi+1 == g.lo {
			last.hi = g.hi
			continue
		}
		out = append(out, g)
	}
	return out
}

// atLeast reports whether every point of r is mapped to e or higher,
// without allocating (the common case of a repeated heartbeat).
func (m segMap) atLeast(r spanSet, e Epoch) bool {
	for _, s := range r {
		cur, done := s.lo, false
		i, _ := slices.BinarySearchFunc(m, s.lo, func(g seg, k uint64) int {
			if g.hi < k {
				return -1
			}
			return 1
		})
		for ; i < len(m) && !done; i++ {
			g := m[i]
			if g.lo > cur || g.e.Less(e) {
				return false
			}
			if g.hi >= s.hi {
				done = true
			} else {
				cur = g.hi + 1
			}
		}
		if !done {
			return false
		}
	}
	return true
}

// anyAbove reports whether some point of r maps above e, without
// allocating.
func (m segMap) anyAbove(r spanSet, e Epoch) bool {
	for _, s := range r {
		i, _ := slices.BinarySearchFunc(m, s.lo, func(g seg, k uint64) int {
			if g.hi < k {
				return -1
			}
			return 1
		})
		for ; i < len(m) && m[i].lo <= s.hi; i++ {
			if e.Less(m[i].e) {
				return true
			}
		}
	}
	return false
}

// raise lifts every point of r to at least e.
func (m segMap) raise(r spanSet, e Epoch) segMap {
	for _, s := range r {
		m = m.update(s, func(old Epoch, ok bool) (Epoch, bool) {
			if !ok || old.Less(e) {
				return e, true
			}
			return old, true
		})
	}
	return m
}

// set maps every point of r to e.
func (m segMap) set(r spanSet, e Epoch) segMap {
	for _, s := range r {
		m = m.update(s, func(Epoch, bool) (Epoch, bool) { return e, true })
	}
	return m
}

// remove unmaps every point of r.
func (m segMap) remove(r spanSet) segMap {
	for _, s := range r {
		m = m.update(s, func(Epoch, bool) (Epoch, bool) { return Epoch{}, false })
	}
	return m
}

// maxOver returns the highest epoch any point of r maps to.
func (m segMap) maxOver(r spanSet) Epoch {
	var best Epoch
	for _, p := range m.within(r) {
		if best.Less(p.e) {
			best = p.e
		}
	}
	return best
}

// within returns the mapped pieces of r, clipped to r.
func (m segMap) within(r spanSet) segMap {
	var out segMap
	for _, s := range r {
		for _, g := range m {
			if g.hi < s.lo {
				continue
			}
			if g.lo > s.hi {
				break
			}
			out = append(out, seg{max(g.lo, s.lo), min(g.hi, s.hi), g.e})
		}
	}
	return out
}

// pieces splits r into maximal pieces of constant epoch, unmapped gaps
// included (with the zero Epoch).
func (m segMap) pieces(r spanSet) segMap {
	var out segMap
	for _, s := range r {
		cur := s.lo
		done := false
		for _, g := range m.within(spanSet{s}) {
			if g.lo > cur {
				out = append(out, seg{cur, g.lo - 1, Epoch{}})
			}
			out = append(out, g)
			if g.hi == s.hi {
				done = true
				break
			}
			cur = g.hi + 1
		}
		if !done {
			out = append(out, seg{cur, s.hi, Epoch{}})
		}
	}
	return out
}

// get returns the epoch point k maps to.
func (m segMap) get(k uint64) Epoch {
	for _, g := range m {
		if g.lo <= k && k <= g.hi {
			return g.e
		}
		if g.lo > k {
			break
		}
	}
	return Epoch{}
}

// domain returns the set of mapped points.
func (m segMap) domain() spanSet {
	out := make([]span, len(m))
	for i, g := range m {
		out[i] = span{g.lo, g.hi}
	}
	return normalize(out)
}

// claims converts the map to claims: one per run of equal epoch, joining a
// run that ends at the top of the space with one that starts at zero.
func (m segMap) claims() []Claim {
	if len(m) == 0 {
		return nil
	}
	first, last := m[0], m[len(m)-1]
	wrap := len(m) > 1 && first.lo == 0 && last.hi == maxPoint && first.e == last.e
	var out []Claim
	if wrap {
		out = append(out, Claim{Range{From: ring.ID(last.lo - 1), To: ring.ID(first.hi)}, first.e})
		m = m[1 : len(m)-1]
	}
	for _, g := range m {
		out = append(out, Claim{rangeOf(span{g.lo, g.hi}), g.e})
	}
	return out
}

// covers reports whether point k is mapped.
func (m segMap) covers(k uint64) bool {
	_, found := slices.BinarySearchFunc(m, k, func(g seg, k uint64) int {
		switch {
		case g.hi < k:
			return -1
		case g.lo > k:
			return 1
		}
		return 0
	})
	return found
}
