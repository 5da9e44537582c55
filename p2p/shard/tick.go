package shard

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// view is what the ring says this node is responsible for right now.
type view struct {
	// known is false when the predecessor is unknown but the node is not
	// alone (it has successors, or it is isolated: ring.State.Isolated):
	// then claims are kept and nothing is acquired or released.
	known bool
	// alone: no predecessor and no successor but self, none ever lost.
	alone bool
	r     Range   // (pred, self], or the whole ring when alone
	spans spanSet // r as linear intervals
	// succs are the successors in replica order (replicaOrder); next is
	// the ring's first successor but self, whichever machine it is on:
	// the previous owner of this node's arc.
	succs []ring.Peer
	next  ring.Peer
}

func (m *Manager) currentView() view {
	pred, succs, isolated := m.ring.Neighbourhood()
	var v view
	v.succs = m.replicaOrderOf(succs)
	for _, p := range succs {
		if p != m.self {
			v.next = p
			break
		}
	}
	switch {
	case !pred.IsZero() && pred != m.self:
		v.known, v.r = true, Range{From: pred.ID, To: m.self.ID}
	case len(v.succs) == 0 && !isolated:
		v.known, v.alone, v.r = true, true, Range{From: m.self.ID, To: m.self.ID}
	}
	if v.known {
		v.spans = spansOf(v.r)
	}
	return v
}

// sameSpans reports whether a and b are the same span set, not merely
// equal ones (as sameList for peer lists).
func sameSpans(a, b spanSet) bool {
	return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0]
}

// sameList reports whether a and b are the same list, not merely equal
// ones: the same first element in memory and the same length. Lists the
// ring (and replicaOrderOf) replace whole and never change in place are
// the same exactly when this says so.
func sameList(a, b []ring.Peer) bool {
	return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0]
}

// replicaOrderOf returns replicaOrder of the ring's successor list succs,
// computed again only when the ring replaced its list (ring.Node
// replaces the list whole, so the same first element and length mean the
// same list). The result is shared: callers read it only. Every Tick and
// every write asks for it; building it every time was 13% of a
// simulation's CPU at 16 positions a machine.
func (m *Manager) replicaOrderOf(succs []ring.Peer) []ring.Peer {
	if len(succs) == 0 {
		return nil
	}
	m.orderMu.Lock()
	defer m.orderMu.Unlock()
	if !sameList(m.orderOf, succs) {
		m.orderOf = succs
		m.order = replicaOrder(m.self, succs)
	}
	return m.order
}

// replicaOrder returns the successors that may hold this node's replicas,
// nearest first: one position of each other machine (ring.Peer.Machine),
// so that a machine that fails with all its positions leaves K copies of
// each of its arcs; or, when every successor the list names is on this
// node's machine (a swarm of one machine, or a list too short to reach
// another), the successors but self.
func replicaOrder(self ring.Peer, succs []ring.Peer) []ring.Peer {
	var out, same []ring.Peer
	machines := map[string]bool{self.Machine(): true}
	for _, p := range succs {
		switch mc := p.Machine(); {
		case p == self:
		case mc == self.Machine():
			same = append(same, p)
		case !machines[mc]:
			machines[mc] = true
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		return same
	}
	return out
}

// Tick runs one maintenance step: shed claims the ring moved away, hand
// them off, acquire unclaimed parts of this node's arc, heartbeat the
// replicas, run anti-entropy, return stale records to their owners and
// ask witnesses about refused handoff givers.
// Run calls it every TickInterval; a simulator may call it directly.
func (m *Manager) Tick(ctx context.Context) {
	m.tickMu.Lock()
	defer m.tickMu.Unlock()
	m.mu.Lock()
	leaving := m.own.leaving
	m.mu.Unlock()
	if leaving || ctx.Err() != nil {
		return
	}
	now := m.clock.Now()
	v := m.currentView()
	m.observe(v, now)
	m.transMu.Lock()
	m.flushDeactivations(ctx)
	m.transMu.Unlock()
	m.shed(ctx, v)
	m.release(ctx, v)
	m.acquire(ctx, v, now)
	m.heartbeat(ctx, now)
	m.antiEntropy(ctx, now)
	m.reconcileStale(ctx, v)
	m.checkWitnesses(ctx)
	m.watchTick(ctx, now)
	m.forwardHeld(ctx)
}

// observe notes changes of the view and of the replica set.
func (m *Manager) observe(v view, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.viewSeen || v.known != m.lastView.known || v.r != m.lastView.r {
		m.waitStart = now
	}
	m.lastView, m.viewSeen = v, true
	if sameList(v.succs, m.seen) {
		// The list observed last tick, which set succCache and replicas:
		// comparing them again was 4% of a simulation's CPU.
		return
	}
	m.seen = v.succs
	if len(v.succs) > 0 && !slices.Equal(v.succs, m.succCache) {
		m.succCache = slices.Clone(v.succs)
	}
	replicas := v.succs[:min(len(v.succs), m.cfg.Replicas)]
	if !slices.Equal(replicas, m.replicas) {
		m.replicas = slices.Clone(replicas)
		m.beatNow = true
		m.syncDue = time.Time{}
		for addr := range m.lastSync {
			if !slices.ContainsFunc(replicas, func(p ring.Peer) bool { return p.Addr == addr }) {
				delete(m.lastSync, addr)
			}
		}
		for addr := range m.owed {
			if !slices.ContainsFunc(replicas, func(p ring.Peer) bool { return p.Addr == addr }) {
				delete(m.owed, addr)
			}
		}
	}
}

// shed (step 1) moves active claims outside the view to releasing and
// deactivates them in the app.
func (m *Manager) shed(ctx context.Context, v view) {
	if !v.known {
		return
	}
	m.mu.Lock()
	claimed := m.claimedLocked()
	// The claims and the arc of the last tick that found nothing to shed:
	// the domain is replaced whole when the claims change, so the same
	// slice and the same arc need no comparison (3% of a simulation's CPU).
	nothing := m.shedSeen.r == v.r && sameSpans(claimed, m.shedSeen.claimed)
	if !nothing && subsetOf(claimed, v.spans) {
		nothing = true
		m.shedSeen.r, m.shedSeen.claimed = v.r, claimed
	}
	m.mu.Unlock()
	if nothing {
		return // the common case: no need to wait for Accepts in flight
	}
	m.transMu.Lock()
	defer m.transMu.Unlock()
	m.acceptMu.Lock()
	m.mu.Lock()
	out := subtract(m.claimedLocked(), v.spans)
	var parts segMap
	if !out.empty() {
		parts = m.own.claims.within(out)
		m.setClaimsLocked(m.own.claims.remove(out))
		for _, p := range parts {
			m.releasing = m.releasing.set(spanSet{{p.lo, p.hi}}, p.e)
		}
		m.beatNow = true
	}
	m.mu.Unlock()
	m.acceptMu.Unlock()
	if len(parts) == 0 {
		return
	}
	m.log.Info("releasing", "parts", parts.claims(), "view", v.r)
	for _, c := range parts.claims() {
		if err := m.app.Deactivate(ctx, c.Range); err != nil {
			m.log.Warn("deactivate", "range", c.Range, "err", err)
		}
	}
}

// release (step 2) reclaims releasing parts the view covers again and
// pushes the others to their owners. It walks each part from its end
// backwards, one owner's piece after the other, as long as the owners say
// where their arcs begin and for about a HeartbeatInterval per part: when
// many nodes joined inside the part, their pieces are offered in few
// ticks, and the owners that must first ask a witness (witness.go) ask
// together.
func (m *Manager) release(ctx context.Context, v view) {
	if v.known {
		m.mu.Lock()
		back := intersect(m.releasing.domain(), v.spans)
		m.mu.Unlock()
		if !back.empty() {
			m.claim(ctx, back, false)
		}
	}
	m.mu.Lock()
	parts := m.releasing.claims()
	m.mu.Unlock()
	if len(parts) == 0 {
		return // the common case: computing the replicas' arcs every tick was 4% of a simulation's CPU
	}
	replicas := m.replicaArcs(v)
	for _, p := range parts {
		start := m.clock.Now()
		cur := p.Range
		for {
			if ctx.Err() != nil {
				return
			}
			target, _, err := m.ring.Lookup(ctx, cur.To)
			if err != nil || target == m.self {
				break
			}
			res := m.pushTo(ctx, target, Claim{Range: cur, Epoch: p.Epoch}, replicas)
			// On to the piece before the target's arc, if the arc begins
			// inside what is left of the part.
			if !res.known || res.owned.From == cur.To || !cur.Contains(res.owned.From) {
				break
			}
			cur.To = res.owned.From
			if res.gaveUp {
				// No witness saw this node's claim reach the target's
				// piece, so none saw it reach the pieces before it either:
				// their owners, further still, take them over by pull as
				// the target did. Only the arcs of this node's replicas,
				// which hear from it and would wait for its handoff, stay
				// releasing (see "Releases the owner will not take").
				for _, r := range subtract(spansOf(cur), replicas).ranges() {
					m.giveUp(ctx, r, target, Epoch{}, Epoch{})
				}
				break
			}
			if m.clock.Now().Sub(start) > m.cfg.HeartbeatInterval {
				break
			}
		}
	}
}

// Releases the owner will not take.
//
// A push is refused while its receiver does not know its arc, does not own
// what is pushed, or cannot judge the giver (witness.go); the giver tries
// again every tick. But a receiver that cannot judge the giver, no witness
// vouching, and claims its piece already (it took it by pull, having
// waited FailureTimeout for a handoff it could take) will not take the
// giver's state any more: its refusal carries its claim's epoch. The giver
// then hands the piece over in all but its state: it raises its table to
// the receiver's epoch, as for an acknowledged Final, stops releasing the
// piece and passes its pending records to the app to send as tasks
// (App.Reroute), which the owner dedupes and accepts like any link. The
// owner gets every URL still to crawl; the giver's done marks, fetch
// state and host states go to it too, and it takes them only if its own
// view says the giver held the piece (see "Rerouted done marks" in
// reroute.go): where it cannot judge the giver, a URL the giver fetched
// may be fetched again when a link to it comes. No witness saw the
// giver's claim reach that piece, so none saw it reach the pieces of the
// part before it either, whose owners are further away still: the giver
// gives those up in the same way without asking (their pending records as
// tasks, no done marks), and their owners, which found nothing to take,
// claim them by pull.
//
// Never given up this way are the arcs of the giver's own replicas, its
// first K successors (self, K-th successor]: they hear from the giver
// every heartbeat, so one whose table names the giver over a piece would
// wait for the giver's handoff for ever instead of promoting itself. They
// take that handoff: a node takes handoffs from the K predecessors it
// replicates as from its successors (feedsLocked in witness.go). (In
// a ring in flux the receiver that answers can be a node whose claim is
// itself stale; its refusal still gives the piece up, and the true owner,
// which does not hear from the giver, promotes itself after
// FailureTimeout.) A stale owner's merge that the rightful owner will not
// take goes the same way: the stale owner holds no claim there.

// replicaArcs returns the arcs of this node's first K successors in the
// view v, (self, K-th successor]: the nodes that hear from this node as
// its replicas, and so would wait for its handoff of a range their table
// names it for.
func (m *Manager) replicaArcs(v view) spanSet {
	if len(v.succs) == 0 {
		return nil
	}
	last := v.succs[min(len(v.succs), m.cfg.Replicas)-1]
	return spansOf(Range{From: m.self.ID, To: last.ID})
}

// pushed is what pushTo learnt: the arc the peer said it owns, if it said
// (known), and whether the peer claims its piece already and would not
// take it, so that it was given up (gaveUp).
type pushed struct {
	owned         Range
	known, gaveUp bool
}

// pushTo hands part over to one peer. If the peer owns only some of it,
// that piece is pushed and the rest stays releasing for a later try; a
// piece the peer claims already and will not take from this node is given
// up (see "Releases the owner will not take"), except what lies in keep.
func (m *Manager) pushTo(ctx context.Context, to ring.Peer, part Claim, keep spanSet) pushed {
	var res pushed
	todo := []Range{part.Range}
	for round := 0; round < 2 && len(todo) > 0; round++ {
		var next []Range
		for _, r := range todo {
			reply, err := m.sendHandoff(ctx, to, r, part.Epoch, false, nil)
			if err != nil {
				m.log.Debug("handoff failed", "to", to, "range", r, "err", err)
				return res
			}
			if reply.HasOwned {
				res.owned, res.known = reply.Owned, true
			}
			if owner := refusedByOwner(to, reply); !owner.empty() {
				e := reply.Epoch
				if e.N > m.epochLimit(m.clock.Now()) {
					e = Epoch{} // from the future: not for the table
				}
				for _, x := range subtract(intersect(spansOf(r), owner), keep).ranges() {
					res.gaveUp = m.giveUp(ctx, x, to, e, part.Epoch) || res.gaveUp
				}
				continue
			}
			if reply.Accepted {
				m.mu.Lock()
				m.releasing = m.releasing.remove(spansOf(r))
				if m.table.raise(r, reply.Epoch) {
					m.saveTableLocked()
				}
				m.stats.HandoffsOut++
				m.noteHandedLocked(r, to, part.Epoch, m.clock.Now())
				m.mu.Unlock()
				m.log.Info("handed off", "to", to, "range", r, "epoch", reply.Epoch)
				continue
			}
			if !reply.HasOwned {
				continue
			}
			for _, x := range intersect(spansOf(r), spansOf(reply.Owned)).ranges() {
				if x != r {
					next = append(next, x)
				}
			}
		}
		todo = next
	}
	return res
}

// giveUp stops releasing r, which owner claims at epoch (if known) and
// will not take from this node, once its pending records went to the app
// to reroute, and reports whether it did (see "Releases the owner will
// not take"). When owner answered for r itself (mine, this node's claim
// of r, is set), the done records and host states of r go to it as well,
// best effort (see "Rerouted done marks" in reroute.go); the pieces given
// up without asking are sent none: their owners are further away still,
// and this node does not know them.
func (m *Manager) giveUp(ctx context.Context, r Range, owner ring.Peer, epoch, mine Epoch) bool {
	if err := m.reroute(ctx, r); err != nil {
		m.log.Warn("reroute a release", "range", r, "owner", owner, "err", err)
		return false
	}
	if !mine.IsZero() {
		m.sendDoneMarks(ctx, owner, r, mine)
	}
	m.mu.Lock()
	m.releasing = m.releasing.remove(spansOf(r))
	if m.table.raise(r, epoch) {
		m.saveTableLocked()
	}
	m.stats.Rerouted++
	m.mu.Unlock()
	m.log.Info("gave up a release its owner took without it; pending records rerouted", "range", r, "owner", owner, "epoch", epoch)
	return true
}

// refusedByOwner returns the arc of a receiver that refused a push or a
// merge from this node because it claims its piece already (its reply
// names its own epoch), or nothing.
func refusedByOwner(to ring.Peer, reply *HandoffReply) spanSet {
	if reply.Accepted || !reply.HasOwned || reply.Epoch.IsZero() || reply.Epoch.Owner != to.Addr {
		return nil
	}
	return spansOf(reply.Owned)
}

// reroute passes the pending records held over r to the app, a page at a
// time, to send to their owners as tasks.
func (m *Manager) reroute(ctx context.Context, r Range) error {
	var after *cursor
	for {
		page, more, err := m.pageRecords(r, after, m.cfg.ChunkRecords, nil)
		if err != nil {
			return fmt.Errorf("shard: reroute %s: %w", r, err)
		}
		var pending []Record
		for _, rec := range page {
			if !rec.Done {
				pending = append(pending, rec)
			}
		}
		if len(pending) > 0 {
			if err := m.app.Reroute(ctx, pending); err != nil {
				return fmt.Errorf("shard: reroute %s: %w", r, err)
			}
		}
		if !more {
			return nil
		}
		tail := page[len(page)-1]
		after = &cursor{tail.Key, tail.Hash}
	}
}

// rerouteAll reroutes the pending records over every range of s.
func (m *Manager) rerouteAll(ctx context.Context, s spanSet) error {
	for _, r := range s.ranges() {
		if err := m.reroute(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// acquire (step 3) claims unclaimed parts of the view: at once when alone
// and nobody else is known to own them; after FailureTimeout of silence
// from the owner the epoch table names (promotion); otherwise, after
// FailureTimeout, once a pull from the successor shows nobody holds them.
func (m *Manager) acquire(ctx context.Context, v view, now time.Time) {
	if !v.known {
		return
	}
	m.mu.Lock()
	free := subtract(subtract(v.spans, m.claimedLocked()), m.releasing.domain())
	var direct, promote, pull []span
	for _, p := range m.table.m.pieces(free) {
		sp := span{p.lo, p.hi}
		switch owner := p.e.Owner; {
		case owner != "" && owner != m.self.Addr:
			since := m.waitStart
			if h := m.heard[owner].at; h.After(since) {
				since = h
			}
			if now.Sub(since) > m.cfg.FailureTimeout {
				promote = append(promote, sp)
			}
		case v.alone:
			direct = append(direct, sp)
		case now.Sub(m.waitStart) > m.cfg.FailureTimeout:
			pull = append(pull, sp)
		}
	}
	m.mu.Unlock()
	if len(direct) > 0 {
		m.claim(ctx, normalize(direct), false)
	}
	if len(promote) > 0 {
		m.claim(ctx, normalize(promote), true)
	}
	if len(pull) == 0 || v.next.IsZero() {
		return
	}
	for _, r := range normalize(pull).ranges() {
		owner, err := m.pullFrom(ctx, v.next, r, nil)
		if err != nil {
			m.log.Debug("pull failed", "from", v.next, "range", r, "err", err)
			continue
		}
		if owner {
			m.mu.Lock()
			m.waitStart = now
			m.mu.Unlock()
			continue
		}
		m.mu.Lock()
		free := subtract(subtract(spansOf(r), m.claimedLocked()), m.releasing.domain())
		var mine []span
		for _, p := range m.table.m.pieces(free) {
			if p.e.Owner == "" || p.e.Owner == m.self.Addr {
				mine = append(mine, span{p.lo, p.hi})
			}
		}
		m.mu.Unlock()
		if len(mine) > 0 {
			m.claim(ctx, normalize(mine), false)
		}
	}
}

// heartbeat (step 4) sends the active claims and pending progress to the
// replicas every HeartbeatInterval, and at once when something changed.
// Acknowledgements without rejection from a quorum of the replicas
// (leaseQuorum) renew the lease; a rejection marks the claims it beats as
// stale.
func (m *Manager) heartbeat(ctx context.Context, now time.Time) {
	m.mu.Lock()
	due := m.beatNow || len(m.progRecs)+len(m.progHosts) > 0 || now.Sub(m.lastBeat) >= m.cfg.heartbeatEvery()
	if !due {
		m.mu.Unlock()
		return
	}
	m.lastBeat, m.beatNow = now, false
	replicas := slices.Clone(m.replicas)
	claims := m.own.claims.claims()
	var recs, gone []Record
	for _, r := range m.progRecs {
		if m.own.claims.covers(r.Key) {
			recs = append(recs, r)
		} else {
			gone = append(gone, r)
		}
	}
	late := m.lateLocked(gone, now)
	var pieces []handedPiece
	if late != nil {
		pieces = slices.Clone(m.handed)
	}
	var hosts []HostState
	for _, h := range m.progHosts {
		if m.own.claims.covers(h.Key) {
			hosts = append(hosts, h)
		}
	}
	if n := len(m.progRecs) + len(m.progHosts); n > 0 {
		m.sending, m.sendingSince = n, m.progSince
		defer func() {
			m.mu.Lock()
			m.sending, m.sendingSince = 0, time.Time{}
			m.mu.Unlock()
		}()
	}
	m.progRecs, m.progHosts, m.progSince = nil, nil, time.Time{}
	m.mu.Unlock()
	if late != nil {
		m.sendLate(ctx, pieces, late)
	}
	if len(replicas) == 0 || len(claims) == 0 {
		return
	}
	req := &WriteRequest{Claims: claims, Records: recs, Hosts: hosts}
	res := fanout(m, ctx, replicas, func(ctx context.Context, p ring.Peer) (*WriteReply, error) {
		return m.tr.Replicate(ctx, p, req)
	})
	var rejected []Claim
	acks, firstAck, firstRefused := 0, false, false
	for i, r := range res {
		if r.err != nil {
			m.missed(r.peer)
			m.log.Debug("heartbeat failed", "to", r.peer, "err", r.err)
			continue
		}
		if r.reply.StoreError != "" {
			m.missed(r.peer)
			m.log.Warn("replica could not store progress", "to", r.peer, "err", r.reply.StoreError)
		}
		if r.reply.Refused != "" {
			m.missed(r.peer)
			m.log.Warn("replica refused this node's claims", "to", r.peer, "reason", r.reply.Refused)
			firstRefused = firstRefused || i == 0
		}
		rejected = append(rejected, r.reply.Rejected...)
		if len(r.reply.Rejected) == 0 && r.reply.Refused == "" {
			acks++
			firstAck = firstAck || i == 0
		}
	}
	// The first successor's acknowledgement renews the lease, as it
	// always did; one that refuses (withholds) is outvoted by a quorum of
	// the replicas. One that does not answer at all (crashed, cut off) is
	// not: the owner stops before it may promote itself, as before.
	if !firstAck && !m.cfg.LeaseFromFirst && firstRefused && acks < leaseQuorum(m.cfg.Replicas) {
		// Every replica withholds: the claims alone go to the next K
		// successors, whose acknowledgements count towards the quorum.
		more, rej := m.leaseWitnesses(ctx, replicas, claims)
		acks += more
		rejected = append(rejected, rej...)
	}
	if firstAck || !m.cfg.LeaseFromFirst && firstRefused && acks >= leaseQuorum(m.cfg.Replicas) {
		m.mu.Lock()
		if until := now.Add(m.cfg.Lease); until.After(m.own.leaseUntil) {
			m.own.mu.Lock()
			m.own.leaseUntil = until
			m.own.mu.Unlock()
		}
		m.mu.Unlock()
	}
	if len(rejected) > 0 {
		m.handleRejected(rejected)
	}
}

// antiEntropy (step 5) compares every active claim with every replica
// once per SyncInterval, at once for a replica new in the successor set
// and after a new claim.
func (m *Manager) antiEntropy(ctx context.Context, now time.Time) {
	m.mu.Lock()
	if !m.syncNow && !m.syncDue.IsZero() && now.Before(m.syncDue) {
		// Nothing due: looking up every replica's last round each tick
		// was 8% of a simulation's CPU.
		m.mu.Unlock()
		return
	}
	every := m.cfg.syncEvery()
	var due []ring.Peer
	var next time.Time
	for _, p := range m.replicas {
		t, ok := m.lastSync[p.Addr]
		if m.syncNow || !ok || now.Sub(t) >= every {
			due = append(due, p)
			m.lastSync[p.Addr], t = now, now
		}
		if at := t.Add(every); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	m.syncDue = next
	m.syncNow = false
	var claims []Claim
	if len(due) > 0 {
		claims = m.own.claims.claims()
	}
	m.mu.Unlock()
	for _, p := range due {
		clean := true
		for _, c := range claims {
			if ctx.Err() != nil {
				return
			}
			if !m.syncClaim(ctx, p, c) {
				clean = false
			}
		}
		m.mu.Lock()
		if wait, ok := m.owed[p.Addr]; ok {
			if clean {
				delete(m.owed, p.Addr)
			} else if slices.Contains(m.replicas, p) {
				// Still missing writes: try again, less often.
				wait = min(2*wait, every)
				m.owed[p.Addr] = wait
				m.syncAtLocked(p, now.Add(wait))
			}
		}
		m.mu.Unlock()
	}
}

// syncClaim reconciles one claim with one replica: compare digests; for
// differing buckets, pull what the replica has (it may hold records this
// node lacks, say after a degraded write before a promotion) and push
// what this node has. It reports whether the replica now holds what this
// node does: false when a step failed or the replica refused or could
// not store the push.
func (m *Manager) syncClaim(ctx context.Context, p ring.Peer, c Claim) bool {
	diff, err := m.diffBuckets(ctx, p, c.Range)
	if err != nil {
		m.log.Debug("digest failed", "to", p, "range", c.Range, "err", err)
		return false
	}
	if diff == nil {
		return true
	}
	if _, err := m.pullFrom(ctx, p, c.Range, diff); err != nil {
		m.log.Debug("anti-entropy pull failed", "from", p, "range", c.Range, "err", err)
	}
	var after *cursor
	for {
		page, more, err := m.pageRecords(c.Range, after, m.cfg.ChunkRecords, diff)
		if err != nil {
			m.log.Warn("anti-entropy scan", "range", c.Range, "err", err)
			return false
		}
		if len(page) == 0 {
			return true
		}
		cctx, cancel := context.WithTimeout(ctx, m.cfg.AckTimeout)
		reply, err := m.tr.Replicate(cctx, p, &WriteRequest{Claims: []Claim{c}, Records: page})
		cancel()
		if err != nil {
			return false
		}
		if len(reply.Rejected) > 0 {
			m.handleRejected(reply.Rejected)
			return false
		}
		if reply.Refused != "" || reply.StoreError != "" {
			// The rest would be dropped as well.
			return false
		}
		if !more {
			return true
		}
		last := page[len(page)-1]
		after = &cursor{last.Key, last.Hash}
	}
}

// diffBuckets compares the digest of r here and at p. It returns nil when
// they agree, else a filter for the records of differing buckets.
func (m *Manager) diffBuckets(ctx context.Context, p ring.Peer, r Range) (func(Record) bool, error) {
	cctx, cancel := context.WithTimeout(ctx, m.cfg.AckTimeout)
	rep, err := m.tr.Digest(cctx, p, &DigestRequest{Range: r, Buckets: DigestBuckets})
	cancel()
	if err != nil {
		return nil, err
	}
	local, err := digestOf(m.st, r, DigestBuckets)
	if err != nil {
		return nil, err
	}
	var differ [DigestBuckets]bool
	differs := false
	for i := range local {
		if len(rep.Sums) != len(local) || rep.Sums[i] != local[i] {
			differ[i], differs = true, true
		}
	}
	if !differs {
		return nil, nil
	}
	return func(rec Record) bool { return differ[rec.Hash%DigestBuckets] }, nil
}

// reconcileStale returns the records of claims dropped as stale to the
// ranges' rightful owners (merge pushes of differing digest buckets). A
// part inside this node's own arc stays listed until the node claims it
// again (its records are here already); the rest goes to whoever the ring
// says owns it, piece by piece as the owners' replies name their arcs.
func (m *Manager) reconcileStale(ctx context.Context, v view) {
	m.mu.Lock()
	todo := m.reconcile
	m.mu.Unlock()
	if v.known {
		todo = subtract(todo, v.spans)
	}
	for _, r := range todo.ranges() {
		if ctx.Err() != nil {
			return
		}
		target, _, err := m.ring.Lookup(ctx, r.To)
		if err != nil || target == m.self {
			continue
		}
		diff, err := m.diffBuckets(ctx, target, r)
		if err != nil {
			continue
		}
		done := spanSet(nil)
		if diff == nil {
			done = spansOf(r) // the owner holds the same records
		} else {
			reply, err := m.sendHandoff(ctx, target, r, Epoch{}, true, diff)
			if err != nil {
				continue
			}
			if owner := refusedByOwner(target, reply); !owner.empty() {
				done = intersect(spansOf(r), owner)
				if err := m.rerouteAll(ctx, done); err != nil {
					m.log.Warn("reroute stale records", "range", r, "owner", target, "err", err)
					continue
				}
				for _, x := range done.ranges() {
					m.sendDoneMarks(ctx, target, x, Epoch{})
				}
				m.mu.Lock()
				m.stats.Rerouted++
				m.mu.Unlock()
				m.log.Info("the owner will not take stale records; pending ones rerouted", "to", target, "range", r, "owned", reply.Owned)
			} else {
				if !reply.Accepted || !reply.HasOwned {
					continue
				}
				done = intersect(spansOf(r), spansOf(reply.Owned))
				m.log.Info("merged stale records", "to", target, "range", r, "owned", reply.Owned)
			}
		}
		m.mu.Lock()
		m.reconcile = subtract(m.reconcile, done)
		m.mu.Unlock()
	}
}

// leaseWitnesses sends claims alone (a heartbeat) to the K successors
// after replicas, when every replica refused them, and returns how many
// acknowledged them without refusal, with the higher epochs they
// reported. Only while the replicas withhold: the owner's records stay
// with its replicas.
func (m *Manager) leaseWitnesses(ctx context.Context, replicas []ring.Peer, claims []Claim) (int, []Claim) {
	m.mu.Lock()
	succs := slices.Clone(m.succCache)
	m.mu.Unlock()
	var extra []ring.Peer
	for _, p := range succs {
		if len(extra) == m.cfg.Replicas {
			break
		}
		if !slices.Contains(replicas, p) {
			extra = append(extra, p)
		}
	}
	if len(extra) == 0 {
		return 0, nil
	}
	req := &WriteRequest{Claims: claims}
	res := fanout(m, ctx, extra, func(ctx context.Context, p ring.Peer) (*WriteReply, error) {
		return m.tr.Replicate(ctx, p, req)
	})
	acks := 0
	var rejected []Claim
	for _, r := range res {
		if r.err != nil {
			continue
		}
		rejected = append(rejected, r.reply.Rejected...)
		if len(r.reply.Rejected) == 0 && r.reply.Refused == "" {
			acks++
		}
	}
	return acks, rejected
}

// leaseQuorum is how many of n replicas must acknowledge a heartbeat to
// renew the lease when the first successor refuses it: with the owner, a
// majority of the K+1 nodes that hold its range ((n+1)/2 of them: 1 of 1
// or 2, 2 of 3 or 4). One successor withholding its acknowledgement then
// cannot stop its predecessor (issue 29).
func leaseQuorum(n int) int {
	if n <= 0 {
		return 0
	}
	return max((n+1)/2, 1)
}
