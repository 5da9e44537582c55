package shard

import (
	"context"
	"fmt"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// Rerouted done marks.
//
// A node that gives a piece up without a handoff (see "Releases the owner
// will not take" in tick.go) sends its pending records as tasks. Its done
// records (what it fetched, with the fetch's Meta) and its host states
// (politeness clocks) go to the owner that answered for the piece too, in
// HandoffRequests with Reroute set, a page of records or of host states
// at a time; the same goes for the records of a stale claim the rightful
// owner will not take as a merge. Delivery is best effort: a refused or failed send only
// costs what it cost before (the owner may fetch those pages again, and
// fetch the host without knowing its clock).
//
// A done mark suppresses a fetch, so the owner takes one only from a peer
// its own view says held the piece, as it judges a handoff:
//
//   - a peer it would take a handoff of the piece from now (admitGiver: a
//     successor, one of the K predecessors it replicates, a placed and
//     plausible owner, or a giver a witness vouched for at the sender's
//     claim epoch); or
//   - a peer it noted as a holder of the piece within WitnessWindow: the
//     owner its epoch table named over the piece when it claimed it
//     (promotion), a successor (a peer whose handoff it would have taken
//     then) that answered its pull of the piece as its owner, or a giver
//     whose handoff or merge of the piece it took.
//
// Only the part of the range the owner claims itself counts, and only
// done records: what is still pending arrives as tasks, each owner
// deduping it like any link. A done record's seed mark is dropped (a seed
// travels with its signed statement as a task only while pending), so a
// rerouted record cannot make a host a seed host. Host states are not
// stored: the app (RerouteApp) applies them to its live politeness state
// only where they make it stricter, a later next-allowed time within the
// crawler's own bound, and never a looser one, nor a robots.txt. A
// stranger, or a member that never held the piece, changes nothing.
//
// What this does not cover: a far owner that no witness vouched for and
// that never saw the giver as its successor or in its table (many nodes
// joined between them before the giver could hand over) cannot tell the
// giver from a stranger, and refuses its done marks as before.

// RerouteApp is implemented by an App that takes rerouted done marks and
// host states (see "Rerouted done marks"). Rerouted gets done records of
// ranges this node actively claims, as stored after the merge, and host
// states of hosts in them; the app marks the records' URLs seen, adopts
// their fetch state (Meta) when newer than its own, and applies each host
// state only where it makes the host's politeness stricter. An App that
// does not implement it gets the records through Merged, and no host
// states.
type RerouteApp interface {
	Rerouted(ctx context.Context, recs []Record, hosts []HostState)
}

// holder is a peer this node's own view said held part of its arc, and
// when it last said so.
type holder struct {
	spans spanSet
	at    time.Time
}

// maxHolders bounds the holders noted; the oldest go first.
const maxHolders = 64

// noteHolderLocked notes that this node's view said the peer at addr held
// s at now. Callers hold m.mu.
func (m *Manager) noteHolderLocked(addr string, s spanSet, now time.Time) {
	if addr == "" || addr == m.self.Addr || s.empty() {
		return
	}
	if m.holders == nil {
		m.holders = make(map[string]holder)
	}
	h := m.holders[addr]
	h.spans, h.at = union(h.spans, s), now
	m.holders[addr] = h
	for a, x := range m.holders {
		if now.Sub(x.at) > m.cfg.WitnessWindow {
			delete(m.holders, a)
		}
	}
	for len(m.holders) > maxHolders {
		oldest := ""
		for a, x := range m.holders {
			if oldest == "" || x.at.Before(m.holders[oldest].at) || x.at.Equal(m.holders[oldest].at) && a < oldest {
				oldest = a
			}
		}
		delete(m.holders, oldest)
	}
}

// heldLocked returns what this node noted the peer at addr held, within
// WitnessWindow. Callers hold m.mu.
func (m *Manager) heldLocked(addr string, now time.Time) spanSet {
	h, ok := m.holders[addr]
	if !ok || now.Sub(h.at) > m.cfg.WitnessWindow {
		return nil
	}
	return h.spans
}

// noteTableOwnersLocked notes, before this node claims s, the owners its
// epoch table names over s. Callers hold m.mu.
func (m *Manager) noteTableOwnersLocked(s spanSet, now time.Time) {
	for _, p := range m.table.m.pieces(s) {
		if o := p.e.Owner; o != "" && o != m.self.Addr {
			m.noteHolderLocked(o, spanSet{{p.lo, p.hi}}, now)
		}
	}
}

// sendRerouted sends to, which claims r and will not take it from this
// node by handoff, the done records and then the host states this node
// holds over r, a page at a time (see "Rerouted done marks"); epoch is
// this node's claim of r, if it had one. It returns how many done records
// and host states the receiver took, and stops at the first refusal.
func (m *Manager) sendRerouted(ctx context.Context, to ring.Peer, r Range, epoch Epoch) (recs, hosts int, err error) {
	send := func(req *HandoffRequest) error {
		req.Range, req.Epoch, req.Reroute = r, epoch, true
		cctx, cancel := context.WithTimeout(ctx, m.cfg.AckTimeout)
		defer cancel()
		reply, err := m.tr.Handoff(cctx, to, req)
		if err != nil {
			return fmt.Errorf("shard: send done marks of %s to %s: %w", r, to, err)
		}
		if !reply.Accepted {
			return fmt.Errorf("shard: %s refused the done marks of %s: %s", to, r, reply.Reason)
		}
		return nil
	}
	done := func(rec Record) bool { return rec.Done }
	var after *cursor
	for {
		page, more, err := m.pageRecords(r, after, m.cfg.ChunkRecords, done)
		if err != nil {
			return recs, hosts, fmt.Errorf("shard: send done marks of %s: %w", r, err)
		}
		if len(page) > 0 {
			if err := send(&HandoffRequest{Records: page}); err != nil {
				return recs, hosts, err
			}
			recs += len(page)
		}
		if !more || len(page) == 0 {
			break
		}
		tail := page[len(page)-1]
		after = &cursor{tail.Key, tail.Hash}
	}
	var hafter *hostCursor
	for {
		page, more, err := m.pageHosts(r, hafter, m.cfg.ChunkRecords)
		if err != nil {
			return recs, hosts, fmt.Errorf("shard: send host states of %s: %w", r, err)
		}
		if len(page) > 0 {
			if err := send(&HandoffRequest{Hosts: page}); err != nil {
				return recs, hosts, err
			}
			hosts += len(page)
		}
		if !more || len(page) == 0 {
			return recs, hosts, nil
		}
		tail := page[len(page)-1]
		hafter = &hostCursor{tail.Key, tail.Host}
	}
}

// sendDoneMarks is sendRerouted that logs its outcome: the pending
// records went as tasks already, so a refusal only loses what a reroute
// lost before.
func (m *Manager) sendDoneMarks(ctx context.Context, to ring.Peer, r Range, epoch Epoch) {
	recs, hosts, err := m.sendRerouted(ctx, to, r, epoch)
	if err != nil {
		m.log.Info("done marks of a rerouted range not taken", "range", r, "owner", to, "records", recs, "hosts", hosts, "err", err)
		return
	}
	if recs+hosts > 0 {
		m.log.Info("sent the done marks of a rerouted range", "range", r, "owner", to, "records", recs, "hosts", hosts)
	}
}

// handleRerouted serves a HandoffRequest with Reroute set (see "Rerouted
// done marks"): the done records and host states inside what this node
// claims and its view says from held are stored (records) and passed to
// the app; everything else is dropped.
func (m *Manager) handleRerouted(ctx context.Context, from ring.Peer, req *HandoffRequest) *HandoffReply {
	now := m.clock.Now()
	reply := &HandoffReply{}
	if v := m.currentView(); v.known {
		reply.Owned, reply.HasOwned = v.r, true
	}
	m.mu.Lock()
	claimed := intersect(spansOf(req.Range), m.claimedLocked())
	m.mu.Unlock()
	if claimed.empty() {
		reply.Reason = "range not claimed here"
		return reply
	}
	// Judged as a handoff of the range now, or as a merge when the sender
	// names no claim of its own.
	judge := &HandoffRequest{Range: req.Range, Epoch: req.Epoch, Merge: req.Epoch.IsZero()}
	var ok spanSet
	if _, err := m.admitGiver(ctx, from, judge, now); err == nil {
		ok = claimed
	} else {
		m.mu.Lock()
		ok = intersect(claimed, m.heldLocked(from.Addr, now))
		m.mu.Unlock()
		if ok.empty() {
			m.mu.Lock()
			m.stats.Implausible++
			m.mu.Unlock()
			m.log.Debug("refused rerouted done marks", "from", from, "range", req.Range, "err", err)
			reply.Reason = fmt.Sprintf("not a holder of %s by this node's view: %v", req.Range, err)
			return reply
		}
	}
	var recs []Record
	for _, r := range req.Records {
		if r.Done && ok.contains(r.Key) {
			r.Seed, r.SeedProof = false, nil
			recs = append(recs, r)
		}
	}
	var hosts []HostState
	for _, h := range req.Hosts {
		if ok.contains(h.Key) {
			hosts = append(hosts, h)
		}
	}
	if len(recs) > 0 {
		if err := m.st.PutRecords(recs); err != nil {
			m.log.Error("store rerouted done marks", "from", from, "err", err)
			reply.Reason = "storage error"
			return reply
		}
	}
	m.transMu.Lock()
	if ra, isRA := m.app.(RerouteApp); isRA {
		// Pass what is stored, in active claims only: a claim dropped
		// meanwhile is no longer the app's to crawl.
		var stored []Record
		m.mu.Lock()
		for _, r := range recs {
			if m.own.claims.covers(r.Key) {
				stored = append(stored, r)
			}
		}
		var live []HostState
		for _, h := range hosts {
			if m.own.claims.covers(h.Key) {
				live = append(live, h)
			}
		}
		m.mu.Unlock()
		for i, r := range stored {
			if s, found, err := m.storedRecord(r.Key, r.Hash); err == nil && found {
				stored[i] = s
			}
		}
		if len(stored) > 0 || len(live) > 0 {
			ra.Rerouted(context.WithoutCancel(ctx), stored, live)
		}
	} else {
		m.notifyMerged(context.WithoutCancel(ctx), recs)
	}
	m.transMu.Unlock()
	m.mu.Lock()
	m.stats.ReroutedIn += int64(len(recs))
	m.mu.Unlock()
	if len(recs)+len(hosts) > 0 {
		m.log.Info("took rerouted done marks", "from", from, "range", req.Range, "records", len(recs), "hosts", len(hosts))
	}
	reply.Accepted = true
	return reply
}
