package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// cursor is a position in ring order: just after (key, hash).
type cursor struct{ key, hash uint64 }

// pageRecords returns up to limit records of r that pass filter (nil: all),
// in ring order after the cursor (nil: from the start), and whether more
// follow.
func (m *Manager) pageRecords(r Range, after *cursor, limit int, filter func(Record) bool) ([]Record, bool, error) {
	var at *resumeAt[Record]
	if after != nil {
		at = &resumeAt[Record]{key: after.key, past: func(rec Record) bool {
			return rec.Key == after.key && rec.Hash > after.hash
		}}
	}
	return page("records", m.st.ScanRecords, r, at, limit, filter)
}

// hostCursor is a position in host order: just after (key, host).
type hostCursor struct {
	key  uint64
	host string
}

// pageHosts is pageRecords for host states.
func (m *Manager) pageHosts(r Range, after *hostCursor, limit int) ([]HostState, bool, error) {
	var at *resumeAt[HostState]
	if after != nil {
		at = &resumeAt[HostState]{key: after.key, past: func(h HostState) bool {
			return h.Key == after.key && h.Host > after.host
		}}
	}
	return page("hosts", m.st.ScanHosts, r, at, limit, nil)
}

// resumeAt is where a page resumes: among the items of ring key key, just
// after those past does not report; then from the next key on.
type resumeAt[T any] struct {
	key  uint64
	past func(T) bool
}

// page returns up to limit items of r that keep accepts (nil: all), in the
// order scan yields them (ring order), starting after at (nil: from the
// start), and whether more follow. what names the items in errors.
func page[T any](what string, scan func(Range, func(T) error) error, r Range, at *resumeAt[T], limit int, keep func(T) bool) ([]T, bool, error) {
	var out []T
	add := func(x T) error {
		if keep != nil && !keep(x) {
			return nil
		}
		out = append(out, x)
		if len(out) > limit {
			return errStopScan
		}
		return nil
	}
	rest, restOK := r, true
	if at != nil {
		k := ring.ID(at.key)
		err := scan(Range{From: k - 1, To: k}, func(x T) error {
			if at.past(x) {
				return add(x)
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStopScan) {
			return nil, false, fmt.Errorf("shard: scan %s: %w", what, err)
		}
		rest, restOK = Range{From: k, To: r.To}, k != r.To
	}
	if restOK && len(out) <= limit {
		if err := scan(rest, add); err != nil && !errors.Is(err, errStopScan) {
			return nil, false, fmt.Errorf("shard: scan %s: %w", what, err)
		}
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// sendHandoff streams r's records (those passing filter) and, unless
// merge, its host states to one peer in chunks, the last one Final. It
// returns the Final's reply, or the first refusal.
func (m *Manager) sendHandoff(ctx context.Context, to ring.Peer, r Range, e Epoch, merge bool, filter func(Record) bool) (*HandoffReply, error) {
	send := func(req *HandoffRequest) (*HandoffReply, error) {
		req.Range, req.Epoch, req.Merge = r, e, merge
		cctx, cancel := context.WithTimeout(ctx, m.cfg.AckTimeout)
		defer cancel()
		reply, err := m.tr.Handoff(cctx, to, req)
		if err != nil {
			return nil, fmt.Errorf("shard: handoff %s to %s: %w", r, to, err)
		}
		return reply, nil
	}
	var after *cursor
	var last []Record
	for {
		page, more, err := m.pageRecords(r, after, m.cfg.ChunkRecords, filter)
		if err != nil {
			return nil, err
		}
		if !more {
			last = page
			break
		}
		reply, err := send(&HandoffRequest{Records: page})
		if err != nil || !reply.Accepted {
			return reply, err
		}
		tail := page[len(page)-1]
		after = &cursor{tail.Key, tail.Hash}
	}
	var hafter *hostCursor
	for {
		var hosts []HostState
		more := false
		if !merge {
			var err error
			if hosts, more, err = m.pageHosts(r, hafter, m.cfg.ChunkRecords); err != nil {
				return nil, err
			}
		}
		if !more {
			return send(&HandoffRequest{Records: last, Hosts: hosts, Final: true})
		}
		reply, err := send(&HandoffRequest{Records: last, Hosts: hosts})
		if err != nil || !reply.Accepted {
			return reply, err
		}
		last = nil
		tail := hosts[len(hosts)-1]
		hafter = &hostCursor{tail.Key, tail.Host}
	}
}

// pullFrom copies what peer p holds over r (records passing filter, host
// states, epoch table entries) into this node, page by page. owner reports
// that p claims part of r itself and sent nothing.
func (m *Manager) pullFrom(ctx context.Context, p ring.Peer, r Range, filter func(Record) bool) (owner bool, err error) {
	req := PullRequest{Range: r}
	rs := spansOf(r)
	for {
		cctx, cancel := context.WithTimeout(ctx, m.cfg.AckTimeout)
		reply, err := m.tr.Pull(cctx, p, &req)
		cancel()
		if err != nil {
			return false, fmt.Errorf("shard: pull %s from %s: %w", r, p, err)
		}
		if reply.Owner {
			if slices.Contains(m.ring.Successors(), p) {
				// A successor, whose handoff of r this node would take,
				// says it holds part of r: a holder (reroute.go).
				m.mu.Lock()
				m.noteHolderLocked(p.Addr, rs, m.clock.Now())
				m.mu.Unlock()
			}
			return true, nil
		}
		var recs []Record
		for _, rec := range reply.Records {
			if r.Contains(ring.ID(rec.Key)) && (filter == nil || filter(rec)) {
				recs = append(recs, rec)
			}
		}
		var hosts []HostState
		for _, h := range reply.Hosts {
			if r.Contains(ring.ID(h.Key)) {
				hosts = append(hosts, h)
			}
		}
		if len(recs) > 0 {
			if err := m.st.PutRecords(recs); err != nil {
				return false, fmt.Errorf("shard: pull: store records: %w", err)
			}
		}
		if len(hosts) > 0 {
			if err := m.st.PutHosts(hosts); err != nil {
				return false, fmt.Errorf("shard: pull: store hosts: %w", err)
			}
		}
		now := m.clock.Now()
		epochs, future := m.splitFuture(reply.Epochs, now)
		m.mu.Lock()
		if len(future) > 0 {
			m.stats.FutureEpochs += int64(len(future))
			m.log.Warn("pulled epochs from the future; ignored", "from", p, "claims", future)
		}
		changed := false
		for _, c := range epochs {
			for _, x := range intersect(spansOf(c.Range), rs).ranges() {
				if m.table.raise(x, c.Epoch) {
					changed = true
				}
			}
		}
		if changed {
			m.saveTableLocked()
			m.dropStaleLocked(now)
		}
		m.mu.Unlock()
		m.transMu.Lock()
		m.notifyMerged(ctx, recs)
		m.transMu.Unlock()
		if !reply.More {
			break
		}
		next := PullRequest{Range: r, AfterKey: reply.NextKey, AfterHash: reply.NextHash, HasAfter: true}
		if req.HasAfter && next.AfterKey == req.AfterKey && next.AfterHash == req.AfterHash {
			return false, fmt.Errorf("shard: pull %s from %s: cursor did not advance", r, p)
		}
		req = next
	}
	m.mu.Lock()
	m.stats.Pulls++
	m.mu.Unlock()
	return false, nil
}
