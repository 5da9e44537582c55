package node

import (
	"errors"
	"strconv"

	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// epochsMeta is the store meta name of the epoch table of the node's
// position 0 (its only one with one position).
const epochsMeta = "shard/epochs"

// epochsMetaOf is the store meta name of position i's epoch table: every
// position's shard manager keeps its own (what it claimed and what it
// witnessed as a replica), while the records and host states of all
// positions share the store's tables.
func epochsMetaOf(i int) string {
	if i == 0 {
		return epochsMeta
	}
	return epochsMeta + "/" + strconv.Itoa(i)
}

// shardStorage keeps a shard manager's records, host states and epoch
// table in the node's store. The records and host states of all the
// node's positions share one table each (positions own disjoint arcs,
// and nothing is ever deleted from them); epochs names the position's
// own epoch table. Every record the manager stores passes here, whichever
// way it came (routed to this node, a replicate write, a handoff, a
// merge, a pull), once the manager has judged the claims it came under:
// seeds judges its seed mark, and a mark it does not honour is stored as
// none (nil seeds: every mark is stored).
type shardStorage struct {
	db     *store.DB
	epochs string
	seeds  *seedPolicy
}

var _ shard.Storage = shardStorage{}

func (s shardStorage) PutRecords(recs []shard.Record) error {
	return s.db.PutShardRecords(storeRecords(s.unmark(recs)))
}

func (s shardStorage) PutRecordsNoSync(recs []shard.Record) error {
	return s.db.PutShardRecordsNoSync(storeRecords(s.unmark(recs)))
}

// unmark returns recs with the seed marks the policy does not honour
// removed.
func (s shardStorage) unmark(recs []shard.Record) []shard.Record {
	if s.seeds == nil {
		return recs
	}
	recs, _ = s.seeds.unmark(recs)
	return recs
}

// storeRecords converts shard records to the store's.
func storeRecords(recs []shard.Record) []store.ShardRecord {
	out := make([]store.ShardRecord, len(recs))
	for i, r := range recs {
		out[i] = store.ShardRecord{Key: r.Key, URLHash: r.Hash, URL: r.URL, Depth: r.Depth, Redirects: r.Redirects, Done: r.Done, Seed: r.Seed, SeedProof: r.SeedProof, Meta: r.Meta, MetaVersion: r.MetaVersion}
	}
	return out
}

func (s shardStorage) ScanRecords(r shard.Range, fn func(shard.Record) error) error {
	return s.db.ScanShard(uint64(r.From), uint64(r.To), func(x store.ShardRecord) error {
		return fn(shard.Record{Key: x.Key, Hash: x.URLHash, URL: x.URL, Depth: x.Depth, Redirects: x.Redirects, Done: x.Done, Seed: x.Seed, SeedProof: x.SeedProof, Meta: x.Meta, MetaVersion: x.MetaVersion})
	})
}

var _ shard.RecordGetter = shardStorage{}

// GetRecord implements shard.RecordGetter: one point lookup.
func (s shardStorage) GetRecord(key, hash uint64) (shard.Record, bool, error) {
	x, ok, err := s.db.ShardRecord(key, hash)
	if err != nil || !ok {
		return shard.Record{}, false, err
	}
	return shard.Record{Key: x.Key, Hash: x.URLHash, URL: x.URL, Depth: x.Depth, Redirects: x.Redirects, Done: x.Done, Seed: x.Seed, Meta: x.Meta, MetaVersion: x.MetaVersion}, true, nil
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
	b, err := s.db.Meta(s.epochs)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	return b, err
}

func (s shardStorage) SaveEpochs(b []byte) error { return s.db.PutMeta(s.epochs, b) }
