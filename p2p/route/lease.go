package route

import (
	"errors"
	"fmt"
	"time"
)

// A helper's lease (issue 28). A helper fetches a hot host's batch on its
// owner's authority, and that authority ends with the owner's own lease on
// the host's key (shard.Ownership.LeaseLeft): a replica promotes itself
// no sooner than FailureTimeout after it last heard from the owner, at
// least FailureTimeout − Lease after the owner's lease ends, and then
// fetches the host at once. So a helper fetches only within the owner's
// lease: it asks the owner how long it still holds the key (Helper.Lease),
// counts the answer from when it asked (the owner answered later, so the
// helper's end is never after the owner's, without synchronised clocks),
// asks again before that runs out, and stops when it does. An owner that
// crashed, or lost the key, answers nothing or zero, and its helpers stop
// at the latest when its lease ends: no two machines fetch the host closer
// than FailureTimeout − Lease (1.5 s at the defaults with many positions),
// which is what the owner's own last request already had.
//
// Before this, a helper stopped only when its own lookup of the host's key
// (cached OwnerCacheTTL, 5 s) named another holder: in a simulated churn
// run (300 machines x V=16, 1% a minute) 21 of 26,424 consecutive fetches
// of a host were closer than the 1 s delay, the closest 211 ms apart, a
// helper's and the promoted replica's.

// ErrNoLease: the owner did not confirm that it holds the host's key
// (it answered no lease left, or did not answer before the lease the helper
// had ran out); the batch stops.
var ErrNoLease = errors.New("route: the owner holds no lease on the key")

// errLeaseRefused: the owner answered that it holds no lease (it lost
// the key); wraps ErrNoLease.
var errLeaseRefused = fmt.Errorf("owner answered none: %w", ErrNoLease)

// MaxLeaseLeft bounds a lease an owner reports: a longer answer counts as
// MaxLeaseLeft (an owner is believed about its own lease, but not for
// longer than a few shard leases).
const MaxLeaseLeft = 30 * time.Second

// HelperLease is how long a helper may go on fetching one batch: until the
// owner's lease ends as the owner last reported it, counted from when the
// helper asked. The zero value allows nothing.
type HelperLease struct {
	end  time.Time
	last time.Duration // the last answer, clamped
}

// Renew records the owner's answer left to a question asked at asked:
// the lease then runs to asked+left (clamped to MaxLeaseLeft) if that is
// later than it ran. A zero or negative answer leaves it as it was.
func (l *HelperLease) Renew(asked time.Time, left time.Duration) {
	if left <= 0 {
		return
	}
	left = min(left, MaxLeaseLeft)
	l.last = left
	if end := asked.Add(left); end.After(l.end) {
		l.end = end
	}
}

// RenewBefore is how much of the lease is left when the helper should ask
// again: three quarters of the owner's last answer, at least least. So a
// question has most of a lease to be answered, on a slow network too,
// before the batch must stop.
func (l HelperLease) RenewBefore(least time.Duration) time.Duration {
	return max(least, l.last*3/4)
}

// Until returns when the lease ends.
func (l HelperLease) Until() time.Time { return l.end }

// Allows reports whether work from now lasting d ends within the lease.
func (l HelperLease) Allows(now time.Time, d time.Duration) bool {
	return !now.Add(d).After(l.end)
}

// Due reports whether less than before is left at now: time to ask the
// owner again.
func (l HelperLease) Due(now time.Time, before time.Duration) bool {
	return l.end.Sub(now) < before
}
