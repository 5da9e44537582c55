package shard

import (
	"context"
	"slices"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// view is what the ring says this node is responsible for right now.
type view struct {
	// known is false when the predecessor is unknown but the node is not
	// alone: then claims are kept and nothing is acquired or released.
	known bool
	// alone: no predecessor and no successor but self.
	alone bool
	r     Range   // (pred, self], or the whole ring when alone
	spans spanSet // r as linear intervals
	succs []ring.Peer
}

func (m *Manager) currentView() view {
	// Two reads, not one State snapshot (which also sorts the fingers):
	// a change in between costs at most one tick on a slightly stale
	// view, which the next tick corrects.
	pred := m.ring.Predecessor()
	var v view
	for _, p := range m.ring.Successors() {
		if p != m.self {
			v.succs = append(v.succs, p)
		}
	}
	switch {
	case !pred.IsZero() && pred != m.self:
		v.known, v.r = true, Range{From: pred.ID, To: m.self.ID}
	case len(v.succs) == 0:
		v.known, v.alone, v.r = true, true, Range{From: m.self.ID, To: m.self.ID}
	}
	if v.known {
		v.spans = spansOf(v.r)
	}
	return v
}

// Tick runs one maintenance step: shed claims the ring moved away, hand
// them off, acquire unclaimed parts of this node's arc, heartbeat the
// replicas, run anti-entropy and return stale records to their owners.
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
}

// observe notes changes of the view and of the replica set.
func (m *Manager) observe(v view, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.viewSeen || v.known != m.lastView.known || v.r != m.lastView.r {
		m.waitStart = now
	}
	m.lastView, m.viewSeen = v, true
	if len(v.succs) > 0 {
		m.succCache = slices.Clone(v.succs)
	}
	replicas := v.succs[:min(len(v.succs), m.cfg.Replicas)]
	if !slices.Equal(replicas, m.replicas) {
		m.replicas = slices.Clone(replicas)
		m.beatNow = true
		for addr := range m.lastSync {
			if !slices.ContainsFunc(replicas, func(p ring.Peer) bool { return p.Addr == addr }) {
				delete(m.lastSync, addr)
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
	nothing := subsetOf(m.own.claims.domain(), v.spans)
	m.mu.Unlock()
	if nothing {
		return // the common case: no need to wait for Accepts in flight
	}
	m.transMu.Lock()
	defer m.transMu.Unlock()
	m.acceptMu.Lock()
	m.mu.Lock()
	out := subtract(m.own.claims.domain(), v.spans)
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
// pushes the others to their owners.
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
	for _, p := range parts {
		if ctx.Err() != nil {
			return
		}
		target, _, err := m.ring.Lookup(ctx, p.Range.To)
		if err != nil || target == m.self {
			continue
		}
		m.pushTo(ctx, target, p)
	}
}

// pushTo hands part over to one peer. If the peer owns only some of it,
// that piece is pushed and the rest stays releasing for a later try.
func (m *Manager) pushTo(ctx context.Context, to ring.Peer, part Claim) {
	todo := []Range{part.Range}
	for round := 0; round < 2 && len(todo) > 0; round++ {
		var next []Range
		for _, r := range todo {
			reply, err := m.sendHandoff(ctx, to, r, part.Epoch, false, nil)
			if err != nil {
				m.log.Debug("handoff failed", "to", to, "range", r, "err", err)
				return
			}
			if reply.Accepted {
				m.mu.Lock()
				m.releasing = m.releasing.remove(spansOf(r))
				if m.table.raise(r, reply.Epoch) {
					m.saveTableLocked()
				}
				m.stats.HandoffsOut++
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
	free := subtract(subtract(v.spans, m.own.claims.domain()), m.releasing.domain())
	var direct, promote, pull []span
	for _, p := range m.table.m.pieces(free) {
		sp := span{p.lo, p.hi}
		switch owner := p.e.Owner; {
		case owner != "" && owner != m.self.Addr:
			since := m.waitStart
			if h := m.lastHeard[owner]; h.After(since) {
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
	if len(pull) == 0 || len(v.succs) == 0 {
		return
	}
	for _, r := range normalize(pull).ranges() {
		owner, err := m.pullFrom(ctx, v.succs[0], r, nil)
		if err != nil {
			m.log.Debug("pull failed", "from", v.succs[0], "range", r, "err", err)
			continue
		}
		if owner {
			m.mu.Lock()
			m.waitStart = now
			m.mu.Unlock()
			continue
		}
		m.mu.Lock()
		free := subtract(subtract(spansOf(r), m.own.claims.domain()), m.releasing.domain())
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
// An acknowledgement without rejection from the first successor renews
// the lease; a rejection marks the claims it beats as stale.
func (m *Manager) heartbeat(ctx context.Context, now time.Time) {
	m.mu.Lock()
	due := m.beatNow || len(m.progRecs)+len(m.progHosts) > 0 || now.Sub(m.lastBeat) >= m.cfg.HeartbeatInterval
	if !due {
		m.mu.Unlock()
		return
	}
	m.lastBeat, m.beatNow = now, false
	replicas := slices.Clone(m.replicas)
	claims := m.own.claims.claims()
	var recs []Record
	for _, r := range m.progRecs {
		if m.own.claims.covers(r.Key) {
			recs = append(recs, r)
		}
	}
	var hosts []HostState
	for _, h := range m.progHosts {
		if m.own.claims.covers(h.Key) {
			hosts = append(hosts, h)
		}
	}
	m.progRecs, m.progHosts = nil, nil
	m.mu.Unlock()
	if len(replicas) == 0 || len(claims) == 0 {
		return
	}
	req := &WriteRequest{Claims: claims, Records: recs, Hosts: hosts}
	res := fanout(m, ctx, replicas, func(ctx context.Context, p ring.Peer) (*WriteReply, error) {
		return m.tr.Replicate(ctx, p, req)
	})
	var rejected []Claim
	for i, r := range res {
		if r.err != nil {
			m.log.Debug("heartbeat failed", "to", r.peer, "err", r.err)
			continue
		}
		if r.reply.StoreError != "" {
			m.log.Warn("replica could not store progress", "to", r.peer, "err", r.reply.StoreError)
		}
		if r.reply.Refused != "" {
			m.log.Warn("replica refused this node's claims", "to", r.peer, "reason", r.reply.Refused)
		}
		rejected = append(rejected, r.reply.Rejected...)
		if i == 0 && len(r.reply.Rejected) == 0 && r.reply.Refused == "" {
			m.mu.Lock()
			if until := now.Add(m.cfg.Lease); until.After(m.own.leaseUntil) {
				m.own.mu.Lock()
				m.own.leaseUntil = until
				m.own.mu.Unlock()
			}
			m.mu.Unlock()
		}
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
	claims := m.own.claims.claims()
	var due []ring.Peer
	for _, p := range m.replicas {
		if t, ok := m.lastSync[p.Addr]; m.syncNow || !ok || now.Sub(t) >= m.cfg.SyncInterval {
			due = append(due, p)
			m.lastSync[p.Addr] = now
		}
	}
	m.syncNow = false
	m.mu.Unlock()
	for _, p := range due {
		for _, c := range claims {
			if ctx.Err() != nil {
				return
			}
			m.syncClaim(ctx, p, c)
		}
	}
}

// syncClaim reconciles one claim with one replica: compare digests; for
// differing buckets, pull what the replica has (it may hold records this
// node lacks, say after a degraded write before a promotion) and push
// what this node has.
func (m *Manager) syncClaim(ctx context.Context, p ring.Peer, c Claim) {
	diff, err := m.diffBuckets(ctx, p, c.Range)
	if err != nil {
		m.log.Debug("digest failed", "to", p, "range", c.Range, "err", err)
		return
	}
	if diff == nil {
		return
	}
	if _, err := m.pullFrom(ctx, p, c.Range, diff); err != nil {
		m.log.Debug("anti-entropy pull failed", "from", p, "range", c.Range, "err", err)
	}
	var after *cursor
	for {
		page, more, err := m.pageRecords(c.Range, after, m.cfg.ChunkRecords, diff)
		if err != nil {
			m.log.Warn("anti-entropy scan", "range", c.Range, "err", err)
			return
		}
		if len(page) == 0 {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, m.cfg.AckTimeout)
		reply, err := m.tr.Replicate(cctx, p, &WriteRequest{Claims: []Claim{c}, Records: page})
		cancel()
		if err != nil {
			return
		}
		if len(reply.Rejected) > 0 {
			m.handleRejected(reply.Rejected)
			return
		}
		if !more {
			return
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
			if err != nil || !reply.Accepted || !reply.HasOwned {
				continue
			}
			done = intersect(spansOf(r), spansOf(reply.Owned))
			m.log.Info("merged stale records", "to", target, "range", r, "owned", reply.Owned)
		}
		m.mu.Lock()
		m.reconcile = subtract(m.reconcile, done)
		m.mu.Unlock()
	}
}
