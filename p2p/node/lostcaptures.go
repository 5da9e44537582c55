package node

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// Lost captures. A page's bytes live only in the WARC files of the peer
// that fetched it, its holder (see "Where a capture lives" in
// docs/architecture.md). When a holder is gone for good, with its data
// dir, the done marks of its pages still name its captures, so nobody
// fetches those pages again and the archive silently lacks them. Each
// node therefore watches the holders its done marks name, and once one
// has been gone longer than the grace period (Config.CaptureGrace) it
// queues again the URLs it owns whose every capture that holder (or
// another gone one) held, through its crawl queue like any recrawl:
// robots.txt, the politeness gap and the owner's lease all hold. The
// fetch puts the new fetcher's capture in the done mark, which replaces
// the lost ones there and travels to the replicas like any done mark, so
// the URL is not queued again.
//
// "Gone" is this node's own judgement, from two things no single peer
// can forge together: the ring no longer places the holder at its own
// position (a lookup of the holder's first position, which every member
// has, answers another peer) and this node cannot reach the holder (a
// ring ping fails). A lookup that fails says nothing, and either sign of
// life restarts the clock, so a holder that is slow, restarting or
// briefly cut off costs nothing unless it stays away for the whole grace
// period.

// DefaultCaptureGrace is Config.CaptureGrace's default: longer than a
// node's restart, an upgrade or a passing network partition (minutes),
// after which the holder is back with its WARC files and nothing needs
// fetching; short enough that a swarm export misses a lost page for no
// longer than a crawl's progress is usually watched.
const DefaultCaptureGrace = 10 * time.Minute

// Bounds of the lost-capture watch.
const (
	// lostScanPage is how many shard records one page of a scan reads.
	lostScanPage = 1000
	// lostRequeueMax bounds the URLs one scan queues again; the next
	// scan, an interval later, takes the next ones.
	lostRequeueMax = 5000
	// lostRequeueBatch is how many URLs are queued under one hold of
	// the admission lock.
	lostRequeueBatch = 500
	// lostPendingMax bounds the URLs queued again and not yet seen
	// fetched (held in memory to queue each once).
	lostPendingMax = 100_000
	// lostPendingTTL is how long a URL queued again waits for its fetch
	// before a scan may queue it once more (its task was dropped with a
	// range given up and taken back, say, or the fetch failed for good:
	// the site is gone too); each time after that it waits twice as
	// long, up to lostPendingMaxTTL.
	lostPendingTTL    = time.Hour
	lostPendingMaxTTL = 128 * time.Hour
	// lostHoldersMax bounds the holders watched; captures of others are
	// taken as present until a later scan finds room for them.
	lostHoldersMax = 1024
	// lostProbeTimeout bounds one holder's lookup and ping;
	// lostProbeParallel is how many holders are probed at once.
	lostProbeTimeout  = 5 * time.Second
	lostProbeParallel = 4
)

// lostInterval is how often the watch probes its holders and may scan:
// a fifth of the grace period, within [200ms, 1min].
func lostInterval(grace time.Duration) time.Duration {
	return min(max(grace/5, 200*time.Millisecond), time.Minute)
}

// lostURL is a URL whose every capture is held by gone peers, queued
// tries times before.
type lostURL struct {
	key, hash        uint64
	url              string
	depth, redirects int
	tries            int
}

// pendingURL is a URL queued again at at, the tries-th time.
type pendingURL struct {
	at    time.Time
	tries int
}

// wait is how long p waits for its fetch before it may be queued again.
func (p pendingURL) wait() time.Duration {
	return min(lostPendingTTL<<min(max(p.tries-1, 0), 16), lostPendingMaxTTL)
}

// holderWatch is what the watch knows of one holder.
type holderWatch struct {
	// goneSince is when it was first found gone in the current run of
	// failed probes; zero while it is present.
	goneSince time.Time
}

// LostCaptureStatus reports the lost-capture watch (see Config.CaptureGrace).
type LostCaptureStatus struct {
	// Grace is how long a holder must be gone before its captures are
	// fetched again; empty when the watch is off.
	Grace string `json:"grace,omitempty"`
	// Holders is how many peers holding captures of this node's done
	// marks are watched; Suspect how many of them are gone for less than
	// the grace period, Gone how many for longer.
	Holders int `json:"holders"`
	Suspect int `json:"suspect"`
	Gone    int `json:"gone"`
	// Requeued counts URLs queued again because their every capture was
	// held by gone peers; Pending those of them not seen fetched yet.
	Requeued int64 `json:"requeued"`
	Pending  int   `json:"pending"`
	// Scans counts full scans of the node's shard records.
	Scans int64 `json:"scans"`
}

// lostCaptures is the lost-capture watch of one node. Its funcs are the
// node's (see newLostCaptures), replaced in tests.
type lostCaptures struct {
	grace time.Duration
	self  string
	log   *slog.Logger
	db    *store.DB
	now   func() time.Time
	// present reports whether holder shows a sign of life (see above).
	present func(ctx context.Context, holder string) bool
	// owns reports whether this node owns a ring key now.
	owns func(key uint64) bool
	// claims is a token of the node's claimed ranges: a change makes
	// the next tick scan again when a holder is gone.
	claims func() string
	// requeue queues lost URLs again, dropping the gone holders'
	// captures from this node's metadata of them; it returns those it
	// queued (not those this node no longer owns).
	requeue func(lost []lostURL, gone func(holder string) bool) ([]lostURL, error)

	mu      sync.Mutex
	holders map[string]*holderWatch
	// pending are the URLs queued again, by (ring key, URL hash); a
	// scan that finds one with a capture by a present holder (or not
	// lost any more, or not owned) forgets it.
	pending map[[2]uint64]pendingURL

	lastScan     time.Time
	lastClaims   string
	lastGone     int  // expired holders at the last scan
	lastCapped   bool // the last scan left lost URLs for the next one
	requeued     atomic.Int64
	scans        atomic.Int64
	reportedGone map[string]bool // holders logged as gone
}

// newLostCaptures returns the node's lost-capture watch, nil when
// Config.CaptureGrace turns it off.
func (n *Node) newLostCaptures() *lostCaptures {
	if n.cfg.CaptureGrace < 0 {
		return nil
	}
	return &lostCaptures{
		grace: n.cfg.CaptureGrace, self: n.host.ID().String(), log: n.log, db: n.db, now: time.Now,
		present: n.holderPresent,
		owns:    n.pos.Owns,
		claims: func() string {
			return claimsToken(n.shardStats().Claims) // every position's
		},
		requeue: n.requeueLost,
	}
}

// holderPresent reports whether holder shows a sign of life: the ring
// places it at its first position, or it answers a ping. A lookup that
// fails counts as a sign of life: this node cannot tell.
func (n *Node) holderPresent(ctx context.Context, holder string) bool {
	id, err := peer.Decode(holder)
	if err != nil {
		return false // no peer at all: its captures cannot be had
	}
	ctx, cancel := context.WithTimeout(ctx, lostProbeTimeout)
	defer cancel()
	owner, _, err := n.ring.Lookup(ctx, p2p.PositionID(id, 0))
	if err != nil || owner.Machine() == holder {
		return true
	}
	return n.ringTr.Ping(ctx, p2p.RingPeer(id)) == nil
}

// requeueLost queues lost URLs again under the admission lock (not
// between a range's queue being dropped and rebuilt), those this node
// still owns: the gone holders' captures leave this node's metadata of
// each, and so do its validators and its recrawl time, so that the fetch
// is unconditional (a 304 would archive nothing) and not taken for a
// stale recrawl.
func (n *Node) requeueLost(lost []lostURL, gone func(string) bool) (queued []lostURL, err error) {
	for len(lost) > 0 {
		batch := lost[:min(len(lost), lostRequeueBatch)]
		lost = lost[len(batch):]
		err := n.admit.Exclusive(func() error {
			tasks := make([]frontier.Task, 0, len(batch))
			var done []lostURL
			for _, l := range batch {
				if !n.pos.Owns(l.key) {
					continue
				}
				m, ok, err := n.db.URLMeta(l.key, l.hash)
				if err != nil {
					return err
				}
				if ok {
					kept := m.Captures[:0:0]
					for _, c := range m.Captures {
						if !gone(c.Holder) {
							kept = append(kept, c)
						}
					}
					m.Captures = kept
					m.ETag, m.LastModified, m.NextCrawl = "", "", time.Time{}
					if err := n.db.PutURLMeta(l.key, l.hash, m); err != nil {
						return err
					}
				}
				tasks = append(tasks, frontier.Task{URL: l.url, Depth: l.depth, Redirects: l.redirects, Recrawl: true})
				done = append(done, l)
			}
			n.crawler.Enqueue(tasks...)
			queued = append(queued, done...)
			return nil
		})
		if err != nil {
			return queued, err
		}
	}
	return queued, nil
}

// Run probes the watched holders and scans the node's shard records
// every interval until ctx ends.
func (l *lostCaptures) Run(ctx context.Context) {
	every(ctx, lostInterval(l.grace), func() bool {
		l.tick(ctx)
		return true
	})
}

// tick probes the holders, then scans when it is time: at first, a
// grace period after the last scan (to find new holders), or when a
// holder is gone past the grace period and something changed since the
// last scan (another gone holder, the node's claims, a scan cut short).
func (l *lostCaptures) tick(ctx context.Context) {
	l.probe(ctx)
	now := l.now()
	claims := l.claims()
	l.mu.Lock()
	gone := l.goneLocked(now)
	due := l.lastScan.IsZero() || now.Sub(l.lastScan) >= l.grace ||
		len(gone) > 0 && (len(gone) != l.lastGone || claims != l.lastClaims || l.lastCapped)
	l.mu.Unlock()
	if !due {
		return
	}
	if err := l.scan(ctx, gone, claims); err != nil && ctx.Err() == nil {
		l.log.Warn("scanning for lost captures failed", "err", err)
	}
}

// goneLocked returns the holders gone for at least the grace period.
func (l *lostCaptures) goneLocked(now time.Time) map[string]bool {
	gone := map[string]bool{}
	for h, w := range l.holders {
		if !w.goneSince.IsZero() && now.Sub(w.goneSince) >= l.grace {
			gone[h] = true
		}
	}
	return gone
}

// probe asks after every watched holder, a few at a time.
func (l *lostCaptures) probe(ctx context.Context) {
	l.mu.Lock()
	names := make([]string, 0, len(l.holders))
	for h := range l.holders {
		names = append(names, h)
	}
	l.mu.Unlock()
	alive := make([]bool, len(names))
	var wg sync.WaitGroup
	sem := make(chan struct{}, lostProbeParallel)
	for i, h := range names {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			alive[i] = l.present(ctx, h)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, h := range names {
		w := l.holders[h]
		switch {
		case w == nil:
		case alive[i]:
			if l.reportedGone[h] {
				l.log.Info("a holder of captures is back", "holder", h)
				delete(l.reportedGone, h)
			}
			w.goneSince = time.Time{}
		case w.goneSince.IsZero():
			w.goneSince = now
		case now.Sub(w.goneSince) >= l.grace && !l.reportedGone[h]:
			if l.reportedGone == nil {
				l.reportedGone = map[string]bool{}
			}
			l.reportedGone[h] = true
			l.log.Warn("a holder of captures is gone past the grace period: its captures are fetched again", "holder", h, "gone_for", now.Sub(w.goneSince).Round(time.Second).String())
		}
	}
}

// scan walks every shard record this node holds, page by page: it learns
// the holders its done marks name (to watch them), forgets the pending
// URLs that were fetched again, and queues again the URLs it owns whose
// every capture a gone holder held, at most lostRequeueMax of them.
func (l *lostCaptures) scan(ctx context.Context, gone map[string]bool, claims string) error {
	now := l.now()
	l.mu.Lock()
	oldPending := l.pending
	watched := make(map[string]bool, len(l.holders))
	for h := range l.holders {
		watched[h] = true
	}
	l.mu.Unlock()
	seen := map[string]bool{}
	pending := map[[2]uint64]pendingURL{}
	var lost []lostURL
	capped := false
	var c store.ShardCursor
	for more := true; more; {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var err error
		c, more, err = l.db.ScanShardPage(c, lostScanPage, func(rec store.ShardRecord) error {
			if !rec.Done || len(rec.Meta) == 0 {
				return nil
			}
			m, err := decodeRecordState(rec.Meta)
			if err != nil || len(m.Captures) == 0 {
				return nil // not this watch's to judge
			}
			allGone := true
			for _, cp := range m.Captures {
				if cp.Holder == l.self {
					allGone = false
					continue
				}
				if !seen[cp.Holder] && (len(seen) < lostHoldersMax || watched[cp.Holder]) {
					seen[cp.Holder] = true
				}
				if !gone[cp.Holder] {
					allGone = false
				}
			}
			id := [2]uint64{rec.Key, rec.URLHash}
			if !allGone || !l.owns(rec.Key) {
				return nil // a present capture (a refetch done), or not this node's to fetch
			}
			p, ok := oldPending[id]
			if ok && now.Sub(p.at) < p.wait() {
				pending[id] = p // queued already, its fetch not done yet
				return nil
			}
			if len(lost) >= lostRequeueMax || len(pending)+len(lost) >= lostPendingMax {
				capped = true
				return nil
			}
			lost = append(lost, lostURL{key: rec.Key, hash: rec.URLHash, url: rec.URL, depth: rec.Depth, redirects: rec.Redirects, tries: p.tries})
			return nil
		})
		if err != nil {
			return err
		}
	}
	var err error
	if len(lost) > 0 {
		var queued []lostURL
		queued, err = l.requeue(lost, func(h string) bool { return gone[h] })
		l.requeued.Add(int64(len(queued)))
		l.log.Info("queued again the URLs whose captures were held by gone peers", "urls", len(queued), "gone_holders", len(gone), "more_next_scan", capped)
		for _, u := range queued {
			pending[[2]uint64{u.key, u.hash}] = pendingURL{at: now, tries: u.tries + 1}
		}
	}
	l.scans.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	// Holders no done mark names any more are not watched.
	for h := range l.holders {
		if !seen[h] {
			delete(l.holders, h)
		}
	}
	if l.holders == nil {
		l.holders = map[string]*holderWatch{}
	}
	for h := range seen {
		if l.holders[h] == nil {
			l.holders[h] = &holderWatch{}
		}
	}
	l.pending = pending
	l.lastScan, l.lastClaims, l.lastGone, l.lastCapped = now, claims, len(gone), capped || err != nil
	return err
}

// claimsToken is a token of a node's claimed ranges, equal for the same
// ranges.
func claimsToken(cs []shard.Claim) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.Range.String())
	}
	return b.String()
}

// Status reports the watch; nil-safe (the watch off).
func (l *lostCaptures) Status() LostCaptureStatus {
	if l == nil {
		return LostCaptureStatus{}
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := LostCaptureStatus{Grace: l.grace.String(), Holders: len(l.holders), Pending: len(l.pending),
		Requeued: l.requeued.Load(), Scans: l.scans.Load()}
	for _, w := range l.holders {
		switch {
		case w.goneSince.IsZero():
		case now.Sub(w.goneSince) >= l.grace:
			s.Gone++
		default:
			s.Suspect++
		}
	}
	return s
}
