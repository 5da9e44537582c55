package ring

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Join enters the ring that bootstrap belongs to: it looks up its own
// successor through bootstrap, takes that successor's list as its own, and
// notifies the successor. The predecessor is learnt later, when it
// stabilizes and notifies this node. A failed notify is not an error:
// Stabilize repeats it.
func (n *Node) Join(ctx context.Context, bootstrap Peer) error {
	if bootstrap.IsZero() || bootstrap == n.self {
		return fmt.Errorf("join via %s: bootstrap must be another peer", bootstrap)
	}
	r, err := n.walk(ctx, n.self.ID, Peer{}, nil, bootstrap, false)
	if err != nil {
		return fmt.Errorf("join via %s: find successor: %w", bootstrap, err)
	}
	if r.owner == n.self {
		// The ring still lists us from an earlier life; the peer after our
		// position is our successor.
		if r, err = n.walk(ctx, n.self.ID+1, Peer{}, nil, bootstrap, false); err != nil {
			return fmt.Errorf("join via %s: find successor: %w", bootstrap, err)
		}
	}
	succ := r.owner
	if succ.ID == n.self.ID && succ != n.self {
		return fmt.Errorf("join via %s: %s: %w", bootstrap, succ, ErrIDTaken)
	}
	if succ == n.self {
		return fmt.Errorf("join via %s: ring has no member but us", bootstrap)
	}
	nb, err := n.neighbours(ctx, succ)
	if err != nil {
		return fmt.Errorf("join via %s: fetch successor list from %s: %w", bootstrap, succ, err)
	}
	// Peers that joined just before us may already sit between us and the
	// answer we got.
	succ, nb = n.closerSuccessor(ctx, succ, nb)

	n.mu.Lock()
	w := n.watchLocked()
	n.resetLocked()
	n.succs = n.buildSuccessorsLocked(append([]Peer{succ}, nb.Successors...))
	snap := n.commitLocked(w)
	n.mu.Unlock()
	n.emit(snap)

	_ = n.notify(ctx, succ)
	if n.shared() {
		// Our predecessor, told now, takes us as its successor at once
		// (HandleNotify) and notifies us at its next tick, instead of
		// finding us a stretched stabilize interval later (shared.go).
		// The successor's predecessor is it; without one, the peer whose
		// answer named our successor. That peer is not our predecessor
		// when it answered from a sibling's tables, as a machine's
		// positions do (HandleFindSuccessorStep): the sibling positions
		// a node joins through its first one then waited a stretched
		// interval for a predecessor, 4 s of a 3-machine ring's forming.
		pred := nb.Predecessor
		if pred.IsZero() || pred == n.self {
			pred = r.via
		}
		if !pred.IsZero() && pred != succ && pred != n.self {
			_ = n.notify(ctx, pred)
		}
	}
	return nil
}

// Leave departs gracefully: the successor learns our predecessor and the
// predecessor learns our successor list, so the ring closes at once instead
// of after a failure timeout. The node is left alone; stop Run and
// unregister the node from its transport afterwards. Leave returns an error
// if a neighbour could not be told, in which case stabilization repairs the
// ring as it would after a crash.
func (n *Node) Leave(ctx context.Context) error {
	n.mu.Lock()
	notice := LeaveNotice{Leaving: n.self, Predecessor: n.pred, Successors: slices.Clone(n.succs)}
	n.mu.Unlock()

	var targets []Peer
	if s := notice.Successors[0]; s != n.self {
		targets = append(targets, s)
	}
	if p := notice.Predecessor; !p.IsZero() && p != n.self && !slices.Contains(targets, p) {
		targets = append(targets, p)
	}
	var errs []error
	for _, to := range targets {
		err := n.call(ctx, to, func(c context.Context) error { return n.tr.Leave(c, to, notice) })
		if err != nil {
			errs = append(errs, fmt.Errorf("leave: notify %s: %w", to, err))
		}
	}
	n.Create()
	return errors.Join(errs...)
}

// rejoinTries is how many peers an isolated node tries per Stabilize; a
// try through a peer that does not answer costs Config.RPCTimeout.
const rejoinTries = 3

// rejoin is what an isolated node does each Stabilize: Join through the
// peers it remembers (predecessor, last predecessor, last successor list,
// fingers, suspects) and Config.Bootstrap, rejoinTries of them a round in
// rotation, until one lets it in. The node answers notifies and revived
// suspects meanwhile too: whichever comes first ends the isolation.
func (n *Node) rejoin(ctx context.Context) {
	n.mu.Lock()
	cands := make([]Peer, 0, 2+len(n.lastSuccs)+len(n.cfg.Bootstrap))
	cands = append(cands, n.pred, n.lastPred)
	cands = append(cands, n.lastSuccs...)
	cands = append(cands, n.distinctFingersLocked()...)
	cands = append(cands, n.suspects.list()...)
	cands = append(cands, n.cfg.Bootstrap...)
	var uniq []Peer
	for _, p := range cands {
		if !p.IsZero() && p != n.self && p.ID != n.self.ID && !slices.Contains(uniq, p) {
			uniq = append(uniq, p)
		}
	}
	start := n.rejoinNext
	n.rejoinNext += rejoinTries
	n.mu.Unlock()
	for i := range min(rejoinTries, len(uniq)) {
		if ctx.Err() != nil || !n.Isolated() {
			return
		}
		if n.Join(ctx, uniq[(start+i)%len(uniq)]) == nil {
			return
		}
	}
}
