package store

// Near-duplicate index: simhash fingerprints of fetched pages, looked up by
// Hamming distance.
//
// The fingerprint table, prefix 'f', holds one entry per URL:
//
//	table        prefix  key                                               value
//	fingerprint  'f'     'f' | 'u' | ring key (8, BE) | URL hash (8, BE)   fingerprint record
//
// laid out by ring key like the other per-URL tables. Lookups by distance
// go to an index in memory (fpIndex), built from the table at Open and
// kept in step with it by AddFingerprint and DeleteFingerprint. A
// fingerprint is cut into four bands of 16 bits (band i is bits
// 16i..16i+15), and the index lists, for each band and band value, the
// URLs whose fingerprint has it. Two fingerprints within Hamming distance 3
// differ in at most 3 of the 4 bands, so they agree exactly on at least one
// (pigeonhole), and a lookup with a distance up to 3 only reads four short
// lists. The index costs about 50 bytes per URL (24 in the slab, 16 in
// the band lists, and the lists' share of the map).
//
// Earlier versions kept the band lists in leveldb, as 'f' | 'b' | band |
// band bits | ring key | URL hash keys: a lookup was four range reads
// across every level of the tree (60 µs at 100,000 pages) and a page's
// fingerprint five writes. Open deletes such entries.
//
// Fingerprint record, version 1:
//
//	version      byte = 1
//	fingerprint  uint64 BE
//	url          bytes

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"

	"github.com/syndtr/goleveldb/leveldb"
	"github.com/syndtr/goleveldb/leveldb/opt"
	"github.com/syndtr/goleveldb/leveldb/util"
)

const (
	prefixFingerprint byte = 'f'
	fpKindURL         byte = 'u'
	fpKindBand        byte = 'b'

	// fpBands is the number of 16-bit bands of a fingerprint.
	fpBands = 4
	// fpBandedDistance is the largest distance the band index answers by
	// itself; larger ones scan every fingerprint.
	fpBandedDistance = fpBands - 1

	fpURLKeyLen = 2 + 16
	// fpBandKeyLen is the length of the band keys of earlier versions.
	fpBandKeyLen = 2 + 1 + 2 + 16
)

// fpLocks serialise AddFingerprint and DeleteFingerprint per URL, across
// the read of the old fingerprint and the batch that replaces its bands.
var fpLocks [64]sync.Mutex

func fpLock(ringKey, urlHash uint64) *sync.Mutex {
	return &fpLocks[(ringKey^bits.RotateLeft64(urlHash, 17))%uint64(len(fpLocks))]
}

// fpURLKey is the per-URL key of the fingerprint table.
func fpURLKey(ringKey, urlHash uint64) []byte {
	k := make([]byte, fpURLKeyLen)
	k[0], k[1] = prefixFingerprint, fpKindURL
	binary.BigEndian.PutUint64(k[2:10], ringKey)
	binary.BigEndian.PutUint64(k[10:18], urlHash)
	return k
}

// fpBand returns band i of a fingerprint.
func fpBand(fp uint64, i int) uint16 { return uint16(fp >> (16 * i)) }

func encodeFingerprint(fp uint64, url string) []byte {
	dst := make([]byte, 0, 1+8+binary.MaxVarintLen64+len(url))
	dst = append(dst, recordVersion1)
	dst = binary.BigEndian.AppendUint64(dst, fp)
	return appendString(dst, url)
}

func decodeFingerprint(v []byte) (fp uint64, url string, err error) {
	if len(v) < 9 || v[0] != recordVersion1 {
		return 0, "", fmt.Errorf("%w: fingerprint record %x", ErrCorrupt, v)
	}
	d := decoder{b: v[9:]}
	url = d.str()
	return binary.BigEndian.Uint64(v[1:9]), url, d.finish()
}

// AddFingerprint records fp as the simhash fingerprint of the URL (ringKey,
// urlHash), whose text is url, replacing the fingerprint recorded for it
// before, if any. A zero fingerprint means the page has no text: it removes
// the URL from the index, because pages without words are not duplicates
// of each other in any useful sense.
func (db *DB) AddFingerprint(ringKey, urlHash, fp uint64, url string) error {
	if err := db.replaceFingerprint(ringKey, urlHash, fp, url, nil); err != nil {
		return fmt.Errorf("store: add fingerprint %s: %w", keyString(ringKey, urlHash), err)
	}
	return nil
}

// UpdateFingerprint is AddFingerprint for a caller that keeps the URL's
// fingerprint itself, as the crawler does in the URL's metadata: prev is
// the fingerprint it recorded for the URL last, 0 for none. The record the
// URL had is then not read first, which spares a lookup in every level of
// the store: the index is in step with the table, so a prev that the index
// holds for the URL is the fingerprint recorded, and a prev of 0 is taken
// at its word. If it is wrong (metadata that a crash lost after the
// fingerprint was recorded, or a fetch without text since), the entry of
// the fingerprint recorded before stays in the index until the first
// NearDuplicate that meets it finds the record changed and drops it: the
// answers are the same, only a lookup is spent later. A prev the index
// does not hold for the URL is not trusted: the record is read.
func (db *DB) UpdateFingerprint(ringKey, urlHash, prev, fp uint64, url string) error {
	if err := db.replaceFingerprint(ringKey, urlHash, fp, url, &prev); err != nil {
		return fmt.Errorf("store: update fingerprint %s: %w", keyString(ringKey, urlHash), err)
	}
	return nil
}

// DeleteFingerprint removes the URL (ringKey, urlHash) from the
// near-duplicate index. Deleting a URL that is not there is not an error.
func (db *DB) DeleteFingerprint(ringKey, urlHash uint64) error {
	if err := db.replaceFingerprint(ringKey, urlHash, 0, "", nil); err != nil {
		return fmt.Errorf("store: delete fingerprint %s: %w", keyString(ringKey, urlHash), err)
	}
	return nil
}

// replaceFingerprint makes fp (0: none) the URL's fingerprint, in the
// table and in the index. prev, when not nil, is the fingerprint the
// caller says the URL has (see UpdateFingerprint); otherwise the record is
// read.
func (db *DB) replaceFingerprint(ringKey, urlHash, fp uint64, url string, prev *uint64) error {
	mu := fpLock(ringKey, urlHash)
	mu.Lock()
	defer mu.Unlock()
	if db.closed.Load() {
		return ErrClosed
	}
	k := fpURLKey(ringKey, urlHash)
	var oldFP uint64
	exists := true
	switch {
	case prev != nil && *prev == 0:
		exists = false
	case prev != nil && db.fps.contains(fpEntry{*prev, ringKey, urlHash}):
		// The URL of a key and hash is always the same text.
		if *prev == fp {
			return nil
		}
		oldFP = *prev
	default:
		old, err := db.ldb.Get(k, nil)
		switch {
		case errors.Is(err, leveldb.ErrNotFound):
			exists = false
		case err != nil:
			return ldbErr(err, "read fingerprint")
		default:
			var oldURL string
			// A record that cannot be decoded was never indexed (see
			// loadFingerprints): the new one replaces it.
			if oldFP, oldURL, err = decodeFingerprint(old); err != nil {
				oldFP = 0
			} else if oldFP == fp && oldURL == url {
				return nil
			}
		}
	}
	var err error
	if fp == 0 {
		if !exists {
			return nil
		}
		err = db.ldb.Delete(k, nil)
	} else {
		err = db.ldb.Put(k, encodeFingerprint(fp, url), nil)
	}
	if err != nil {
		return ldbErr(err, "write fingerprint")
	}
	db.fps.remove(fpEntry{oldFP, ringKey, urlHash})
	db.fps.add(fpEntry{fp, ringKey, urlHash})
	return nil
}

// NearDuplicate looks for a recorded page whose fingerprint is within
// maxDist bits (Hamming distance) of fp, ignoring the URL whose hash is
// excludeURLHash (the page being checked, when it was recorded before). It
// returns the URL of the closest such page (among equally close ones, the
// one the index lists first) and found = true; found = false when there is
// none.
//
// Distances up to 3 are answered from the band index with four short range
// reads. A larger maxDist is still answered exactly but by reading every
// recorded fingerprint, which costs time proportional to the number of
// pages. A zero fp (a page without text) is never a near-duplicate, and a
// negative maxDist is an error.
func (db *DB) NearDuplicate(fp uint64, maxDist int, excludeURLHash uint64) (url string, found bool, err error) {
	if maxDist < 0 {
		return "", false, fmt.Errorf("store: near duplicate: negative distance %d", maxDist)
	}
	if fp == 0 {
		return "", false, nil
	}
	if db.closed.Load() {
		return "", false, ErrClosed
	}
	// An entry whose record disagrees is a stale one (its record was
	// corrupt when replaced) or one being replaced right now: it leaves
	// the index, and the lookup goes on without it.
	for {
		e, ok := db.fps.nearest(fp, maxDist, excludeURLHash)
		if !ok {
			return "", false, nil
		}
		v, err := db.ldb.Get(fpURLKey(e.ringKey, e.urlHash), nil)
		if err != nil && !errors.Is(err, leveldb.ErrNotFound) {
			return "", false, ldbErr(err, "near duplicate: read %s", keyString(e.ringKey, e.urlHash))
		}
		if err == nil {
			if recorded, url, err := decodeFingerprint(v); err == nil && recorded == e.fp {
				return url, true, nil
			}
		}
		db.fps.remove(e)
	}
}

// fpEntry is a URL's fingerprint in the index.
type fpEntry struct{ fp, ringKey, urlHash uint64 }

// fpIndex is the fingerprint table in memory: a slab of entries, and for
// each band and band value the slots whose fingerprint has it, in the
// order they were added. A slot whose fingerprint is 0 is free.
type fpIndex struct {
	mu    sync.RWMutex
	slots []fpEntry
	free  []int32
	bands map[uint32][]int32 // band<<16 | band bits
}

func newFPIndex() *fpIndex { return &fpIndex{bands: make(map[uint32][]int32)} }

// fpBandOf is the index key of band i of fp.
func fpBandOf(fp uint64, i int) uint32 { return uint32(i)<<16 | uint32(fpBand(fp, i)) }

// add indexes e, unless it is indexed already; a zero fingerprint is not
// indexed.
func (x *fpIndex) add(e fpEntry) {
	if e.fp == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.slotLocked(e) >= 0 {
		return
	}
	var slot int32
	if n := len(x.free); n > 0 {
		slot, x.free = x.free[n-1], x.free[:n-1]
		x.slots[slot] = e
	} else {
		slot = int32(len(x.slots))
		x.slots = append(x.slots, e)
	}
	for i := range fpBands {
		k := fpBandOf(e.fp, i)
		x.bands[k] = append(x.bands[k], slot)
	}
}

// remove takes e out of the index, if it is there.
func (x *fpIndex) remove(e fpEntry) {
	if e.fp == 0 {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	slot := x.slotLocked(e)
	if slot < 0 {
		return
	}
	for i := range fpBands {
		k := fpBandOf(e.fp, i)
		list := x.bands[k]
		if j := slices.Index(list, slot); j >= 0 {
			list = slices.Delete(list, j, j+1)
		}
		if len(list) == 0 {
			delete(x.bands, k)
		} else {
			x.bands[k] = list
		}
	}
	x.slots[slot] = fpEntry{}
	x.free = append(x.free, slot)
}

// contains reports whether e is indexed.
func (x *fpIndex) contains(e fpEntry) bool {
	if e.fp == 0 {
		return false
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.slotLocked(e) >= 0
}

// slotLocked returns the slot of e, or -1 when e is not indexed.
func (x *fpIndex) slotLocked(e fpEntry) int32 {
	for _, s := range x.bands[fpBandOf(e.fp, 0)] {
		if x.slots[s] == e {
			return s
		}
	}
	return -1
}

// len is the number of indexed URLs.
func (x *fpIndex) len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.slots) - len(x.free)
}

// nearest returns the entry closest to fp within maxDist, other than the
// URL excluded: among equally close ones, the first listed for the lowest
// band, or, past fpBandedDistance, the first in the slab.
func (x *fpIndex) nearest(fp uint64, maxDist int, exclude uint64) (best fpEntry, found bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	bestDist := maxDist + 1
	offer := func(e fpEntry) bool {
		if e.fp == 0 || e.urlHash == exclude {
			return false
		}
		if d := bits.OnesCount64(fp ^ e.fp); d < bestDist {
			best, bestDist, found = e, d, true
		}
		return bestDist == 0 // cannot be beaten
	}
	if maxDist > fpBandedDistance {
		for _, e := range x.slots {
			if offer(e) {
				break
			}
		}
		return best, found
	}
	for i := range fpBands {
		for _, s := range x.bands[fpBandOf(fp, i)] {
			if offer(x.slots[s]) {
				return best, found
			}
		}
	}
	return best, found
}

// loadFingerprints builds the index from the fingerprint table, and
// deletes the band entries earlier versions kept in leveldb. A record that
// cannot be decoded is left out (Repair deletes it; AddFingerprint
// replaces it).
func (db *DB) loadFingerprints() error {
	db.fps = newFPIndex()
	it := db.ldb.NewIterator(util.BytesPrefix([]byte{prefixFingerprint}), &opt.ReadOptions{DontFillCache: true})
	defer it.Release()
	stale := new(leveldb.Batch)
	for it.Next() {
		k := it.Key()
		switch {
		case len(k) == fpURLKeyLen && k[1] == fpKindURL:
			fp, _, err := decodeFingerprint(it.Value())
			if err == nil {
				db.fps.add(fpEntry{fp, binary.BigEndian.Uint64(k[2:10]), binary.BigEndian.Uint64(k[10:18])})
			}
		case len(k) == fpBandKeyLen && k[1] == fpKindBand:
			stale.Delete(k)
			if stale.Len() >= 10_000 {
				if err := db.ldb.Write(stale, nil); err != nil {
					return ldbErr(err, "delete old band entries")
				}
				stale.Reset()
			}
		}
	}
	if err := it.Error(); err != nil {
		return ldbErr(err, "load fingerprints")
	}
	if stale.Len() > 0 {
		if err := db.ldb.Write(stale, nil); err != nil {
			return ldbErr(err, "delete old band entries")
		}
	}
	return nil
}
