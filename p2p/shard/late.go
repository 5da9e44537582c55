package shard

import (
	"context"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// Late done marks.
//
// A fetch can end after its range left: the owner's own last request, or
// a helper's batch (route.Delegator) whose reply comes after the owner
// handed the host's range to a node that joined in its arc. Its Done mark
// reaches Progress when the range is no longer claimed here, and the
// heartbeat, which sends only what this node claims, used to drop it: the
// receiver, holding the page as pending from the handoff, fetched it again
// (a simulated 100-machine crawl under 5% churn a minute: 9 of 16
// duplicates were such pages).
//
// So the manager remembers, for WitnessWindow and at most maxHanded
// pieces, whom it handed each piece to, and a done record that arrives for
// a piece it handed off goes to that receiver as a rerouted done mark
// (HandoffRequest with Reroute set, see "Rerouted done marks" in
// reroute.go). The receiver judges it as any rerouted done mark: it takes
// it only over what it claims and only from a peer its own view says held
// the piece, which the giver of a handoff it took is. Delivery is best
// effort, one try: a refusal or a failure costs what it cost before, one
// more fetch of the page. Records of a part still releasing are not late:
// they are stored and go with its handoff.

// maxHanded bounds the handed-off pieces remembered; the oldest go first.
const maxHanded = 64

// handedPiece is a piece this node handed off: to whom, under which of
// this node's epochs, and when.
type handedPiece struct {
	r     Range
	to    ring.Peer
	epoch Epoch
	at    time.Time
}

// noteHandedLocked remembers that r went to to. Callers hold m.mu.
func (m *Manager) noteHandedLocked(r Range, to ring.Peer, epoch Epoch, now time.Time) {
	kept := m.handed[:0]
	for _, h := range m.handed {
		if now.Sub(h.at) <= m.cfg.WitnessWindow {
			kept = append(kept, h)
		}
	}
	m.handed = append(kept, handedPiece{r: r, to: to, epoch: epoch, at: now})
	if over := len(m.handed) - maxHanded; over > 0 {
		m.handed = append(m.handed[:0], m.handed[over:]...)
	}
}

// lateLocked splits recs, done records of keys this node no longer
// claims, by the piece it handed each to, the latest hand-off first;
// records of no remembered piece are dropped. Callers hold m.mu.
func (m *Manager) lateLocked(recs []Record, now time.Time) map[int][]Record {
	if len(recs) == 0 || len(m.handed) == 0 {
		return nil // every heartbeat asks: most have nothing late
	}
	var out map[int][]Record
	releasing := m.releasing.domain()
	for _, r := range recs {
		if !r.Done || releasing.contains(r.Key) {
			continue
		}
		for i := len(m.handed) - 1; i >= 0; i-- {
			h := m.handed[i]
			if now.Sub(h.at) <= m.cfg.WitnessWindow && h.r.Contains(ring.ID(r.Key)) {
				if out == nil {
					out = map[int][]Record{}
				}
				out[i] = append(out[i], r)
				break
			}
		}
	}
	return out
}

// sendLate sends each piece's late done marks to the node it was handed
// to (see "Late done marks"), a chunk at a time, once.
func (m *Manager) sendLate(ctx context.Context, pieces []handedPiece, late map[int][]Record) {
	for i, recs := range late {
		h := pieces[i]
		for len(recs) > 0 {
			n := min(len(recs), m.cfg.ChunkRecords)
			req := &HandoffRequest{Range: h.r, Epoch: h.epoch, Reroute: true, Records: recs[:n]}
			recs = recs[n:]
			cctx, cancel := context.WithTimeout(ctx, m.cfg.AckTimeout)
			reply, err := m.tr.Handoff(cctx, h.to, req)
			cancel()
			if err != nil || !reply.Accepted {
				reason := ""
				if reply != nil {
					reason = reply.Reason
				}
				m.log.Debug("late done marks not taken", "to", h.to, "range", h.r, "err", err, "reason", reason)
				break
			}
			m.mu.Lock()
			m.stats.LateDoneOut += int64(n)
			m.mu.Unlock()
		}
	}
}
