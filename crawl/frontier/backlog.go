package frontier

import "time"

// hotTTL and coldTTL are how long Backlog trusts a count of a host's queue
// in the store that found it hot, or not: a hot host stays hot for a
// while, and a growing queue is noticed soon.
const (
	hotTTL  = 10 * time.Second
	coldTTL = 250 * time.Millisecond
)

// Backlog reports whether at least n tasks of the leased host are queued
// and not handed out: whether the host is hot, in the sense of seed 000
// §5, and worth sharing out. A count that needs the store is reused for a
// while (10s when hot, 250ms when not).
func (l *Lease) Backlog(n int) bool {
	f, q := l.f, l.q
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case len(q.buf) >= n:
		return true
	case !q.more:
		return false
	}
	now := f.now()
	if now.Before(q.hotUntil) {
		return q.hot
	}
	head, err := f.db.QueueHead(q.key, n, takenFilter(q.taken, false))
	if err != nil {
		f.storeErrs++
		return false
	}
	q.hot = len(head) >= n
	if q.hot {
		q.hotUntil = now.Add(hotTTL)
	} else {
		q.hotUntil = now.Add(coldTTL)
	}
	return q.hot
}
