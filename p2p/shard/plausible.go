package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// Who may claim what.
//
// Every claim a node takes in (a replica write, a handoff, a merge) comes
// from an authenticated sender, and the node judges it against its own
// view of the ring before it changes anything:
//
//   - The claim's epoch names the sender as its owner.
//   - The sender is a plausible owner of the range: it does not lie inside
//     the range it claims (an owner's arc ends at the owner), and between
//     the range's start and the sender lie at most K (Config.Replicas) of
//     the nodes this node knows, none of which it heard from within Lease,
//     and, for a replica write, not this node itself. Those K are the
//     slack for neighbours that crashed and whose arcs the sender took
//     over before everyone noticed.
//   - The epoch is not ahead of this node's clock by more than
//     MaxClockSkew. A new claim's epoch is one above the highest the
//     claimer's table knows for the range, and at least the claimer's
//     clock in milliseconds, so honest epochs follow the clock and advance
//     by bounded steps, and none comes near 2^64: a forged epoch cannot be
//     made unbeatable, and one that slipped in is overtaken by honest
//     claims within MaxClockSkew.
//
// A handoff whose sender fails the second check is also taken when one of
// the sender's first successors witnessed the sender's claim of the range
// at the handoff's epoch (see "Witnesses" in witness.go): the receiver's
// view cannot tell an old owner from a stranger once more nodes joined in
// between than a successor list holds.
//
// A replica whose table names an owner it never hears from takes the
// range back after FailureTimeout (promotion), so a forged claim that got
// past these checks costs a range at most that long. A table loaded with
// entries from the future (poisoned by an older version, or a clock set
// back by more than MaxClockSkew) loses them when the node starts.

// errImplausible marks a claim this node refused because of who sent it.
var errImplausible = errors.New("not a plausible owner")

// clockEpoch is the epoch number of time t: its Unix time in milliseconds.
func clockEpoch(t time.Time) uint64 {
	if ms := t.UnixMilli(); ms > 0 {
		return uint64(ms)
	}
	return 0
}

// epochLimit is the highest epoch number this node takes from others at
// now.
func (m *Manager) epochLimit(now time.Time) uint64 {
	return clockEpoch(now.Add(m.cfg.MaxClockSkew))
}

// newEpochLocked returns the epoch of a claim of r by this node: above the
// table's highest over r and above floor, and not below the clock.
// Callers hold m.mu.
func (m *Manager) newEpochLocked(r Range, floor Epoch, now time.Time) Epoch {
	base := m.table.max(r)
	if base.Less(floor) {
		base = floor
	}
	n := max(base.N+1, clockEpoch(now))
	return Epoch{N: n, Owner: m.self.Addr}
}

// admitClaim reports why the claim c, sent by from, may not change this
// node's state, or nil. replica is true for a replica write (this node
// must lie outside the claim); a handoff or merge into this node's own
// arc may cover it.
func (m *Manager) admitClaim(k knownPeers, from ring.Peer, c Claim, now time.Time, replica bool) error {
	if c.Epoch.Owner != from.Addr {
		return fmt.Errorf("claim %s from %s names another owner: %w", c, from, errImplausible)
	}
	if limit := m.epochLimit(now); c.Epoch.N > limit {
		return fmt.Errorf("claim %s from %s: epoch more than %v ahead of this node's clock: %w",
			c, from, m.cfg.MaxClockSkew, errImplausible)
	}
	return m.plausible(k, from, c.Range, now, replica, true)
}

// admitGiver reports why the handoff or merge req, sent by from, may not
// change this node's state, or nil. Either gives this node state of a
// range its sender held: the sender may be one of this node's successors
// (a joining node gets its arc from the next node, and a stale owner
// returns what it accepted to the nodes before it) or one of the K
// predecessors it replicates (feedsLocked: the node that held the whole
// ring hands its successors their arcs), or otherwise a plausible owner
// of the range (a leaving node hands its arc to its successor). A handoff's epoch must be the sender's and within the clock
// bound; a handoff from a sender this node's view cannot judge is also
// taken when a witness vouched for the sender's claim of the range at
// that epoch (witness.go). ask reports a refused handoff whose sender a
// witness might vouch for: its epoch is in order, the view alone refused.
func (m *Manager) admitGiver(ctx context.Context, from ring.Peer, req *HandoffRequest, now time.Time) (ask bool, err error) {
	if !req.Merge {
		if req.Epoch.Owner != from.Addr {
			return false, fmt.Errorf("handoff of %s from %s at epoch %s names another owner: %w", req.Range, from, req.Epoch, errImplausible)
		}
		if req.Epoch.N > m.epochLimit(now) {
			return false, fmt.Errorf("handoff of %s from %s: epoch %s more than %v ahead of this node's clock: %w",
				req.Range, from, req.Epoch, m.cfg.MaxClockSkew, errImplausible)
		}
	}
	if slices.Contains(m.ring.Successors(), from) {
		return false, nil
	}
	pred := m.ring.Predecessor()
	m.mu.Lock()
	feeds := m.feedsLocked(from, pred, now)
	m.mu.Unlock()
	if feeds {
		return false, nil
	}
	// Anyone else must be where the ring holds it (member.go), and a
	// merge is judged as a handoff is, liveness included: a stranger's
	// merge or final handoff gives this node nothing.
	if ok, known := m.placement(ctx, from, now); known && !ok {
		return false, fmt.Errorf("handoff of %s from %s: %w", req.Range, from, errNotPlaced)
	}
	err = m.plausible(m.knownPeers(), from, req.Range, now, false, true)
	if err == nil || req.Merge {
		return false, err
	}
	m.mu.Lock()
	vouched := m.vouchedLocked(from, req.Range, req.Epoch, now)
	m.mu.Unlock()
	if vouched {
		return false, nil
	}
	return true, err
}

// knownPeers is this node's view of the ring when it judges a message:
// itself, its predecessor, successors and fingers, and which of them are
// suspected dead.
type knownPeers struct {
	peers   []ring.Peer
	suspect map[string]bool
}

// knownPeers takes the ring's view once, for every claim of a message.
// Its order does not matter, so it is a Snapshot: State would sort the
// fingers on every write this node receives.
func (m *Manager) knownPeers() knownPeers {
	st := m.ring.Snapshot()
	peers := make([]ring.Peer, 0, 2+len(st.Successors)+len(st.Fingers))
	k := knownPeers{peers: append(append(append(peers, m.self, st.Predecessor), st.Successors...), st.Fingers...)}
	if len(st.Suspects) > 0 {
		k.suspect = make(map[string]bool, len(st.Suspects))
	}
	for _, p := range st.Suspects {
		k.suspect[p.Addr] = true
	}
	return k
}

// plausible reports why from cannot own r in the view k of the ring, or
// nil (see "Who may claim what"). replica: this node may not lie between
// r's start and from. live: nor may a node heard from within Lease.
func (m *Manager) plausible(k knownPeers, from ring.Peer, r Range, now time.Time, replica, live bool) error {
	if from.ID != r.To && r.Contains(from.ID) {
		return fmt.Errorf("%s lies inside the range %s it claims: %w", from, r, errImplausible)
	}
	// between: the open arc from r's start to the sender; with r.From ==
	// from.ID (the whole ring) everything but the sender.
	between := func(id ring.ID) bool { return id != from.ID && id.Between(r.From, from.ID) }
	// Machines are counted, not positions: the positions of one machine
	// fail together, and its successor takes all of their arcs over.
	seen := map[string]bool{from.Machine(): true}
	m.mu.Lock()
	defer m.mu.Unlock()
	others := 0
	for _, p := range k.peers {
		if p.IsZero() || p.Addr == from.Addr || !between(p.ID) {
			continue
		}
		if p == m.self {
			if replica {
				return fmt.Errorf("range %s from %s covers this node: %w", r, from, errImplausible)
			}
			continue
		}
		if seen[p.Machine()] {
			continue
		}
		seen[p.Machine()] = true
		switch {
		case k.suspect[p.Addr]:
		case live && now.Sub(m.heard[p.Addr].at) < m.cfg.Lease:
			return fmt.Errorf("range %s from %s passes over %s, which is alive: %w", r, from, p, errImplausible)
		default:
			others++
		}
	}
	if others > m.cfg.Replicas {
		return fmt.Errorf("range %s from %s passes over %d known nodes, more than %d: %w",
			r, from, others, m.cfg.Replicas, errImplausible)
	}
	return nil
}

// splitFuture returns the claims among cs whose epoch is within what this
// node takes from others at now, and those beyond it.
func (m *Manager) splitFuture(cs []Claim, now time.Time) (ok, future []Claim) {
	limit := m.epochLimit(now)
	for _, c := range cs {
		if c.Epoch.N > limit {
			future = append(future, c)
		} else {
			ok = append(ok, c)
		}
	}
	return ok, future
}

// dropFuture removes from the table every entry whose epoch is above
// limit, and reports how many it removed.
func (t *epochTable) dropFuture(limit uint64) int {
	var keep segMap
	n := 0
	for _, g := range t.m {
		if g.e.N > limit {
			n++
			continue
		}
		keep = append(keep, g)
	}
	t.m = keep
	return n
}
