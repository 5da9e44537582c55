package ring

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Node is one member of a Chord ring. It serves ring RPCs through its
// Handler methods, answers Lookup for local callers and keeps its pointers
// fresh through Stabilize, FixFingers and CheckPredecessor (driven by Run or
// called directly by a simulator).
//
// All state sits behind one mutex that is never held across a Transport
// call, so a node may talk to itself through an in-process transport and
// RPC handlers never wait on the network.
type Node struct {
	self    Peer
	tr      Transport
	cfg     Config
	running atomic.Bool

	mu   sync.Mutex
	pred Peer
	// succs is never empty; it is [self] when the node is alone, and never
	// contains self otherwise.
	succs []Peer
	// succGen increases on every change to succs so that Stabilize, which
	// reads succs, calls out and then writes, can tell that someone else
	// (a LeaveNotice, a revived suspect) changed the list meanwhile.
	succGen  uint64
	fingers  [idBits]Peer
	suspects suspects
	version  uint64
	// positionChecks rotates the finger checkPosition starts from.
	positionChecks int

	// hadPeer is set once the node has had another member as predecessor
	// or successor, and cleared by Create and by the graceful departure of
	// the last other member: with it set, an empty successor list means
	// the node is isolated, not alone (State.Isolated).
	hadPeer bool
	// lastPred is the last known predecessor, which bounds the arc the
	// node holds while its predecessor is unknown; lastSuccs the last
	// successor list that named another peer, kept to rejoin through.
	lastPred  Peer
	lastSuccs []Peer
	// rejoinNext rotates through the peers an isolated node tries.
	rejoinNext int

	// Shared maintenance (Config.Positions > 1, shared.go): when each
	// step last ran, the steps to run at the next tick whatever their
	// interval, and when this node last heard from each machine.
	// baseSuccs is the successor list length asked for before
	// Positions grew it (buildSuccessorsLocked).
	baseSuccs                    int
	lastStab, lastCheck, lastFix time.Time
	urgentStab, urgentCheck      bool
	machineHeard                 map[string]time.Time
	// machineDown holds when a call by the family to each machine last
	// failed (downMachines).
	machineDown map[string]time.Time
}

var _ Handler = (*Node)(nil)

// NewNode returns a node at self that talks through tr. The node starts as
// a ring of one; call Create or Join before serving traffic, and Run to
// keep it healthy.
func NewNode(self Peer, tr Transport, cfg Config) *Node {
	base := cfg.SuccessorListLen
	if base <= 0 {
		base = DefaultConfig().SuccessorListLen
	}
	n := &Node{self: self, tr: tr, cfg: cfg.WithDefaults(), baseSuccs: base}
	n.resetLocked()
	return n
}

// Self returns the node's own Peer.
func (n *Node) Self() Peer { return n.self }

// Clock returns the clock that drives the node (Config.Clock): whatever
// keeps time beside the ring on the same node uses it too.
func (n *Node) Clock() Clock { return n.cfg.Clock }

// Create starts a new ring with this node as its only member, forgetting
// any previous routing state: the node is alone, not isolated, and owns
// the whole ring.
func (n *Node) Create() {
	n.mu.Lock()
	w := n.watchLocked()
	n.resetLocked()
	n.forgetPastLocked()
	snap := n.commitLocked(w)
	n.mu.Unlock()
	n.emit(snap)
}

func (n *Node) resetLocked() {
	n.pred = Peer{}
	n.succs = []Peer{n.self}
	n.succGen++
	n.fingers = [idBits]Peer{}
	n.suspects = newSuspects(4 * n.cfg.SuccessorListLen)
}

// forgetPastLocked makes the node alone rather than isolated.
func (n *Node) forgetPastLocked() {
	n.hadPeer = false
	n.lastPred = Peer{}
	n.lastSuccs = nil
}

// Owns reports whether key lies in (predecessor, self], the arc this node
// is responsible for. With no known predecessor, a node that never had
// another member (alone since Create) owns every key; any other node owns
// no more than (last known predecessor, self], the arc it had: its
// predecessor died or it is cut off, and what it may gain beyond that arc
// it learns from the live predecessor that notifies it, which a node cut
// off never hears from. A node that has not learnt a predecessor since it
// joined owns nothing.
func (n *Node) Owns(key ID) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch {
	case !n.pred.IsZero():
		return key.Between(n.pred.ID, n.self.ID)
	case !n.hadPeer:
		return true
	case !n.lastPred.IsZero():
		return key.Between(n.lastPred.ID, n.self.ID)
	}
	return false
}

// holds reports whether key lies in the node's own arc as it knows it
// now: its ID, or (predecessor, self] with the predecessor known. A key it
// holds is answered by Lookup without a network hop.
func (n *Node) holds(key ID) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return key == n.self.ID || (!n.pred.IsZero() && key.Between(n.pred.ID, n.self.ID))
}

// Isolated reports whether the node had other members and lost every
// successor (State.Isolated).
func (n *Node) Isolated() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.isolatedLocked()
}

// Alone reports whether the node is the only member of its ring: its
// successor list names only itself and it is not isolated, so it was
// created alone (Create) or every other member left gracefully. An alone
// node owns the whole ring.
func (n *Node) Alone() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.succs[0] == n.self && !n.hadPeer
}

func (n *Node) isolatedLocked() bool { return n.hadPeer && n.succs[0] == n.self }

// Predecessor returns the node's predecessor, zero if unknown.
func (n *Node) Predecessor() Peer {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pred
}

// Neighbourhood returns what a shard manager reads of the node every
// tick: its predecessor (zero if unknown), its successor list, nearest
// first, and whether it is isolated. The list is the node's own, not a
// copy: the node replaces its list whole and never changes one in place,
// so it stays as it was; the caller must not change it either. Snapshot
// costs more (it copies the list and gathers the fingers and suspects):
// called by 16 positions every 100 ms, it was 7% of a simulation's CPU.
func (n *Node) Neighbourhood() (pred Peer, succs []Peer, isolated bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pred, n.succs, n.isolatedLocked()
}

// Successors returns a copy of the successor list, nearest first; [Self()]
// when the node is alone.
func (n *Node) Successors() []Peer {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.succs)
}

// State returns a snapshot of the node's routing state.
func (n *Node) State() State {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stateLocked(true)
}

// Snapshot is State without putting the fingers in clockwise order: they
// come in finger-table order, where a stale entry may sit out of place.
// It is for callers that need the set of known peers, not their order,
// on a hot path (a replica judges every write against it).
func (n *Node) Snapshot() State {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stateLocked(false)
}

func (n *Node) stateLocked(ordered bool) State {
	st := State{
		Self:        n.self,
		Predecessor: n.pred,
		Successors:  slices.Clone(n.succs),
		Suspects:    n.suspects.list(),
		Version:     n.version,
		Isolated:    n.isolatedLocked(),
	}
	st.Fingers = n.distinctFingersLocked()
	// Fingers are filled by increasing start, but a stale entry may sit out
	// of place; sort so status pages read clockwise from self.
	if ordered {
		byDist := func(a, b Peer) int {
			da, db := n.self.ID.dist(a.ID), n.self.ID.dist(b.ID)
			switch {
			case da < db:
				return -1
			case da > db:
				return 1
			}
			return 0
		}
		if !slices.IsSortedFunc(st.Fingers, byDist) {
			slices.SortFunc(st.Fingers, byDist)
		}
	}
	return st
}

// distinctFingersLocked returns the finger-table peers other than self,
// each once, in table order. Equal fingers mostly sit next to each other
// (a peer owns a run of starts), so a comparison with the last one kept
// answers most entries and the scan of the few kept the rest, with no map.
func (n *Node) distinctFingersLocked() []Peer {
	var out []Peer
	for i, f := range n.fingers {
		if out == nil && !f.IsZero() && f != n.self {
			// A ring of N has about log2(N) distinct fingers.
			out = make([]Peer, 0, min(16, len(n.fingers)-i))
		}
		if f.IsZero() || f == n.self || (len(out) > 0 && out[len(out)-1] == f) || slices.Contains(out, f) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// HandleFindSuccessorStep answers one step of an iterative lookup: the
// owner if key falls between this node and its successor, otherwise the
// closest preceding peer this node knows that it has no reason to distrust.
//
// An isolated node never answers Found: its empty successor list means it
// lost its neighbours, not that the ring is just itself. It names the
// closest preceding peer it knows, or nobody, and no successor list, so
// the asker goes on from its own tables.
//
// A position that shares maintenance (Config.Positions > 1) answers as
// its machine: from the tables of the sibling that precedes key most
// closely, itself included (see shared.go).
func (n *Node) HandleFindSuccessorStep(key ID) Step {
	return n.answererFor(key).step(key)
}

// step is HandleFindSuccessorStep from this node's own tables.
func (n *Node) step(key ID) Step {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.isolatedLocked() {
		return Step{Next: n.closestPrecedingLocked(n.self.ID, key, nil)}
	}
	succs := slices.Clone(n.succs)
	if key.Between(n.self.ID, succs[0].ID) {
		return Step{Found: true, Next: succs[0], Successors: succs}
	}
	next := n.closestPrecedingLocked(n.self.ID, key, nil)
	if next.IsZero() {
		// Every candidate is suspect. The successor still makes progress
		// (key lies beyond it) and the asker will route around it if it
		// really is dead.
		next = succs[0]
	}
	return Step{Next: next, Successors: succs}
}

// HandleNeighbours reports the predecessor and successor list, without
// the machines the family found down (downMachines). A call from another
// machine proves that machine alive (shared.go): the
// predecessor that stabilizes through this node need not notify it again
// to keep it from pinging.
func (n *Node) HandleNeighbours(from string) Neighbours {
	down := n.downMachines()
	n.mu.Lock()
	defer n.mu.Unlock()
	if mc := (Peer{Addr: from}).Machine(); from != "" && mc != n.self.Machine() {
		n.heardLocked(mc, n.cfg.Clock.Now())
		delete(down, mc)
	}
	return Neighbours{Predecessor: n.pred, Successors: withoutDown(slices.Clone(n.succs), down)}
}

// HandleNotify adopts candidate as predecessor if there is none, if it lies
// between the current one and self, or if the current one is suspect. Only
// the candidate itself may propose itself: a notify naming another peer
// (from is not candidate.Addr) is refused with ErrNotSender.
//
// A candidate that lies between self and our successor also becomes our
// successor: it is alive (it just called) and our successor pointer skips
// it. Plain Chord ignores this, and so a node alone when many others join
// through it takes its predecessor as successor, skips every newcomer and
// answers almost every lookup with that one peer; the ring then unwinds
// one node per stabilize round.
func (n *Node) HandleNotify(from string, candidate Peer) error {
	if candidate.Addr != from {
		return fmt.Errorf("notify from %s names %s: %w", from, candidate, ErrNotSender)
	}
	if candidate.IsZero() || candidate == n.self {
		return nil
	}
	n.mu.Lock()
	w := n.watchLocked()
	// The candidate just spoke to us, so it is alive whatever we thought.
	n.suspects.clear(candidate.Addr)
	n.heardLocked(candidate.Machine(), n.cfg.Clock.Now())
	if n.pred.IsZero() || candidate.ID.inOpen(n.pred.ID, n.self.ID) || n.suspects.has(n.pred.Addr) {
		n.pred = candidate
	} else if n.shared() && candidate != n.pred && candidate.Machine() != n.pred.Machine() {
		// A peer before our predecessor takes us for its successor: it
		// may have found our predecessor dead. Check at the next tick
		// rather than a stretched interval later (shared.go).
		n.urgentCheck = true
	}
	n.offerSuccessorLocked(candidate)
	snap := n.commitLocked(w)
	n.mu.Unlock()
	n.emit(snap)
	n.offerSiblings(candidate)
	return nil
}

// HandlePing answers a liveness check; reaching it is the whole answer.
func (n *Node) HandlePing() {}

// HandleLeave repairs pointers around a gracefully departing peer: as its
// successor, adopt its predecessor; as its predecessor (or anyone listing
// it), splice its successor list in where it stood. The leaver is forgotten
// rather than suspected, since re-probing it would be wasted. Only the
// leaver may announce its departure: a notice from another peer is refused
// with ErrNotSender.
func (n *Node) HandleLeave(from string, notice LeaveNotice) error {
	gone := notice.Leaving
	if gone.Addr != from {
		return fmt.Errorf("leave notice from %s names %s: %w", from, gone, ErrNotSender)
	}
	if gone.IsZero() || gone == n.self {
		return nil
	}
	n.mu.Lock()
	w := n.watchLocked()
	wasIsolated := n.isolatedLocked()
	if n.pred == gone {
		n.pred = Peer{}
		if p := notice.Predecessor; !p.IsZero() && p != n.self && p != gone {
			n.pred = p
		}
	}
	if i := slices.Index(n.succs, gone); i >= 0 {
		rest := make([]Peer, 0, len(n.succs)+len(notice.Successors))
		rest = append(rest, n.succs[i+1:]...)
		if i == 0 || len(rest) == 0 {
			// The leaver's list is fresher than the tail we hold.
			rest = append(slices.Clone(notice.Successors), rest...)
		}
		rest = slices.DeleteFunc(rest, func(p Peer) bool { return p == gone })
		n.succs = n.buildSuccessorsLocked(append(slices.Clone(n.succs[:i]), rest...))
		n.succGen++
	}
	if n.pred.IsZero() && n.succs[0] == n.self && !wasIsolated && len(n.suspects.byKey) == 0 && onlyUsLeft(n.self, notice) {
		// The last other member left and said so, and no other peer
		// failed to answer us lately: the ring is just us. With a recent
		// failure the leaver's view may have been cut by the same
		// partition as ours, and we stay isolated.
		n.forgetPastLocked()
	}
	for i := range n.fingers {
		if n.fingers[i] == gone {
			n.fingers[i] = Peer{}
		}
	}
	n.suspects.clear(gone.Addr)
	snap := n.commitLocked(w)
	n.mu.Unlock()
	n.emit(snap)
	return nil
}

// onlyUsLeft reports whether a leave notice shows that the ring is self
// and the leaver alone: the leaver names no other peer as its predecessor
// or successor. A leaver whose list only wraps round to self before going
// on to others does not leave self alone.
func onlyUsLeft(self Peer, notice LeaveNotice) bool {
	for _, p := range append([]Peer{notice.Predecessor}, notice.Successors...) {
		if !p.IsZero() && p != self && p != notice.Leaving {
			return false
		}
	}
	return true
}

// offerSuccessorLocked makes p the first successor if it lies between self
// and the current one. Callers offer only peers they have evidence are
// alive; the next Stabilize checks p properly and drops it if it is dead.
func (n *Node) offerSuccessorLocked(p Peer) {
	if p.IsZero() || p == n.self || !p.ID.inOpen(n.self.ID, n.succs[0].ID) {
		return
	}
	n.succs = n.buildSuccessorsLocked(append([]Peer{p}, n.succs...))
	n.succGen++
}

// buildSuccessorsLocked turns a clockwise candidate list into a successor
// list: zero peers and duplicates dropped, cut at self (everything after
// self has wrapped around the ring) and at SuccessorListLen. An empty
// result means the node is alone.
//
// With Config.Positions > 1 the list stops short of SuccessorListLen
// once it holds baseSuccs peers on baseSuccs machines other than ours:
// it reaches as many machines as one position's list, and is no longer
// than needed where the machines' positions interleave (a large ring).
func (n *Node) buildSuccessorsLocked(cands []Peer) []Peer {
	out := make([]Peer, 0, n.cfg.SuccessorListLen)
	for _, p := range cands {
		if len(out) == n.cfg.SuccessorListLen || p == n.self || n.reachesLocked(out) {
			break
		}
		if p.IsZero() || slices.Contains(out, p) {
			continue
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		out = append(out, n.self)
	}
	return out
}

// closestPrecedingLocked returns the known peer in the open arc (from, key)
// nearest to key, from the finger table and successor list, skipping self,
// suspects and anything in skip. Zero if there is none.
func (n *Node) closestPrecedingLocked(from, key ID, skip map[string]bool) Peer {
	var best Peer
	var bestDist uint64
	consider := func(p Peer) {
		if p.IsZero() || p == n.self || skip[p.Addr] || n.suspects.has(p.Addr) || !p.ID.inOpen(from, key) {
			return
		}
		if d := from.dist(p.ID); best.IsZero() || d > bestDist {
			best, bestDist = p, d
		}
	}
	for _, f := range n.fingers {
		consider(f)
	}
	for _, s := range n.succs {
		consider(s)
	}
	return best
}

// watch records the pointers OnChange reports on, before a mutation.
type watch struct{ pred, succ Peer }

func (n *Node) watchLocked() watch { return watch{n.pred, n.succs[0]} }

// commitLocked bumps the version if the watched pointers changed and
// returns the snapshot to hand to OnChange, or nil if there is nothing to
// report. Taking the snapshot under the same lock as the change means each
// callback sees exactly the state its change produced.
func (n *Node) commitLocked(w watch) *State {
	n.rememberLocked()
	if w == n.watchLocked() {
		return nil
	}
	if w.succ != n.succs[0] && n.shared() {
		// A new first successor is to be checked and notified at the
		// next tick, not a stretched interval later.
		n.urgentStab = true
	}
	n.version++
	if n.cfg.OnChange == nil {
		return nil
	}
	st := n.stateLocked(true)
	return &st
}

// rememberLocked notes the neighbours the node has, for when it loses
// them: every change of pred or succs is followed by commitLocked. The
// successor lists are never modified in place, so keeping one is safe.
func (n *Node) rememberLocked() {
	if !n.pred.IsZero() {
		n.hadPeer = true
		n.lastPred = n.pred
	}
	if n.succs[0] != n.self {
		n.hadPeer = true
		n.lastSuccs = n.succs
	}
}

// emit calls OnChange outside the lock so the callback may use the node.
func (n *Node) emit(st *State) {
	if st != nil {
		n.cfg.OnChange(*st)
	}
}

// call runs one RPC to peer under the per-call deadline and keeps the
// suspicion overlay honest: an answer clears suspicion, a failure sets it
// unless it was the caller's own context that ended.
func (n *Node) call(ctx context.Context, to Peer, rpc func(context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, n.cfg.RPCTimeout)
	err := rpc(cctx)
	cancel()
	failed := false
	n.mu.Lock()
	if err == nil {
		n.suspects.clear(to.Addr)
		n.heardLocked(to.Machine(), n.cfg.Clock.Now())
	} else if ctx.Err() == nil && to != n.self {
		n.suspects.mark(to, n.cfg.Clock.Now())
		failed = to.Machine() != n.self.Machine()
	}
	n.mu.Unlock()
	if failed {
		n.machineFailed(to.Machine())
	}
	return err
}

func (n *Node) ping(ctx context.Context, to Peer) error {
	return n.call(ctx, to, func(c context.Context) error { return n.tr.Ping(c, to) })
}

func (n *Node) notify(ctx context.Context, to Peer) error {
	return n.call(ctx, to, func(c context.Context) error { return n.tr.Notify(c, to, n.self) })
}

func (n *Node) neighbours(ctx context.Context, to Peer) (Neighbours, error) {
	var nb Neighbours
	err := n.call(ctx, to, func(c context.Context) error {
		var err error
		nb, err = n.tr.Neighbours(c, to)
		return err
	})
	return nb, err
}

// probeAttempts is how many consecutive failures declare a neighbour dead.
// One lost message must not cut a live successor out of the ring.
const probeAttempts = 2

// probeNeighbours is neighbours with a retry, for decisions that drop a
// peer from the ring.
func (n *Node) probeNeighbours(ctx context.Context, to Peer) (Neighbours, error) {
	var err error
	for range probeAttempts {
		var nb Neighbours
		if nb, err = n.neighbours(ctx, to); err == nil || ctx.Err() != nil {
			return nb, err
		}
	}
	return Neighbours{}, fmt.Errorf("neighbours of %s: %w", to, err)
}

// probePing is ping with a retry, for decisions that drop a peer.
func (n *Node) probePing(ctx context.Context, to Peer) error {
	var err error
	for range probeAttempts {
		if err = n.ping(ctx, to); err == nil || ctx.Err() != nil {
			return err
		}
	}
	return fmt.Errorf("ping %s: %w", to, err)
}
