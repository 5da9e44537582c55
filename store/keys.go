package store

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/syndtr/goleveldb/leveldb/util"
)

// Table prefixes; see the package documentation.
const (
	prefixSeen    byte = 's'
	prefixPage    byte = 'p'
	prefixJournal byte = 'j'
	prefixMeta    byte = 'm'
)

// urlKeyLen is the length of a per-URL key: prefix, ring key, URL hash.
const urlKeyLen = 17

// Reserved meta names.
const (
	reservedMetaPrefix = "store/"
	metaSchema         = reservedMetaPrefix + "schema"
	metaSeenMode       = reservedMetaPrefix + "seen_mode"
	metaSeenCount      = reservedMetaPrefix + "seen_count"
	metaPageCount      = reservedMetaPrefix + "page_count"
)

// schemaVersion is the layout version recorded under store/schema.
const schemaVersion = 1

// putURLKey writes prefix | ring key | URL hash into dst[:urlKeyLen].
func putURLKey(dst []byte, prefix byte, key, urlHash uint64) {
	dst[0] = prefix
	binary.BigEndian.PutUint64(dst[1:9], key)
	binary.BigEndian.PutUint64(dst[9:17], urlHash)
}

// urlKey returns a new per-URL key.
func urlKey(prefix byte, key, urlHash uint64) []byte {
	k := make([]byte, urlKeyLen)
	putURLKey(k, prefix, key, urlHash)
	return k
}

// parseURLKey splits a per-URL key of the given table.
func parseURLKey(k []byte, prefix byte) (key, urlHash uint64, err error) {
	if len(k) != urlKeyLen || k[0] != prefix {
		return 0, 0, fmt.Errorf("%w: malformed key %x in table %q", ErrCorrupt, k, prefix)
	}
	return binary.BigEndian.Uint64(k[1:9]), binary.BigEndian.Uint64(k[9:17]), nil
}

// metaKey returns the leveldb key of a meta name.
func metaKey(name string) []byte {
	k := make([]byte, 0, 1+len(name))
	k = append(k, prefixMeta)
	return append(k, name...)
}

// ringStart is the first possible key of the table with ring key >= key.
func ringStart(prefix byte, key uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefix
	binary.BigEndian.PutUint64(k[1:], key)
	return k
}

// ringLimit is the exclusive upper bound of the keys of the table with ring
// key <= key.
func ringLimit(prefix byte, key uint64) []byte {
	if key == math.MaxUint64 {
		return []byte{prefix + 1}
	}
	return ringStart(prefix, key+1)
}

// ringRanges returns the leveldb key ranges of a table that hold the ring
// keys in (from, to], walking the ring clockwise from from. When from >= to
// the range wraps around 0; from == to is the whole ring, starting just after
// from.
func ringRanges(prefix byte, from, to uint64) []util.Range {
	if from < to {
		return []util.Range{{Start: ringStart(prefix, from+1), Limit: ringLimit(prefix, to)}}
	}
	rs := make([]util.Range, 0, 2)
	if from != math.MaxUint64 {
		rs = append(rs, util.Range{Start: ringStart(prefix, from+1), Limit: ringLimit(prefix, math.MaxUint64)})
	}
	return append(rs, util.Range{Start: ringStart(prefix, 0), Limit: ringLimit(prefix, to)})
}

// tableRange is the whole key range of a table.
func tableRange(prefix byte) *util.Range {
	return &util.Range{Start: []byte{prefix}, Limit: []byte{prefix + 1}}
}

// keyString formats a URL identity for error messages.
func keyString(key, urlHash uint64) string {
	return fmt.Sprintf("ring=%016x url=%016x", key, urlHash)
}
