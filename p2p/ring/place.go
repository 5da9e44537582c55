package ring

import (
	"context"
	"errors"
	"fmt"
)

// Placing a machine's positions. A machine of V positions whose places
// are all drawn at random owns a share of the ring that spreads about
// 1/sqrt(V) around the mean: with 8 machines of 16 positions the busiest
// owns more than 1.5 times the mean in one swarm of four. Place lets a
// machine that is joining choose each further position among a few
// candidates, all of which any peer can check (they come from its
// identity and an index under a bound the checkers know), so the choice
// gives nobody a place it could not already take with more positions.
// The candidate chosen is the one that splits the longest arc of the
// ring nearest its middle (score): each position takes from the machine
// that has most to give, and takes about half of it. In a model of 8
// machines joining one after another, 16 positions each chosen among 4
// candidates, the busiest machine's share of 1,000 hosts is at most 1.5
// times the mean in 99% of identity sets, against 75% for positions
// drawn at random (docs/scale.md, "Placing positions").

// ErrNoCandidates is returned by Place when it is given no candidate.
var ErrNoCandidates = errors.New("ring: place: no candidates")

// Place returns the candidate whose joining would take about half of the
// longest arc of the ring: for each candidate c it finds the member s
// that owns c.ID now and s's predecessor p, so that c would split the
// arc (p, s], and it keeps the candidate with the highest score of that
// split. placed are the positions of this machine already chosen (its
// first one included) that are not members yet: they split the arcs as
// members would. The lookups start at via, as a joining node's do, so n
// need not be a member; with via zero they are n's own (Lookup), and a
// node that knows no other member sees the whole ring, split by placed
// alone. A candidate whose owner or predecessor cannot be found is
// passed over; when no candidate could be scored, Place returns the
// first one and the last error, so that a machine that cannot see the
// ring still joins, where its identity alone puts it.
func (n *Node) Place(ctx context.Context, via Peer, candidates []Peer, placed []ID) (Peer, error) {
	if len(candidates) == 0 {
		return Peer{}, ErrNoCandidates
	}
	best, bestScore, scored := candidates[0], uint64(0), false
	var lastErr error
	for _, c := range candidates {
		if err := ctx.Err(); err != nil {
			return candidates[0], fmt.Errorf("ring: place: %w", err)
		}
		pred, succ, err := n.arcAround(ctx, via, c.ID)
		if err != nil {
			lastErr = err
			continue
		}
		pred, succ = narrow(c.ID, pred, succ, placed)
		if s := score(c.ID, pred, succ); !scored || s > bestScore {
			best, bestScore, scored = c, s, true
		}
	}
	if !scored {
		return candidates[0], fmt.Errorf("ring: place: no candidate could be placed: %w", lastErr)
	}
	return best, nil
}

// arcAround returns the arc (pred, succ] of the ring that holds key: succ
// is the member owning key, found from via (zero: by n's own Lookup),
// pred that member's predecessor.
func (n *Node) arcAround(ctx context.Context, via Peer, key ID) (pred, succ ID, err error) {
	var owner Peer
	if via.IsZero() {
		owner, _, err = n.Lookup(ctx, key)
	} else {
		var r route
		r, err = n.walk(ctx, key, Peer{}, nil, via, false)
		owner = r.owner
	}
	if err != nil {
		return 0, 0, fmt.Errorf("owner of %s: %w", key, err)
	}
	if owner == n.self {
		p := n.Predecessor()
		if p.IsZero() {
			// Alone, or not told its predecessor yet: the node's arc
			// is the whole ring as far as it knows.
			return n.self.ID, n.self.ID, nil
		}
		return p.ID, n.self.ID, nil
	}
	nb, err := n.neighbours(ctx, owner)
	if err != nil {
		return 0, 0, fmt.Errorf("neighbours of %s: %w", owner, err)
	}
	if nb.Predecessor.IsZero() {
		return 0, 0, fmt.Errorf("%s knows no predecessor yet", owner)
	}
	return nb.Predecessor.ID, owner.ID, nil
}

// narrow shrinks the arc (pred, succ] holding key to the part between
// the placed positions nearest key on either side.
func narrow(key, pred, succ ID, placed []ID) (ID, ID) {
	for _, p := range placed {
		if p == key {
			continue
		}
		// The whole ring when pred == succ; Between handles it.
		if p.Between(pred, key) && p != pred {
			pred = p
		} else if p.Between(key, succ) {
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
	rest := d - a
	return d/2 + min(a, rest)
}
