package shard

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// Witnesses: how the owner of a piece of a range learns that a far node,
// which its own view of the ring cannot tell from a stranger, held the
// piece and may hand it over.
//
// A handoff is judged by the receiver's view of the ring (plausible.go):
// its predecessor, its successor list (8 peers) and its fingers. When more
// nodes join inside one owner's arc than a successor list holds, before
// the owner has handed the pieces off, the owner of a far piece sees a
// dozen live nodes between itself and the old owner, as it would for a
// stranger. Refused for ever, the old owner kept the piece releasing and
// pushed it every tick, and the records it had accepted there never
// reached the piece's owner, which claimed it empty by pull after
// FailureTimeout ("stuck releases", docs/scale.md).
//
// The nodes that can vouch for the old owner are those that took its
// claims in when it held the range: its replicas. A node witnesses the
// claims a replica write carries from its ring predecessor P, once it took
// them in (plausible, not beaten by its epoch table), for the part of them
// inside (A, P], where A is the nearest peer before P that this node heard
// from (took a claim or a handoff from) within Lease. With K >= 2 a node
// hears from its first two predecessors, so it witnesses exactly its
// predecessor's claims over the arc between the two: the ring's arc of
// that predecessor, as this node saw it while both were alive. A claim
// that reaches back past a live neighbour (the neighbour is heard), or to
// a point no heard peer anchors, or that comes from another peer than the
// predecessor, is not witnessed. Each witnessed claim is kept for
// WitnessWindow after this node last saw it, and a Digest with Witness set
// is answered with those over the asked range.
//
// A node that refuses a handoff of part of its own arc because the giver
// is not plausible (and only then: the epoch must name the giver and be
// within the clock bound), a part it does not claim yet, asks in its next
// Tick the giver's first 2K successors, found by its own lookups from the
// giver's position, for the claims they witnessed over that part. If one
// of them witnessed the giver's claim over all of it, at the handoff's
// epoch, the node takes handoffs of that part from the giver at that
// epoch for FailureTimeout; the giver pushes again every tick. Otherwise
// it asks again, if the giver does, after Lease. A node asks only about
// parts of its arc it does not claim, so only while it waits for them
// (after it joined, or its predecessor changed, until it claims by pull):
// a node that claims its arc asks nothing, however many handoffs it is
// sent, and at most witnessChecksPerTick questions a Tick.
//
// What this lets a peer do: hand over a range that one of its successors,
// by its own view and what it heard, saw it claim within WitnessWindow.
// A stranger (not in the ring) is no member's predecessor, so no member
// witnesses it. A member hands over only the arc it held as its successor
// saw it, which it could hand over (or poison) while it held it anyway; a
// witness that lies needs a member beside the giver to collude. With
// K = 1 a node hears from one predecessor only and witnesses nothing.
//
// A far owner that no witness vouched for (the claim was made while the
// ring was in flux and nothing anchored it, or K = 1), or that the giver
// reached too late, claims its piece by pull, and the giver then gives the
// piece up and reroutes its pending records (see "Releases the owner will
// not take" in tick.go).

// heardFrom is one peer this node took a claim or a handoff from: when
// last (at), and when it last took claims from it as its replica (wrote).
type heardFrom struct {
	peer      ring.Peer
	at, wrote time.Time
}

// heardLocked notes that this node took a claim (replica true) or a
// handoff from p at now. Callers hold m.mu.
func (m *Manager) heardLocked(p ring.Peer, now time.Time, replica bool) {
	h := m.heard[p.Addr]
	h.peer = p
	if now.After(h.at) {
		h.at = now
	}
	if replica && now.After(h.wrote) {
		h.wrote = now
	}
	m.heard[p.Addr] = h
}

// feedsLocked reports whether p is one of the K predecessors this node
// replicates, by what it hears: p is pred, this node's ring predecessor,
// or pred and p both had claims taken in here, as their replica, within
// Lease, with fewer than K such peers nearer before this node than p
// (with K = 2: its first two predecessors). Such a peer may hand this node
// state of its arc as its successors may: the node that held the whole
// ring, or a range a partition gave it, hands its successors their arcs
// back. A peer further away that got a claim taken in here does not
// qualify: the predecessors are nearer, and a predecessor that has not
// replicated here lately (a new node with no claim yet) makes only itself
// qualify. Callers hold m.mu.
func (m *Manager) feedsLocked(p, pred ring.Peer, now time.Time) bool {
	writes := func(q ring.Peer) bool {
		h, ok := m.heard[q.Addr]
		return ok && h.peer == q && now.Sub(h.wrote) < m.cfg.Lease
	}
	if p.ID == m.self.ID || !writes(p) {
		return false
	}
	if p == pred {
		return true
	}
	if pred.IsZero() || !writes(pred) {
		return false
	}
	// Writers are counted by machine, as owners choose their replicas
	// (replicaOrder).
	d := uint64(m.self.ID - p.ID)
	closer := map[string]bool{}
	for _, o := range m.heard {
		if mc := o.peer.Machine(); mc != p.Machine() && o.peer.ID != m.self.ID && writes(o.peer) && uint64(m.self.ID-o.peer.ID) < d {
			closer[mc] = true
		}
	}
	return len(closer) < m.cfg.Replicas
}

// witnessTable maps each witnessed claim to when this node last saw it.
type witnessTable map[Claim]time.Time

// maxWitnessed bounds the witness table; the oldest entries go first.
const maxWitnessed = 1024

// maxWitnessReply bounds the witnessed claims in one Digest reply, and
// how many of a reply the asking node reads.
const maxWitnessReply = 256

// witnessLocked records which of the claims cs, just taken in from from as
// its replica, this node witnesses (see "Witnesses"): only those of its
// ring predecessor pred, inside (A, from] for the nearest peer A before
// from that it heard from within Lease. Callers hold m.mu.
func (m *Manager) witnessLocked(from, pred ring.Peer, cs []Claim, now time.Time) {
	if len(cs) == 0 || pred != from {
		return
	}
	anchor, ok := m.anchorLocked(from, now)
	if !ok {
		return
	}
	if (Range{From: anchor.ID, To: from.ID}).Contains(m.self.ID) {
		// The nearest peer heard before the sender lies after this node:
		// nothing heard anchors the sender's arc.
		return
	}
	arc := spansOf(Range{From: anchor.ID, To: from.ID})
	for _, c := range cs {
		for _, r := range intersect(spansOf(c.Range), arc).ranges() {
			m.witness[Claim{Range: r, Epoch: c.Epoch}] = now
		}
	}
	m.pruneWitnessLocked(now)
}

// anchorLocked returns the nearest peer before p (counter-clockwise) that
// this node heard from within Lease, other than p and itself.
func (m *Manager) anchorLocked(p ring.Peer, now time.Time) (ring.Peer, bool) {
	var best ring.Peer
	found := false
	for addr, h := range m.heard {
		// Entries older than FailureTimeout matter to nothing (the
		// promotion wait counts from the later of them and the view's
		// change): forget them, so the map holds the recent peers only.
		if now.Sub(h.at) > m.cfg.FailureTimeout {
			delete(m.heard, addr)
			continue
		}
		q := h.peer
		if q.Addr == p.Addr || q.Addr == m.self.Addr || q.ID == p.ID || now.Sub(h.at) >= m.cfg.Lease {
			continue
		}
		// The distance from q clockwise to p; the smallest is the nearest
		// peer before p. Ties (equal IDs) go to the lower address, so the
		// choice does not depend on map order.
		d, bd := uint64(p.ID-q.ID), uint64(p.ID-best.ID)
		if !found || d < bd || (d == bd && q.Addr < best.Addr) {
			best, found = q, true
		}
	}
	return best, found
}

// pruneWitnessLocked drops witnessed claims older than WitnessWindow and,
// beyond maxWitnessed, the oldest. Callers hold m.mu.
func (m *Manager) pruneWitnessLocked(now time.Time) {
	for c, at := range m.witness {
		if now.Sub(at) > m.cfg.WitnessWindow {
			delete(m.witness, c)
		}
	}
	if len(m.witness) <= maxWitnessed {
		return
	}
	type entry struct {
		c  Claim
		at time.Time
	}
	all := make([]entry, 0, len(m.witness))
	for c, at := range m.witness {
		all = append(all, entry{c, at})
	}
	slices.SortFunc(all, func(a, b entry) int {
		if x := a.at.Compare(b.at); x != 0 {
			return x
		}
		return cmpClaims(a.c, b.c)
	})
	for _, e := range all[:len(all)-maxWitnessed] {
		delete(m.witness, e.c)
	}
}

// witnessedOver returns the claims this node witnessed within
// WitnessWindow, clipped to r, in a stable order and at most
// maxWitnessReply of them.
func (m *Manager) witnessedOver(r Range, now time.Time) []Claim {
	s := spansOf(r)
	m.mu.Lock()
	var out []Claim
	for c, at := range m.witness {
		if now.Sub(at) > m.cfg.WitnessWindow {
			continue
		}
		for _, x := range intersect(spansOf(c.Range), s).ranges() {
			out = append(out, Claim{Range: x, Epoch: c.Epoch})
		}
	}
	m.mu.Unlock()
	slices.SortFunc(out, cmpClaims)
	if len(out) > maxWitnessReply {
		out = out[:maxWitnessReply]
	}
	return out
}

func cmpClaims(a, b Claim) int {
	return cmp.Or(
		cmp.Compare(a.Range.From, b.Range.From), cmp.Compare(a.Range.To, b.Range.To),
		cmp.Compare(a.Epoch.N, b.Epoch.N), cmp.Compare(a.Epoch.Owner, b.Epoch.Owner))
}

// witnessCheck is one question a receiver asks about a giver: did a
// witness see giver claim r at epoch? Once answered, ok is the answer and
// at when it came.
type witnessCheck struct {
	giver ring.Peer
	r     Range
	epoch Epoch
	ok    bool
	at    time.Time
}

// covers reports whether c answers the question of a handoff of r from
// giver at epoch.
func (c witnessCheck) covers(giver ring.Peer, r Range, epoch Epoch) bool {
	return c.giver == giver && c.epoch == epoch && subsetOf(spansOf(r), spansOf(c.r))
}

// witnessChecks is the receiving side: questions waiting for the next
// Tick, and the answers, kept for WitnessWindow (within maxWitnessChecks).
type witnessChecks struct {
	pending, answered []witnessCheck
}

// maxWitnessChecks bounds the questions waiting and the answers kept, so
// that refused handoffs cannot make a node hold or ask more than that.
const maxWitnessChecks = 32

// witnessChecksPerTick bounds the questions asked in one Tick: each costs
// up to 2K lookups and as many Digest calls.
const witnessChecksPerTick = 4

// vouchedLocked reports whether a witness vouched, within FailureTimeout,
// for a handoff of r from giver at epoch: long enough for the giver's
// next push. Callers hold m.mu.
func (m *Manager) vouchedLocked(giver ring.Peer, r Range, epoch Epoch, now time.Time) bool {
	for _, c := range m.checks.answered {
		if c.ok && now.Sub(c.at) < m.cfg.FailureTimeout && c.covers(giver, r, epoch) {
			return true
		}
	}
	return false
}

// askWitnessLocked queues the question for a handoff of r from giver at
// epoch, unless it waits already, was answered yes within FailureTimeout
// or no within Lease (the giver's next refused push asks again after
// that), or the queue is full. Callers hold m.mu.
func (m *Manager) askWitnessLocked(giver ring.Peer, r Range, epoch Epoch, now time.Time) {
	for _, c := range m.checks.pending {
		if c.covers(giver, r, epoch) {
			return
		}
	}
	for _, c := range m.checks.answered {
		fresh := now.Sub(c.at) < m.cfg.Lease || (c.ok && now.Sub(c.at) < m.cfg.FailureTimeout)
		if fresh && c.covers(giver, r, epoch) {
			return
		}
	}
	if len(m.checks.pending) >= maxWitnessChecks {
		return
	}
	m.checks.pending = append(m.checks.pending, witnessCheck{giver: giver, r: r, epoch: epoch})
}

// checkWitnesses (the last step of Tick) asks the witnesses of the
// questions waiting, a few per Tick, and keeps the answers.
func (m *Manager) checkWitnesses(ctx context.Context) {
	m.mu.Lock()
	now := m.clock.Now()
	m.checks.answered = slices.DeleteFunc(m.checks.answered, func(c witnessCheck) bool { return now.Sub(c.at) > m.cfg.WitnessWindow })
	n := min(len(m.checks.pending), witnessChecksPerTick)
	todo := slices.Clone(m.checks.pending[:n])
	m.checks.pending = slices.Delete(m.checks.pending, 0, n)
	m.mu.Unlock()
	for _, c := range todo {
		if ctx.Err() != nil {
			return
		}
		w, ok := m.askWitnesses(ctx, c)
		m.mu.Lock()
		c.ok, c.at = ok, m.clock.Now()
		if ok {
			m.stats.Witnessed++
		}
		m.checks.answered = append(m.checks.answered, c)
		if extra := len(m.checks.answered) - maxWitnessChecks; extra > 0 {
			m.checks.answered = slices.Delete(m.checks.answered, 0, extra)
		}
		m.mu.Unlock()
		if ok {
			m.log.Info("handoff giver witnessed", "giver", c.giver, "range", c.r, "epoch", c.epoch, "witness", w)
		} else {
			m.log.Debug("handoff giver not witnessed", "giver", c.giver, "range", c.r, "epoch", c.epoch)
		}
	}
}

// askWitnesses walks the giver's first 2K successors, found by this
// node's lookups, and returns the first that witnessed the giver's claim
// over all of c.r at c.epoch.
func (m *Manager) askWitnesses(ctx context.Context, c witnessCheck) (ring.Peer, bool) {
	asked := map[string]bool{c.giver.Addr: true}
	prev := c.giver
	for range 2 * m.cfg.Replicas {
		w, _, err := m.ring.Lookup(ctx, prev.ID+1)
		if err != nil || asked[w.Addr] {
			return ring.Peer{}, false
		}
		asked[w.Addr] = true
		var claims []Claim
		if w == m.self {
			claims = m.witnessedOver(c.r, m.clock.Now())
		} else {
			cctx, cancel := context.WithTimeout(ctx, m.cfg.AckTimeout)
			reply, err := m.tr.Digest(cctx, w, &DigestRequest{Range: c.r, Witness: true})
			cancel()
			if err != nil {
				m.log.Debug("witness did not answer", "witness", w, "giver", c.giver, "err", err)
				prev = w
				continue
			}
			claims = reply.Witnessed
		}
		if witnessedAll(claims, c.r, c.epoch) {
			return w, true
		}
		prev = w
	}
	return ring.Peer{}, false
}

// witnessedAll reports whether the claims (a witness's answer, at most
// maxWitnessReply of them read) cover all of r at exactly epoch.
func witnessedAll(claims []Claim, r Range, epoch Epoch) bool {
	want := spansOf(r)
	var got spanSet
	for _, c := range claims[:min(len(claims), maxWitnessReply)] {
		if c.Epoch == epoch {
			got = union(got, intersect(spansOf(c.Range), want))
		}
	}
	return subsetOf(want, got)
}
