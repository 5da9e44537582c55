package shard

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// Replicas watch progress (issue 29).
//
// A replica holds every pending record its predecessors accepted, so it
// can tell whether they are crawled: for each host key it holds pending
// records of as a replica, it notes when the first arrived and when a
// Done mark for that key last came from the owner (the owner's progress
// writes carry them, one fetch per politeness gap while it works on the
// host). A key whose owner neither fetched a page (a Done mark) within
// WatchTimeout of the later of the two is taken over: the replica passes
// its pending records of the key to the app (Watcher), which fetches them
// under the host's politeness as it fetches its own, and reports the
// Done marks (WatchDone), which also go to the owner's next replica, this
// node's successor. The n-th replica of an owner (by this node's view of
// the ring at each scan: the first when the owner is its predecessor,
// else the second) waits n times WatchTimeout, so the next steps in when
// the first does nothing either: suppressing a host takes its owner and
// all K replicas, or an owner and a first replica that claims fetches it
// did not make.
//
// Watching is per host key (the ring key of a URL is its host's), so the
// state is one entry per host, not per URL, bounded by maxWatched; an
// owner slowly crawling a large host keeps it explained with every
// fetch. An honest owner whose host is slow to answer (backoff, robots
// retries) for longer than WatchTimeout may see its replica fetch a few
// of its pages too: the price of the bound.

// Watcher is implemented by an App that fetches records for a
// predecessor that neither fetched nor explained them (see "Replicas
// watch progress"). An App without it watches nothing.
type Watcher interface {
	// Watch queues recs, pending records owner holds and did not fetch,
	// to fetch under their hosts' politeness; the app reports each one
	// fetched with Manager.WatchDone.
	Watch(ctx context.Context, owner string, recs []Record)
}

// maxWatched bounds the host keys a node watches.
const maxWatched = 1 << 17

// watchLookupShare: a watch scan looks keys up (ringNames) for at most
// HeartbeatInterval/watchLookupShare after its first lookup, so that the
// tick's next heartbeat, which renews the lease, is not held up.
const watchLookupShare = 4

// watched is one host key this node watches for its owner.
type watched struct {
	owner    string
	since    time.Time // first pending record held
	lastDone time.Time // last Done mark for the key
	taken    bool      // handed to the app already
}

// watchLocked notes records stored as a replica of owner's claims.
// Callers hold m.mu.
func (m *Manager) watchLocked(owner string, recs []Record, now time.Time) {
	if m.cfg.WatchTimeout < 0 {
		return
	}
	for _, r := range recs {
		w := m.watch[r.Key]
		if w == nil {
			if r.Done || len(m.watch) >= maxWatched {
				continue
			}
			w = &watched{owner: owner, since: now}
			m.watch[r.Key] = w
		}
		switch {
		case w.owner != owner:
			w.owner, w.since, w.lastDone, w.taken = owner, now, time.Time{}, false
		case !r.Done && !w.taken && !w.lastDone.Before(w.since):
			// The wait for the last pending records ended with a Done
			// mark: this one starts a new wait.
			w.since = now
		}
		if r.Done {
			w.lastDone = now
		}
	}
}

// acceptWatchedLocked takes in the Done marks a fellow watcher, this
// node's predecessor, sent of keys whose owner is another node, and
// returns the records to store. Callers hold m.mu.
func (m *Manager) acceptWatchedLocked(from, pred ring.Peer, recs []Record, now time.Time) []Record {
	if from != pred || pred.IsZero() {
		return nil
	}
	var out []Record
	for _, r := range recs {
		if !r.Done {
			continue
		}
		e := m.table.max(Range{From: ring.ID(r.Key - 1), To: ring.ID(r.Key)})
		if e.IsZero() || e.Owner == from.Addr || e.Owner == m.self.Addr {
			continue
		}
		out = append(out, r)
		if w := m.watch[r.Key]; w != nil {
			w.lastDone = now
		}
	}
	m.stats.WatchedIn += int64(len(out))
	return out
}

// watchTick (step 8) hands the app the pending records of every watched
// key whose owner neither fetched nor explained them within the bound,
// and forgets keys this node owns now or whose owner changed. It scans
// once a second.
func (m *Manager) watchTick(ctx context.Context, now time.Time) {
	w, ok := m.app.(Watcher)
	if !ok || m.cfg.WatchTimeout < 0 {
		return
	}
	m.mu.Lock()
	if now.Sub(m.lastWatchScan) < time.Second {
		m.mu.Unlock()
		return
	}
	m.lastWatchScan = now
	type due struct {
		key   uint64
		owner string
		taken bool
	}
	var todo []due
	// The first replica is the owner's successor as the ring stands now:
	// judged when the records came, during joins, two replicas could both
	// take themselves for it and step in together (TestGrowthJoins saw
	// two nodes fetch one host's pages side by side).
	pred := m.ring.Predecessor().Addr
	for k, e := range m.watch {
		owner := m.table.max(Range{From: ring.ID(k - 1), To: ring.ID(k)}).Owner
		if m.own.claims.covers(k) || owner != e.owner {
			delete(m.watch, k)
			continue
		}
		last := e.since
		if e.lastDone.After(last) {
			last = e.lastDone
		}
		// Only an owner that is alive (this node heard from it within
		// FailureTimeout) is watched: a silent one's range is promotion's
		// to take back, and its records are fetched by its successor then.
		alive := now.Sub(m.heard[e.owner].at) <= m.cfg.FailureTimeout
		rank := time.Duration(2)
		if e.owner == pred {
			rank = 1
		}
		if e.taken || alive && now.Sub(last) > rank*m.cfg.WatchTimeout {
			todo = append(todo, due{k, e.owner, e.taken})
		}
	}
	m.mu.Unlock()
	// In key order: the same every run, as a simulation needs.
	slices.SortFunc(todo, func(a, b due) int { return cmpUint64(a.key, b.key) })
	start, looked := m.clock.Now(), false
	for _, d := range todo {
		k := ring.ID(d.key)
		// The local scan first: a key whose records are all done is
		// forgotten without asking the ring (it was due again every
		// scan, and every scan looked it up).
		var pending []Record
		err := m.st.ScanRecords(Range{From: k - 1, To: k}, func(r Record) error {
			if !r.Done {
				pending = append(pending, r)
			}
			return nil
		})
		if err != nil {
			m.log.Warn("watch: scan", "key", k, "err", err)
			continue
		}
		if len(pending) == 0 {
			m.mu.Lock()
			if e := m.watch[d.key]; e != nil && e.owner == d.owner {
				delete(m.watch, d.key) // all fetched, by someone
			}
			m.mu.Unlock()
			continue
		}
		if !d.taken {
			// Lookups are a network round trip each, and the tick that
			// makes them also renews the lease: past a budget the other
			// due keys wait for the next scan.
			if looked && m.clock.Now().Sub(start) >= m.cfg.HeartbeatInterval/watchLookupShare {
				continue
			}
			looked = true
			if !m.ringNames(ctx, k, d.owner, now) {
				continue
			}
		}
		m.mu.Lock()
		e := m.watch[d.key]
		first := e != nil && !e.taken
		if e != nil {
			e.taken = true
		}
		if first {
			m.stats.WatchFetches += int64(len(pending))
		}
		m.mu.Unlock()
		if first {
			m.log.Info("owner neither fetched nor explained its pending records; fetching them as its replica",
				"owner", d.owner, "key", k, "records", len(pending))
		}
		w.Watch(ctx, d.owner, pending)
	}
}

// ringNames reports whether the ring names owner as k's owner, asked
// before a watched key is first handed to the app. An owner that handed
// the key's range to a node that joined in its arc no longer fetches it,
// and its second replica, not a replica of the joiner, may never hear the
// joiner's claim: by its epoch table the owner still holds the key, alive
// and silent about it. When the ring names another owner, or cannot tell
// (the lookup failed), the wait starts again instead: the joiner has the
// records (the owner's handoff), and an owner the ring still names is
// watched as before. Callers do not hold m.mu.
func (m *Manager) ringNames(ctx context.Context, k ring.ID, owner string, now time.Time) bool {
	p, _, err := m.ring.Lookup(ctx, k)
	if err == nil && p.Addr == owner {
		return true
	}
	m.mu.Lock()
	if e := m.watch[uint64(k)]; e != nil && e.owner == owner && !e.taken {
		e.since = now
	}
	m.stats.WatchMoved++
	m.mu.Unlock()
	if err != nil {
		m.log.Debug("watch: cannot look the key's owner up", "key", k, "err", err)
	}
	return false
}

// HoldFor stores recs, which a sender could not get owner to vouch for
// (no receipts from its replicas), as this node holds owner's records: as
// its replica, and only for keys this node's epoch table names owner for
// and this node does not claim. held[i] tells whether recs[i] is held
// here now (taken, or held already: dups of them); the others are not
// this node's to hold. The records are watched like any other a replica
// holds, and pushed to owner at the next tick (forwardHeld), those held
// already as well while pending: an owner that could not get its
// replicas to vouch for a write may never have queued its URLs, and its
// next anti-entropy round, which would pull them, may come after this
// node's watch ran out. If owner neither fetches nor explains them, this
// node fetches them itself.
func (m *Manager) HoldFor(owner string, recs []Record) (held []bool, took, dups int, err error) {
	held = make([]bool, len(recs))
	if m.cfg.WatchTimeout < 0 || owner == m.self.Addr {
		return held, 0, 0, nil
	}
	m.mu.Lock()
	for i, r := range recs {
		e := m.table.max(Range{From: ring.ID(r.Key - 1), To: ring.ID(r.Key)})
		held[i] = e.Owner == owner && !m.own.claims.covers(r.Key) && !m.releasing.covers(r.Key)
	}
	m.mu.Unlock()
	var fresh, pending []Record
	for i, r := range recs {
		if !held[i] {
			continue
		}
		if s, ok, err := m.storedRecord(r.Key, r.Hash); err != nil {
			return nil, 0, 0, fmt.Errorf("shard: hold for %s: %w", owner, err)
		} else if ok {
			dups++
			if !s.Done {
				pending = append(pending, s)
			}
			continue
		}
		fresh = append(fresh, r)
		pending = append(pending, r)
	}
	if len(fresh) > 0 {
		if err := m.st.PutRecords(fresh); err != nil {
			return nil, 0, 0, fmt.Errorf("shard: hold for %s: %w", owner, err)
		}
	}
	now := m.clock.Now()
	m.mu.Lock()
	m.watchLocked(owner, fresh, now)
	m.stats.HeldFor += int64(len(fresh))
	for _, r := range pending {
		if m.forwardN >= maxForward {
			break // the watch still covers them
		}
		if m.forward == nil {
			m.forward = make(map[string][]Record)
		}
		m.forward[owner] = append(m.forward[owner], r)
		m.forwardN++
	}
	m.mu.Unlock()
	return held, len(fresh), dups, nil
}

// maxForward bounds the held records waiting to be pushed to their
// owners (forwardHeld).
const maxForward = 1 << 14

// forwardHeld (step 9) pushes the records HoldFor took since the last
// tick to their owners, as a merge (the replica's own records, which
// the owner takes from a successor as it takes any merge), in chunks of
// ChunkRecords in key order, whatever the keys: the owner
// stores them and queues those it has not seen. The owner is looked up
// by the first record's key; one the ring no longer names for it gets
// nothing (it handed the range on, with the records), nor does one that
// refuses: the watch covers both.
func (m *Manager) forwardHeld(ctx context.Context) {
	m.mu.Lock()
	fw := m.forward
	m.forward, m.forwardN = nil, 0
	m.mu.Unlock()
	owners := make([]string, 0, len(fw))
	for o := range fw {
		owners = append(owners, o)
	}
	slices.Sort(owners) // the same every run, as a simulation needs
	for _, owner := range owners {
		recs := fw[owner]
		if ctx.Err() != nil {
			return
		}
		to, _, err := m.ring.Lookup(ctx, ring.ID(recs[0].Key))
		if err != nil || to.Addr != owner {
			continue
		}
		slices.SortFunc(recs, func(a, b Record) int {
			if c := cmpUint64(a.Key, b.Key); c != 0 {
				return c
			}
			return cmpUint64(a.Hash, b.Hash)
		})
		for len(recs) > 0 {
			// A chunk's keys, in order, span (first-1, last].
			n := min(len(recs), m.cfg.ChunkRecords)
			r := Range{From: ring.ID(recs[0].Key - 1), To: ring.ID(recs[n-1].Key)}
			cctx, cancel := context.WithTimeout(ctx, m.cfg.AckTimeout)
			reply, err := m.tr.Handoff(cctx, to, &HandoffRequest{Range: r, Merge: true, Final: true, Records: recs[:n]})
			cancel()
			if err != nil || !reply.Accepted {
				m.log.Debug("push held records to their owner", "to", to, "range", r, "records", n, "err", err)
			} else {
				m.mu.Lock()
				m.stats.HeldForwarded += int64(n)
				m.mu.Unlock()
			}
			recs = recs[n:]
		}
	}
}
