package store

// Exact-content index: for each exact content a page was fetched with (the
// body and the links it resolves to, hashed by the crawler), the page
// whose links were followed and from how deep, so that the links of a
// byte-identical copy are not reported again.
//
//	table    prefix  key                                   value
//	content  'c'     'c' | hash (8, BE) | check (8, BE)    content record
//
// Content record, version 1:
//
//	version  byte = 1
//	depth    varint
//	url      bytes
//
// The table is a node-local cache, not state of a ring range: it is not
// laid out by ring key and does not move with a range. A node without an
// entry merely reports a copy's links once more.

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/syndtr/goleveldb/leveldb"
)

const prefixContent byte = 'c'

func contentKey(hash, check uint64) []byte {
	k := make([]byte, urlKeyLen)
	putURLKey(k, prefixContent, hash, check)
	return k
}

// FollowContent decides whether the links of a page whose exact content
// hashes to (hash, check) are to be followed from depth: not when a page
// with the same content already had its links followed from depth or less
// (that page's URL is returned as first, with dup set). Otherwise the page
// becomes the one whose links are followed for this content, and dup is
// false. Two pages with the same content never both see dup unset at the
// same depth.
func (db *DB) FollowContent(hash, check uint64, depth int, url string) (first string, dup bool, err error) {
	if db.closed.Load() {
		return "", false, ErrClosed
	}
	k := contentKey(hash, check)
	db.contentMu.Lock()
	defer db.contentMu.Unlock()
	v, err := db.getFiltered(k)
	switch {
	case errors.Is(err, leveldb.ErrNotFound):
	case err != nil:
		return "", false, ldbErr(err, "content %016x", hash)
	default:
		d := decoder{b: v}
		if ver := d.byte(); d.err == nil && ver != recordVersion1 {
			return "", false, fmt.Errorf("%w: unknown content record version %d", ErrCorrupt, ver)
		}
		had := d.int()
		u := d.str()
		if err := d.finish(); err != nil {
			return "", false, fmt.Errorf("store: content %016x: %w", hash, err)
		}
		if had <= depth {
			return u, true, nil
		}
	}
	rec := append([]byte{recordVersion1}, binary.AppendVarint(nil, int64(depth))...)
	db.keys.add(k)
	if err := db.ldb.Put(k, appendString(rec, url), nil); err != nil {
		return "", false, ldbErr(err, "put content %016x", hash)
	}
	return "", false, nil
}
