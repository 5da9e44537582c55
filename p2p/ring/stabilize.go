package ring

import (
	"context"
	"slices"
	"time"
)

// Stabilize is Chord's periodic successor check. It asks the successor for
// its neighbours, dropping successors that do not answer (falling back to
// the first live finger when the whole list is dead); adopts the
// successor's predecessor, or any other peer it reports, that sits between
// us and it; rebuilds the successor list as [successor] + successor's
// list; and notifies the successor that we may be its predecessor. A node
// that is isolated after all that tries to rejoin (see rejoin).
//
// With Config.Positions > 1 a call returns at once unless the step is due
// (see shared.go).
func (n *Node) Stabilize(ctx context.Context) {
	if n.shared() {
		n.mu.Lock()
		urgent := n.urgentCheck
		n.mu.Unlock()
		if urgent {
			// A sign that the predecessor failed came since the last
			// check: the stabilize tick, the more frequent, checks it.
			n.CheckPredecessor(ctx)
		}
	}
	if !n.due(&n.lastStab, &n.urgentStab, n.cfg.StabilizeInterval*n.cfg.stretch(), n.cfg.StabilizeInterval) {
		return
	}
	n.stabilize(ctx)
	if ctx.Err() == nil && n.Isolated() {
		n.rejoin(ctx)
	}
}

func (n *Node) stabilize(ctx context.Context) {
	// Each failed successor costs one iteration; the bound stops a node
	// whose every contact is dead from spinning.
	for range n.cfg.SuccessorListLen + 2 {
		if ctx.Err() != nil {
			return
		}
		n.mu.Lock()
		succ, gen := n.succs[0], n.succGen
		n.mu.Unlock()

		var nb Neighbours
		if succ == n.self {
			nb = n.HandleNeighbours("")
		} else {
			var err error
			if nb, err = n.probeNeighbours(ctx, succ); err != nil {
				if ctx.Err() != nil {
					return
				}
				n.dropSuccessor(ctx, succ)
				continue
			}
		}

		succ, nb = n.closerSuccessor(ctx, succ, nb)
		// What the successor still lists of machines the family found
		// down stays out (shared.go, downMachines).
		rest := withoutDown(nb.Successors, n.downMachines())

		n.mu.Lock()
		w := n.watchLocked()
		if n.succGen == gen {
			list := n.buildSuccessorsLocked(append([]Peer{succ}, rest...))
			if !slices.Equal(list, n.succs) {
				n.succs = list
				n.succGen++
			}
		} // else someone changed the list meanwhile; the next round redoes this
		snap := n.commitLocked(w)
		n.mu.Unlock()
		n.emit(snap)

		// A successor that already names this position its predecessor
		// learns nothing from a notify when maintenance is shared: the
		// Neighbours call just made proved this machine alive to it
		// (shared.go). Otherwise, best effort: the next round notifies
		// again.
		if succ != n.self && !(n.shared() && nb.Predecessor == n.self) {
			_ = n.notify(ctx, succ)
		}
		return
	}
}

// due reports whether a maintenance step runs now (always, with one
// position; see shared.go).
func (n *Node) due(last *time.Time, urgent *bool, every, base time.Duration) bool {
	if !n.shared() {
		return true
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.isolatedLocked() {
		*urgent = true
	}
	return dueLocked(last, urgent, n.cfg.Clock.Now(), every, base)
}

// closerSuccessor looks for a live peer between us and succ among what
// succ reported: its predecessor (Chord's rule: a peer that joined between
// us and succ has notified succ) and also its successor list, which shows
// us peers our pointer skips when it wraps too far round the ring. The
// nearest such peer is asked directly before it is adopted, so a dead
// pointer cannot pull us off the ring, and the search repeats from it.
// When alone (succ == self) the arc is everything but self, which is how
// the first two nodes find each other.
//
// Chord takes one step per stabilize round; walking on makes a burst of
// joins into one gap converge in a few rounds instead of one per joiner.
// The walk is bounded so a misbehaving peer cannot keep us busy.
func (n *Node) closerSuccessor(ctx context.Context, succ Peer, nb Neighbours) (Peer, Neighbours) {
	for range n.cfg.SuccessorListLen {
		var best Peer
		for _, x := range append([]Peer{nb.Predecessor}, nb.Successors...) {
			if x.IsZero() || x == n.self || !x.ID.inOpen(n.self.ID, succ.ID) {
				continue
			}
			if best.IsZero() || n.self.ID.dist(x.ID) < n.self.ID.dist(best.ID) {
				best = x
			}
		}
		if best.IsZero() {
			break
		}
		xnb, err := n.probeNeighbours(ctx, best)
		if err != nil {
			break
		}
		succ, nb = best, xnb
	}
	return succ, nb
}

// dropSuccessor removes a dead first successor. If that empties the list,
// the nearest finger that answers a ping takes its place; failing that the
// node is isolated (or, if it never had another member, alone) until
// someone notifies it or rejoin gets it back in.
func (n *Node) dropSuccessor(ctx context.Context, dead Peer) {
	n.mu.Lock()
	if n.succs[0] != dead {
		n.mu.Unlock()
		return
	}
	w := n.watchLocked()
	rest := slices.Clone(n.succs[1:])
	n.succs = n.buildSuccessorsLocked(rest)
	n.succGen++
	gen := n.succGen
	var fingers []Peer
	if len(rest) == 0 {
		fingers = n.stateLocked(true).Fingers // distinct, nearest first
		fingers = slices.DeleteFunc(fingers, func(p Peer) bool {
			return p == dead || n.suspects.has(p.Addr)
		})
	}
	snap := n.commitLocked(w)
	n.mu.Unlock()
	n.emit(snap)

	for _, f := range fingers {
		if n.ping(ctx, f) != nil {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		n.mu.Lock()
		w := n.watchLocked()
		if n.succGen == gen {
			n.succs = []Peer{f}
			n.succGen++
		}
		snap := n.commitLocked(w)
		n.mu.Unlock()
		n.emit(snap)
		return
	}
}

// CheckPredecessor clears the predecessor if it no longer answers, so that
// the next notifier can take its place, and re-probes one suspect.
//
// With Config.Positions > 1 a call returns at once unless the step is
// due, and a predecessor whose machine this node or a sibling heard from
// within the stretched interval is not pinged (see shared.go).
func (n *Node) CheckPredecessor(ctx context.Context) {
	every := n.cfg.CheckPredecessorInterval * n.cfg.stretch()
	n.mu.Lock()
	urgent := n.urgentCheck
	n.mu.Unlock()
	if !n.due(&n.lastCheck, &n.urgentCheck, every, n.cfg.CheckPredecessorInterval) {
		return
	}
	n.mu.Lock()
	pred := n.pred
	now := n.cfg.Clock.Now()
	n.mu.Unlock()
	// The predecessor notifies us every stretched stabilize interval; a
	// check made urgent by a sign of failure asks it in any case.
	window := n.cfg.StabilizeInterval*n.cfg.stretch() + n.cfg.StabilizeInterval/2
	alive := n.shared() && !urgent && !pred.IsZero() && n.heardSince(pred.Machine(), now.Add(-window))
	if !pred.IsZero() && !alive && n.probePing(ctx, pred) != nil && ctx.Err() == nil {
		n.mu.Lock()
		w := n.watchLocked()
		if n.pred == pred {
			n.pred = Peer{}
		}
		snap := n.commitLocked(w)
		n.mu.Unlock()
		n.emit(snap)
	}
	if ctx.Err() == nil {
		n.reviveSuspect(ctx)
	}
}
