package shard

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// Liveness and place come from the ring.
//
// A claim, handoff or merge says who its sender is (authenticated) and
// where it sits (its ring ID); it does not prove that the ring holds the
// sender there. A stranger whose ID falls just after a host's key could
// claim the host's key without ever joining, and every write it sent would
// have counted as a sign of life that kept replicas from promoting. So a
// receiver places the sender by its own ring:
//
//   - A peer in its own ring tables (predecessor, successors, fingers)
//     and not suspected is placed: the ring learnt it from members and
//     checks it (CheckPredecessor pings the predecessor, stabilize the
//     successors), and drops it when it dies.
//   - Any other sender is placed by this node's own lookup of the sender's
//     ID: a member at that ID is the ID's owner, so the lookup names it.
//     A lookup that names another peer says the ring has nobody at the
//     sender's place (a stranger, or a node whose join has not reached the
//     peers before it yet: its claims are taken once stabilization does),
//     and the sender's claims, handoffs and merges are all refused. A
//     lookup that fails judges nothing: the other checks decide.
//
// Only a placed sender is "heard from" (what the wait before promotion in
// tick.go, acquire, and the liveness part of the plausibility check, "Who
// may claim what", count): a message makes its sender heard only if the
// ring placed the sender within the last Lease, so no sender's messages
// alone keep its replicas from promoting its ranges. A lookup that placed
// the sender is cached for Lease, so an honest owner's replicas look it up
// at most once a lease (its heartbeats arrive five times as often); one
// that did not, for Lease/4 only, so a node whose join had not settled is
// taken soon after it has.

// errNotPlaced marks a message whose sender this node's ring does not hold
// where the sender sits.
var errNotPlaced = fmt.Errorf("sender not in the ring at its ID: %w", errImplausible)

// maxPlaced bounds the lookup cache; a full cache forgets its expired
// entries, and then everything.
const maxPlaced = 1024

// placed is one cached lookup of a sender's ID.
type placed struct {
	at time.Time // when the lookup answered
	ok bool      // the lookup named the sender
}

// placement reports whether this node's ring holds from at its ID (ok).
// known is false when the ring could not tell (the lookup failed): the
// caller then judges by its other checks and counts nothing as heard.
func (m *Manager) placement(ctx context.Context, from ring.Peer, now time.Time) (ok, known bool) {
	if from.IsZero() {
		return false, true
	}
	if from == m.self || m.inView(from) {
		return true, true
	}
	// A sender found in place is believed for a Lease (stretched with
	// Config.Positions, as its heartbeats are), one found out of place
	// for a quarter of one.
	ttl := m.cfg.Lease
	okTTL := ttl * m.cfg.stretch()
	m.mu.Lock()
	if p, hit := m.placed[from.Addr]; hit && now.Sub(p.at) >= 0 && (now.Sub(p.at) < okTTL && p.ok || now.Sub(p.at) < ttl/4) {
		m.mu.Unlock()
		return p.ok, true
	}
	m.mu.Unlock()
	owner, _, err := m.ring.Lookup(ctx, from.ID)
	if err != nil {
		m.log.Debug("cannot place sender", "from", from, "err", err)
		return false, false
	}
	ok = owner == from
	at := m.clock.Now()
	m.mu.Lock()
	if len(m.placed) >= maxPlaced {
		for a, p := range m.placed {
			if at.Sub(p.at) >= okTTL {
				delete(m.placed, a)
			}
		}
		if len(m.placed) >= maxPlaced {
			clear(m.placed)
		}
	}
	m.placed[from.Addr] = placed{at: at, ok: ok}
	if !ok {
		m.stats.Unplaced++
	}
	m.mu.Unlock()
	if !ok {
		m.log.Debug("sender not in the ring at its ID", "from", from, "owner", owner)
	}
	return ok, true
}

// inView reports whether p is in this node's own ring tables (predecessor,
// successors, fingers) and not suspected: the ring learnt it from members
// (stabilize, notify, finger lookups) and checks it (pings, stabilize), so
// it needs no lookup.
func (m *Manager) inView(p ring.Peer) bool {
	st := m.ring.Snapshot()
	if slices.Contains(st.Suspects, p) {
		return false
	}
	return st.Predecessor == p || slices.Contains(st.Successors, p) || slices.Contains(st.Fingers, p)
}
