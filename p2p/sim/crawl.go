package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// task is a discovered link on its way to its owner.
type task struct {
	page, from int32 // from is -1 for a seed
	depth      int32
	tries      int32
	notBefore  time.Duration
}

// hostQueue is one host's pending pages at its owner, with its politeness
// clock.
type hostQueue struct {
	h         int32
	pending   []int32
	scheduled bool
}

// pageWait is a fetched page whose links are still on their way.
type pageWait struct{ links, depth int32 }

// app is a position's crawler, the shard.App: its queue is a cache of the
// pending records of the ranges the Manager activated, as a node's intake
// keeps it (p2p/node/intake.go).
type app struct {
	v       *vnode
	hosts   map[int32]*hostQueue
	queued  map[int32]int32         // page -> depth, pages in some host queue
	fetched map[int32]bool          // pages fetched here (a node's page records)
	waiting map[int32]pageWait      // fetched page -> its links not yet settled
	next    map[int32]time.Duration // host -> earliest next fetch (politeness)
}

var _ shard.App = (*app)(nil)

func newApp(v *vnode) *app {
	return &app{
		v:       v,
		hosts:   map[int32]*hostQueue{},
		queued:  map[int32]int32{},
		fetched: map[int32]bool{},
		waiting: map[int32]pageWait{},
		next:    map[int32]time.Duration{},
	}
}

// Activate implements shard.App: drop the queue over r, then queue every
// pending record of r not fetched here, and take over the host states
// that travelled with the range.
func (a *app) Activate(ctx context.Context, r shard.Range) error {
	a.drop(r)
	err := a.v.st.ScanHosts(r, func(h shard.HostState) error {
		if len(h.Data) == 8 {
			host := a.v.s.hostIndex[h.Host]
			t := time.Duration(binary.BigEndian.Uint64(h.Data))
			if t > a.next[host] {
				a.next[host] = t
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return a.v.st.ScanRecords(r, func(rec shard.Record) error {
		if !rec.Done {
			a.enqueue(int32(rec.Hash), int32(rec.Depth))
		}
		return nil
	})
}

// Deactivate implements shard.App: no fetch of r after it returns (the
// simulated fetches take no time in between), its queue dropped, its
// hosts' politeness clocks saved to travel with the range.
func (a *app) Deactivate(ctx context.Context, r shard.Range) error {
	a.drop(r)
	g := a.v.s.g
	var save []shard.HostState
	for h, t := range a.next {
		if r.Contains(g.hostKey(h)) {
			var b [8]byte
			binary.BigEndian.PutUint64(b[:], uint64(t))
			save = append(save, shard.HostState{Key: uint64(g.hostKey(h)), Host: g.hostNames[h], Data: b[:]})
		}
	}
	if len(save) == 0 {
		return nil
	}
	slices.SortFunc(save, func(x, y shard.HostState) int {
		switch {
		case x.Key != y.Key:
			return cmpU64(x.Key, y.Key)
		case x.Host < y.Host:
			return -1
		case x.Host > y.Host:
			return 1
		}
		return 0
	})
	return a.v.st.PutHosts(save)
}

// Merged implements shard.App: pending records that arrived inside an
// active range are queued unless fetched here.
func (a *app) Merged(ctx context.Context, recs []shard.Record) {
	for _, r := range recs {
		if !r.Done {
			a.enqueue(int32(r.Hash), int32(r.Depth))
		}
	}
}

// Reroute implements shard.App: pending records of a range the Manager
// gave up without a handoff go to their owners through the outbox, as
// links found on a page do (with no page waiting for them).
func (a *app) Reroute(ctx context.Context, recs []shard.Record) error {
	v := a.v
	for _, r := range recs {
		v.outbox = append(v.outbox, task{page: int32(r.Hash), from: -1, depth: int32(r.Depth)})
	}
	v.s.rerouted += int64(len(recs))
	v.s.scheduleRoute(v, 0)
	return nil
}

// drop removes the queue entries of r's hosts.
func (a *app) drop(r shard.Range) {
	g := a.v.s.g
	if g == nil {
		return
	}
	for h, q := range a.hosts {
		if !r.Contains(g.hostKey(h)) {
			continue
		}
		for _, p := range q.pending {
			delete(a.queued, p)
		}
		q.pending = nil
	}
}

// enqueue queues page p (depth d) unless queued or fetched here, and makes
// sure its host's next fetch is scheduled.
func (a *app) enqueue(p, d int32) {
	if _, ok := a.queued[p]; ok || a.fetched[p] {
		return
	}
	s := a.v.s
	h := s.g.host[p]
	q := a.hosts[h]
	if q == nil {
		q = &hostQueue{h: h}
		a.hosts[h] = q
	}
	a.queued[p] = d
	q.pending = append(q.pending, p)
	a.schedule(q)
}

func (a *app) schedule(q *hostQueue) {
	if q.scheduled || len(q.pending) == 0 {
		return
	}
	q.scheduled = true
	s := a.v.s
	s.w.at(max(s.w.elapsed(), a.next[q.h]), func() { a.fetchFrom(q) })
}

// notOwnedRetry is how long a host waits when its owner's lease or claim
// lapsed with pages queued (the queue is dropped if the range goes).
const notOwnedRetry = 500 * time.Millisecond

// fetchFrom fetches the next page of host q, if this position may
// (shard.Ownership.Owns), and schedules the host's next fetch a
// politeness gap after this one ends.
func (a *app) fetchFrom(q *hostQueue) {
	v := a.v
	q.scheduled = false
	if !v.alive || v.app != a {
		return
	}
	for len(q.pending) > 0 {
		if _, ok := a.queued[q.pending[0]]; ok {
			break
		}
		q.pending = q.pending[1:]
	}
	if len(q.pending) == 0 {
		delete(a.hosts, q.h)
		return
	}
	s := v.s
	key := s.g.hostKey(q.h)
	if !v.own.Owns(uint64(key)) {
		q.scheduled = true
		s.w.after(notOwnedRetry, func() { a.fetchFrom(q) })
		return
	}
	p := q.pending[0]
	q.pending = q.pending[1:]
	depth := a.queued[p]
	delete(a.queued, p)
	s.act = actCrawl
	s.w.charge += s.cfg.FetchTime/10 + time.Duration(s.rng.Int64N(int64(s.cfg.FetchTime*9/10)+1))
	s.fetched(p, v)
	a.fetched[p] = true
	a.next[q.h] = s.w.elapsed() + s.cfg.Delay
	links := s.g.links(p)
	if len(links) == 0 {
		a.done(p, depth)
	} else {
		a.waiting[p] = pageWait{int32(len(links)), depth}
		for _, l := range links {
			v.outbox = append(v.outbox, task{page: l, from: p, depth: depth + 1})
		}
		s.scheduleRoute(v, 0)
	}
	a.schedule(q)
}

// done reports page p fetched, its links settled: the Done mark goes to
// storage now and to the replicas with the next heartbeat.
func (a *app) done(p, depth int32) {
	s := a.v.s
	rec := shard.Record{Key: uint64(s.g.hostKey(s.g.host[p])), Hash: uint64(p), URL: s.g.url(p), Depth: int(depth), Done: true}
	if err := a.v.m.Progress([]shard.Record{rec}, nil); err != nil {
		s.progressErrors++
	}
}

// settled notes that one link of page from reached its owner.
func (a *app) settled(from int32) {
	if from < 0 {
		return
	}
	w, ok := a.waiting[from]
	if !ok {
		return
	}
	if w.links > 1 {
		w.links--
		a.waiting[from] = w
		return
	}
	delete(a.waiting, from)
	a.done(from, w.depth)
}

// routeInterval is how often a router with work retries.
const routeInterval = 100 * time.Millisecond

// scheduleRoute makes sure v's router runs d from now.
func (s *Sim) scheduleRoute(v *vnode, d time.Duration) {
	if v.routing {
		return
	}
	v.routing = true
	s.w.after(d, func() {
		v.routing = false
		if !v.alive {
			return
		}
		s.act = actCrawl
		s.routeOnce(v)
		if len(v.outbox) > 0 {
			next := v.outbox[0].notBefore
			for _, t := range v.outbox {
				next = min(next, t.notBefore)
			}
			s.scheduleRoute(v, max(routeInterval, next-s.w.elapsed()))
		}
	})
}

// routeOnce delivers every ready task of v's outbox: grouped by key, each
// key's owner looked up (or taken from the 5 s cache) and sent its tasks.
// Keys are routed in parallel, as a node's router does: the event is
// charged the slowest key's lookup, not their sum. Each batch reaches
// its owner as an event of its own, when its lookup has ended: run
// inside this event, the owner would judge it at this event's clock,
// ahead of its own heartbeats, and find its lease run out.
func (s *Sim) routeOnce(v *vnode) {
	if len(v.outbox) == 0 {
		return
	}
	now := s.w.elapsed()
	var keys []ring.ID
	groups := map[ring.ID][]task{}
	var later []task
	for _, t := range v.outbox {
		if t.notBefore > now {
			later = append(later, t)
			continue
		}
		k := s.g.hostKey(s.g.host[t.page])
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], t)
	}
	v.outbox = later
	base := s.w.charge
	slowest := base
	for _, k := range keys {
		s.w.charge = base
		ts := groups[k]
		owner, found := s.ownerFor(v, k)
		if !found {
			s.retry(v, ts)
		} else {
			s.w.at(s.w.elapsed(), func() {
				s.act = actCrawl
				if !s.deliver(v, owner, k, ts) {
					if v.ownerSeen != nil {
						delete(v.ownerSeen, k)
					}
					s.retry(v, ts)
				}
			})
		}
		slowest = max(slowest, s.w.charge)
	}
	s.w.charge = slowest
}

// retry puts tasks back in v's outbox with exponential backoff and
// jitter, unless v is gone (its outbox died with it).
func (s *Sim) retry(v *vnode, ts []task) {
	if !v.alive {
		return
	}
	for _, t := range ts {
		t.tries++
		back := min(30*time.Second, 500*time.Millisecond<<min(t.tries, 6))
		t.notBefore = s.w.elapsed() + back/2 + time.Duration(s.rng.Int64N(int64(back)))
		v.outbox = append(v.outbox, t)
	}
	s.scheduleRoute(v, routeInterval)
}

// ownerFor returns the owner of key as v's router sees it.
func (s *Sim) ownerFor(v *vnode, key ring.ID) (ring.Peer, bool) {
	now := s.w.elapsed()
	if c, ok := v.ownerSeen[key]; ok && c.until > now {
		return c.owner, true
	}
	owner, ok := s.lookup(v, key)
	if ok {
		v.ownerSeen[key] = cachedOwner{owner, s.w.elapsed() + ownerCacheTTL}
	}
	return owner, ok
}

// errGone is the delivery error for a position that left or crashed.
var errGone = errors.New("sim: peer gone")

// taskTimeout is what a failed task delivery costs the sender.
const taskTimeout = 5 * time.Second

// deliver sends one key's tasks from v to owner over the network and
// settles those the owner took (new or already seen). It reports whether
// the owner took them.
func (s *Sim) deliver(v *vnode, owner ring.Peer, key ring.ID, ts []task) bool {
	var took bool
	req := 0
	for _, t := range ts {
		req += len(s.g.url(t.page)) + 8
	}
	call := func() {
		o := s.byAddr[owner.Addr]
		if o == nil || !o.alive {
			return
		}
		took = o.intake(key, ts)
	}
	var err error
	if owner.Addr == v.peer.Addr {
		call()
	} else {
		err = s.rnet.Deliver(s.ctx, v.peer.Addr, owner.Addr, call)
		if err == nil && s.byAddr[owner.Addr] == nil {
			err = errGone
		}
		s.account(v, owner.Addr, req, 8*len(ts), err, taskTimeout)
	}
	if err != nil || !took {
		return false
	}
	if v.app != nil { // nil once v has left: its pages are the next owner's
		for _, t := range ts {
			v.app.settled(t.from)
		}
	}
	return true
}

// intake is the owner's side of a task batch for one key: refused unless
// this position owns the key (a claim under a valid lease); the pages not
// in its shard records are accepted (stored and replicated to the K
// successors before the answer, shard.Manager.Accept) and queued.
func (o *vnode) intake(key ring.ID, ts []task) bool {
	s := o.s
	if !o.own.Owns(uint64(key)) {
		s.refusedNotOwned++
		return false
	}
	var recs []shard.Record
	for _, t := range ts {
		if _, ok := o.st.Record(uint64(key), uint64(t.page)); ok {
			s.dupTasks++
			continue
		}
		if slices.ContainsFunc(recs, func(r shard.Record) bool { return r.Hash == uint64(t.page) }) {
			s.dupTasks++
			continue
		}
		recs = append(recs, shard.Record{Key: uint64(key), Hash: uint64(t.page), URL: s.g.url(t.page), Depth: int(t.depth)})
	}
	if len(recs) == 0 {
		return true
	}
	if err := o.m.Accept(s.ctx, recs); err != nil {
		if errors.Is(err, shard.ErrStale) {
			s.refusedStale++
		} else {
			s.refusedOther++
		}
		return false
	}
	for _, r := range recs {
		s.accepted[r.Hash] = true
		o.app.enqueue(int32(r.Hash), int32(r.Depth))
	}
	return true
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
