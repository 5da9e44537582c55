package ring

import (
	"slices"
	"time"
)

// Shared maintenance.
//
// A process that holds V ring positions (Config.Positions > 1) would pay V
// times the maintenance of one if every position ran Chord's loops at the
// base intervals: V stabilize exchanges, V predecessor pings and V finger
// tables refreshed per round. Its positions share the work instead:
//
//   - Stabilize and CheckPredecessor run every stretch() of their
//     intervals and FixFingers every 4*Positions FixFingersIntervals
//     (fixEvery), so the machine refreshes about a quarter of a finger
//     table's worth per interval, about half what a process with one
//     position does: lookups start from the sibling nearest the key
//     (Config.Siblings), whose table is the one that matters. Run (or a
//     simulator) still calls the steps at the base intervals; a call
//     before its stretched interval returns at once.
//   - Failure reaction does not slow down. A failed call to a peer makes
//     every position whose first successor or predecessor is on that
//     peer's machine (this one and its siblings: a machine fails with all
//     its positions) stabilize or check its predecessor at its next tick.
//     A notify that changes the successor, a leave notice and a revived
//     suspect do the same for the position concerned, and a joining
//     position notifies its successor's predecessor as well as its
//     successor, so the predecessor takes it as successor at once (Join).
//   - The machine routes as one: a lookup step asked of any position is
//     answered from the tables of the position that precedes the key
//     most closely (HandleFindSuccessorStep), as Lookup starts from it,
//     so a position keeps fingers only up to its next sibling clockwise
//     (FixFingers): beyond it a sibling's tables answer. The machine's
//     positions hold one finger table's worth between them.
//   - A notify proves its sender alive to the whole machine: a sibling
//     whose successor pointer skips the sender takes it as successor too.
//   - Liveness is per machine: a successful call to any position of a
//     machine, or a notify from one, by this position or a sibling, proves
//     the machine alive, and a predecessor on a machine proven alive
//     within the stretched check interval is not pinged.

// machineHeardMax bounds the machines a node remembers hearing from; the
// oldest is forgotten first.
const machineHeardMax = 64

// shared reports whether the node shares maintenance with siblings.
func (n *Node) shared() bool { return n.cfg.Positions > 1 }

// stretch is how many base intervals apart a position of a shared
// machine stabilizes and checks its predecessor.
func (c Config) stretch() time.Duration { return time.Duration(max(1, c.Positions/2)) }

// fixEvery is how often a position refreshes its fingers: every
// FixFingersInterval with one position, every 4*Positions with more. A
// position's table then covers the arc up to its next sibling, a V-th of
// the ring on average, which on a ring of V*N positions holds as many
// fingers as one position's table on a ring of N, and lookups are
// answered from the tables of the whole machine. A process with one
// position refreshes its table less often than every interval, since a
// round waits for its lookups (at 1,000 machines about every 6 s of a
// 2 s interval: 8.8 lookup messages a second); refreshed every 2V
// intervals, the V tables of a machine cost 12.5 and their position
// checks 2.6 messages a second at 1,000 machines of 16, every 4V 5.4 and
// 1.1, with the same mean hops (3.91 against 3.89) and coverage. Every V
// intervals cost 1.9 times one table's lookups at 300 machines and 2.7
// times at 1,000.
func (c Config) fixEvery() time.Duration {
	if c.Positions <= 1 {
		return c.FixFingersInterval
	}
	return c.FixFingersInterval * time.Duration(4*c.Positions)
}

// dueLocked reports whether a step last run at *last, every `every`, runs
// now, and if so notes now as its start. urgent forces it (and is
// cleared). A tick that comes up to half a base interval early still
// counts, so that a step the base tickers call every `base` runs every
// `every` and not one tick later. Callers hold n.mu.
func dueLocked(last *time.Time, urgent *bool, now time.Time, every, base time.Duration) bool {
	if !*urgent && !last.IsZero() && now.Sub(*last) < every-base/2 {
		return false
	}
	*urgent = false
	*last = now
	return true
}

// heardLocked notes that machine answered or spoke to this node at now.
// Callers hold n.mu.
func (n *Node) heardLocked(machine string, now time.Time) {
	if !n.shared() {
		return
	}
	noteMachine(&n.machineHeard, machine, now)
}

// noteMachine records machine at now in *m, made on first use, forgetting
// the machine noted longest ago when machineHeardMax are noted.
func noteMachine(m *map[string]time.Time, machine string, now time.Time) {
	if *m == nil {
		*m = make(map[string]time.Time)
	}
	if _, ok := (*m)[machine]; !ok && len(*m) >= machineHeardMax {
		var oldest string
		var at time.Time
		for name, t := range *m {
			// Ties go to the smaller name, so that a simulator that
			// replays a seed forgets the same machine.
			if oldest == "" || t.Before(at) || t.Equal(at) && name < oldest {
				oldest, at = name, t
			}
		}
		delete(*m, oldest)
	}
	(*m)[machine] = now
}

// downFor is how long a failed call keeps a machine out of the successor
// lists the family builds and answers (downMachines), in stretched
// stabilize rounds: long enough for every list that named it to be
// rebuilt from clean answers, short enough that a live machine missed
// by a lost message comes back soon even if no position of the family
// calls it.
const downFor = 4

// downMachines returns the machines that a call by this node or a
// sibling failed to reach within the last downFor stretched stabilize
// intervals and that none of them heard from since (nil without shared
// maintenance). Successor lists keep such a machine's positions until
// their next rebuild, one stabilize round per place in the list, and a
// list of 2V places took minutes to forget a dead machine at V = 16; the
// family, which learns of the failure once, leaves the machine out of
// the lists it answers and builds at once. Callers do not hold n.mu.
func (n *Node) downMachines() map[string]bool {
	if !n.shared() {
		return nil
	}
	// machineFailed notes a failure in every sibling's machineDown, so
	// this node's own holds the family's; only a recent one costs the
	// siblings' locks (heardSince).
	horizon := n.cfg.Clock.Now().Add(-downFor * n.cfg.StabilizeInterval * n.cfg.stretch())
	var failed map[string]time.Time
	n.mu.Lock()
	for m, t := range n.machineDown {
		if !t.After(horizon) {
			delete(n.machineDown, m) // expired
			continue
		}
		if failed == nil {
			failed = make(map[string]time.Time)
		}
		failed[m] = t
	}
	n.mu.Unlock()
	var out map[string]bool
	for m, t := range failed {
		if !n.heardSince(m, t) {
			if out == nil {
				out = make(map[string]bool, len(failed))
			}
			out[m] = true
		}
	}
	return out
}

// withoutDown returns list without the positions of machines in down
// (list itself when there are none).
func withoutDown(list []Peer, down map[string]bool) []Peer {
	if len(down) == 0 {
		return list
	}
	return slices.DeleteFunc(slices.Clone(list), func(p Peer) bool { return down[p.Machine()] })
}

// heardSince reports whether this node or a sibling heard from machine
// at or after t.
func (n *Node) heardSince(machine string, t time.Time) bool {
	for _, s := range n.family() {
		s.mu.Lock()
		at, ok := s.machineHeard[machine]
		s.mu.Unlock()
		if ok && !at.Before(t) {
			return true
		}
	}
	return false
}

// family is the node and its siblings.
func (n *Node) family() []*Node {
	out := []*Node{n}
	if n.cfg.Siblings != nil {
		for _, s := range n.cfg.Siblings() {
			if s != nil && s != n {
				out = append(out, s)
			}
		}
	}
	return out
}

// machineFailed makes every position of the family whose first successor
// or predecessor is on machine repair at its next tick, and the family
// leave machine out of the successor lists it answers and builds until
// one of them hears from it (downMachines): a call to it just failed, and
// a machine fails with all its positions.
func (n *Node) machineFailed(machine string) {
	if !n.shared() {
		return
	}
	now := n.cfg.Clock.Now()
	for _, s := range n.family() {
		s.mu.Lock()
		noteMachine(&s.machineDown, machine, now)
		if s.succs[0] != s.self && s.succs[0].Machine() == machine {
			s.urgentStab = true
		}
		if !s.pred.IsZero() && s.pred.Machine() == machine {
			s.urgentCheck = true
		}
		s.mu.Unlock()
	}
}

// inRing reports whether the node is a joined member that may answer for
// the ring: it has a successor other than itself and is not isolated.
func (n *Node) inRing() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.succs[0] != n.self
}

// answererFor returns the position of this machine whose tables answer a
// lookup step for key: the member of the family preceding key most
// closely, or n itself without shared maintenance.
func (n *Node) answererFor(key ID) *Node {
	if !n.shared() || n.cfg.Siblings == nil {
		return n
	}
	best := n
	for _, s := range n.cfg.Siblings() {
		if s == nil || s == n || !s.self.ID.inOpen(best.self.ID, key) || !s.inRing() {
			continue
		}
		best = s
	}
	return best
}

// nextSibling returns the ID of the nearest position of this machine
// clockwise after n that is in the ring, and false if there is none or
// maintenance is not shared.
func (n *Node) nextSibling() (ID, bool) {
	if !n.shared() || n.cfg.Siblings == nil {
		return 0, false
	}
	var next ID
	found := false
	for _, s := range n.cfg.Siblings() {
		if s == nil || s == n || s.self.ID == n.self.ID || !s.inRing() {
			continue
		}
		if !found || n.self.ID.dist(s.self.ID) < n.self.ID.dist(next) {
			next, found = s.self.ID, true
		}
	}
	return next, found
}

// offerSiblings offers p, which just spoke to n, as successor to n's
// siblings: one whose successor pointer skips p takes it.
func (n *Node) offerSiblings(p Peer) {
	if !n.shared() || n.cfg.Siblings == nil || p.Machine() == n.self.Machine() {
		return
	}
	for _, s := range n.cfg.Siblings() {
		if s == nil || s == n {
			continue
		}
		s.mu.Lock()
		w := s.watchLocked()
		if s.succs[0] != s.self {
			s.offerSuccessorLocked(p)
		}
		snap := s.commitLocked(w)
		s.mu.Unlock()
		s.emit(snap)
	}
}

// reachesLocked reports whether a successor list under construction is
// long enough for a shared machine: baseSuccs peers, on at least
// baseSuccs machines other than ours. Without shared maintenance the
// list is cut at SuccessorListLen alone.
func (n *Node) reachesLocked(list []Peer) bool {
	if !n.shared() || len(list) < n.baseSuccs {
		return false
	}
	own := n.self.Machine()
	machines := make([]string, 0, len(list))
	for _, p := range list {
		if m := p.Machine(); m != own && !slices.Contains(machines, m) {
			machines = append(machines, m)
		}
	}
	return len(machines) >= n.baseSuccs
}
