package store

import (
	"sync"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/syndtr/goleveldb/leveldb"
	"github.com/syndtr/goleveldb/leveldb/opt"
)

// filteredTables are the per-URL tables whose single-key lookups the key
// filter answers first: a crawl looks each of them up for nearly every URL
// it meets for the first time (the shard record a new URL's acceptance
// merges into, the metadata admission checks, the page PutPage counts, the
// content record of the exact-copy check) and nearly always finds nothing.
// leveldb answers such a miss only after walking its memtables and the
// filter of every level-0 table and of one table per level: in a crawl,
// some four reads per page and about 4.5% of a node's CPU.
var filteredTables = [...]byte{prefixShard, prefixURLMeta, prefixPage, prefixContent}

// Key filter sizing: the first Bloom filter holds keyFilterFirst keys in
// keyFilterBitsPerKey bits each, which with keyFilterHashes hash functions
// gives about 1% false positives when it is full; each one added when the
// last is full holds twice as many as the one before.
// With n keys the filters take at most about 2.5 bytes per key, and a key
// never added passes each filter with about 1% chance: a false positive
// costs the read the filter would have saved, nothing more.
const (
	keyFilterFirst      = 1 << 16
	keyFilterBitsPerKey = 10
	keyFilterHashes     = 7
)

// keyFilter answers "may the store hold this key?" for the filteredTables
// without a read. It holds every key written since Open, added before the
// write, and, once a scan of the tables started by Open has finished,
// every key that was there at Open: from then on a key it lacks is in none
// of these tables. Keys are never taken out (a key deleted stays, and
// costs a read). Until the scan finishes, or if it failed, it answers
// "maybe" to every key.
type keyFilter struct {
	mu      sync.Mutex
	ready   bool
	filters []*bloom.BloomFilter // the last one takes new keys
	room    uint                 // keys the last filter takes before a bigger one is added
}

// add notes that k may be in the store from now on. Callers add a key
// before they write it.
func (f *keyFilter) add(k []byte) {
	f.mu.Lock()
	f.addLocked(k)
	f.mu.Unlock()
}

func (f *keyFilter) addLocked(k []byte) {
	if f.room == 0 {
		capacity := uint(keyFilterFirst)
		if n := len(f.filters); n > 0 {
			capacity = f.filters[n-1].Cap() / keyFilterBitsPerKey * 2
		}
		f.filters = append(f.filters, bloom.New(capacity*keyFilterBitsPerKey, keyFilterHashes))
		f.room = capacity
	}
	f.filters[len(f.filters)-1].Add(k)
	f.room--
}

// mayHold reports whether k may be in the store: false only when the scan
// has finished and k was neither there at Open nor written since.
func (f *keyFilter) mayHold(k []byte) bool {
	locs := bloom.Locations(k, keyFilterHashes)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.ready {
		return true
	}
	for _, b := range f.filters {
		if b.TestLocations(locs) {
			return true
		}
	}
	return false
}

// getFiltered reads the value of k, a key of one of the filteredTables,
// as leveldb's Get does, answering leveldb.ErrNotFound without a read
// when the key filter rules k out.
func (db *DB) getFiltered(k []byte) ([]byte, error) {
	if !db.keys.mayHold(k) {
		return nil, leveldb.ErrNotFound
	}
	return db.ldb.Get(k, nil)
}

// hasFiltered is getFiltered for leveldb's Has.
func (db *DB) hasFiltered(k []byte) (bool, error) {
	if !db.keys.mayHold(k) {
		return false, nil
	}
	return db.ldb.Has(k, nil)
}

// scanKeys adds the keys of the filteredTables to db.keys and then makes
// it ready, unless stop is closed first or the scan fails: the filter then
// keeps answering "maybe" (and the reads it would have saved meet the same
// failure and report it). Writes going on meanwhile add their keys
// themselves. Open starts it in a goroutine; Close stops it and waits.
func (db *DB) scanKeys(stop <-chan struct{}) {
	const chunk = 1024
	keys := make([]byte, 0, chunk*urlKeyLen)
	flush := func() {
		db.keys.mu.Lock()
		for i := 0; i < len(keys); i += urlKeyLen {
			db.keys.addLocked(keys[i : i+urlKeyLen])
		}
		db.keys.mu.Unlock()
		keys = keys[:0]
	}
	for _, p := range filteredTables {
		it := db.ldb.NewIterator(tableRange(p), &opt.ReadOptions{DontFillCache: true})
		stopped := false
		for !stopped && it.Next() {
			if k := it.Key(); len(k) == urlKeyLen { // the only keys looked up
				keys = append(keys, k...)
			}
			if len(keys) < cap(keys) {
				continue
			}
			flush()
			select {
			case <-stop:
				stopped = true
			default:
			}
		}
		err := it.Error()
		it.Release()
		if stopped || err != nil {
			return
		}
	}
	flush()
	db.keys.mu.Lock()
	db.keys.ready = true
	db.keys.mu.Unlock()
}

// keyScan is the goroutine of scanKeys: closing stop stops it, and done
// is closed when it has returned.
type keyScan struct {
	stop chan struct{}
	done chan struct{}
}

// startKeyScan starts scanKeys.
func (db *DB) startKeyScan() {
	db.keyScan = keyScan{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(db.keyScan.done)
		db.scanKeys(db.keyScan.stop)
	}()
}

// stopKeyScan stops scanKeys if it is still running, and waits for it.
func (db *DB) stopKeyScan() {
	close(db.keyScan.stop)
	<-db.keyScan.done
}
