package crawl

// Moving key ranges between nodes. The node decides what it owns; the
// crawler offers the hooks: an ownership gate before every request
// (Config.Owns), a callback for every task that reaches its end
// (Config.OnDone), Release to stop work on a range and clear its queue,
// HostSnapshot to carry a host's politeness state and robots.txt to its
// next owner (Snapshots, Release, Restore), Resume to pick up parked hosts
// again, and Fetched to tell whether a URL was already crawled here.

import (
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// HostSnapshot is the politeness state of one host, to hand to a new owner:
// when the host may next be contacted, and the robots.txt this node uses
// for it. MarshalBinary gives the opaque blob a node stores and ships;
// Restore installs it on the receiving crawler.
type HostSnapshot struct {
	// Host is the hostname (lowercase, no port) and Key its host key,
	// urls.HostKey(Host).
	Host string
	Key  uint64
	// NotBefore is when the host may next be contacted: no request to it
	// before this time (zero: no constraint).
	NotBefore time.Time
	// Robots is the raw robots.txt body as fetched (nil if none cached or
	// the answer was not a 2xx, whose body does not matter).
	Robots []byte
	// RobotsStatus is the HTTP status of the robots.txt fetch (0 = none
	// cached; a network failure is not handed over either).
	RobotsStatus int
	// RobotsFetched is when robots.txt was fetched: the receiver trusts it
	// until RobotsFetched plus its own Config.RobotsTTL.
	RobotsFetched time.Time
	// Origin is the scheme://host[:port] the robots.txt belongs to, as RFC
	// 9309 scopes it; "" when RobotsStatus is 0. (An addition to the plan's
	// fields: without it the receiver could not tell an http robots.txt
	// from an https one.)
	Origin string
}

// snapshotVersion1 is the first byte of a marshalled HostSnapshot. Its
// fields are the store's primitive encodings (store.AppendBytes,
// store.AppendTime), read back with a store.Decoder.
//
//	version         byte = 1
//	host            uvarint length, bytes
//	key             8 bytes BE
//	not before      time (presence byte, then varint Unix seconds and uvarint nanoseconds)
//	origin          uvarint length, bytes
//	robots status   uvarint
//	robots fetched  time
//	robots          presence byte, then uvarint length, bytes
const snapshotVersion1 = 1

// maxSnapshotHost bounds the host names accepted (DNS allows 253 bytes).
const maxSnapshotHost = 255

// check reports what makes s unusable, if anything.
func (s *HostSnapshot) check() error {
	switch {
	case s.Host == "" || len(s.Host) > maxSnapshotHost:
		return fmt.Errorf("host %q: empty or longer than %d bytes", urls.Truncate(s.Host, 80), maxSnapshotHost)
	case s.Key != urls.HostKey(s.Host):
		return fmt.Errorf("host %s: key %016x is not its host key %016x", s.Host, s.Key, urls.HostKey(s.Host))
	case s.RobotsStatus < 0 || s.RobotsStatus > 999 || s.RobotsStatus > 0 && s.RobotsStatus < 100:
		return fmt.Errorf("host %s: robots.txt status %d", s.Host, s.RobotsStatus)
	case len(s.Robots) > maxRobotsBytes:
		return fmt.Errorf("host %s: robots.txt of %d bytes, more than %d", s.Host, len(s.Robots), maxRobotsBytes)
	case s.RobotsStatus == 0 && (s.Robots != nil || s.Origin != ""):
		return fmt.Errorf("host %s: robots.txt without a status", s.Host)
	}
	if s.Origin != "" {
		host, err := urls.HostOf(s.Origin)
		if err != nil || host != s.Host || s.Origin != originOf(s.Origin) {
			return fmt.Errorf("host %s: bad robots.txt origin %q", s.Host, urls.Truncate(s.Origin, 80))
		}
	} else if s.RobotsStatus != 0 {
		return fmt.Errorf("host %s: robots.txt without an origin", s.Host)
	}
	return nil
}

// originOf returns the scheme://authority part of an absolute URL.
func originOf(u string) string {
	origin, _ := urls.SplitOrigin(u)
	return origin
}

// MarshalBinary encodes s in a versioned binary form. It fails for a
// snapshot UnmarshalBinary would reject: an empty host, a Key that is not
// urls.HostKey(Host), robots.txt data that does not fit together.
func (s HostSnapshot) MarshalBinary() ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("host snapshot: %w", err)
	}
	b := make([]byte, 0, 64+len(s.Host)+len(s.Origin)+len(s.Robots))
	b = append(b, snapshotVersion1)
	b = store.AppendBytes(b, []byte(s.Host))
	b = binary.BigEndian.AppendUint64(b, s.Key)
	b = store.AppendTime(b, s.NotBefore)
	b = store.AppendBytes(b, []byte(s.Origin))
	b = binary.AppendUvarint(b, uint64(s.RobotsStatus))
	b = store.AppendTime(b, s.RobotsFetched)
	if s.Robots == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = store.AppendBytes(b, s.Robots)
	}
	return b, nil
}

// UnmarshalBinary decodes what MarshalBinary encoded. It rejects an
// unknown version, truncated or trailing bytes, and contents that do not
// fit together (see MarshalBinary), leaving s unchanged then.
func (s *HostSnapshot) UnmarshalBinary(data []byte) error {
	d := store.NewDecoder(data)
	if v := d.Byte(); d.Err() == nil && v != snapshotVersion1 {
		return fmt.Errorf("host snapshot: unknown version %d", v)
	}
	var out HostSnapshot
	out.Host = string(d.Bytes(maxSnapshotHost))
	out.Key = d.Fixed64()
	out.NotBefore = d.Time()
	out.Origin = string(d.Bytes(maxSnapshotHost + len("https://[]:65535")))
	status := d.Uvarint()
	out.RobotsFetched = d.Time()
	switch d.Byte() {
	case 0:
	case 1:
		out.Robots = slices.Clone(d.Bytes(maxRobotsBytes))
		if out.Robots == nil {
			out.Robots = []byte{}
		}
	default:
		d.Fail("bad robots.txt presence byte")
	}
	if err := d.Finish(); err != nil {
		return fmt.Errorf("host snapshot: %w", err)
	}
	if status > 999 {
		return fmt.Errorf("host snapshot: robots.txt status %d", status)
	}
	out.RobotsStatus = int(status)
	if err := out.check(); err != nil {
		return fmt.Errorf("host snapshot: %w", err)
	}
	*s = out
	return nil
}

// owns reports whether Config.Owns lets the crawler contact t's host for t.
func (c *Crawler) owns(t Task) bool {
	if c.cfg.Owns == nil {
		return true
	}
	ringKey, _ := c.keys(t.URL)
	return c.cfg.Owns(ringKey)
}

// park puts a task the node does not own back into the store and parks its
// host, ending the lease.
func (c *Crawler) park(t Task, l *lease) {
	c.requeue(t)
	c.frontier.park(l.host)
	c.finish(l)
}

// done tells Config.OnDone that t reached its end without new metadata.
func (c *Crawler) done(t Task) { c.doneWith(t, nil) }

// doneWith tells Config.OnDone that t reached its end with the metadata
// its outcome stored.
func (c *Crawler) doneWith(t Task, meta *store.URLMeta) {
	if c.cfg.OnDone == nil {
		return
	}
	ringKey, urlHash := c.keys(t.URL)
	c.cfg.OnDone(t, ringKey, urlHash, meta)
}

// Release stops all work on tasks whose ring key satisfies in: no new task
// of them is handed out, and Release waits (bounded by ctx) until none is
// in flight, fetch and processing included. It then deletes their queue
// and schedule entries from the store and the frontier's memory and
// returns the hosts' snapshots (NotBefore = the time the next request
// would have been allowed), for hosts with a NotBefore still ahead or a
// cached robots.txt. In host-key mode "in" is evaluated per host key; in
// URL-key mode per task's ring key (entries scanned and filtered), and the
// snapshots are those of the hosts that had entries released.
//
// in is called with the frontier's lock held: it must be quick and must
// not call the Crawler. Tasks of the range that are enqueued while Release
// runs may survive it (the ownership gate, Config.Owns, keeps them from
// being fetched). When ctx ends first Release returns its error and
// changes nothing. Host and robots.txt state stays in memory (it expires
// on its own), so a range released and taken back keeps its politeness.
func (c *Crawler) Release(ctx context.Context, in func(ringKey uint64) bool) ([]HostSnapshot, error) {
	fc := c.frontier.fence(in)
	defer c.frontier.unfence(fc)
	if err := c.frontier.waitFence(ctx, fc, c.cfg.KeyMode); err != nil {
		return nil, fmt.Errorf("crawl: release: %w", err)
	}
	hosts, err := c.frontier.dropRange(in, c.cfg.KeyMode)
	if err != nil {
		return nil, fmt.Errorf("crawl: release: %w", err)
	}
	want := func(host string) bool { return hosts[host] }
	if c.cfg.KeyMode == urls.KeyHost {
		want = func(host string) bool { return hosts[host] || in(urls.HostKey(host)) }
	}
	return c.snapshots(hosts, want, true), nil
}

// Snapshots returns the current snapshots of hosts whose key satisfies
// in: those the crawler has in memory with a NotBefore still ahead or a
// cached robots.txt. It reads no store.
func (c *Crawler) Snapshots(in func(hostKey uint64) bool) []HostSnapshot {
	hosts := c.frontier.hostsWhere(in)
	return c.snapshots(hosts, func(host string) bool { return in(urls.HostKey(host)) }, false)
}

// snapshots builds the snapshots of hosts, and of the hosts whose robots.txt
// is cached and want accepts, leaving out those with nothing to hand over.
// readStore looks up the durable Retry-After of hosts not in memory.
func (c *Crawler) snapshots(hosts map[string]bool, want func(host string) bool, readStore bool) []HostSnapshot {
	now := c.now()
	robots := c.robots.latest(now, want)
	names := make([]string, 0, len(hosts)+len(robots))
	for h := range hosts {
		names = append(names, h)
	}
	for h := range robots {
		if !hosts[h] {
			names = append(names, h)
		}
	}
	sort.Strings(names)
	notBefore := c.frontier.notBefore(names, readStore)
	var out []HostSnapshot
	for _, host := range names {
		s := HostSnapshot{Host: host, Key: urls.HostKey(host), NotBefore: notBefore[host]}
		if e, ok := robots[host]; ok {
			s.Origin, s.RobotsStatus, s.RobotsFetched = e.origin, e.rules.status, e.rules.fetched
			if e.rules.packed != nil {
				body, err := unpackRobots(e.rules.packed)
				if err != nil {
					c.countError("other") // cannot happen: packed here
					s.Origin, s.RobotsStatus, s.RobotsFetched = "", 0, time.Time{}
				} else {
					s.Robots = body
				}
			}
		}
		if s.RobotsStatus == 0 && !s.NotBefore.After(now) {
			continue // nothing to hand over
		}
		if s.check() != nil {
			continue // an odd host name: not worth shipping
		}
		out = append(out, s)
	}
	return out
}

// Restore installs snapshots from a previous owner: a host's next request
// waits until NotBefore (kept durably, like a Retry-After), and its
// robots.txt is used from the snapshot (respecting Config.RobotsTTL from
// RobotsFetched) instead of fetched again, unless this crawler has a
// robots.txt for the origin fetched at the same time or later. Invalid
// snapshots are skipped and counted as errors of kind "other". Clocks of
// nodes differ: a RobotsFetched ahead of this crawler's clock counts as
// now, and a NotBefore is capped at the longest wait the crawler itself
// would impose (MaxRetryAfter, or the delay after a request if longer).
func (c *Crawler) Restore(hosts []HostSnapshot) {
	now := c.now()
	latest := now.Add(max(c.cfg.MaxRetryAfter, c.gap(c.cfg.MaxCrawlDelay)))
	valid := make([]HostSnapshot, 0, len(hosts))
	for _, s := range hosts {
		if s.check() != nil {
			c.countError("other")
			continue
		}
		if s.RobotsFetched.After(now) {
			s.RobotsFetched = now
		}
		if s.NotBefore.After(latest) {
			s.NotBefore = latest
		}
		valid = append(valid, s)
		if s.RobotsStatus == 0 {
			continue
		}
		r := robotsFromResponse(s.RobotsStatus, s.Robots, c.token, s.RobotsFetched, c.cfg.RobotsTTL, c.robotsRetry)
		r.status, r.fetched = s.RobotsStatus, s.RobotsFetched
		if s.RobotsStatus >= 200 && s.RobotsStatus < 300 {
			r.packed = packRobots(s.Robots)
		}
		if now.Before(r.expires) {
			c.robots.restore(s.Origin, r, now)
		}
	}
	if err := c.frontier.restore(valid, now); err != nil {
		c.countError("store")
	}
}

// Resume brings back the hosts Config.Owns parked whose key satisfies in,
// reloading their queues from the store, and schedules every host with a
// queue in the store that the frontier does not have in memory (one whose
// state could not be read when a task of its fell due, say). In URL-key mode
// every parked host comes back (its entries have many ring keys); Owns
// parks again those that are still not owned, without a request. Its cost
// grows with the number of parked hosts, not of queued ones: in is called
// once per parked host, and the store is not scanned.
func (c *Crawler) Resume(in func(ringKey uint64) bool) error {
	if err := c.frontier.resume(in, c.cfg.KeyMode); err != nil {
		return fmt.Errorf("crawl: resume: %w", err)
	}
	return nil
}

// Fetched reports whether the store has a record of the URL (ring key, URL
// hash) being crawled here: its metadata (written when a fetch completes),
// a page record (written by the node's PageSink) or a dead letter. The
// node fetched it, or gave up on it. A URL dropped without a request
// (robots.txt, budget, trap) leaves no record and is not Fetched. Each
// check is a point lookup in the store.
func (c *Crawler) Fetched(ringKey, urlHash uint64) (bool, error) {
	if _, ok, err := c.db.URLMeta(ringKey, urlHash); err != nil {
		return false, fmt.Errorf("crawl: fetched: %w", err)
	} else if ok {
		return true, nil
	}
	if _, err := c.db.Page(ringKey, urlHash); err == nil {
		return true, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return false, fmt.Errorf("crawl: fetched: %w", err)
	}
	dead, err := c.isDead(ringKey, urlHash)
	if err != nil {
		return false, fmt.Errorf("crawl: fetched: %w", err)
	}
	return dead, nil
}

// isDead reports whether the store holds a dead letter for the URL.
func (c *Crawler) isDead(ringKey, urlHash uint64) (bool, error) {
	_, ok, err := c.db.DeadLetter(ringKey, urlHash)
	if err != nil {
		return false, fmt.Errorf("dead letter: %w", err)
	}
	return ok, nil
}

// park takes a leased host out of the scheduler until Resume or a Push:
// its queue stays in the store, its head is forgotten.
func (f *Frontier) park(host string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.hosts[host]
	if q == nil {
		return
	}
	f.setParkedLocked(q, true)
	q.buf, q.more = nil, true
	f.unheapLocked(q)
}

// unparkLocked brings a parked host back, to read its head from the store.
func (f *Frontier) unparkLocked(q *hostQueue) {
	f.setParkedLocked(q, false)
	q.buf, q.more = nil, true
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

// resume is Crawler.Resume. It reads no store but for the hosts it brings
// into memory: the parked hosts are a set of their own, and the only hosts
// with a queue in the store and none in memory are the orphans (every
// queued host is loaded at start, and a host leaves memory only once it
// has no work).
func (f *Frontier) resume(in func(uint64) bool, mode urls.KeyMode) error {
	match := func(key uint64) bool { return mode != urls.KeyHost || in(key) }
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
		q.more = true
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

// fence starts a Release of the ring keys in: from now on no entry of
// theirs is handed out.
func (f *Frontier) fence(in func(uint64) bool) *fence {
	fc := &fence{in: in}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fences = append(f.fences, fc)
	return fc
}

// unfence ends a Release: hosts held because of a fence are scheduled again
// (those another fence still holds are held again when they come up).
func (f *Frontier) unfence(fc *fence) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fences = slices.DeleteFunc(f.fences, func(x *fence) bool { return x == fc })
	for _, q := range f.hosts {
		if q.held {
			q.held = false
			f.scheduleLocked(q)
		}
	}
	f.broadcastLocked()
}

// waitFence waits until no task fc fences is handed out and no host it
// covers is leased (in URL-key mode: no leased host has an entry of the
// range at its head), or until ctx ends.
func (f *Frontier) waitFence(ctx context.Context, fc *fence, mode urls.KeyMode) error {
	for {
		f.mu.Lock()
		busy := f.busyLocked(fc.in, mode)
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
func (f *Frontier) busyLocked(in func(uint64) bool, mode urls.KeyMode) bool {
	for _, q := range f.hosts {
		for i := range q.taken {
			if in(q.taken[i].RingKey) {
				return true
			}
		}
		if !q.busy {
			continue
		}
		if mode == urls.KeyHost {
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

// dropRange deletes the queue and schedule entries of the ring keys in, and
// returns the hosts concerned: in host-key mode every host of the range
// that has a queue, a schedule entry or a frontier entry; in URL-key mode
// the hosts that lost entries.
func (f *Frontier) dropRange(in func(uint64) bool, mode urls.KeyMode) (map[string]bool, error) {
	hosts := make(map[string]bool)
	// The schedule first: an entry of the range falling due meanwhile
	// would otherwise move into a queue already dropped.
	f.mu.Lock()
	err := f.dropScheduleLocked(in, hosts)
	if mode == urls.KeyHost {
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
		if mode == urls.KeyHost && !in(head.RingKey) {
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
		n, err := f.dropHostRange(h.host, h.key, in, mode)
		if n > 0 || mode == urls.KeyHost {
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
func (f *Frontier) dropHostRange(host string, key uint64, in func(uint64) bool, mode urls.KeyMode) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.hosts[host]
	var taken []store.QueueEntry
	if q != nil {
		taken = q.taken
	}
	n, err := f.db.DropHostQueue(key, func(e *store.QueueEntry) bool {
		return mode != urls.KeyHost && !in(e.RingKey) ||
			slices.ContainsFunc(taken, func(t store.QueueEntry) bool { return t.Seq == e.Seq })
	})
	if counts, cerr := f.db.QueueCounts(); cerr == nil {
		f.counts = counts
	}
	switch {
	case q != nil:
		f.unheapLocked(q)
		q.buf, q.more, q.held = nil, true, false
		if n > 0 {
			f.setParkedLocked(q, false) // what made Owns refuse it may be gone: ask again
		}
		f.scheduleLocked(q)
		f.broadcastLocked()
	case mode != urls.KeyHost || err != nil:
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
// in one write (QueueUpdate.Unschedule), and adds their hosts to hosts.
// The other entries stay as they are, due times and sequence numbers
// included.
func (f *Frontier) dropScheduleLocked(in func(uint64) bool, hosts map[string]bool) error {
	u := &store.QueueUpdate{}
	err := f.db.ScanSchedule(func(e store.QueueEntry) error {
		if in(e.RingKey) {
			u.Unschedule = append(u.Unschedule, e)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("frontier: scan schedule: %w", err)
	}
	if len(u.Unschedule) == 0 {
		return nil
	}
	if err := f.applyLocked(u); err != nil {
		return fmt.Errorf("frontier: drop schedule entries: %w", err)
	}
	for i := range u.Unschedule {
		if host, err := urls.HostOf(u.Unschedule[i].URL); err == nil {
			hosts[host] = true
		}
	}
	return f.refreshDueLocked()
}

// hostsWhere returns the hosts in memory whose host key in holds.
func (f *Frontier) hostsWhere(in func(uint64) bool) map[string]bool {
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

// notBefore returns when each host may next be contacted: its next-allowed
// time or its durable Retry-After, whichever is later. Hosts not in memory
// have no pending delay but a durable one, which readStore looks up.
func (f *Frontier) notBefore(hosts []string, readStore bool) map[string]time.Time {
	out := make(map[string]time.Time, len(hosts))
	var missing []string
	f.mu.Lock()
	for _, host := range hosts {
		q := f.hosts[host]
		if q == nil {
			missing = append(missing, host)
			continue
		}
		t := q.nextAllowed
		if q.state.NotBefore.After(t) {
			t = q.state.NotBefore
		}
		out[host] = t
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

// restore makes each host wait until its snapshot's NotBefore, durably.
func (f *Frontier) restore(snaps []HostSnapshot, now time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	u := &store.QueueUpdate{}
	var dirty []*hostQueue
	for _, s := range snaps {
		if !s.NotBefore.After(now) {
			continue
		}
		q, err := f.hostLocked(s.Host, s.Key)
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

// Adopted is a URL another node fetched, with its metadata after that
// fetch: what a new owner needs to recrawl it on schedule, conditionally.
type Adopted struct {
	Task Task
	Meta store.URLMeta
}

// Adopt takes over URLs a previous owner fetched. Each one's metadata is
// stored unless the local copy is as recent, and, with recrawling on, its
// recrawl is scheduled at the newer copy's NextCrawl, all in one write. A
// zero Meta adopts whatever this node knows of the URL itself.
// Call it on a range with no schedule of its own (after Release, as
// Activate does), or the URL is scheduled twice; the second copy is
// dropped when it comes up (see TakenTwice).
func (c *Crawler) Adopt(adopted []Adopted) error {
	u := &store.QueueUpdate{}
	for _, a := range adopted {
		if _, err := urls.HostOf(a.Task.URL); err != nil {
			continue
		}
		ringKey, urlHash := c.keys(a.Task.URL)
		m := a.Meta
		m.URL = a.Task.URL
		local, ok := c.urlMeta(ringKey, urlHash)
		switch {
		case ok && !local.LastFetch.Before(m.LastFetch):
			m = local
		case m.LastFetch.IsZero():
			continue // never fetched: nothing to adopt
		default:
			u.URLMeta = append(u.URLMeta, store.URLMetaRecord{RingKey: ringKey, URLHash: urlHash, Meta: m})
		}
		if c.cfg.MaxRecrawl <= 0 || m.NextCrawl.IsZero() {
			continue
		}
		e, _, err := c.frontier.entry(Task{URL: a.Task.URL, Depth: a.Task.Depth, Redirects: a.Task.Redirects, Recrawl: true})
		if err != nil {
			continue
		}
		e.Due = m.NextCrawl
		u.Schedule = append(u.Schedule, e)
	}
	if len(u.URLMeta) == 0 && len(u.Schedule) == 0 {
		return nil
	}
	c.frontier.mu.Lock()
	defer c.frontier.mu.Unlock()
	if err := c.frontier.applyLocked(u); err != nil {
		return fmt.Errorf("adopt %d urls: %w", len(adopted), err)
	}
	return nil
}

// noteFreshRobots remembers that host's robots.txt was just fetched.
func (c *Crawler) noteFreshRobots(host string) {
	c.freshMu.Lock()
	defer c.freshMu.Unlock()
	if c.freshRobots == nil {
		c.freshRobots = map[string]bool{}
	}
	c.freshRobots[host] = true
}

// TakeFreshSnapshots returns the snapshots of the hosts whose robots.txt
// was fetched since the last call, and forgets them: what a node sends its
// replicas so that whoever takes a host over after a crash reuses its
// robots.txt (and waits out its politeness clock) instead of asking again.
func (c *Crawler) TakeFreshSnapshots() []HostSnapshot {
	c.freshMu.Lock()
	hosts := c.freshRobots
	c.freshRobots = nil
	c.freshMu.Unlock()
	if len(hosts) == 0 {
		return nil
	}
	return c.snapshots(hosts, func(host string) bool { return hosts[host] }, false)
}
