package store

import (
	"github.com/syndtr/goleveldb/leveldb/opt"
	"github.com/syndtr/goleveldb/leveldb/util"
)

// ShardCursor is a position in the shard table, in key order (ring key,
// then URL hash): just after (Key, URLHash) once Started, before the
// first record when not.
type ShardCursor struct {
	Key, URLHash uint64
	Started      bool
}

// ScanShardPage calls fn for at most limit shard records after c, in key
// order over the whole table (every range the node holds, owned or
// replicated), and returns the cursor after the last one and whether
// records may follow. A long walk over the table goes page by page, each
// page on its own snapshot, so that no iterator and no snapshot is held
// between pages and the walk can pause. A record written behind the
// cursor meanwhile is met on the next walk.
func (db *DB) ScanShardPage(c ShardCursor, limit int, fn func(ShardRecord) error) (next ShardCursor, more bool, err error) {
	if db.closed.Load() {
		return c, false, ErrClosed
	}
	if limit <= 0 {
		limit = 1
	}
	start := []byte{prefixShard}
	if c.Started {
		// The first key after (Key, URLHash): the same key with a zero
		// byte appended sorts right after it and before every longer
		// key's successor.
		start = append(urlKey(prefixShard, c.Key, c.URLHash), 0)
	}
	it := db.ldb.NewIterator(&util.Range{Start: start, Limit: []byte{prefixShard + 1}}, &opt.ReadOptions{DontFillCache: true})
	defer it.Release()
	next = c
	n := 0
	for n < limit && it.Next() {
		key, urlHash, err := parseURLKey(it.Key(), prefixShard)
		if err != nil {
			return next, false, err
		}
		r, err := shardRecordAt(key, urlHash, it.Value())
		if err != nil {
			return next, false, err
		}
		next = ShardCursor{Key: key, URLHash: urlHash, Started: true}
		n++
		if err := fn(r); err != nil {
			return next, false, err
		}
	}
	if err := it.Error(); err != nil {
		return next, false, ldbErr(err, "scan shard page")
	}
	return next, n == limit, nil
}
