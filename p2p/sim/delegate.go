package sim

import (
	"context"
	"slices"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// Hot-host delegation in the simulator: a position's crawler hands a
// batch of a host's pages to a helper machine through the routing layer's
// delegation (route.Delegator: one batch of a host out at a time, the
// helper slots' holders as candidates, the choice by load), and the
// helper admits it by the routing layer's rule (route.HelperAdmission
// with the slot rule: its own router's lookup of the host's key, its own
// positions' hold of a slot). The batch and its reply travel as events a
// link's one-way latency apart, lost when either end is down or cut off;
// the helper's fetches count as its machine's work and send their links
// through its own outbox and router. A machine's load is its work so far
// plus the pages of the batches it holds (load).

const (
	// delegBatchCap is the most pages of a batch whatever its budget,
	// as a node's crawler caps it (crawl.Config.DelegateBatch's default);
	// batchPages gives the size a node would send.
	delegBatchCap = 16
	// settlePoll and settleMax: how often, and how long at most, a
	// helper waits for its batch's links to settle before it replies
	// (route.Helper's defaults).
	settlePoll = 25 * time.Millisecond
	settleMax  = 5 * time.Second
	// replyMargin is how long before the batch's deadline the helper
	// stops fetching.
	replyMargin = time.Second
	// leaseRenew is the least of the owner's lease left when a helper
	// asks again (route.Helper's default; HelperLease.RenewBefore).
	leaseRenew = time.Second
)

// noDelegation turns delegation off, for the tests' comparison.
var noDelegation bool

// delegation is the simulator's delegation state and counts (Sim.deleg).
type delegation struct {
	byPhys  map[*physNode]*route.Delegator[struct{}, struct{}]
	pending map[*physNode]int // pages in batches a machine holds as helper
	// running is each machine's batches in progress as helper, answered
	// at once when it leaves (helpersLeave).
	running map[*physNode][]*helpRun
	// lastEnd is when the last fetch of each host ended, for the
	// politeness check: the least time between the end of one fetch of a
	// host and the start of the next, by whichever machine.
	lastEnd  map[int32]time.Duration
	minGap   time.Duration
	gaps     int64
	underGap int64
	// Batches sent, refused by the helper, declined as not worth it
	// (route.WorthSize: not one page), taken in part (trimmed), lost
	// (no reply before the owner's deadline), cut short; pages fetched
	// by helpers.
	batches, refused, busy, trimmed, lost, cut, pages int64
	msgs, bytes                                       int64
	// Lease questions' messages; batches refused for want of a lease,
	// cut short because the owner's lease would run out.
	leaseMsgs, noLease, leaseCut int64
}

// delegation returns the run's delegation state.
func (s *Sim) delegation() *delegation {
	if s.deleg == nil {
		s.deleg = &delegation{
			byPhys:  map[*physNode]*route.Delegator[struct{}, struct{}]{},
			pending: map[*physNode]int{},
			running: map[*physNode][]*helpRun{},
			lastEnd: map[int32]time.Duration{},
			minGap:  -1,
		}
	}
	return s.deleg
}

// helpRun is a batch in progress at its helper: the pages fetched so far
// and when the last fetch ended; replied once the answer is sent.
type helpRun struct {
	h       *vnode
	b       *batch
	fetched []int32
	lastEnd time.Duration
	replied bool
}

// helpersLeave answers, with what they fetched, the batches machine p
// holds as helper as it leaves, as a node's Close answers its running
// batches before its crawler stops: their links went with its last
// routing pass, and the owners do not fetch those pages again.
func (s *Sim) helpersLeave(p *physNode) {
	d := s.delegation()
	runs := d.running[p]
	delete(d.running, p)
	for _, r := range runs {
		if !r.replied {
			r.replied = true
			s.reply(r.h, r.b, r.fetched, r.lastEnd)
		}
	}
}

// helpDone ends run r: it is no longer answered when its machine leaves.
func (s *Sim) helpDone(r *helpRun) {
	r.replied = true
	d := s.delegation()
	d.running[r.h.phys] = slices.DeleteFunc(d.running[r.h.phys], func(x *helpRun) bool { return x == r })
}

// hostFetch records a fetch of host h from start to end (politeness).
func (s *Sim) hostFetch(h int32, start, end time.Duration) {
	d := s.delegation()
	if last, ok := d.lastEnd[h]; ok {
		gap := start - last
		// The first gap sets the least; a later one, even negative (two
		// fetches at once), lowers it.
		if d.gaps == 0 || gap < d.minGap {
			d.minGap = gap
		}
		d.gaps++
		if gap < s.cfg.Delay {
			d.underGap++
		}
	}
	d.lastEnd[h] = max(d.lastEnd[h], end)
}

// load is machine ph's work as it reports it: pages fetched and pages of
// the batches it holds as a helper. Its positions' queues do not count: a
// simulated machine fetches any number of hosts at once, so a queue costs
// it no time, and the pages in it are not its work yet: their owner hands
// most of a long queue out. Counted, they let helpers rise to a level the
// owner itself never reached, and a machine's fetches only grow (a
// node's backlog drains instead: crawlLoad).
func (s *Sim) load(ph *physNode) int {
	return int(ph.work) + s.delegation().pending[ph]
}

// delegator returns machine ph's delegator: the helper slots' holders
// found by the router of the position that asks (cur).
func (s *Sim) delegator(ph *physNode) *route.Delegator[struct{}, struct{}] {
	d := s.delegation()
	if dl := d.byPhys[ph]; dl != nil {
		return dl
	}
	self := ph.vnodes[0].peer
	dl := route.NewDelegator[struct{}, struct{}](nil, 1, func(uint64) (ring.Peer, []ring.Peer) { return self, nil })
	dl.UseSlots(route.DefaultConfig().HelperSlots, func(ctx context.Context, key uint64) (ring.Peer, error) {
		return s.delegCur.router.Owner(ctx, key)
	})
	d.byPhys[ph] = dl
	return dl
}

// batch is a delegated batch in flight.
type batch struct {
	owner  *vnode
	q      *hostQueue
	key    uint64
	pages  []int32
	depths []int32
	helper ring.Peer
	done   bool
	// asked marks the pages before which the helper asked the owner's
	// lease, so a page asks once.
	asked []bool
	// ownerLoad is the owner's load when it sent the batch; declined,
	// the helper found itself busier.
	ownerLoad int
	declined  bool
	// since is how long before the batch was sent the host's last fetch
	// ended as the owner knows it (route.HelpRequest.SinceLast).
	since time.Duration
}

// delegate hands the next pages of host q to a helper when the routing
// layer's choice says so, and reports whether it did (the host's queue
// then waits for the batch's reply).
func (a *app) delegate(q *hostQueue) bool {
	v, s := a.v, a.v.s
	if noDelegation || q.watch || len(q.pending) == 0 || s.cfg.Delay <= 0 {
		return false
	}
	if q.declines >= route.DefaultConfig().HelperSlots {
		// A helper for each slot declined in a row: the owner fetches
		// a page before it asks again, so the host does not wait on
		// declines.
		q.declines = 0
		return false
	}
	key := uint64(s.g.hostKey(q.h))
	dl := s.delegator(v.phys)
	if dl.Begin(key) != nil {
		return false
	}
	s.delegCur = v
	s.act = actCrawl
	// The largest batch the choice allows: each batch costs the host a
	// lease question at the helper and its transits, so a long queue
	// goes in few batches; a smaller one when the larger would leave the
	// helper busier than the owner.
	// The slots' holders are looked up in parallel, as the router's
	// lookups of one pass are (routeOnce): the event is charged the
	// slowest.
	v.look.base, v.look.slowest, v.look.parallel = s.w.charge, s.w.charge, true
	all := dl.Candidates(s.ctx, key)
	v.look.parallel = false
	s.w.charge = v.look.slowest
	own := s.load(v.phys)
	// As a node's Send sizes it: a single queued page moves alone (links
	// trickle in, and a host whose pages are found one at a time never
	// has two queued), a longer queue in batches of at least
	// route.MinBatch.
	most := min(s.batchPages(), len(q.pending))
	cands, size, ok := dl.ChooseSize(all, own, most, min(route.MinBatch, most))
	var to *vnode
	for _, c := range cands {
		if h := s.byAddr[c.Addr]; h != nil && h.alive && h.phys != v.phys {
			to = h
			break
		}
	}
	if !ok || to == nil {
		dl.End(key)
		return false
	}
	// fetchFrom runs once the host's turn has come (a.next), so this is
	// the whole gap; the gap less what is left of it all the same.
	since := max(s.cfg.Delay-max(a.next[q.h]-s.w.elapsed(), 0), 0)
	b := &batch{owner: v, q: q, key: key, helper: to.peer, ownerLoad: own, since: since}
	for len(b.pages) < size && len(q.pending) > 0 {
		p := q.pending[0]
		q.pending = q.pending[1:]
		d, queued := a.queued[p]
		if !queued {
			continue
		}
		delete(a.queued, p)
		b.pages = append(b.pages, p)
		b.depths = append(b.depths, d)
	}
	q.out = true
	// Were the range to leave this position while the batch is out, its
	// next owner must not fetch the host before the helper has stopped:
	// the helper's check of the owner (a lookup cached at most
	// OwnerCacheTTL) and one more fetch and gap (Deactivate).
	a.outUntil[q.h] = s.w.elapsed() + route.DefaultConfig().OwnerCacheTTL + s.cfg.FetchTime + s.cfg.Delay
	d := s.delegation()
	d.batches++
	d.pending[to.phys] += len(b.pages)
	d.msgs++
	d.bytes += int64(frameBytes + 8 + len(b.pages)*40)
	s.traffic[actCrawl].msgs++
	s.traffic[actCrawl].bytes += int64(frameBytes + 8 + len(b.pages)*40)
	sent := s.w.elapsed()
	// The owner's deadline: every page a gap and a fetch apart after one
	// gap, the links' settling, both transits.
	wait := time.Duration(len(b.pages)+1)*(s.cfg.Delay+s.cfg.FetchTime) + settleMax + 2*time.Second
	s.w.at(sent+s.oneWay(v, to.peer.Addr), func() { s.helpBatch(to, b, sent+wait) })
	s.w.at(sent+wait+time.Second, func() {
		if !b.done {
			d.lost++
			s.batchBack(b, nil, 0, -1)
		}
	})
	return true
}

// batchPages is the most pages of a batch, sized as a node's crawler sizes
// one (crawl.Crawler.delegate): no request later than the budget after the
// batch arrives, the budget being the owner's shard lease (a batch must
// not outlive the owner's right to the host), so at most 1 + lease/gap
// pages, and at most delegBatchCap: 4 at the defaults with many positions
// (a 3.5 s lease, a 1 s gap), 3 with one.
func (s *Sim) batchPages() int {
	return max(min(delegBatchCap, 1+int(s.cfg.Shard.Lease/s.cfg.Delay)), 1)
}

// helpAdmission is helper h's admission, as a node builds it.
func (s *Sim) helpAdmission(h *vnode) route.HelperAdmission {
	return route.HelperAdmission{View: simHelperView{h}, Machines: route.DefaultConfig().Helpers, Slots: simSlots{h}, SlotCount: route.DefaultConfig().HelperSlots}
}

// helpBatch is the batch's arrival at helper h: admission, the rest of the
// gap (route.HelpRequest.FirstRequest), then the pages a gap apart while
// the owner still holds the host.
func (s *Sim) helpBatch(h *vnode, b *batch, deadline time.Duration) {
	d := s.delegation()
	if !h.alive || s.rnet.Reachable(s.ctx, b.owner.peer.Addr, h.peer.Addr) != nil {
		d.pending[h.phys] -= len(b.pages)
		return // lost: the owner's deadline brings the pages back
	}
	s.act = actCrawl
	adm := s.helpAdmission(h)
	arrived := s.w.elapsed()
	// The helper takes the part of the batch that leaves it no busier
	// than the owner (route.WorthSize), the rest left unstarted: the
	// owner takes those pages back with the reply. As a node's helper
	// (serveBatch), it weighs its load before admission: a batch it
	// declines costs no lookup.
	take := route.WorthSize(b.ownerLoad, s.load(h.phys)-len(b.pages), len(b.pages))
	if take == 0 {
		d.busy++
		b.declined = true
		d.pending[h.phys] -= len(b.pages)
		s.reply(h, b, nil, 0)
		return
	}
	if take < len(b.pages) {
		d.trimmed++
		d.pending[h.phys] -= len(b.pages) - take
	}
	// The owner's lease is asked at the batch's arrival, beside the
	// admission's lookup (route.Helper.Serve): the batch waits for the
	// slower of the two.
	charge := s.w.charge
	owner, err := adm.Admit(s.ctx, b.owner.peer.Machine(), b.key)
	admitted := s.w.elapsed()
	if err != nil {
		d.refused++
		s.countLeaseQuestion() // asked all the same
		d.pending[h.phys] -= take
		s.reply(h, b, nil, 0)
		return
	}
	s.w.charge = charge
	run := &helpRun{h: h, b: b}
	d.running[h.phys] = append(d.running[h.phys], run)
	var ids []uint64
	// The owner's lease as the helper last heard it (route.HelperLease):
	// asked at arrival, again before a fetch when less than
	// leaseRenew is left; no fetch may end after it.
	lease := &route.HelperLease{}
	var step func(i int)
	step = func(i int) {
		if !h.alive {
			d.pending[h.phys] -= take - i
			return
		}
		s.act = actCrawl
		now := clock{&s.w}.Now()
		if i < take && lease.Due(now, lease.RenewBefore(leaseRenew)) && !b.asked[i] {
			b.asked[i] = true
			s.askLease(h, b, lease, func(revoked bool) {
				if revoked {
					lease = &route.HelperLease{} // the owner holds the key no more: stop
				}
				step(i)
			})
			return
		}
		// The owner watch runs beside the fetches (route.Helper.watch):
		// its lookups are counted, not charged to the fetch.
		charge := s.w.charge
		still := adm.Still(s.ctx, b.key, owner)
		s.w.charge = charge
		took := s.cfg.FetchTime/10 + time.Duration(s.rng.Int64N(int64(s.cfg.FetchTime*9/10)+1))
		if i == take || s.w.elapsed()+s.cfg.FetchTime > deadline-replyMargin || !still || !lease.Allows(now, took) {
			if i < take {
				d.cut++
				if !lease.Allows(now, took) {
					d.leaseCut++
				}
			}
			d.pending[h.phys] -= take - i
			s.settleThenReply(run, b, ids, s.w.elapsed()+settleMax)
			return
		}
		p := b.pages[i]
		start := s.w.elapsed()
		s.w.charge += took
		run.lastEnd = s.w.elapsed()
		s.hostFetch(b.q.h, start, run.lastEnd)
		s.fetched(p, h)
		d.pages++
		d.pending[h.phys]--
		run.fetched = append(run.fetched, p)
		for _, l := range s.g.links(p) {
			ids = append(ids, h.send(s.newTask(l, int(b.depths[i])+1)))
		}
		if len(s.g.links(p)) > 0 {
			s.scheduleRoute(h, 0)
		}
		if i+1 == take {
			step(i + 1) // the last: settle the links now
			return
		}
		s.w.after(s.cfg.Delay, func() { step(i + 1) })
	}
	// The owner's lease and the admission first, then the rest of the
	// gap counted from the batch's arrival (route.Helper.Serve), the
	// lookup and the lease's round trip inside it.
	first := route.HelpRequest{Gap: s.cfg.Delay, SinceLast: b.since, Received: epoch0.Add(arrived)}.FirstRequest().Sub(epoch0)
	b.asked = make([]bool, take)
	s.askLease(h, b, lease, func(revoked bool) {
		// Judged when the answer comes; a lease that has run short by
		// the time the admission's lookup ends is asked again before the
		// first fetch (step), as a node's helper does.
		at := max(admitted, s.w.elapsed())
		if revoked || !lease.Allows(clock{&s.w}.Now(), 0) {
			s.w.at(at, func() {
				d.refused++
				d.noLease++
				d.pending[h.phys] -= take
				s.helpDone(run)
				s.reply(h, b, nil, 0)
			})
			return
		}
		s.w.at(max(first, at), func() { step(0) })
	})
}

// countLeaseQuestion counts a lease question and its answer.
func (s *Sim) countLeaseQuestion() {
	d := s.delegation()
	for range 2 {
		d.msgs++
		d.leaseMsgs++
		d.bytes += frameBytes + 16
		s.traffic[actCrawl].msgs++
		s.traffic[actCrawl].bytes += frameBytes + 16
	}
}

// askLease is helper h's question to batch b's owner (route.Helper.Lease):
// it reaches the owner a link's latency later, which answers with its lease
// on the key (shard.Ownership.LeaseLeft), and the answer comes back as far;
// either is lost when an end is down or cut off. The lease is renewed
// counted from when h asked; then runs once, when the answer arrives
// (revoked: the owner answered it holds no lease) or, without one, when
// the lease h held runs out (at once if none is left).
func (s *Sim) askLease(h *vnode, b *batch, lease *route.HelperLease, then func(revoked bool)) {
	asked := clock{&s.w}.Now()
	answered := false
	fired := false
	fire := func(revoked bool) {
		if !fired {
			fired = true
			then(revoked)
		}
	}
	s.countLeaseQuestion()
	o := b.owner
	there := s.oneWay(h, o.peer.Addr)
	s.w.after(there, func() {
		if !o.alive || s.rnet.Reachable(s.ctx, h.peer.Addr, o.peer.Addr) != nil {
			return
		}
		left := o.own.LeaseLeft(b.key)
		s.w.after(s.oneWay(o, h.peer.Addr), func() {
			if fired || !h.alive || s.rnet.Reachable(s.ctx, o.peer.Addr, h.peer.Addr) != nil {
				return
			}
			answered = true
			lease.Renew(asked, left)
			fire(left <= 0)
		})
	})
	wait := lease.Until().Sub(asked)
	if wait <= 0 {
		// No lease left: as long as an answer may take, two latencies
		// and a margin, then give up.
		wait = 2*there + time.Second
	}
	s.w.after(wait, func() {
		if !answered {
			fire(false)
		}
	})
}

// settleThenReply waits until the links found on the batch's pages are
// settled with their owners, at most until limit, then replies.
func (s *Sim) settleThenReply(r *helpRun, b *batch, ids []uint64, limit time.Duration) {
	if !r.h.alive || r.replied {
		return
	}
	if r.h.Settled(ids) || s.w.elapsed() >= limit {
		s.helpDone(r)
		s.reply(r.h, b, r.fetched, r.lastEnd)
		return
	}
	s.w.after(settlePoll, func() { s.settleThenReply(r, b, ids, limit) })
}

// reply sends the batch's outcome and h's load back to the owner.
func (s *Sim) reply(h *vnode, b *batch, fetched []int32, lastEnd time.Duration) {
	d := s.delegation()
	d.msgs++
	d.bytes += int64(frameBytes + 16 + len(fetched)*8)
	s.traffic[actCrawl].msgs++
	s.traffic[actCrawl].bytes += int64(frameBytes + 16 + len(fetched)*8)
	load := s.load(h.phys)
	s.w.after(s.oneWay(h, b.owner.peer.Addr), func() {
		if b.done || s.rnet.Reachable(s.ctx, h.peer.Addr, b.owner.peer.Addr) != nil {
			return
		}
		s.batchBack(b, fetched, lastEnd, load)
	})
}

// batchBack ends batch b at its owner: the fetched pages are done (their
// links settled by the helper), the others wait in the host's queue again,
// the host's next fetch is a gap after the helper's last. A negative load
// means no reply came.
func (s *Sim) batchBack(b *batch, fetched []int32, lastEnd time.Duration, load int) {
	b.done = true
	v := b.owner
	dl := s.delegator(v.phys)
	dl.End(b.key)
	if load >= 0 {
		dl.Report(b.helper, load)
	}
	a, q := v.app, b.q
	q.out = false
	// A declined batch is offered again at once, to the helper the
	// loads heard now put first, as a node's Send asks the host's next
	// slot holder; only when one for each slot declined in a row does
	// the owner fetch a page itself.
	if b.declined {
		q.declines++
	} else {
		q.declines = 0
	}
	if !v.alive || a == nil {
		return
	}
	done := make(map[int32]bool, len(fetched))
	g := s.g
	for _, p := range fetched {
		done[p] = true
		a.fetched[p] = true
		rec := shard.Record{Key: b.key, Hash: uint64(p), URL: g.url(p), Depth: int(b.depths[indexOf(b.pages, p)]), Done: true}
		v.progress.Finished(rec, nil)
	}
	if len(fetched) > 0 {
		v.flushProgress()
	}
	// The pages not fetched wait again, as any queued page: fetched when
	// the position holds the host, dropped with the queue if the range
	// goes (its next owner holds them as pending records).
	delete(a.outUntil, q.h)
	for i, p := range b.pages {
		if done[p] || a.fetched[p] {
			continue
		}
		if _, ok := a.queued[p]; ok {
			continue
		}
		if a.hosts[q.h] == q {
			a.queued[p] = b.depths[i]
			q.pending = append([]int32{p}, q.pending...)
		} else {
			a.enqueue(p, b.depths[i])
		}
	}
	next := s.w.elapsed() + s.cfg.Delay
	if load >= 0 {
		next = lastEnd + s.cfg.Delay
	}
	a.next[q.h] = max(a.next[q.h], next)
	a.schedule(q)
}

func indexOf(ps []int32, p int32) int {
	for i, x := range ps {
		if x == p {
			return i
		}
	}
	return 0
}

// simHelperView is a helper machine's ring and epoch tables
// (route.HelperView): every position's predecessor.
type simHelperView struct{ h *vnode }

// Machine implements route.HelperView.
func (v simHelperView) Machine() string { return v.h.peer.Machine() }

// Predecessors implements route.HelperView.
func (v simHelperView) Predecessors() [][]ring.Peer {
	out := make([][]ring.Peer, 0, len(v.h.phys.vnodes))
	for _, p := range v.h.phys.vnodes {
		if p.joined {
			out = append(out, []ring.Peer{p.rn.Predecessor()})
		}
	}
	return out
}

// Vouch implements route.HelperView.
func (v simHelperView) Vouch(key uint64, owner string) bool {
	for _, p := range v.h.phys.vnodes {
		if p.joined && p.m.Vouch(key, owner) {
			return true
		}
	}
	return false
}

// simSlots is a helper machine's slot view (route.SlotView): its own
// router's lookups, its positions' ring arcs.
type simSlots struct{ h *vnode }

// Owner implements route.SlotView.
func (v simSlots) Owner(ctx context.Context, key uint64) (ring.Peer, error) {
	return v.h.router.Owner(ctx, key)
}

// Holds implements route.SlotView.
func (v simSlots) Holds(k uint64) bool {
	for _, p := range v.h.phys.vnodes {
		if p.joined && p.alive && p.rn.Owns(ring.ID(k)) {
			return true
		}
	}
	return false
}
