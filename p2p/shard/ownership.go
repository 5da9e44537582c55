package shard

import (
	"sync"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// Ownership is a node's answer to "may I work on this key now?": yes
// while one of its active claims holds the key, its lease is valid (its
// first successor, or when that one withholds a quorum of its replicas,
// acknowledged a heartbeat within Config.Lease, or it is alone on the
// ring: ring.Node.Alone), it is not leaving, and the ring
// agrees. A node cut off from every successor (ring.State.Isolated) is
// not alone: its lease runs out as it does when its successors stop
// answering, and the ring gives it no more than the arc it had. The Manager keeps
// it current; whatever fetches or accepts work asks it first.
//
// It is a value of its own, made before the Manager, because the Manager
// drives the app (its queue is a cache of the claimed ranges) while the
// app's crawler must ask Owns before every request: the crawler is built
// with Owns, the app with the crawler, and the Manager with the app, in
// that order.
type Ownership struct {
	ring *ring.Node
	self ring.Peer

	// mu guards the fields below for Owns. The Manager writes them only
	// while it also holds its own lock, so its code reads them under that
	// lock alone.
	mu         sync.RWMutex
	claims     segMap  // active claims
	domain     spanSet // the points claims cover, computed once per change
	leaseUntil time.Time
	leaving    bool
}

// NewOwnership returns the ownership of ring node r: nothing owned until a
// Manager made with it claims ranges.
func NewOwnership(r *ring.Node) *Ownership {
	return &Ownership{ring: r, self: r.Self()}
}

// Owns reports whether this node may fetch or accept key now: an active
// claim holds it, the lease is valid, and the ring view agrees
// (ring.Node.Owns: with the predecessor unknown, the arc under the last
// known one, or the whole ring for a node alone).
func (o *Ownership) Owns(key uint64) bool {
	now := o.ring.Clock().Now()
	noReplica := o.noSuccessor()
	o.mu.RLock()
	ok := o.claims.covers(key) && o.leaseValid(now, noReplica)
	o.mu.RUnlock()
	return ok && o.ring.Owns(ring.ID(key))
}

// leaseValid reports whether the node, not leaving, holds a lease at now
// (always, alone on the ring with no successor to hold one from); callers
// hold o.mu or the Manager's lock, and ask the ring before taking it.
func (o *Ownership) leaseValid(now time.Time, noSuccessor bool) bool {
	return !o.leaving && (noSuccessor || now.Before(o.leaseUntil))
}

// noSuccessor reports whether the node is alone on the ring: no successor
// to hold a lease from, and none lost either.
func (o *Ownership) noSuccessor() bool { return o.ring.Alone() }
