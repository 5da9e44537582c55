package ring

import (
	"context"
	"fmt"
	"slices"
)

// Lookup finds the owner of key (its successor on the ring) iteratively:
// this node asks one peer per hop and follows the answers, so a dead hop
// costs the caller a timeout rather than silently stalling a chain of
// forwarded requests. hops counts the remote calls made, failed ones
// included.
//
// A key in the node's own arc, (predecessor, self], or in the arc of one
// of its Config.Siblings, is answered at once (0 hops), as is a key
// between the node and its first successor. Otherwise the walk starts
// from whichever of the node and its siblings precedes the key most
// closely, with that position's tables.
//
// When a hop fails, the peer is marked suspect and the lookup continues
// from the last peer that answered, using that peer's successor list and
// this node's own tables. MaxHops bounds the whole walk. An isolated node
// answers only its own arc at once and walks from its remaining tables
// otherwise, failing with ErrNoRoute when nobody it knows answers.
func (n *Node) Lookup(ctx context.Context, key ID) (owner Peer, hops int, err error) {
	if n.holds(key) {
		return n.self, 0, nil
	}
	start := n
	if n.cfg.Siblings != nil {
		for _, s := range n.cfg.Siblings() {
			if s == nil || s == n {
				continue
			}
			if s.holds(key) {
				return s.self, 0, nil
			}
			// The walk starts from the position of this process that
			// precedes key most closely: its tables are the nearest.
			if s.self.ID.Between(start.self.ID, key) && s.self.ID != key {
				start = s
			}
		}
	}
	return start.lookupFrom(ctx, key)
}

// lookupFrom is Lookup from this node's own tables, its siblings left
// aside.
func (n *Node) lookupFrom(ctx context.Context, key ID) (owner Peer, hops int, err error) {
	n.mu.Lock()
	succs := slices.Clone(n.succs)
	isolated := n.isolatedLocked()
	n.mu.Unlock()
	if isolated {
		// Our list names only us because its peers failed: it says
		// nothing about who owns key.
		succs = nil
	} else if key.Between(n.self.ID, succs[0].ID) {
		// Alone, succs[0] is self and the arc is the whole ring.
		return succs[0], 0, nil
	}
	r, err := n.walk(ctx, key, n.self, succs, Peer{}, true)
	return r.owner, r.hops, err
}

// route is the outcome of a walk: the owner, the peer whose answer named
// it (zero if none did), and the remote calls made.
type route struct {
	owner, via Peer
	hops       int
}

// walk runs the iterative lookup of key. prev is the last peer known to
// precede key (self for Lookup; zero when joining, before anyone answered),
// prevSuccs its successor list, next the first peer to ask (zero: choose
// one). useOwn lets the walk fall back on this node's own tables and
// suspicions, which a joining node does not have yet.
func (n *Node) walk(ctx context.Context, key ID, prev Peer, prevSuccs []Peer, next Peer, useOwn bool) (route, error) {
	asked := make(map[string]bool)  // never ask anyone twice: that would be a loop
	failed := make(map[string]bool) // failed in this walk: certainly not the answer
	var lastErr error
	hops := 0
	if next.IsZero() {
		next = n.nextHop(key, prev, prevSuccs, asked, useOwn)
	}
	for {
		if next.IsZero() {
			// Nobody left who precedes key. If everyone between prev and
			// key failed, prev's list still says who took over from them.
			if owner, ok := firstLiveAtOrAfter(key, prev, prevSuccs, failed); ok {
				return route{owner, prev, hops}, nil
			}
			if lastErr != nil {
				return route{hops: hops}, fmt.Errorf("lookup %s: %w: %w", key, ErrNoRoute, lastErr)
			}
			return route{hops: hops}, fmt.Errorf("lookup %s: %w", key, ErrNoRoute)
		}
		if hops >= n.cfg.MaxHops {
			return route{hops: hops}, fmt.Errorf("lookup %s: %w (limit %d)", key, ErrTooManyHops, n.cfg.MaxHops)
		}
		hops++
		asked[next.Addr] = true
		var st Step
		err := n.call(ctx, next, func(c context.Context) error {
			var err error
			st, err = n.tr.FindSuccessorStep(c, next, key)
			return err
		})
		if err != nil {
			if ctx.Err() != nil {
				return route{hops: hops}, fmt.Errorf("lookup %s: ask %s: %w", key, next, err)
			}
			failed[next.Addr] = true
			lastErr = fmt.Errorf("ask %s: %w", next, err)
			next = n.nextHop(key, prev, prevSuccs, asked, useOwn)
			continue
		}
		if st.Found && !st.Next.IsZero() {
			if !failed[st.Next.Addr] {
				return route{st.Next, next, hops}, nil
			}
			// The answerer has not noticed yet that its successor died.
			if owner, ok := firstLiveAtOrAfter(key, next, st.Successors, failed); ok {
				return route{owner, next, hops}, nil
			}
		}
		prev, prevSuccs = next, st.Successors
		next = st.Next
		if st.Found || next.IsZero() || asked[next.Addr] || !next.ID.inOpen(prev.ID, key) {
			// A useless answer (no progress, or a peer already tried):
			// choose for ourselves from what the answerer told us.
			next = n.nextHop(key, prev, prevSuccs, asked, useOwn)
		}
	}
}

// nextHop picks the next peer to ask: the known peer in the open arc
// (prev, key) nearest to key, from prev's successor list and, if useOwn,
// this node's tables. Any peer in that arc is safe to ask, since it is
// closer to key than prev. Suspects are used only when nothing else is
// left, because a false suspicion must not make a lookup fail.
func (n *Node) nextHop(key ID, prev Peer, prevSuccs []Peer, asked map[string]bool, useOwn bool) Peer {
	if prev.IsZero() {
		return Peer{}
	}
	pick := func(avoidSuspects bool) Peer {
		var best Peer
		var bestDist uint64
		consider := func(p Peer) {
			if p.IsZero() || p == n.self || asked[p.Addr] || !p.ID.inOpen(prev.ID, key) {
				return
			}
			if avoidSuspects && n.suspects.has(p.Addr) {
				return
			}
			if d := prev.ID.dist(p.ID); best.IsZero() || d > bestDist {
				best, bestDist = p, d
			}
		}
		for _, p := range prevSuccs {
			consider(p)
		}
		if useOwn {
			if own := n.closestPrecedingLocked(prev.ID, key, asked); !own.IsZero() {
				consider(own)
			}
		}
		return best
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if p := pick(useOwn); !p.IsZero() {
		return p
	}
	if useOwn {
		return pick(false)
	}
	return Peer{}
}

// firstLiveAtOrAfter reads list (a successor list of prev, clockwise) for
// the first entry at or after key that has not failed: the peer that owns
// key once the failed ones are gone.
func firstLiveAtOrAfter(key ID, prev Peer, list []Peer, failed map[string]bool) (Peer, bool) {
	if prev.IsZero() {
		return Peer{}, false
	}
	for _, p := range list {
		if p.IsZero() || failed[p.Addr] || p.ID.inOpen(prev.ID, key) {
			continue
		}
		return p, true
	}
	return Peer{}, false
}
