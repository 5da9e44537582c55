package sim

import (
	"context"
	"encoding/binary"
	"slices"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// task is a discovered link waiting in a position's outbox: the routing
// layer's task, and what the simulated crawler needs to know when it is
// settled.
type task struct {
	rt        route.Task
	id        uint64 // the outbox entry, settled or not (v.unsettled)
	tries     int32
	notBefore time.Duration
}

// newTask returns the task for page p at depth.
func (s *Sim) newTask(p int32, depth int) task {
	h := s.g.host[p]
	return task{rt: route.Task{URL: s.g.url(p), Key: uint64(s.g.hostKey(h)), Depth: depth}}
}

// send puts t in v's outbox as a new entry and returns its id.
func (v *vnode) send(t task) uint64 {
	v.nextID++
	t.id = v.nextID
	v.unsettled[t.id] = struct{}{}
	v.outbox = append(v.outbox, t)
	return t.id
}

// Settled implements route.Links over v's outbox entries.
func (v *vnode) Settled(ids []uint64) bool {
	for _, id := range ids {
		if _, ok := v.unsettled[id]; ok {
			return false
		}
	}
	return true
}

// flushProgress hands v's shard manager the done records of the pages
// whose links are all settled (route.Progress), as a node's progress loop
// does.
func (v *vnode) flushProgress() {
	if recs, since := v.progress.TakeSettled(); len(recs) > 0 {
		if err := v.m.ProgressSince(recs, nil, since); err != nil {
			v.s.progressErrors++
		}
	}
}

// hostQueue is one host's pending pages at its owner, with its politeness
// clock.
type hostQueue struct {
	h         int32
	pending   []int32
	scheduled bool
	// out: a batch of the host is at a helper (delegate); the queue
	// waits for its reply.
	out bool
	// declines counts the batches helpers declined in a row as busier
	// than the owner; at one for each helper slot the owner fetches the
	// next page itself.
	declines int
	// watch: the host's pages are fetched for an owner that neither
	// fetched nor explained them (shard.Watcher), not under a claim.
	watch bool
}

// app is a position's crawler, the shard.App: its queue is a cache of the
// pending records of the ranges the Manager activated, as a node's intake
// keeps it (p2p/node/intake.go).
type app struct {
	v       *vnode
	hosts   map[int32]*hostQueue
	watchQ  map[int32]*hostQueue    // hosts fetched for a predecessor (Watch)
	queued  map[int32]int32         // page -> depth, pages in some host queue
	fetched map[int32]bool          // pages fetched here (a node's page records)
	next    map[int32]time.Duration // host -> earliest next fetch (politeness)
	// outUntil: host -> when a batch out at a helper has surely stopped
	// (delegate.go), for the host state a range carries when it leaves.
	outUntil map[int32]time.Duration
}

var _ shard.App = (*app)(nil)

func newApp(v *vnode) *app {
	return &app{
		v:       v,
		hosts:   map[int32]*hostQueue{},
		watchQ:  map[int32]*hostQueue{},
		queued:  map[int32]int32{},
		fetched: map[int32]bool{},
		next:    map[int32]time.Duration{},

		outUntil: map[int32]time.Duration{},
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
	for h, u := range a.outUntil {
		if r.Contains(g.hostKey(h)) && u > a.next[h] {
			// A batch of h is out: the next owner waits for its helper.
			a.next[h] = u
		}
	}
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

var _ shard.RerouteApp = (*app)(nil)

// Rerouted implements shard.RerouteApp: a done record from a peer that
// held the range (a late done mark, or those of a range given up) takes
// its page out of the queue, as a node's intake marks it seen. Host
// states are not simulated.
func (a *app) Rerouted(ctx context.Context, recs []shard.Record, hosts []shard.HostState) {
	for _, r := range recs {
		if r.Done {
			p := int32(r.Hash)
			delete(a.queued, p)
			a.fetched[p] = true
		}
	}
}

// Reroute implements shard.App: pending records of a range the Manager
// gave up without a handoff go to their owners through the outbox, as
// links found on a page do (with no page waiting for them).
func (a *app) Reroute(ctx context.Context, recs []shard.Record) error {
	v := a.v
	for _, r := range recs {
		v.send(v.s.newTask(int32(r.Hash), r.Depth))
	}
	v.s.rerouted += int64(len(recs))
	v.s.scheduleRoute(v, 0)
	return nil
}

var _ shard.Watcher = (*app)(nil)

// Watch implements shard.Watcher: the pages go to a queue of their host's
// own, fetched under the host's politeness without a claim; a dishonest
// position watches nothing.
func (a *app) Watch(ctx context.Context, owner string, recs []shard.Record) {
	if a.v.phys.dishonest {
		return
	}
	for _, r := range recs {
		p := int32(r.Hash)
		if _, ok := a.queued[p]; ok || a.fetched[p] {
			continue
		}
		h := a.v.s.g.host[p]
		q := a.watchQ[h]
		if q == nil {
			q = &hostQueue{h: h, watch: true}
			a.watchQ[h] = q
		}
		a.queued[p] = int32(r.Depth)
		q.pending = append(q.pending, p)
		a.schedule(q)
	}
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
	if a.v.phys.dishonest {
		// Acknowledged (the owner accepted it, its replicas hold it) and
		// dropped.
		a.v.s.droppedByDishonest++
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
	if q.scheduled || q.out || len(q.pending) == 0 {
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
		if q.watch {
			delete(a.watchQ, q.h)
		} else {
			delete(a.hosts, q.h)
		}
		return
	}
	s := v.s
	key := s.g.hostKey(q.h)
	if !q.watch && !v.own.Owns(uint64(key)) {
		q.scheduled = true
		s.w.after(notOwnedRetry, func() { a.fetchFrom(q) })
		return
	}
	if a.delegate(q) {
		return
	}
	p := q.pending[0]
	q.pending = q.pending[1:]
	depth := a.queued[p]
	delete(a.queued, p)
	s.act = actCrawl
	start := s.w.elapsed()
	s.w.charge += s.cfg.FetchTime/10 + time.Duration(s.rng.Int64N(int64(s.cfg.FetchTime*9/10)+1))
	s.hostFetch(q.h, start, s.w.elapsed())
	s.fetched(p, v)
	a.fetched[p] = true
	a.next[q.h] = s.w.elapsed() + s.cfg.Delay
	links := s.g.links(p)
	ids := make([]uint64, len(links))
	for i, l := range links {
		ids[i] = v.send(s.newTask(l, int(depth)+1))
	}
	rec := shard.Record{Key: uint64(key), Hash: uint64(p), URL: s.g.url(p), Depth: int(depth), Done: true}
	if q.watch {
		s.watchFetches++
		if err := v.m.WatchDone(s.ctx, []shard.Record{rec}); err != nil {
			s.progressErrors++
		}
		if len(links) > 0 {
			s.scheduleRoute(v, 0)
		}
		a.schedule(q)
		return
	}
	v.progress.Finished(rec, ids)
	if len(links) == 0 {
		v.flushProgress()
	} else {
		s.scheduleRoute(v, 0)
	}
	a.schedule(q)
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

// routeOnce delivers every ready task of v's outbox through v's router
// (route.Router, the code a peer runs): Plan looks each key's owner up
// (or takes it from the router's 5 s cache) and groups the tasks by
// owner. Keys are looked up in parallel, as a node's router would: the
// event is charged the slowest lookup, not their sum. Each batch reaches
// its owner as an event of its own, when its lookup has ended: run inside
// this event, the owner would judge it at this event's clock, ahead of
// its own heartbeats, and find its lease run out.
func (s *Sim) routeOnce(v *vnode) {
	if len(v.outbox) == 0 {
		return
	}
	now := s.w.elapsed()
	var ready, later []task
	for _, t := range v.outbox {
		if t.notBefore > now {
			later = append(later, t)
		} else {
			ready = append(ready, t)
		}
	}
	v.outbox = later
	if len(ready) == 0 {
		return
	}
	tasks := make([]route.Task, len(ready))
	for i, t := range ready {
		tasks[i] = t.rt
	}
	waiting := byURL(ready)
	v.look.base, v.look.slowest, v.look.parallel = s.w.charge, s.w.charge, true
	batches, failed := v.router.Plan(s.ctx, tasks)
	v.look.parallel = false
	s.w.charge = v.look.slowest
	s.retry(v, waiting.take(failed.Undelivered))
	for _, b := range batches {
		sent := waiting.take(b.Tasks)
		s.w.at(s.w.elapsed(), func() {
			s.act = actCrawl
			s.settleBatch(v, b, sent, v.router.Deliver(s.ctx, b, false))
		})
	}
}

// tasksByURL finds the outbox tasks behind routed ones: those of one URL
// are told apart only by the page they were found on, and any of them
// stands for another.
type tasksByURL map[string][]task

func byURL(ts []task) tasksByURL {
	m := make(tasksByURL, len(ts))
	for _, t := range ts {
		m[t.rt.URL] = append(m[t.rt.URL], t)
	}
	return m
}

// take returns (and forgets) one outbox task for each routed task.
func (m tasksByURL) take(rts []route.Task) []task {
	out := make([]task, 0, len(rts))
	for _, rt := range rts {
		q := m[rt.URL]
		if len(q) == 0 {
			continue // cannot happen: every routed task came from the outbox
		}
		out = append(out, q[0])
		m[rt.URL] = q[1:]
	}
	return out
}

// settleBatch applies the delivery of batch b to v: the tasks handed back are
// retried, the others are settled with their pages.
func (s *Sim) settleBatch(v *vnode, b route.Batch, sent []task, d route.Delivery) {
	if b.To == v.peer { // remote owners' answers are counted by taskTransport
		s.refusedNotOwned += int64(len(d.Undelivered))
	}
	s.dupTasks += int64(d.Duplicates)
	s.rejectedTasks += int64(len(d.Rejected))
	back := byURL(sent)
	retry := back.take(d.Undelivered)
	s.retry(v, retry)
	if v.app == nil { // v has left: its pages are the next owner's
		return
	}
	for _, ts := range back {
		for _, t := range ts {
			delete(v.unsettled, t.id)
		}
	}
	v.flushProgress()
}

// retry puts tasks back in v's outbox with the routing layer's backoff,
// unless v is gone (its outbox died with it).
func (s *Sim) retry(v *vnode, ts []task) {
	if !v.alive || len(ts) == 0 {
		return
	}
	cfg := v.router.Config()
	for _, t := range ts {
		t.tries++
		t.notBefore = s.w.elapsed() + cfg.Backoff(int(t.tries), s.rng.Int64N)
		v.outbox = append(v.outbox, t)
	}
	s.scheduleRoute(v, routeInterval)
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
