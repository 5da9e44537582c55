package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// intake keeps the crawler's queue in step with the node's shard records:
// it rebuilds a range's queue from its shard records when the node takes
// the range over (Activate), queues records merged in from another node
// (Merged), gives a range up (Deactivate) and reroutes records of a range
// given up without a handoff. It is the shard manager's App: the shard
// records of a range are the truth about what must be crawled there, and
// the crawler's queue is a cache of them. URLs routed here come in through
// the routing layer's Intake (admit), under whose lock the first two run:
// a queue being rebuilt must not interleave with an admission.
type intake struct {
	admit   *route.Intake
	db      *store.DB
	crawler *crawl.Crawler
	log     *slog.Logger
	// route sends tasks to their owners (the outbox): Reroute's way out;
	// holdProof keeps a rerouted seed's signed statement for the way
	// (false: too many held).
	route     func([]frontier.Task)
	holdProof func(url string, proof []byte) bool
}

var _ shard.App = (*intake)(nil)

// enqueueBatch bounds the tasks queued and marked seen in one store write.
const enqueueBatch = 1000

func inRange(r shard.Range) func(uint64) bool {
	return func(k uint64) bool { return r.Contains(ring.ID(k)) }
}

// crawlQueue is where the routing layer's Intake puts admitted URLs
// (route.Queue): the crawler's queue, then the seen set, in the store.
type crawlQueue struct {
	db      *store.DB
	crawler *crawl.Crawler
	log     *slog.Logger
	// diskLow is the last reading of Room's free-space check (Room runs
	// under the Intake's lock); diskRefused counts the new URLs it
	// refused for want of space.
	diskLow     bool
	diskRefused atomic.Int64
}

var _ route.Queue = (*crawlQueue)(nil)

// Queue implements route.Queue: the queue is durable before the seen set
// says "seen": the other order loses URLs to a crash in between, since the
// sender's retry would find them seen and they would never be crawled;
// this one at worst queues a URL twice after a crash.
func (q *crawlQueue) Queue(fresh []route.Admission) error {
	tasks := make([]frontier.Task, len(fresh))
	entries := make([]store.SeenEntry, len(fresh))
	for i, a := range fresh {
		t := a.Task
		tasks[i] = frontier.Task{URL: t.URL, Depth: t.Depth, Redirects: t.Redirects}
		entries[i] = store.SeenEntry{Key: a.Key, URLHash: a.Hash, URL: t.URL, Depth: t.Depth}
	}
	q.crawler.Enqueue(tasks...)
	_, err := q.db.MarkSeen(entries)
	return err
}

// errDiskLow is wrapped by Room's error while the store's disk is below
// its free-space threshold.
var errDiskLow = errors.New("not accepting new URLs: disk space low")

// Room implements route.Queue: while the store's disk is below its
// free-space threshold (store.Options.MinFreeBytes) no new URL is taken;
// the sender keeps it. Duplicates are still answered, and the URLs
// already accepted are still crawled. Room logs when the disk becomes low
// and when it recovers.
func (q *crawlQueue) Room(n int) error {
	d := q.db.DiskSpace()
	if d.Low != q.diskLow {
		q.diskLow = d.Low
		if d.Low {
			q.log.Warn("disk space low: refusing new URLs until space is freed", "free_bytes", d.Free, "min_free_bytes", d.MinFree)
		} else {
			q.log.Info("disk space recovered: accepting new URLs again", "free_bytes", d.Free, "min_free_bytes", d.MinFree)
		}
	}
	if !d.Low {
		return nil
	}
	q.diskRefused.Add(int64(n))
	return fmt.Errorf("%w: %d bytes free for the store, below the node's threshold of %d (--min-free-disk)", errDiskLow, d.Free, d.MinFree)
}

// Activate takes over a range: whatever the local queue held for it (from
// before a restart, say) is dropped, and every pending record the node has
// not fetched itself is queued and marked seen.
func (in *intake) Activate(ctx context.Context, r shard.Range) error {
	return in.admit.Exclusive(func() error { return in.activate(ctx, r) })
}

func (in *intake) activate(ctx context.Context, r shard.Range) error {
	if _, err := in.crawler.ReleaseRange(ctx, inRange(r)); err != nil {
		return fmt.Errorf("activate %s: %w", r, err)
	}
	queued, err := in.queueRecords(r)
	if err != nil {
		return fmt.Errorf("activate %s: %w", r, err)
	}
	hosts, err := in.restoreHosts(r)
	if err != nil {
		return fmt.Errorf("activate %s: host states: %w", r, err)
	}
	in.log.Info("range activated", "range", r.String(), "queued", queued, "hosts", hosts)
	return nil
}

// queueRecords marks every record of r seen, queues the pending ones this
// node has not crawled itself and those it saw deeper than their records
// say, and schedules the recrawls of the fetched
// ones (ReleaseRange dropped the range's schedule, if it had one: the done
// records, with their metadata, bring it back). It returns how many it
// queued. Callers hold the admission lock.
func (in *intake) queueRecords(r shard.Range) (queued int, err error) {
	var tasks []frontier.Task
	var seen []store.SeenEntry
	var adopted []crawl.Adopted
	flush := func() error {
		if len(seen) > 0 {
			if _, err := in.db.MarkSeen(seen); err != nil {
				return err
			}
		}
		in.crawler.Enqueue(tasks...)
		err := in.crawler.Adopt(adopted)
		tasks, seen, adopted = tasks[:0], seen[:0], adopted[:0]
		return err
	}
	err = in.db.ScanShard(uint64(r.From), uint64(r.To), func(rec store.ShardRecord) error {
		// A URL this node saw deeper than the record says was found by a
		// shorter path while the range was elsewhere: queued again, so that
		// the crawler follows its links from there if it fetched it here.
		depth, wasSeen, err := in.db.SeenDepth(rec.Key, rec.URLHash)
		if err != nil {
			return err
		}
		shorter := wasSeen && rec.Depth < depth
		seen = append(seen, store.SeenEntry{Key: rec.Key, URLHash: rec.URLHash, URL: rec.URL, Depth: rec.Depth})
		task := frontier.Task{URL: rec.URL, Depth: rec.Depth, Redirects: rec.Redirects}
		if shorter {
			tasks = append(tasks, task)
			queued++
		}
		if rec.Done {
			ad := crawl.Adopted{Task: task}
			if len(rec.Meta) > 0 {
				var err error
				if ad.Meta, err = decodeRecordState(rec.Meta); err != nil {
					in.log.Warn("ignoring bad URL state in a shard record", "url", rec.URL, "err", err)
				}
			}
			adopted = append(adopted, ad)
		} else {
			crawled, err := in.crawler.Crawled(rec.Key, rec.URLHash)
			if err != nil {
				return err
			}
			if !crawled && !shorter {
				tasks = append(tasks, task)
				queued++
			}
		}
		if len(seen) >= enqueueBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	return queued, err
}

// restoreHosts hands the crawler the host states stored for r, skipping
// those that do not decode or fit together, and returns how many it
// restored.
func (in *intake) restoreHosts(r shard.Range) (int, error) {
	var snaps []crawl.HostSnapshot
	err := in.db.ScanShardHosts(uint64(r.From), uint64(r.To), func(h store.ShardHost) error {
		s, err := decodeHostState(shard.HostState{Key: h.Key, Host: h.Host, Data: h.Data})
		if err != nil {
			in.log.Warn("skipping a bad host state", "host", h.Host, "err", err)
			return nil
		}
		snaps = append(snaps, s)
		return nil
	})
	if err != nil {
		return 0, err
	}
	in.crawler.Restore(snaps)
	return len(snaps), nil
}

// Deactivate gives a range up: the crawler stops fetching it, waits for its
// requests in flight and drops its queue, again once the admissions in
// flight have ended; the hosts' politeness state goes into the shard
// store so that it travels with the range.
func (in *intake) Deactivate(ctx context.Context, r shard.Range) error {
	snaps, err := in.crawler.ReleaseRange(ctx, inRange(r))
	if err != nil {
		return fmt.Errorf("deactivate %s: %w", r, err)
	}
	hosts, err := hostStates(snaps)
	if err == nil {
		err = shardStorage{db: in.db}.PutHosts(hosts)
	}
	if err != nil {
		return fmt.Errorf("deactivate %s: %w", r, err)
	}
	// What this node fetched is done, whether or not the replicas heard of
	// it yet: the records that travel with the range must say so, or the
	// next owner fetches those pages again. (This node stays up, so the
	// links still in its outbox are delivered.) Likewise the newest
	// metadata of what it fetched, so that the next owner recrawls on
	// schedule.
	var done []store.ShardRecord
	err = in.db.ScanShardMeta(uint64(r.From), uint64(r.To), func(rec store.ShardRecord, m *store.URLMeta) error {
		changed := false
		if !rec.Done {
			// A URL with metadata was fetched (as Crawled would say);
			// one without may still have a page or a dead letter.
			fetched := m != nil
			if !fetched {
				var err error
				if fetched, err = in.crawler.Crawled(rec.Key, rec.URLHash); err != nil {
					return err
				}
			}
			rec.Done, changed = fetched, fetched
		}
		if m != nil && metaVersion(*m) > rec.MetaVersion {
			meta, version, err := recordState(*m)
			if err != nil {
				return err
			}
			rec.Meta, rec.MetaVersion, changed = meta, version, true
		}
		if changed {
			done = append(done, rec)
		}
		return nil
	})
	if err == nil {
		err = in.db.PutShardRecords(done)
	}
	if err != nil {
		return fmt.Errorf("deactivate %s: %w", r, err)
	}
	// An admission that found the range owned before it was given up may
	// have queued its tasks since the release above: under the admission
	// lock, every such admission has ended, and their tasks go too (their
	// records went with the range). Any later admission finds the range
	// not owned. The lock order is Activate's: the shard manager's first.
	err = in.admit.Exclusive(func() error {
		_, err := in.crawler.ReleaseRange(ctx, inRange(r))
		return err
	})
	if err != nil {
		return fmt.Errorf("deactivate %s: admissions in flight: %w", r, err)
	}
	in.log.Info("range deactivated", "range", r.String(), "hosts", len(hosts))
	return nil
}

// Merged queues records that another node held for a range this node owns
// (after a partition healed): those not seen here, or seen only deeper,
// are new work, and the pages it fetched are recrawled on the schedule of
// that fetch when it is newer than this node's own.
func (in *intake) Merged(_ context.Context, recs []shard.Record) {
	_ = in.admit.Exclusive(func() error { in.merged(recs); return nil })
}

func (in *intake) merged(recs []shard.Record) {
	var tasks []frontier.Task
	var seen []store.SeenEntry
	var adopted []crawl.Adopted
	for _, r := range recs {
		if r.Done {
			if len(r.Meta) == 0 {
				continue
			}
			m, err := decodeRecordState(r.Meta)
			if err != nil {
				continue
			}
			ad := crawl.Adopted{Task: frontier.Task{URL: r.URL, Depth: r.Depth, Redirects: r.Redirects}, Meta: m}
			if _, version, err := urlState(in.db, r.Key, r.Hash); err == nil && version < r.MetaVersion {
				adopted = append(adopted, ad)
			}
			continue
		}
		depth, ok, err := in.db.SeenDepth(r.Key, r.Hash)
		if err != nil {
			in.log.Warn("merge: seen check failed", "url", r.URL, "err", err)
			continue
		}
		if ok && depth <= r.Depth {
			continue
		}
		seen = append(seen, store.SeenEntry{Key: r.Key, URLHash: r.Hash, URL: r.URL, Depth: r.Depth})
		tasks = append(tasks, frontier.Task{URL: r.URL, Depth: r.Depth, Redirects: r.Redirects})
	}
	if err := in.crawler.Adopt(adopted); err != nil {
		in.log.Warn("merge: adopting the recrawl state of fetched URLs failed", "err", err)
	}
	if len(tasks) == 0 {
		return
	}
	in.crawler.Enqueue(tasks...)
	if _, err := in.db.MarkSeen(seen); err != nil {
		in.log.Warn("merge: mark seen failed", "err", err)
	}
	in.log.Info("merged records from another node", "queued", len(tasks))
}

// Reroute sends pending records of a range the shard manager gave up
// without a handoff (its owner took it over without them) to their owners
// through the outbox, as links found on a page: each owner dedupes them
// against its seen set like any routed URL. A seed goes with its signed
// statement, so that its owner marks it a seed again if it honours it.
func (in *intake) Reroute(_ context.Context, recs []shard.Record) error {
	if in.route == nil {
		return errors.New("intake: no outbox to reroute records through")
	}
	tasks := make([]frontier.Task, 0, len(recs))
	for _, r := range recs {
		if !r.Done {
			if r.Seed && r.SeedProof != nil && in.holdProof != nil && !in.holdProof(r.URL, r.SeedProof) {
				in.log.Warn("rerouting a seed without its signature: too many seeds waiting for their owners", "url", r.URL)
			}
			tasks = append(tasks, frontier.Task{URL: r.URL, Depth: r.Depth, Redirects: r.Redirects})
		}
	}
	in.route(tasks)
	in.log.Info("rerouted the pending records of a range given up without a handoff", "tasks", len(tasks))
	return nil
}

var _ shard.RerouteApp = (*intake)(nil)

// Rerouted implements shard.RerouteApp: done records and host states of a
// range this node claims, from a node the shard manager judged held the
// range and gave it up without a handoff. A done record's URL is marked
// seen at the record's depth, so that a link to it is a duplicate, and the
// state of its fetch (Meta) is adopted when newer than this node's own, so
// that a copy already queued here is reopened from it rather than fetched
// again and the page is recrawled on schedule. A host state only makes the
// host's politeness stricter: its next-allowed time is applied when later
// than this node's (the crawler caps it at its own longest delay), and its
// robots.txt is ignored, since a peer's copy could allow what the site's
// own forbids.
func (in *intake) Rerouted(_ context.Context, recs []shard.Record, hosts []shard.HostState) {
	_ = in.admit.Exclusive(func() error { in.rerouted(recs, hosts); return nil })
}

func (in *intake) rerouted(recs []shard.Record, hosts []shard.HostState) {
	var seen []store.SeenEntry
	var adopted []crawl.Adopted
	for _, r := range recs {
		if !r.Done {
			continue
		}
		depth, ok, err := in.db.SeenDepth(r.Key, r.Hash)
		if err != nil {
			in.log.Warn("rerouted done mark: seen check failed", "url", r.URL, "err", err)
			continue
		}
		if !ok || depth > r.Depth {
			seen = append(seen, store.SeenEntry{Key: r.Key, URLHash: r.Hash, URL: r.URL, Depth: r.Depth})
		}
		if len(r.Meta) == 0 {
			continue
		}
		m, err := decodeRecordState(r.Meta)
		if err != nil {
			in.log.Warn("rerouted done mark: ignoring bad URL state", "url", r.URL, "err", err)
			continue
		}
		if _, version, err := urlState(in.db, r.Key, r.Hash); err == nil && version < r.MetaVersion {
			adopted = append(adopted, crawl.Adopted{Task: frontier.Task{URL: r.URL, Depth: r.Depth, Redirects: r.Redirects}, Meta: m})
		}
	}
	if len(seen) > 0 {
		if _, err := in.db.MarkSeen(seen); err != nil {
			in.log.Warn("rerouted done marks: mark seen failed", "err", err)
		}
	}
	if err := in.crawler.Adopt(adopted); err != nil {
		in.log.Warn("rerouted done marks: adopting the state of fetched URLs failed", "err", err)
	}
	var snaps []crawl.HostSnapshot
	for _, h := range hosts {
		s, err := decodeHostState(h)
		if err != nil {
			in.log.Warn("skipping a bad rerouted host state", "host", h.Host, "err", err)
			continue
		}
		snaps = append(snaps, crawl.HostSnapshot{Host: s.Host, Key: s.Key, NotBefore: s.NotBefore})
	}
	in.crawler.Restore(snaps)
	in.log.Info("took the done marks of a range rerouted to this node", "records", len(recs), "marked_seen", len(seen), "adopted", len(adopted), "hosts", len(snaps))
}

// urlState is what this node knows of a URL after fetching it, as a shard
// record's Meta and MetaVersion (the fetch time): nil and 0 when it never
// fetched the URL.
func urlState(db *store.DB, key, urlHash uint64) (meta []byte, version uint64, err error) {
	m, ok, err := db.URLMeta(key, urlHash)
	if err != nil || !ok {
		return nil, 0, err
	}
	return recordState(m)
}
