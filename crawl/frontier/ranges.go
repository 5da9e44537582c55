package frontier

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// Moving key ranges between nodes. The node decides what it owns; the
// frontier offers the operations: a Fence that stops the work of a range
// and drops its queue, Resume for the hosts the ownership gate parked,
// HostsWhere and NotBefore for the politeness state a range carries to
// its next owner, and Restore to install it there.

// parkLocked takes a leased host out of the scheduler until Resume or a
// Push: its queue stays in the store, its head is forgotten.
func (f *Frontier) parkLocked(q *hostQueue) {
	f.setParkedLocked(q, true)
	q.forgetHead()
	f.unheapLocked(q)
}

// unparkLocked brings a parked host back, to read its head from the store.
func (f *Frontier) unparkLocked(q *hostQueue) {
	f.setParkedLocked(q, false)
	q.forgetHead()
	f.scheduleLocked(q)
}

// setParkedLocked sets or clears q.parked, keeping the set of parked hosts
// in step with it.
func (f *Frontier) setParkedLocked(q *hostQueue, parked bool) {
	q.parked = parked
	if parked {
		f.parked[q.host] = q
	} else {
		delete(f.parked, q.host)
	}
}

// unheapLocked takes q out of the heap it is in, if any.
func (f *Frontier) unheapLocked(q *hostQueue) {
	if q.heap != nil {
		heap.Remove(q.heap, q.index)
		q.heap = nil
	}
}

// Resume brings back the parked hosts (see Lease.Park) whose key satisfies
// in, reloading their queues from the store, and schedules every host with
// a queue in the store that the frontier does not have in memory (one
// whose state could not be read when a task of its fell due, say). In
// URL-key mode every parked host comes back (its entries have many ring
// keys); the gate parks again those that are still not owned, without a
// request.
//
// It reads no store but for the hosts it brings into memory, and its cost
// grows with the number of parked hosts, not of queued ones: in is called
// once per parked host. The parked hosts are a set of their own, and the
// only hosts with a queue in the store and none in memory are the orphans
// (every queued host is loaded at start, and a host leaves memory only
// once it has no work).
func (f *Frontier) Resume(in func(ringKey uint64) bool) error {
	match := func(key uint64) bool { return f.keyMode != urls.KeyHost || in(key) }
	f.mu.Lock()
	defer f.mu.Unlock()
	changed := false
	for _, q := range f.parked {
		if match(q.key) {
			f.unparkLocked(q)
			changed = true
		}
	}
	var errs []error
	for host, key := range f.orphans {
		if !match(key) {
			continue
		}
		q, err := f.hostLocked(host, key)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		delete(f.orphans, host)
		// In memory again (or meanwhile): its head must come from the
		// store, which has entries the memory never saw.
		q.more, q.readKnown = true, false
		f.scheduleLocked(q)
		changed = true
	}
	if changed {
		f.broadcastLocked()
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("frontier: %w", err)
	}
	return nil
}

// Fence holds back a key range being released: while it is up, no task
// whose ring key it holds is handed out, by Next or Lease.Next. Wait then
// waits for the range's work in flight, Drop deletes its queue and
// schedule entries, and Lift ends the release.
type Fence struct {
	f  *Frontier
	in func(ringKey uint64) bool
}

// Fence starts the release of the ring keys in: from now on no entry of
// theirs is handed out. in is called with the frontier's lock held: it must
// be quick and must not call the frontier. The caller must Lift the fence.
func (f *Frontier) Fence(in func(ringKey uint64) bool) *Fence {
	fc := &Fence{f: f, in: in}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fences = append(f.fences, fc)
	return fc
}

// Lift ends the release: hosts held because of the fence are scheduled
// again (those another fence still holds are held again when they come
// up).
func (fc *Fence) Lift() {
	f := fc.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fences = slices.DeleteFunc(f.fences, func(x *Fence) bool { return x == fc })
	for _, q := range f.hosts {
		if q.held {
			q.held = false
			f.scheduleLocked(q)
		}
	}
	f.broadcastLocked()
}

// Wait waits until no task of the range is handed out and not completed,
// fetch and processing included, and no host it covers is leased (in
// URL-key mode: no leased host has an entry of the range at its head), or
// until ctx ends.
func (fc *Fence) Wait(ctx context.Context) error {
	f := fc.f
	for {
		f.mu.Lock()
		busy := f.busyLocked(fc.in)
		ch := f.fenceCh
		f.mu.Unlock()
		if !busy {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for tasks in flight: %w", ctx.Err())
		case <-ch:
		}
	}
}

// busyLocked reports whether work of the ring keys in is in flight: a task
// handed out and not completed, or a lease on one of their hosts (whose
// next-allowed time is not final until the lease ends).
func (f *Frontier) busyLocked(in func(uint64) bool) bool {
	for _, q := range f.hosts {
		for i := range q.taken {
			if in(q.taken[i].RingKey) {
				return true
			}
		}
		if !q.busy {
			continue
		}
		if f.keyMode == urls.KeyHost {
			if in(q.key) {
				return true
			}
			continue
		}
		for i := range q.buf {
			if in(q.buf[i].RingKey) {
				return true
			}
		}
	}
	return false
}

// Drop deletes the queue and schedule entries of the fenced range, and
// returns the hosts concerned: in host-key mode every host of the range
// that has a queue, a schedule entry or a frontier entry; in URL-key mode
// the hosts that lost entries. Tasks of the range pushed meanwhile may
// survive it. Host state stays in memory (it expires on its own), so a
// range released and taken back keeps its politeness.
func (fc *Fence) Drop() (map[string]bool, error) {
	f, in := fc.f, fc.in
	hosts := make(map[string]bool)
	// The schedule first: an entry of the range falling due meanwhile
	// would otherwise move into a queue already dropped.
	f.mu.Lock()
	err := f.dropScheduleLocked(in, hosts)
	if f.keyMode == urls.KeyHost {
		for host, q := range f.hosts {
			if in(q.key) {
				hosts[host] = true
			}
		}
	}
	f.mu.Unlock()
	if err != nil {
		return hosts, err
	}
	type queued struct {
		host string
		key  uint64
	}
	var list []queued
	err = f.db.QueueHosts(func(head store.QueueEntry) error {
		if f.keyMode == urls.KeyHost && !in(head.RingKey) {
			return nil
		}
		if host, err := urls.HostOf(head.URL); err == nil {
			list = append(list, queued{host, head.HostKey})
		}
		return nil
	})
	if err != nil {
		return hosts, fmt.Errorf("frontier: list queued hosts: %w", err)
	}
	for _, h := range list {
		n, err := f.dropHostRange(h.host, h.key, in)
		if n > 0 || f.keyMode == urls.KeyHost {
			hosts[h.host] = true
		}
		if err != nil {
			return hosts, err
		}
	}
	return hosts, nil
}

// dropHostRange deletes the queue entries of one host whose ring key in
// holds (all of them in host-key mode), except any handed out, and makes
// the host read its head from the store again.
func (f *Frontier) dropHostRange(host string, key uint64, in func(uint64) bool) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.hosts[host]
	var taken []store.QueueEntry
	if q != nil {
		taken = q.taken
	}
	byHost := f.keyMode == urls.KeyHost
	n, err := f.db.DropHostQueue(key, func(e *store.QueueEntry) bool {
		return !byHost && !in(e.RingKey) ||
			slices.ContainsFunc(taken, func(t store.QueueEntry) bool { return t.Seq == e.Seq })
	})
	if counts, cerr := f.db.QueueCounts(); cerr == nil {
		f.counts = counts
	}
	switch {
	case q != nil:
		f.unheapLocked(q)
		q.forgetHead()
		q.held = false
		if n > 0 {
			f.setParkedLocked(q, false) // what made the gate refuse it may be gone: ask again
		}
		f.scheduleLocked(q)
		f.broadcastLocked()
	case !byHost || err != nil:
		// Queued in the store, not in memory: entries out of the range
		// (or not dropped) remain, for Resume to bring back.
		f.orphans[host] = key
	default:
		delete(f.orphans, host) // nothing left
	}
	if err != nil {
		return n, fmt.Errorf("frontier: drop queue of host %s: %w", host, err)
	}
	return n, nil
}

// dropScheduleLocked deletes the schedule entries whose ring key in holds,
// in one write, and adds their hosts to hosts. The other entries stay as
// they are, due times and sequence numbers included. The entries are
// deleted as read (QueueUpdate.UnscheduleKnown, no read each): the
// frontier is the only one to change the schedule, and it holds its lock
// from the scan to the write.
func (f *Frontier) dropScheduleLocked(in func(uint64) bool, hosts map[string]bool) error {
	u := &store.QueueUpdate{}
	err := f.db.ScanSchedule(func(e store.QueueEntry) error {
		if in(e.RingKey) {
			u.UnscheduleKnown = append(u.UnscheduleKnown, e)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("frontier: scan schedule: %w", err)
	}
	if len(u.UnscheduleKnown) == 0 {
		return nil
	}
	if err := f.applyLocked(u); err != nil {
		return fmt.Errorf("frontier: drop schedule entries: %w", err)
	}
	for i := range u.UnscheduleKnown {
		if host, err := urls.HostOf(u.UnscheduleKnown[i].URL); err == nil {
			hosts[host] = true
		}
	}
	return f.refreshDueLocked()
}

// HostsWhere returns the hosts in memory whose host key in holds.
func (f *Frontier) HostsWhere(in func(hostKey uint64) bool) map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]bool)
	for host, q := range f.hosts {
		if in(q.key) {
			out[host] = true
		}
	}
	return out
}

// NotBefore returns when each host may next be contacted: its next-allowed
// time or its durable Retry-After, whichever is later. Hosts not in memory
// have no pending delay but a durable one, which readStore looks up; hosts
// with neither are left out.
func (f *Frontier) NotBefore(hosts []string, readStore bool) map[string]time.Time {
	out := make(map[string]time.Time, len(hosts))
	var missing []string
	f.mu.Lock()
	for _, host := range hosts {
		q := f.hosts[host]
		if q == nil {
			missing = append(missing, host)
			continue
		}
		out[host] = latest(q.nextAllowed, q.state.NotBefore)
	}
	f.mu.Unlock()
	if readStore {
		for _, host := range missing {
			if st, ok, err := f.db.Host(urls.HostKey(host)); err == nil && ok {
				out[host] = st.NotBefore
			}
		}
	}
	return out
}

// HostNotBefore is a host that must not be contacted before a time: what
// a previous owner hands over with the host.
type HostNotBefore struct {
	Host      string
	NotBefore time.Time
}

// Restore makes each host wait until its NotBefore, durably, like a
// Retry-After; times already past are ignored.
func (f *Frontier) Restore(hosts []HostNotBefore) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	var errs []error
	u := &store.QueueUpdate{}
	var dirty []*hostQueue
	for _, s := range hosts {
		if !s.NotBefore.After(now) {
			continue
		}
		q, err := f.hostLocked(s.Host, urls.HostKey(s.Host))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if s.NotBefore.After(q.nextAllowed) {
			q.nextAllowed = s.NotBefore
			switch q.heap {
			case &f.waiting:
				heap.Fix(&f.waiting, q.index)
			case &f.ready:
				f.unheapLocked(q)
				f.scheduleLocked(q)
			}
		}
		if s.NotBefore.After(q.state.NotBefore) {
			q.state.NotBefore = s.NotBefore
			u.Hosts = append(u.Hosts, q.state)
			dirty = append(dirty, q)
		}
	}
	if len(u.Hosts) > 0 {
		if err := f.applyLocked(u); err != nil {
			for _, q := range dirty {
				q.stateDirty = true // written with the host's next completion
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
