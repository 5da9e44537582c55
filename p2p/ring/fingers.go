package ring

import (
	"context"
	"slices"
)

// FixFingers refreshes the whole finger table; finger i is the owner of
// self + 2^i. Most fingers need no lookup: starts within the successor list
// are read from it, and a start that lies before the previous finger's node
// has that node as its owner too. Failed lookups keep the old entry, which
// is only a routing hint.
//
// With Config.Positions > 1 a call returns at once unless 4*Positions
// FixFingersIntervals passed since the last (see shared.go).
func (n *Node) FixFingers(ctx context.Context) {
	notUrgent := false
	if !n.due(&n.lastFix, &notUrgent, n.cfg.fixEvery(), n.cfg.FixFingersInterval) {
		return
	}
	n.mu.Lock()
	succs := slices.Clone(n.succs)
	old := n.fingers
	n.mu.Unlock()

	if succs[0] == n.self {
		// Alone, no finger is needed. Isolated, the old fingers are peers
		// to rejoin through: keep them.
		n.mu.Lock()
		if !n.hadPeer {
			n.fingers = [idBits]Peer{}
		}
		n.mu.Unlock()
		return
	}
	n.checkPosition(ctx)

	// With shared maintenance, the sibling after us answers for the
	// keys beyond it (answererFor): our fingers stop there.
	limit, bounded := n.nextSibling()
	var fresh [idBits]Peer
	var prev Peer
	for i := range idBits {
		start := n.self.ID + ID(1)<<i
		if bounded && !start.Between(n.self.ID, limit) {
			break
		}
		f, ok := ownerFromList(n.self.ID, start, succs)
		switch {
		case ok:
		case !prev.IsZero() && start.Between(n.self.ID, prev.ID):
			f = prev
		default:
			if ctx.Err() != nil {
				return
			}
			owner, _, err := n.Lookup(ctx, start)
			if err != nil {
				owner = old[i]
			}
			f = owner
		}
		if f == n.self {
			// start wrapped past every other node: no finger needed, and
			// every later start wraps too.
			break
		}
		fresh[i] = f
		prev = f
	}
	n.mu.Lock()
	n.fingers = fresh
	n.mu.Unlock()
}

// checkPosition asks the ring, from one of our fingers and without using
// our own tables, who owns our own ID. In a healthy ring the answer is us.
// Anything else shows the ring is not one clean cycle where we stand, which
// stabilize alone can never repair: a burst of joins through an unsettled
// ring can leave two interleaved cycles that are each locally consistent.
// If the answer lies between us and our successor, our pointer skips it
// and we adopt it; otherwise the peer that answered skips us, and a notify
// makes it adopt us (see HandleNotify). Rotating the starting finger makes
// a cross-cycle start likely within a few rounds. This is Chord's "strong
// stabilization" in spirit, at the cost of one lookup per FixFingers.
func (n *Node) checkPosition(ctx context.Context) {
	n.mu.Lock()
	succ := n.succs[0]
	var starts []Peer
	for _, f := range n.stateLocked(true).Fingers {
		if f != succ && !n.suspects.has(f.Addr) {
			starts = append(starts, f)
		}
	}
	if len(starts) == 0 {
		n.mu.Unlock()
		return
	}
	start := starts[n.positionChecks%len(starts)]
	n.positionChecks++
	n.mu.Unlock()

	r, err := n.walk(ctx, n.self.ID, Peer{}, nil, start, false)
	if err != nil || r.owner == n.self || r.owner.IsZero() {
		return
	}
	if r.owner.ID.inOpen(n.self.ID, succ.ID) {
		n.mu.Lock()
		w := n.watchLocked()
		n.offerSuccessorLocked(r.owner)
		snap := n.commitLocked(w)
		n.mu.Unlock()
		n.emit(snap)
		return
	}
	if !r.via.IsZero() && r.via != n.self {
		_ = n.notify(ctx, r.via)
	}
}

// ownerFromList returns the owner of key according to a successor list of
// self, if key falls within the arc the list covers.
func ownerFromList(self, key ID, succs []Peer) (Peer, bool) {
	lo := self
	for _, s := range succs {
		if key.Between(lo, s.ID) {
			return s, true
		}
		lo = s.ID
	}
	return Peer{}, false
}
