package shard

import "time"

// aloneLease is what LeaseLeft answers for a node alone on the ring: it
// holds no lease (no successor grants one, none can promote itself), so
// it answers a short while, asked again as it runs out.
const aloneLease = time.Second

// LeaseLeft returns how much longer this node may work on key: zero when
// it may not now (Owns is false), else the time left of its lease. A
// replica promotes itself no sooner than FailureTimeout after it last
// heard from this node, and the lease ran from before that (a heartbeat
// renews it from when it was sent), so at least FailureTimeout − Lease
// passes between the end of what LeaseLeft answers and a replica's
// first fetch: a hot host's helper that stops when this answer runs out,
// counted from when it asked, stops before any replica may start
// (route.HelperLease).
func (o *Ownership) LeaseLeft(key uint64) time.Duration {
	if !o.Owns(key) {
		return 0
	}
	if o.noSuccessor() {
		return aloneLease
	}
	now := o.ring.Clock().Now()
	o.mu.RLock()
	left := o.leaseUntil.Sub(now)
	o.mu.RUnlock()
	return max(left, 0)
}
