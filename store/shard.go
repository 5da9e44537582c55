package store

// The shard tables: the replicated state of ring ranges (see package
// p2p/shard), kept by every replica of a range.
//
//	table      prefix  key                                         value
//	shard      'r'     'r' | ring key (8, BE) | URL hash (8, BE)   shard record
//	shardhost  'g'     'g' | host key (8, BE) | name hash (8, BE)  shard host record
//	seeds      'e'     'e' | ring key (8, BE) | URL hash (8, BE)   seed record
//
// The name hash is the 64-bit FNV-1a hash of the host name (hostHash).
//
// Shard record, version 4 (ring key and URL hash come from the key):
//
//	version       byte = 4
//	flags         byte: bit 0 = done, bit 1 = seed (no other bit may be set)
//	depth         varint
//	redirects     varint
//	url           bytes
//	meta version  uvarint
//	meta          bytes (the crawler's opaque state of the URL)
//	seed proof    bytes (the signed statement behind the seed mark, opaque)
//
// Version 3 records are the same without the seed proof; version 2 records are the same without the seed bit; version 1 records,
// written before the meta fields existed, end after url and are read with
// no meta.
//
// The seeds table is an index of the shard table: one entry for each
// shard record marked seed, written in the same batch as the record, so
// that the two agree after any crash. A node reads the seeds of a ring key
// (SeedURLs) to judge a crawl's scope. Seed record, version 1:
//
//	version    byte = 1
//	url        bytes
//
// Shard host record, version 1 (host key from the key):
//
//	version    byte = 1
//	host       bytes
//	data       bytes (the crawler's opaque host state)
//
// Records are merged, not counted: a shard record's merge keeps done and
// seed once set, the smaller depth and the meta of the higher meta version
// (PutShardRecords), and the last write of a shard host record wins.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/syndtr/goleveldb/leveldb"
	"github.com/syndtr/goleveldb/leveldb/opt"
	"github.com/syndtr/goleveldb/leveldb/util"
)

// Shard tables: the replicated state of ring ranges (see package p2p/shard).
const (
	prefixShard     byte = 'r'
	prefixShardHost byte = 'g'
	prefixSeeds     byte = 'e'
)

// ShardRecord is the replicated state of one URL: enough for whichever node
// owns its ring key next to crawl it, or to know it needs no crawling.
type ShardRecord struct {
	Key, URLHash uint64
	URL          string
	Depth        int
	Redirects    int
	// Done is set once the URL needs no more fetching: fetched, dead-lettered
	// or dropped for good.
	Done bool
	// Seed marks a URL that a client allowed to seed submitted (at depth
	// 0): the seeds table indexes such records, and a crawl scoped to the
	// seeds' hosts or domains is judged by them.
	Seed bool
	// SeedProof is the signed statement behind Seed, opaque here (the node
	// verifies it before it stores a mark): a merge keeps it with the mark.
	SeedProof []byte
	// Meta is the crawler's opaque state of the URL after its last fetch
	// (validators, next recrawl), and MetaVersion orders such states: the
	// higher one wins a merge.
	Meta        []byte
	MetaVersion uint64
}

// ShardHost is the replicated politeness state of one host, an opaque blob
// owned by the crawler.
type ShardHost struct {
	Key  uint64
	Host string
	Data []byte
}

// PutShardRecords merges records into the shard table. The merge is
// idempotent and commutative: Done and Seed win, the smaller depth (at
// equal depths, the fewer redirects) is kept, and so is the meta of the higher MetaVersion, so replicas that
// receive the same records in any order and any number of times agree. A
// record that becomes a seed gets its entry in the seeds table in the same
// batch. The write is synced to disk before PutShardRecords returns.
func (db *DB) PutShardRecords(recs []ShardRecord) error {
	if err := db.PutShardRecordsNoSync(recs); err != nil || len(recs) == 0 {
		return err
	}
	// Synced: this is what makes an owner's (or a replica's)
	// acknowledgement of a new URL survive a power loss (doc.go,
	// "Durability"). Even when nothing was written: the records found
	// here may be those of a concurrent call whose sync is not done.
	if db.opts.noSync {
		return nil
	}
	if err := db.journals.sync(); err != nil {
		return fmt.Errorf("store: put %d shard records: %w", len(recs), err)
	}
	return nil
}

// PutShardRecordsNoSync is PutShardRecords without the sync: the records
// survive a crash of the process at once, and a power loss once a later
// sync covers them (every sync covers all earlier writes: see doc.go,
// "Durability"). It is for records that something written before them
// and removed after them, in the same journal, stands for until then: a
// node's own outbox entries, delivered to itself (see the node's owner).
func (db *DB) PutShardRecordsNoSync(recs []ShardRecord) error {
	if db.closed.Load() {
		return ErrClosed
	}
	if len(recs) == 0 {
		return nil
	}
	return db.putShardRecords(recs)
}

// putShardRecords merges recs into the shard table, unsynced.
func (db *DB) putShardRecords(recs []ShardRecord) error {
	db.shardMu.Lock()
	defer db.shardMu.Unlock()
	b := new(leveldb.Batch)
	pending := make(map[[2]uint64]ShardRecord, len(recs))
	var written []recentRecord
	for _, r := range recs {
		if r.URL == "" {
			return fmt.Errorf("store: shard record %s: empty URL", keyString(r.Key, r.URLHash))
		}
		id := [2]uint64{r.Key, r.URLHash}
		old, ok := pending[id]
		if !ok {
			v, err := db.shardRecordValue(id)
			if err != nil {
				return err
			}
			if v != nil {
				old = ShardRecord{Key: r.Key, URLHash: r.URLHash}
				if err := decodeShardRecord(v, &old); err != nil {
					return fmt.Errorf("store: shard record %s: %w", keyString(r.Key, r.URLHash), err)
				}
				ok = true
			}
		}
		merged := r
		if ok {
			merged = mergeShard(old, r)
			if shardEqual(merged, old) {
				continue
			}
		}
		pending[id] = merged
		v := encodeShardRecord(nil, &merged)
		k := urlKey(prefixShard, r.Key, r.URLHash)
		db.keys.add(k)
		b.Put(k, v)
		written = append(written, recentRecord{id, v})
		if merged.Seed && !(ok && old.Seed) {
			b.Put(urlKey(prefixSeeds, r.Key, r.URLHash), encodeSeed(merged.URL))
		}
	}
	if b.Len() == 0 {
		return nil
	}
	if err := db.ldb.Write(b, nil); err != nil {
		return ldbErr(err, "put %d shard records", b.Len())
	}
	for _, w := range written {
		db.recentShard.Put(w.id, w.value)
	}
	return nil
}

// shardRecordValue returns the stored value of a shard record, nil when
// there is none: from recentShard when the record was written or read
// lately, else from leveldb. Callers hold shardMu.
func (db *DB) shardRecordValue(id [2]uint64) ([]byte, error) {
	if v, ok := db.recentShard.Get(id); ok {
		return v, nil
	}
	v, err := db.getFiltered(urlKey(prefixShard, id[0], id[1]))
	switch {
	case errors.Is(err, leveldb.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, ldbErr(err, "shard record %s", keyString(id[0], id[1]))
	}
	db.recentShard.Put(id, v)
	return v, nil
}

// recentShardRecords is how many shard record values a generation of
// DB.recentShard holds: the values written or read last, so that merging
// into a record met moments ago (a URL's done mark after its acceptance, a
// link found again) does not read it back through every level of
// leveldb; in a crawl, that read was about 3% of the node's CPU.
// putShardRecords, the only writer of the shard table while the store is
// open, keeps them in step under shardMu; at most two generations, some
// 8 MB.
const recentShardRecords = 1 << 14

// recentRecord is a record's value as written.
type recentRecord struct {
	id    [2]uint64
	value []byte
}

func mergeShard(old, nw ShardRecord) ShardRecord {
	out := old
	out.Done = old.Done || nw.Done
	if nw.Seed && !old.Seed {
		out.Seed, out.SeedProof = true, nw.SeedProof
	}
	if nw.Depth < old.Depth || nw.Depth == old.Depth && nw.Redirects < old.Redirects {
		out.Depth, out.URL, out.Redirects = nw.Depth, nw.URL, nw.Redirects
	}
	if nw.MetaVersion > old.MetaVersion {
		out.Meta, out.MetaVersion = nw.Meta, nw.MetaVersion
	}
	return out
}

func shardEqual(a, b ShardRecord) bool {
	return a.Key == b.Key && a.URLHash == b.URLHash && a.URL == b.URL && a.Depth == b.Depth &&
		a.Redirects == b.Redirects && a.Done == b.Done && a.Seed == b.Seed && a.MetaVersion == b.MetaVersion && bytes.Equal(a.Meta, b.Meta) &&
		bytes.Equal(a.SeedProof, b.SeedProof)
}

// ShardRecord returns the shard record of a URL, ok false when there is none.
func (db *DB) ShardRecord(key, urlHash uint64) (r ShardRecord, ok bool, err error) {
	if db.closed.Load() {
		return r, false, ErrClosed
	}
	v, err := db.getFiltered(urlKey(prefixShard, key, urlHash))
	if errors.Is(err, leveldb.ErrNotFound) {
		return r, false, nil
	}
	if err != nil {
		return r, false, ldbErr(err, "shard record %s", keyString(key, urlHash))
	}
	if r, err = shardRecordAt(key, urlHash, v); err != nil {
		return r, false, err
	}
	return r, true, nil
}

// shardRecordAt decodes the shard record stored under (key, urlHash).
func shardRecordAt(key, urlHash uint64, v []byte) (ShardRecord, error) {
	r := ShardRecord{Key: key, URLHash: urlHash}
	if err := decodeShardRecord(v, &r); err != nil {
		return r, fmt.Errorf("store: shard record %s: %w", keyString(key, urlHash), err)
	}
	return r, nil
}

// ScanShard calls fn for every shard record whose ring key lies in
// (from, to], in ring order; from == to is the whole ring. It reads a
// snapshot, so fn may write.
func (db *DB) ScanShard(from, to uint64, fn func(ShardRecord) error) error {
	if db.closed.Load() {
		return ErrClosed
	}
	return db.scan(prefixShard, from, to, func(key, urlHash uint64, v []byte) error {
		r, err := shardRecordAt(key, urlHash, v)
		if err != nil {
			return err
		}
		return fn(r)
	})
}

// ScanShardMeta is ScanShard with each record's URL metadata, nil when the
// URL has none: one pass over both tables, in place of a URLMeta read per
// record.
func (db *DB) ScanShardMeta(from, to uint64, fn func(ShardRecord, *URLMeta) error) error {
	if db.closed.Load() {
		return ErrClosed
	}
	snap, err := db.ldb.GetSnapshot()
	if err != nil {
		return ldbErr(err, "scan shard")
	}
	defer snap.Release()
	metas := ringRanges(prefixURLMeta, from, to)
	for i, r := range ringRanges(prefixShard, from, to) {
		if err := scanShardMeta(snap, &r, &metas[i], fn); err != nil {
			return err
		}
	}
	return nil
}

// scanShardMeta walks the shard records of one key range with the URL
// metadata of the same range (see ScanShardMeta).
func scanShardMeta(snap *leveldb.Snapshot, recs, metas *util.Range, fn func(ShardRecord, *URLMeta) error) error {
	ro := &opt.ReadOptions{DontFillCache: true}
	it := snap.NewIterator(recs, ro)
	defer it.Release()
	mt := snap.NewIterator(metas, ro)
	defer mt.Release()
	more := mt.Next()
	for it.Next() {
		key, urlHash, err := parseURLKey(it.Key(), prefixShard)
		if err != nil {
			return err
		}
		r, err := shardRecordAt(key, urlHash, it.Value())
		if err != nil {
			return err
		}
		// Both keys are prefix | ring key | URL hash: past the prefix they
		// sort alike.
		for more && bytes.Compare(mt.Key()[1:], it.Key()[1:]) < 0 {
			more = mt.Next()
		}
		var m *URLMeta
		if more && bytes.Equal(mt.Key()[1:], it.Key()[1:]) {
			m = new(URLMeta)
			if err := decodeURLMeta(mt.Value(), m); err != nil {
				return fmt.Errorf("store: url meta %s: %w", keyString(key, urlHash), err)
			}
		}
		if err := fn(r, m); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return ldbErr(err, "scan shard")
	}
	if err := mt.Error(); err != nil {
		return ldbErr(err, "scan url meta")
	}
	return nil
}

// SeedURLs calls fn with the URL of every shard record marked seed under
// ring key key, in URL hash order, until fn returns false. It reads the
// seeds table only.
func (db *DB) SeedURLs(key uint64, fn func(url string) bool) error {
	if db.closed.Load() {
		return ErrClosed
	}
	it := db.ldb.NewIterator(&util.Range{Start: ringStart(prefixSeeds, key), Limit: ringLimit(prefixSeeds, key)}, nil)
	defer it.Release()
	for it.Next() {
		u, err := decodeSeed(it.Value())
		if err != nil {
			return fmt.Errorf("store: seed under ring key %016x: %w", key, err)
		}
		if !fn(u) {
			return nil
		}
	}
	if err := it.Error(); err != nil {
		return ldbErr(err, "seeds of ring key %016x", key)
	}
	return nil
}

// IsSeed reports whether the shard record of a URL is marked seed.
func (db *DB) IsSeed(key, urlHash uint64) (bool, error) {
	if db.closed.Load() {
		return false, ErrClosed
	}
	_, err := db.ldb.Get(urlKey(prefixSeeds, key, urlHash), nil)
	switch {
	case errors.Is(err, leveldb.ErrNotFound):
		return false, nil
	case err != nil:
		return false, ldbErr(err, "seed %s", keyString(key, urlHash))
	}
	return true, nil
}

// seedVersion is the version of seed records.
const seedVersion = 1

func encodeSeed(url string) []byte { return appendString([]byte{seedVersion}, url) }

func decodeSeed(v []byte) (string, error) {
	d := decoder{b: v}
	if ver := d.byte(); d.err == nil && ver != seedVersion {
		return "", fmt.Errorf("%w: seed record version %d", ErrCorrupt, ver)
	}
	u := d.str()
	if err := d.finish(); err != nil {
		return "", err
	}
	return u, nil
}

// PutShardHosts stores host states; the last write of a host wins.
func (db *DB) PutShardHosts(hosts []ShardHost) error {
	if db.closed.Load() {
		return ErrClosed
	}
	if len(hosts) == 0 {
		return nil
	}
	b := new(leveldb.Batch)
	for i := range hosts {
		h := &hosts[i]
		if h.Host == "" {
			return fmt.Errorf("store: shard host %016x: empty name", h.Key)
		}
		v := appendString([]byte{shardVersion}, h.Host)
		v = appendBytes(v, h.Data)
		b.Put(urlKey(prefixShardHost, h.Key, hostHash(h.Host)), v)
	}
	if err := db.ldb.Write(b, nil); err != nil {
		return ldbErr(err, "put %d shard hosts", len(hosts))
	}
	return nil
}

// ScanShardHosts calls fn for every host state whose host key lies in
// (from, to]; from == to is the whole ring.
func (db *DB) ScanShardHosts(from, to uint64, fn func(ShardHost) error) error {
	if db.closed.Load() {
		return ErrClosed
	}
	return db.scan(prefixShardHost, from, to, func(key, _ uint64, v []byte) error {
		d := decoder{b: v}
		if ver := d.byte(); d.err == nil && ver != shardVersion {
			return fmt.Errorf("store: shard host %016x: %w: version %d", key, ErrCorrupt, ver)
		}
		// Copy the blob: the scan's value buffer is reused for the next key.
		h := ShardHost{Key: key, Host: d.str(), Data: bytes.Clone(d.bytes())}
		if err := d.finish(); err != nil {
			return fmt.Errorf("store: shard host %016x: %w", key, err)
		}
		return fn(h)
	})
}

func hostHash(host string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(host))
	return h.Sum64()
}

// shardVersion is the version of shard host records; shard records are
// at shardRecordVersion.
const (
	shardVersion       = 1
	shardRecordVersion = 4
)

// encodeShardRecord appends the shard record of r (see the top of this
// file).
func encodeShardRecord(dst []byte, r *ShardRecord) []byte {
	var flags byte
	if r.Done {
		flags |= flagDone
	}
	if r.Seed {
		flags |= flagSeed
	}
	dst = append(dst, shardRecordVersion, flags)
	dst = binary.AppendVarint(dst, int64(r.Depth))
	dst = binary.AppendVarint(dst, int64(r.Redirects))
	dst = appendString(dst, r.URL)
	dst = binary.AppendUvarint(dst, r.MetaVersion)
	dst = appendBytes(dst, r.Meta)
	return appendBytes(dst, r.SeedProof)
}

// Shard record flags.
const (
	flagDone byte = 1 << iota
	flagSeed
)

func decodeShardRecord(v []byte, r *ShardRecord) error {
	d := decoder{b: v}
	ver := d.byte()
	if d.err == nil && (ver < 1 || ver > shardRecordVersion) {
		return fmt.Errorf("%w: shard record version %d", ErrCorrupt, ver)
	}
	flags := d.byte()
	known := flagDone
	if ver >= 3 {
		known |= flagSeed
	}
	if d.err == nil && flags&^known != 0 {
		return fmt.Errorf("%w: shard record flags %#x", ErrCorrupt, flags)
	}
	r.Done = flags&flagDone != 0
	r.Seed = flags&flagSeed != 0
	r.Depth = d.int()
	r.Redirects = d.int()
	r.URL = d.str()
	if ver >= 2 {
		r.MetaVersion = d.uvarint()
		// Copied: a scan's value buffer is reused for the next key.
		r.Meta = bytes.Clone(d.bytes())
	}
	if ver >= 4 {
		if p := d.bytes(); len(p) > 0 {
			r.SeedProof = bytes.Clone(p)
		}
	}
	return d.finish()
}
