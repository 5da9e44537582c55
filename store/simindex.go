package store

// Near-duplicate index: simhash fingerprints of fetched pages, looked up by
// Hamming distance.
//
// The fingerprint table uses the one-byte prefix 'f' and holds two kinds of
// entries, told apart by the byte after the prefix:
//
//	table        prefix  key                                                        value
//	fingerprint  'f'     'f' | 'u' | ring key (8, BE) | URL hash (8, BE)            fingerprint record
//	             'f'     'f' | 'b' | band (1) | band bits (2, BE) | ring key (8, BE) | URL hash (8, BE)
//	                                                                                  band record
//
// The 'u' entries are per-URL and laid out by ring key like the other
// per-URL tables; they are the truth, and the band entries can be rebuilt
// from them. A fingerprint is cut into four bands of 16 bits (band i is
// bits 16i..16i+15); each URL has one band entry per band, so the URLs
// whose fingerprint agrees with a given one on band i form one contiguous
// key range. Two fingerprints within Hamming distance 3 differ in at most 3
// of the 4 bands, so they agree exactly on at least one (pigeonhole), and a
// lookup with a distance up to 3 only reads four small ranges.
//
// Fingerprint record, version 1:
//
//	version      byte = 1
//	fingerprint  uint64 BE
//	url          bytes
//
// Band record, version 1 (the full fingerprint, so that candidates are
// verified without another read):
//
//	version      byte = 1
//	fingerprint  uint64 BE

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
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

	fpURLKeyLen  = 2 + 16
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

// fpBandPrefix is the key prefix of the URLs whose band i is v.
func fpBandPrefix(i int, v uint16) []byte {
	k := make([]byte, 5, fpBandKeyLen)
	k[0], k[1], k[2] = prefixFingerprint, fpKindBand, byte(i)
	binary.BigEndian.PutUint16(k[3:5], v)
	return k
}

// fpBandKey is the band entry of a URL for band i of fp.
func fpBandKey(i int, fp, ringKey, urlHash uint64) []byte {
	k := fpBandPrefix(i, fpBand(fp, i))
	k = binary.BigEndian.AppendUint64(k, ringKey)
	return binary.BigEndian.AppendUint64(k, urlHash)
}

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

func encodeBand(fp uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{recordVersion1}, fp)
}

func decodeBand(v []byte) (uint64, error) {
	if len(v) != 9 || v[0] != recordVersion1 {
		return 0, fmt.Errorf("%w: band record %x", ErrCorrupt, v)
	}
	return binary.BigEndian.Uint64(v[1:]), nil
}

// AddFingerprint records fp as the simhash fingerprint of the URL (ringKey,
// urlHash), whose text is url, replacing the fingerprint recorded for it
// before, if any. A zero fingerprint means the page has no text: it removes
// the URL from the index, because pages without words are not duplicates
// of each other in any useful sense.
func (db *DB) AddFingerprint(ringKey, urlHash, fp uint64, url string) error {
	if err := db.replaceFingerprint(ringKey, urlHash, fp, url); err != nil {
		return fmt.Errorf("store: add fingerprint %s: %w", keyString(ringKey, urlHash), err)
	}
	return nil
}

// DeleteFingerprint removes the URL (ringKey, urlHash) from the
// near-duplicate index. Deleting a URL that is not there is not an error.
func (db *DB) DeleteFingerprint(ringKey, urlHash uint64) error {
	if err := db.replaceFingerprint(ringKey, urlHash, 0, ""); err != nil {
		return fmt.Errorf("store: delete fingerprint %s: %w", keyString(ringKey, urlHash), err)
	}
	return nil
}

// replaceFingerprint makes fp (0: none) the URL's fingerprint, deleting the
// band entries of the old one in the same batch.
func (db *DB) replaceFingerprint(ringKey, urlHash, fp uint64, url string) error {
	mu := fpLock(ringKey, urlHash)
	mu.Lock()
	defer mu.Unlock()
	if db.closed.Load() {
		return ErrClosed
	}
	k := fpURLKey(ringKey, urlHash)
	old, err := db.ldb.Get(k, nil)
	switch {
	case errors.Is(err, leveldb.ErrNotFound):
		old = nil
	case err != nil:
		return ldbErr(err, "read fingerprint")
	}
	b := new(leveldb.Batch)
	if old != nil {
		oldFP, oldURL, err := decodeFingerprint(old)
		if err != nil {
			// The new record replaces it. The old bands cannot be found
			// without the old value, so they stay behind as strays, which
			// lookups skip because the URL's record disagrees with them.
			oldFP = 0
		}
		if err == nil && oldFP == fp && oldURL == url {
			return nil
		}
		for i := range fpBands {
			if oldFP != 0 && (fp == 0 || fpBand(oldFP, i) != fpBand(fp, i)) {
				b.Delete(fpBandKey(i, oldFP, ringKey, urlHash))
			}
		}
	}
	if fp == 0 {
		if old == nil {
			return nil
		}
		b.Delete(k)
	} else {
		band := encodeBand(fp)
		for i := range fpBands {
			b.Put(fpBandKey(i, fp, ringKey, urlHash), band)
		}
		b.Put(k, encodeFingerprint(fp, url))
	}
	if err := db.ldb.Write(b, nil); err != nil {
		return ldbErr(err, "write fingerprint")
	}
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
	snap, err := db.ldb.GetSnapshot()
	if err != nil {
		return "", false, ldbErr(err, "near duplicate")
	}
	defer snap.Release()
	best := nearest{snap: snap, fp: fp, maxDist: maxDist}
	if maxDist <= fpBandedDistance {
		err = best.scanBands(excludeURLHash)
	} else {
		err = best.scanAll(excludeURLHash)
	}
	if err != nil || !best.found {
		return "", false, err
	}
	return best.url, true, nil
}

// nearest is a NearDuplicate lookup: the best candidate so far.
type nearest struct {
	snap    *leveldb.Snapshot
	fp      uint64
	maxDist int

	found bool
	dist  int
	url   string
}

// offer considers a candidate and reports whether the search can stop (an
// exact match cannot be beaten). A candidate from a band entry (url == "")
// is checked against its URL's fingerprint record, which also gives its
// URL; it is dropped when the record disagrees, i.e. the band entry is a
// stray left behind by a corrupt record (see replaceFingerprint).
func (n *nearest) offer(candidate, ringKey, urlHash uint64, url string, fromBand bool) (bool, error) {
	d := bits.OnesCount64(n.fp ^ candidate)
	if d > n.maxDist || (n.found && d >= n.dist) {
		return false, nil
	}
	if fromBand {
		v, err := n.snap.Get(fpURLKey(ringKey, urlHash), nil)
		if errors.Is(err, leveldb.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, ldbErr(err, "near duplicate: read %s", keyString(ringKey, urlHash))
		}
		recorded, recordedURL, err := decodeFingerprint(v)
		if err != nil || recorded != candidate {
			return false, nil
		}
		url = recordedURL
	}
	n.found, n.dist, n.url = true, d, url
	return d == 0, nil
}

// scanBands reads the four band ranges of fp.
func (n *nearest) scanBands(exclude uint64) error {
	for i := range fpBands {
		done, err := n.scanBand(i, exclude)
		if done || err != nil {
			return err
		}
	}
	return nil
}

func (n *nearest) scanBand(i int, exclude uint64) (done bool, err error) {
	it := n.snap.NewIterator(util.BytesPrefix(fpBandPrefix(i, fpBand(n.fp, i))), nil)
	defer it.Release()
	for !done && it.Next() {
		k := it.Key()
		if len(k) != fpBandKeyLen {
			return false, fmt.Errorf("store: near duplicate: %w: malformed band key %x", ErrCorrupt, k)
		}
		ringKey, urlHash := binary.BigEndian.Uint64(k[5:13]), binary.BigEndian.Uint64(k[13:21])
		if urlHash == exclude {
			continue
		}
		candidate, err := decodeBand(it.Value())
		if err != nil {
			return false, fmt.Errorf("store: near duplicate: %s: %w", keyString(ringKey, urlHash), err)
		}
		if done, err = n.offer(candidate, ringKey, urlHash, "", true); err != nil {
			return false, err
		}
	}
	if err := it.Error(); err != nil {
		return false, ldbErr(err, "near duplicate: scan band %d", i)
	}
	return done, nil
}

// scanAll reads every fingerprint record.
func (n *nearest) scanAll(exclude uint64) error {
	it := n.snap.NewIterator(util.BytesPrefix([]byte{prefixFingerprint, fpKindURL}), &opt.ReadOptions{DontFillCache: true})
	defer it.Release()
	for it.Next() {
		k := it.Key()
		if len(k) != fpURLKeyLen {
			return fmt.Errorf("store: near duplicate: %w: malformed fingerprint key %x", ErrCorrupt, k)
		}
		ringKey, urlHash := binary.BigEndian.Uint64(k[2:10]), binary.BigEndian.Uint64(k[10:18])
		if urlHash == exclude {
			continue
		}
		candidate, url, err := decodeFingerprint(it.Value())
		if err != nil {
			return fmt.Errorf("store: near duplicate: %s: %w", keyString(ringKey, urlHash), err)
		}
		if done, err := n.offer(candidate, ringKey, urlHash, url, false); done || err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return ldbErr(err, "near duplicate: scan fingerprints")
	}
	return nil
}
