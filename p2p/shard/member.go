package shard

import (
	"context"
	"fmt"
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
//   - Its ring predecessor is placed: the ring pings it (CheckPredecessor)
//     and drops it when it dies.
//   - Any other sender is placed by this node's own lookup of the sender's
//     ID: a member at that ID is the ID's owner, so the lookup names it.
//     A lookup that names another peer says the ring has nobody at the
//     sender's place (a stranger, or a node whose join has not reached the
//     peers before it yet: its claims are taken once stabilization does),
//     and the sender's claims, handoffs and merges are all refused. A
//     lookup that fails judges nothing: the other checks decide.
//
// Only a placed sender is "heard from", at the time the ring placed it
// (the ping or the lookup), never at the time of its own messages: the
// wait before promotion (tick.go, acquire) and the liveness part of the
// plausibility check ("Who may claim what") count what the ring says.
// Lookups are cached for Lease/2 per sender, so an honest owner's
// replicas look it up about once per half lease, and a dead owner stops
// being heard within Lease/2 of its last lookup.

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

// placement reports whether this node's ring holds from at its ID, and
// since when it knows (the ping or lookup that said so). known is false
// when the ring could not tell (the lookup failed): the caller then judges
// by its other checks and counts nothing as heard.
func (m *Manager) placement(ctx context.Context, from ring.Peer, now time.Time) (at time.Time, ok, known bool) {
	if from.IsZero() || from.Addr == m.self.Addr {
		return now, false, true
	}
	if pred := m.ring.Predecessor(); pred == from {
		return now, true, true
	}
	ttl := m.cfg.Lease / 2
	m.mu.Lock()
	if p, hit := m.placed[from.Addr]; hit && now.Sub(p.at) < ttl && now.Sub(p.at) >= 0 {
		m.mu.Unlock()
		return p.at, p.ok, true
	}
	m.mu.Unlock()
	owner, _, err := m.ring.Lookup(ctx, from.ID)
	if err != nil {
		m.log.Debug("cannot place sender", "from", from, "err", err)
		return time.Time{}, false, false
	}
	ok = owner == from
	at = m.clock.Now()
	m.mu.Lock()
	if len(m.placed) >= maxPlaced {
		for a, p := range m.placed {
			if at.Sub(p.at) >= ttl {
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
	return at, ok, true
}
