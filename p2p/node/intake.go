package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// intake is the one way into this node's crawl queue. It admits URLs
// routed here (Admit, for the owner), rebuilds a range's queue from its
// shard records when the node takes the range over (Activate), queues
// records merged in from another node (Merged), and gives a range up
// (Deactivate). The first three check the seen set and mark it, so they
// run one at a time: between checking the seen set and marking it, a
// concurrent one with the same URL must not slip through, and accepts must
// not interleave with a queue being rebuilt. It is the shard manager's
// App: the shard records of a range are the truth about what must be
// crawled there, and the crawler's queue is a cache of them.
type intake struct {
	mu      sync.Mutex
	db      *store.DB
	crawler *crawl.Crawler
	log     *slog.Logger
	// diskLow is the last reading of Admit's free-space check, under mu;
	// diskRefused counts the new URLs it refused for want of space.
	diskLow     bool
	diskRefused atomic.Int64
	// route sends tasks to their owners (the outbox): Reroute's way out.
	route func([]frontier.Task)
}

var _ shard.App = (*intake)(nil)

// enqueueBatch bounds the tasks queued and marked seen in one store write.
const enqueueBatch = 1000

func inRange(r shard.Range) func(uint64) bool {
	return func(k uint64) bool { return r.Contains(ring.ID(k)) }
}

// admission is one URL offered to the intake: its seen-set entry, the task
// to queue, and whether it is a seed a client allowed to seed submitted,
// whose shard record is then marked seed (it brings its host into a
// scoped crawl's scope).
type admission struct {
	seen store.SeenEntry
	task frontier.Task
	seed bool
}

// Admit queues the URLs offered that the seen set has not seen, or has
// seen only at a greater depth, once replicate has stored them with the
// replicas, and marks them seen (with the smaller depth). A URL found
// again by a shorter path is queued again so that the crawler follows its
// links from there (crawl.Enqueue): that is what makes every page within
// the depth limit reachable however the crawl meets it first. So is a
// seed whose record is not marked seed yet (the URL was reached first as
// the target of a seed's redirect, or by a link): its record must be
// marked, and queuing it again costs no request (the crawler re-opens a
// page it fetched). It returns the admitted URLs and the number of
// duplicates; when replicate fails nothing is queued and its error is
// returned with the admitted URLs, which the caller hands back. The
// queue is durable before the seen set says "seen": the other order loses
// URLs to a crash in between, since the sender's retry would find them
// seen and they would never be crawled; this one at worst queues a URL
// twice after a crash.
//
// While the store's disk is below its free-space threshold
// (store.Options.MinFreeBytes) Admit takes no new URL: it returns the new
// tasks with an error wrapping errDiskLow, and the sender keeps them.
// Duplicates are still answered, and the URLs already accepted are still
// crawled.
func (in *intake) Admit(offered []admission, replicate func(fresh []admission) error) (fresh []admission, duplicates int, err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	inBatch := make(map[[2]uint64]int, len(offered)) // index in fresh
	for _, a := range offered {
		e := a.seen
		id := [2]uint64{e.Key, e.URLHash}
		if j, ok := inBatch[id]; ok {
			duplicates++
			seed := fresh[j].seed || a.seed
			if e.Depth < fresh[j].seen.Depth {
				fresh[j] = a
			}
			fresh[j].seed = seed
			continue
		}
		depth, seen, err := in.db.SeenDepth(e.Key, e.URLHash)
		if err != nil {
			return nil, duplicates, fmt.Errorf("accept %s: %w", e.URL, err)
		}
		if seen && depth <= e.Depth {
			marked := true
			if a.seed {
				if marked, err = in.db.IsSeed(e.Key, e.URLHash); err != nil {
					return nil, duplicates, fmt.Errorf("accept %s: %w", e.URL, err)
				}
			}
			if marked {
				duplicates++
				continue
			}
		}
		inBatch[id] = len(fresh)
		fresh = append(fresh, a)
	}
	if len(fresh) == 0 {
		return nil, duplicates, nil
	}
	if err := in.checkDisk(len(fresh)); err != nil {
		return fresh, duplicates, err
	}
	if err := replicate(fresh); err != nil {
		return fresh, duplicates, err
	}
	tasks := make([]frontier.Task, len(fresh))
	entries := make([]store.SeenEntry, len(fresh))
	for i, a := range fresh {
		tasks[i], entries[i] = a.task, a.seen
	}
	in.crawler.Enqueue(tasks...)
	if _, err := in.db.MarkSeen(entries); err != nil {
		return fresh, duplicates, err
	}
	return fresh, duplicates, nil
}

// errDiskLow is wrapped by Admit's error while the store's disk is below
// its free-space threshold.
var errDiskLow = errors.New("not accepting new URLs: disk space low")

// checkDisk refuses n new URLs while the store's disk is low, and logs
// when the disk becomes low and when it recovers. Callers hold in.mu.
func (in *intake) checkDisk(n int) error {
	d := in.db.DiskSpace()
	if d.Low != in.diskLow {
		in.diskLow = d.Low
		if d.Low {
			in.log.Warn("disk space low: refusing new URLs until space is freed", "free_bytes", d.Free, "min_free_bytes", d.MinFree)
		} else {
			in.log.Info("disk space recovered: accepting new URLs again", "free_bytes", d.Free, "min_free_bytes", d.MinFree)
		}
	}
	if !d.Low {
		return nil
	}
	in.diskRefused.Add(int64(n))
	return fmt.Errorf("%w: %d bytes free for the store, below the node's threshold of %d (--min-free-disk)", errDiskLow, d.Free, d.MinFree)
}

// Activate takes over a range: whatever the local queue held for it (from
// before a restart, say) is dropped, and every pending record the node has
// not fetched itself is queued and marked seen.
func (in *intake) Activate(ctx context.Context, r shard.Range) error {
	in.mu.Lock()
	defer in.mu.Unlock()
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
// queued. Callers hold in.mu.
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
// requests in flight and drops its queue; the hosts' politeness state goes
// into the shard store so that it travels with the range.
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
	in.log.Info("range deactivated", "range", r.String(), "hosts", len(hosts))
	return nil
}

// Merged queues records that another node held for a range this node owns
// (after a partition healed): those not seen here, or seen only deeper,
// are new work, and the pages it fetched are recrawled on the schedule of
// that fetch when it is newer than this node's own.
func (in *intake) Merged(_ context.Context, recs []shard.Record) {
	in.mu.Lock()
	defer in.mu.Unlock()
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
// against its seen set like any routed URL.
func (in *intake) Reroute(_ context.Context, recs []shard.Record) error {
	if in.route == nil {
		return errors.New("intake: no outbox to reroute records through")
	}
	tasks := make([]frontier.Task, 0, len(recs))
	for _, r := range recs {
		if !r.Done {
			tasks = append(tasks, frontier.Task{URL: r.URL, Depth: r.Depth, Redirects: r.Redirects})
		}
	}
	in.route(tasks)
	in.log.Info("rerouted the pending records of a range given up without a handoff", "tasks", len(tasks))
	return nil
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
