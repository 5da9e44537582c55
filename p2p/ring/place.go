package ring

import (
	"context"
	"fmt"
)

// Placing a machine's positions. A machine of V positions whose places
// are all drawn at random owns a share of the ring that spreads about
// 1/sqrt(V) around the mean: with 8 machines of 16 positions the busiest
// owns more than 1.5 times the mean in one swarm of four. A machine that
// joins may instead choose each further position among a few
// candidates, all of which any peer can check (they come from its
// identity and an index under a bound the checkers know), so the choice
// gives nobody a place it could not already take with more positions.
// It looks up the arc each candidate would split (ArcAround) and keeps,
// for each position, the candidate that splits the longest arc nearest
// its middle (Choose, score): each position takes from the machine that
// has most to give, and takes about half of it (route.PlacePositions).

// Arc is the arc (Pred, Succ] of the ring that holds a key, as the
// members near the key know it (ArcAround); Pred == Succ is the whole
// ring.
type Arc struct {
	Pred, Succ ID
}

// Choose returns the candidate whose joining would take about half of
// the longest arc of the ring: arcs[i] is the arc that holds
// candidates[i] (ArcAround), known[i] whether it could be found. placed
// are the positions of the machine already chosen (its first one
// included) that are not members yet: they split the arcs as members
// would. Choose keeps the candidate with the highest score of its split;
// when no arc is known it returns the first candidate and false, so that
// a machine that cannot see the ring still joins, where its identity
// alone puts it.
func Choose(candidates []Peer, arcs []Arc, known []bool, placed []ID) (Peer, bool) {
	if len(candidates) == 0 {
		return Peer{}, false
	}
	best, bestScore, scored := candidates[0], uint64(0), false
	for i, c := range candidates {
		if i >= len(arcs) || i >= len(known) || !known[i] {
			continue
		}
		pred, succ := narrow(c.ID, arcs[i].Pred, arcs[i].Succ, placed)
		if s := score(c.ID, pred, succ); !scored || s > bestScore {
			best, bestScore, scored = c, s, true
		}
	}
	return best, scored
}

// ArcAround returns the arc of the ring that holds key, as the members
// near key know it: Succ is the member owning key, found through via as
// a joining node finds its successor (n need not be a member; with via
// zero by n's own Lookup), and Pred the nearest of what precedes key
// among that member's predecessor and the peer whose answer named it.
// Either may be the fresher: a position that joined a moment ago is its
// successor's predecessor before its predecessor names it, and then sits
// between key and the owner the walk found, and becomes Succ. A node
// that knows no other member sees the whole ring.
func (n *Node) ArcAround(ctx context.Context, via Peer, key ID) (Arc, error) {
	var owner, namer Peer
	var err error
	if via.IsZero() {
		owner, _, err = n.Lookup(ctx, key)
	} else {
		var r route
		r, err = n.walk(ctx, key, Peer{}, nil, via, false)
		owner, namer = r.owner, r.via
	}
	if err != nil {
		return Arc{}, fmt.Errorf("owner of %s: %w", key, err)
	}
	var ownerPred Peer
	if owner == n.self {
		ownerPred = n.Predecessor()
		if ownerPred.IsZero() && namer.IsZero() {
			// Alone, or not told its predecessor yet: the node's arc
			// is the whole ring as far as it knows.
			return Arc{Pred: n.self.ID, Succ: n.self.ID}, nil
		}
	} else {
		nb, err := n.neighbours(ctx, owner)
		if err != nil && namer.IsZero() {
			return Arc{}, fmt.Errorf("neighbours of %s: %w", owner, err)
		}
		ownerPred = nb.Predecessor
	}
	var p Peer
	s := owner
	for _, m := range []Peer{ownerPred, namer} {
		switch {
		case m.IsZero() || m == s || m.ID == key:
		case m.ID.inOpen(key, s.ID):
			s = m // a member between key and the owner found
		case p.IsZero() || m.ID.inOpen(p.ID, key):
			p = m
		}
	}
	if p.IsZero() {
		return Arc{}, fmt.Errorf("no member known before %s (owner %s)", key, owner)
	}
	return Arc{Pred: p.ID, Succ: s.ID}, nil
}

// narrow shrinks the arc (pred, succ] holding key to the part between
// the placed positions nearest key on either side.
func narrow(key, pred, succ ID, placed []ID) (ID, ID) {
	for _, p := range placed {
		switch {
		case p == key:
		case p.inOpen(pred, key):
			pred = p
		case p.inOpen(key, succ):
			succ = p
		}
	}
	return pred, succ
}

// score rates a new position at key in the arc (pred, succ]: half the
// arc's length, plus the smaller of the two parts the position leaves.
// It prefers the longest arcs, and within one the split nearest its
// middle. With pred == succ the arc is the whole ring.
func score(key, pred, succ ID) uint64 {
	d := pred.dist(succ) // 0: the whole ring
	a := pred.dist(key)
	if d == 0 {
		// The whole ring: every split gives one arc; measure it as
		// 2^64 - 1 so that it outranks every real arc.
		d = ^uint64(0)
	}
	if a >= d {
		return 0 // key is not inside the arc: nothing known of it
	}
	rest := d - a
	return d/2 + min(a, rest)
}
