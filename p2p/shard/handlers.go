package shard

import (
	"context"
	"fmt"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// HandleReplicate serves an owner's write as its replica: every claim
// lower than the epoch table anywhere in its range is refused (the reply
// names the higher epochs); the others raise the table, and the records
// and hosts inside them are stored before the reply goes out. A claim
// above one of this node's own active claims makes that part stale here.
func (m *Manager) HandleReplicate(ctx context.Context, from ring.Peer, req *WriteRequest) *WriteReply {
	now := m.clock.Now()
	var admitted []Claim
	var refused []error
	k := m.knownPeers()
	pred := m.ring.Predecessor()
	// The sender must be where the ring holds it (member.go): a stranger
	// at an ID of its choice claims nothing here.
	isPlaced, known := m.placement(ctx, from, now)
	for _, c := range req.Claims {
		if c.Epoch.IsZero() {
			continue
		}
		if known && !isPlaced {
			refused = append(refused, fmt.Errorf("claim %s from %s: %w", c, from, errNotPlaced))
			continue
		}
		if err := m.admitClaim(k, from, c, now, true); err != nil {
			refused = append(refused, err)
			continue
		}
		admitted = append(admitted, c)
	}
	m.mu.Lock()
	if len(refused) > 0 {
		m.stats.Implausible += int64(len(refused))
		m.log.Debug("refused claims", "from", from, "first", refused[0], "count", len(refused))
	}
	if len(admitted) > 0 && isPlaced {
		// Only a sender that may own what it claims, and that the ring
		// holds where it sits, counts as heard: no sender's writes alone
		// keep a range from being promoted (member.go).
		m.heardLocked(from, now, true)
	}
	var rejected, took []Claim
	var accepted spanSet
	changed := false
	for _, c := range admitted {
		if h := m.table.higher(c.Range, c.Epoch); len(h) > 0 {
			rejected = append(rejected, h...)
			continue
		}
		if m.table.raise(c.Range, c.Epoch) {
			changed = true
		}
		accepted = union(accepted, spansOf(c.Range))
		took = append(took, c)
	}
	if changed {
		m.saveTableLocked()
		m.dropStaleLocked(now)
	}
	m.witnessLocked(from, pred, took, now)
	var watchedIn []Record
	if len(req.Watched) > 0 {
		watchedIn = m.acceptWatchedLocked(from, pred, req.Watched, now)
	}
	if len(rejected) > 0 {
		m.stats.RejectedWrites++
		m.log.Info("refused stale write", "from", from, "higher", rejected)
	}
	m.mu.Unlock()

	var recs []Record
	for _, r := range req.Records {
		if accepted.contains(r.Key) {
			recs = append(recs, r)
		}
	}
	var hosts []HostState
	for _, h := range req.Hosts {
		if accepted.contains(h.Key) {
			hosts = append(hosts, h)
		}
	}
	reply := &WriteReply{Rejected: rejected}
	if len(refused) > 0 {
		reply.Refused = refusal(refused)
	}
	if len(watchedIn) > 0 {
		if err := m.st.PutRecords(watchedIn); err != nil {
			m.log.Error("store watched done marks", "from", from, "err", err)
		}
	}
	// A write this replica could not store is not acknowledged: the owner
	// must not believe its URLs survive this node.
	if len(recs) > 0 {
		if err := m.st.PutRecords(recs); err != nil {
			m.log.Error("store replicated records", "from", from, "err", err)
			reply.StoreError = fmt.Sprintf("cannot store records: %v", err)
		}
	}
	if len(hosts) > 0 {
		if err := m.st.PutHosts(hosts); err != nil {
			m.log.Error("store replicated hosts", "from", from, "err", err)
			reply.StoreError = fmt.Sprintf("cannot store host states: %v", err)
		}
	}
	if reply.StoreError == "" && len(recs) > 0 {
		m.mu.Lock()
		m.watchLocked(from.Addr, recs, now)
		m.mu.Unlock()
	}
	if req.WantReceipt && reply.StoreError == "" && reply.Refused == "" && len(rejected) == 0 {
		reply.Receipt = m.receipt(from.Addr, recs, len(req.Records), req.Held, accepted)
	}
	return reply
}

// HandleHandoff serves one chunk of a push. A merge chunk is stored and
// its records inside active claims passed to the app. An ownership chunk
// is accepted only if the range lies in this node's arc (or is claimed
// here already); on the Final chunk the range is claimed under an epoch
// above both the table and the sender's, and activated. A repeated Final
// for a range already claimed at least that high is acknowledged again.
func (m *Manager) HandleHandoff(ctx context.Context, from ring.Peer, req *HandoffRequest) *HandoffReply {
	if req.Reroute {
		return m.handleRerouted(ctx, from, req)
	}
	actx := context.WithoutCancel(ctx)
	now := m.clock.Now()
	reply := &HandoffReply{}
	ask, err := m.admitGiver(ctx, from, req, now)
	if err != nil {
		// The arc is no secret (the ring tells anyone its predecessor),
		// and with it an honest giver pushes just this node's piece.
		v := m.currentView()
		m.mu.Lock()
		m.stats.Implausible++
		if v.known {
			reply.Owned, reply.HasOwned = v.r, true
			mine := intersect(spansOf(req.Range), v.spans)
			free := subtract(mine, m.claimedLocked())
			switch {
			case mine.empty():
			case free.empty():
				// Claimed here already (by pull: nothing came that
				// this node could take): say so, and the giver sends
				// its pending records as tasks instead (see "Releases
				// the owner will not take" in tick.go).
				reply.Epoch = m.own.claims.maxOver(mine)
			case ask:
				// Only about what this node still waits for: a node
				// that claims its arc asks no witness, whatever it is
				// sent.
				for _, r := range free.ranges() {
					m.askWitnessLocked(from, r, req.Epoch, now)
				}
			}
		}
		m.mu.Unlock()
		m.log.Debug("refused handoff", "from", from, "merge", req.Merge, "err", err)
		reply.Reason = err.Error()
		return reply
	}
	isPlaced, _ := m.placement(ctx, from, now)
	m.mu.Lock()
	if isPlaced {
		m.heardLocked(from, now, false)
	}
	// A giver this node takes state from holds the range (reroute.go).
	m.noteHolderLocked(from.Addr, spansOf(req.Range), now)
	leaving := m.own.leaving
	m.mu.Unlock()
	if leaving {
		reply.Reason = "leaving"
		return reply
	}
	v := m.currentView()
	if v.known {
		reply.Owned, reply.HasOwned = v.r, true
	}
	rs := spansOf(req.Range)
	var recs []Record
	for _, r := range req.Records {
		if req.Range.Contains(ring.ID(r.Key)) {
			recs = append(recs, r)
		}
	}
	var hosts []HostState
	for _, h := range req.Hosts {
		if req.Range.Contains(ring.ID(h.Key)) {
			hosts = append(hosts, h)
		}
	}
	store := func() bool {
		if len(recs) > 0 {
			if err := m.st.PutRecords(recs); err != nil {
				m.log.Error("store handed-off records", "from", from, "err", err)
				reply.Reason = "storage error"
				return false
			}
		}
		if len(hosts) > 0 {
			if err := m.st.PutHosts(hosts); err != nil {
				m.log.Error("store handed-off hosts", "from", from, "err", err)
				reply.Reason = "storage error"
				return false
			}
		}
		return true
	}

	if req.Merge {
		if !store() {
			return reply
		}
		m.transMu.Lock()
		m.notifyMerged(actx, recs)
		m.transMu.Unlock()
		if req.Final {
			m.mu.Lock()
			m.stats.MergesIn++
			m.mu.Unlock()
		}
		reply.Accepted = true
		return reply
	}

	m.mu.Lock()
	mine := subsetOf(rs, m.claimedLocked())
	m.mu.Unlock()
	if !mine && !(v.known && subsetOf(rs, v.spans)) {
		reply.Reason = "range not in my arc"
		return reply
	}
	if !store() {
		return reply
	}
	m.transMu.Lock()
	defer m.transMu.Unlock()
	m.flushDeactivations(actx)
	m.notifyMerged(actx, recs)
	if !req.Final {
		reply.Accepted = true
		return reply
	}
	m.mu.Lock()
	if m.own.leaving {
		m.mu.Unlock()
		reply.Reason = "leaving"
		return reply
	}
	fresh := subtract(rs, m.claimedLocked())
	current := fresh.empty()
	for _, p := range m.own.claims.within(rs) {
		if p.e.Less(req.Epoch) {
			current = false
		}
	}
	if current {
		reply.Epoch = m.own.claims.maxOver(rs)
		m.mu.Unlock()
		reply.Accepted = true
		return reply
	}
	e := m.newEpochLocked(req.Range, req.Epoch, now)
	m.setClaimLocked(req.Range, e)
	m.saveTableLocked()
	m.stats.HandoffsIn++
	m.mu.Unlock()
	m.log.Info("took over by handoff", "from", from, "range", req.Range, "epoch", e)
	for _, r := range fresh.ranges() {
		m.activate(actx, r)
	}
	reply.Accepted, reply.Epoch = true, e
	return reply
}

// HandleDigest summarises the records held over the range, and with
// Witness lists the claims this node witnessed over it (witness.go).
func (m *Manager) HandleDigest(ctx context.Context, from ring.Peer, req *DigestRequest) *DigestReply {
	n := req.Buckets
	if n <= 0 || n > maxDigestBuckets {
		n = DigestBuckets
	}
	reply := &DigestReply{}
	if req.Witness {
		reply.Witnessed = m.witnessedOver(req.Range, m.clock.Now())
		if req.Buckets <= 0 {
			return reply
		}
	}
	sums, err := digestOf(m.st, req.Range, n)
	if err != nil {
		m.log.Error("digest", "range", req.Range, "err", err)
		return reply
	}
	reply.Sums = sums
	return reply
}

// HandlePull pages out what this node holds over the range, unless it
// claims (or is still handing off) part of it, in which case it answers
// Owner and nothing else.
func (m *Manager) HandlePull(ctx context.Context, from ring.Peer, req *PullRequest) *PullReply {
	rs := spansOf(req.Range)
	m.mu.Lock()
	owner := overlaps(rs, m.claimedLocked()) || overlaps(rs, m.releasing.domain())
	epochs := m.table.entries(req.Range)
	m.mu.Unlock()
	if owner {
		return &PullReply{Owner: true}
	}
	var after *cursor
	if req.HasAfter {
		after = &cursor{req.AfterKey, req.AfterHash}
	}
	page, more, err := m.pageRecords(req.Range, after, m.cfg.ChunkRecords, nil)
	if err != nil {
		// Say "owner" so the puller waits and retries rather than
		// claiming on a partial answer.
		m.log.Error("pull", "range", req.Range, "err", err)
		return &PullReply{Owner: true}
	}
	reply := &PullReply{Records: page, Epochs: epochs, More: more}
	if more {
		tail := page[len(page)-1]
		reply.NextKey, reply.NextHash = tail.Key, tail.Hash
		return reply
	}
	err = m.st.ScanHosts(req.Range, func(h HostState) error {
		reply.Hosts = append(reply.Hosts, h)
		return nil
	})
	if err != nil {
		m.log.Error("pull hosts", "range", req.Range, "err", err)
		return &PullReply{Owner: true}
	}
	return reply
}

// refusal sums refused claims up for a reply: the first reason and how
// many more there were.
func refusal(errs []error) string {
	if len(errs) == 1 {
		return errs[0].Error()
	}
	return fmt.Sprintf("%v (and %d more)", errs[0], len(errs)-1)
}
