package p2p

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// epochsMeta is the store meta name of the shard manager's epoch table.
const epochsMeta = "shard/epochs"

// shardStorage keeps the shard manager's records, host states and epoch
// table in the node's store.
type shardStorage struct{ db *store.DB }

var _ shard.Storage = shardStorage{}

func (s shardStorage) PutRecords(recs []shard.Record) error {
	out := make([]store.ShardRecord, len(recs))
	for i, r := range recs {
		out[i] = store.ShardRecord{Key: r.Key, URLHash: r.Hash, URL: r.URL, Depth: r.Depth, Redirects: r.Redirects, Done: r.Done, Meta: r.Meta, MetaVersion: r.MetaVersion}
	}
	return s.db.PutShardRecords(out)
}

func (s shardStorage) ScanRecords(r shard.Range, fn func(shard.Record) error) error {
	return s.db.ScanShard(uint64(r.From), uint64(r.To), func(x store.ShardRecord) error {
		return fn(shard.Record{Key: x.Key, Hash: x.URLHash, URL: x.URL, Depth: x.Depth, Redirects: x.Redirects, Done: x.Done, Meta: x.Meta, MetaVersion: x.MetaVersion})
	})
}

func (s shardStorage) PutHosts(hs []shard.HostState) error {
	out := make([]store.ShardHost, len(hs))
	for i, h := range hs {
		out[i] = store.ShardHost{Key: h.Key, Host: h.Host, Data: h.Data}
	}
	return s.db.PutShardHosts(out)
}

func (s shardStorage) ScanHosts(r shard.Range, fn func(shard.HostState) error) error {
	return s.db.ScanShardHosts(uint64(r.From), uint64(r.To), func(h store.ShardHost) error {
		return fn(shard.HostState{Key: h.Key, Host: h.Host, Data: h.Data})
	})
}

func (s shardStorage) LoadEpochs() ([]byte, error) {
	b, err := s.db.Meta(epochsMeta)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return b, err
}

func (s shardStorage) SaveEpochs(b []byte) error { return s.db.PutMeta(epochsMeta, b) }

// shardApp connects the shard manager to the crawler: the shard records of
// a range are the truth about what must be crawled there, and the
// crawler's queue is rebuilt from them whenever the node takes a range.
type shardApp struct {
	owner   *owner
	db      *store.DB
	crawler *crawl.Crawler
	log     *slog.Logger
}

var _ shard.App = (*shardApp)(nil)

// enqueueBatch bounds the tasks queued and marked seen in one store write.
const enqueueBatch = 1000

func inRange(r shard.Range) func(uint64) bool {
	return func(k uint64) bool { return r.Contains(ring.ID(k)) }
}

// Activate takes over a range: whatever the local queue held for it (from
// before a restart, say) is dropped, and every pending record the node has
// not fetched itself is queued and marked seen. The owner's lock keeps
// concurrent accepts out until the queue is rebuilt.
func (a *shardApp) Activate(ctx context.Context, r shard.Range) error {
	a.owner.mu.Lock()
	defer a.owner.mu.Unlock()
	if _, err := a.crawler.Release(ctx, inRange(r)); err != nil {
		return fmt.Errorf("activate %s: %w", r, err)
	}
	var tasks []crawl.Task
	var seen []store.SeenEntry
	flush := func() error {
		if len(seen) > 0 {
			if _, err := a.db.MarkSeen(seen); err != nil {
				return err
			}
		}
		a.crawler.Enqueue(tasks...)
		tasks, seen = tasks[:0], seen[:0]
		return nil
	}
	// Release dropped the range's recrawl schedule, if it had one: the
	// fetched records, with their metadata, bring it back.
	var adopted []crawl.Adopted
	adopt := func() error {
		err := a.crawler.Adopt(adopted)
		adopted = adopted[:0]
		return err
	}
	queued := 0
	err := a.db.ScanShard(uint64(r.From), uint64(r.To), func(rec store.ShardRecord) error {
		seen = append(seen, store.SeenEntry{Key: rec.Key, URLHash: rec.URLHash, URL: rec.URL, Depth: rec.Depth})
		if rec.Done {
			ad := crawl.Adopted{Task: crawl.Task{URL: rec.URL, Depth: rec.Depth, Redirects: rec.Redirects}}
			if len(rec.Meta) > 0 {
				if err := ad.Meta.UnmarshalBinary(rec.Meta); err != nil {
					a.log.Warn("ignoring bad URL state in a shard record", "url", rec.URL, "err", err)
				}
			}
			if adopted = append(adopted, ad); len(adopted) >= enqueueBatch {
				if err := adopt(); err != nil {
					return err
				}
			}
		} else {
			fetched, err := a.crawler.Fetched(rec.Key, rec.URLHash)
			if err != nil {
				return err
			}
			if !fetched {
				tasks = append(tasks, crawl.Task{URL: rec.URL, Depth: rec.Depth, Redirects: rec.Redirects})
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
	if err == nil {
		err = adopt()
	}
	if err != nil {
		return fmt.Errorf("activate %s: %w", r, err)
	}
	var snaps []crawl.HostSnapshot
	err = a.db.ScanShardHosts(uint64(r.From), uint64(r.To), func(h store.ShardHost) error {
		var s crawl.HostSnapshot
		if err := s.UnmarshalBinary(h.Data); err != nil {
			a.log.Warn("skipping a bad host state", "host", h.Host, "err", err)
			return nil
		}
		snaps = append(snaps, s)
		return nil
	})
	if err != nil {
		return fmt.Errorf("activate %s: host states: %w", r, err)
	}
	a.crawler.Restore(snaps)
	a.log.Info("range activated", "range", r.String(), "queued", queued, "hosts", len(snaps))
	return nil
}

// Deactivate gives a range up: the crawler stops fetching it, waits for its
// requests in flight and drops its queue; the hosts' politeness state goes
// into the shard store so that it travels with the range.
func (a *shardApp) Deactivate(ctx context.Context, r shard.Range) error {
	snaps, err := a.crawler.Release(ctx, inRange(r))
	if err != nil {
		return fmt.Errorf("deactivate %s: %w", r, err)
	}
	hosts, err := hostStates(snaps)
	if err == nil {
		err = shardStorage{db: a.db}.PutHosts(hosts)
	}
	if err != nil {
		return fmt.Errorf("deactivate %s: %w", r, err)
	}
	// What this node fetched is done, whether or not the replicas heard of
	// it yet: the records that travel with the range must say so, or the
	// next owner fetches those pages again. (This node stays up, so the
	// links still in its outbox are delivered.)
	// Likewise the newest metadata of what it fetched, so that the next
	// owner recrawls on schedule.
	var done []store.ShardRecord
	err = a.db.ScanShard(uint64(r.From), uint64(r.To), func(rec store.ShardRecord) error {
		changed := false
		if !rec.Done {
			fetched, err := a.crawler.Fetched(rec.Key, rec.URLHash)
			if err != nil {
				return err
			}
			rec.Done, changed = fetched, fetched
		}
		meta, version, err := urlState(a.db, rec.Key, rec.URLHash)
		if err != nil {
			return err
		}
		if version > rec.MetaVersion {
			rec.Meta, rec.MetaVersion, changed = meta, version, true
		}
		if changed {
			done = append(done, rec)
		}
		return nil
	})
	if err == nil {
		err = a.db.PutShardRecords(done)
	}
	if err != nil {
		return fmt.Errorf("deactivate %s: %w", r, err)
	}
	a.log.Info("range deactivated", "range", r.String(), "hosts", len(hosts))
	return nil
}

// Merged queues records that another node held for a range this node owns
// (after a partition healed): those not seen here are new work, and the
// pages it fetched are recrawled on the schedule of that fetch when it is
// newer than this node's own.
func (a *shardApp) Merged(_ context.Context, recs []shard.Record) {
	a.owner.mu.Lock()
	defer a.owner.mu.Unlock()
	var tasks []crawl.Task
	var seen []store.SeenEntry
	var adopted []crawl.Adopted
	for _, r := range recs {
		if r.Done {
			ad := crawl.Adopted{Task: crawl.Task{URL: r.URL, Depth: r.Depth, Redirects: r.Redirects}}
			if len(r.Meta) == 0 || ad.Meta.UnmarshalBinary(r.Meta) != nil {
				continue
			}
			if _, version, err := urlState(a.db, r.Key, r.Hash); err == nil && version < r.MetaVersion {
				adopted = append(adopted, ad)
			}
			continue
		}
		ok, err := a.db.Seen(r.Key, r.Hash)
		if err != nil {
			a.log.Warn("merge: seen check failed", "url", r.URL, "err", err)
			continue
		}
		if ok {
			continue
		}
		seen = append(seen, store.SeenEntry{Key: r.Key, URLHash: r.Hash, URL: r.URL, Depth: r.Depth})
		tasks = append(tasks, crawl.Task{URL: r.URL, Depth: r.Depth, Redirects: r.Redirects})
	}
	if err := a.crawler.Adopt(adopted); err != nil {
		a.log.Warn("merge: adopting the recrawl state of fetched URLs failed", "err", err)
	}
	if len(tasks) == 0 {
		return
	}
	a.crawler.Enqueue(tasks...)
	if _, err := a.db.MarkSeen(seen); err != nil {
		a.log.Warn("merge: mark seen failed", "err", err)
	}
	a.log.Info("merged records from another node", "queued", len(tasks))
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

// recordState encodes a URL's metadata as a shard record's Meta and
// MetaVersion (the fetch time); nil and 0 for a URL never fetched.
func recordState(m store.URLMeta) (meta []byte, version uint64, err error) {
	if m.LastFetch.IsZero() {
		return nil, 0, nil
	}
	meta, err = m.MarshalBinary()
	return meta, uint64(m.LastFetch.UnixNano()), err
}

// hostStates turns the crawler's host snapshots into shard host states.
func hostStates(snaps []crawl.HostSnapshot) ([]shard.HostState, error) {
	out := make([]shard.HostState, 0, len(snaps))
	for _, s := range snaps {
		b, err := s.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("host %s: %w", s.Host, err)
		}
		out = append(out, shard.HostState{Key: s.Key, Host: s.Host, Data: b})
	}
	return out, nil
}
