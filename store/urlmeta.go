package store

// URL metadata: what the crawler remembers about every URL it fetched, for
// conditional GET and adaptive recrawling.
//
//	table     prefix  key                                         value
//	urlmeta   'u'     'u' | ring key (8, BE) | URL hash (8, BE)   URL metadata record
//
// URL metadata record, version 1:
//
//	version        byte = 1
//	url            bytes
//	etag           bytes
//	last modified  bytes
//	fingerprint    8 bytes BE (simhash)
//	content hash   8 bytes BE
//	last fetch     time
//	next crawl     time
//	interval       varint nanoseconds
//	status         varint
//	changes        varint
//	fetches        varint
//
// A "time" is a presence byte (0 = zero time, nothing follows; 1 = set),
// then varint Unix seconds and uvarint nanoseconds.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/syndtr/goleveldb/leveldb"
)

// URLMeta is what the crawler keeps about a fetched URL.
type URLMeta struct {
	// URL is the normalised URL.
	URL string
	// ETag and LastModified are the validators of the last 2xx response,
	// sent back as If-None-Match and If-Modified-Since on a recrawl.
	ETag, LastModified string
	// Fingerprint is the simhash of the page's visible text (0 when none).
	Fingerprint uint64
	// ContentHash is an exact hash of the body (or of the redirect target),
	// the test of "the content changed".
	ContentHash uint64
	// LastFetch is when the URL was last fetched.
	LastFetch time.Time
	// NextCrawl is when the URL is due for a recrawl (zero: never).
	NextCrawl time.Time
	// Interval is the current recrawl interval.
	Interval time.Duration
	// Status is the HTTP status of the last fetch (304 included).
	Status int
	// Changes counts the fetches that found the content changed, and
	// Fetches all fetches.
	Changes, Fetches int
}

// URLMeta returns the metadata stored for (ringKey, urlHash); ok is false
// when there is none.
func (db *DB) URLMeta(ringKey, urlHash uint64) (m URLMeta, ok bool, err error) {
	if db.closed.Load() {
		return m, false, ErrClosed
	}
	v, err := db.ldb.Get(urlKey(prefixURLMeta, ringKey, urlHash), nil)
	if errors.Is(err, leveldb.ErrNotFound) {
		return m, false, nil
	}
	if err != nil {
		return m, false, ldbErr(err, "url meta %s", keyString(ringKey, urlHash))
	}
	if err := decodeURLMeta(v, &m); err != nil {
		return m, false, fmt.Errorf("store: url meta %s: %w", keyString(ringKey, urlHash), err)
	}
	return m, true, nil
}

// PutURLMeta stores the metadata of (ringKey, urlHash), replacing any.
func (db *DB) PutURLMeta(ringKey, urlHash uint64, m URLMeta) error {
	if db.closed.Load() {
		return ErrClosed
	}
	if err := db.ldb.Put(urlKey(prefixURLMeta, ringKey, urlHash), encodeURLMeta(&m), nil); err != nil {
		return ldbErr(err, "put url meta %s", keyString(ringKey, urlHash))
	}
	return nil
}

// ScanURLMeta calls fn for the metadata of every URL whose ring key lies in
// (from, to], with the range conventions of ScanSeen.
func (db *DB) ScanURLMeta(from, to uint64, fn func(ringKey, urlHash uint64, m URLMeta) error) error {
	if db.closed.Load() {
		return ErrClosed
	}
	return db.scan(prefixURLMeta, from, to, func(key, urlHash uint64, v []byte) error {
		var m URLMeta
		if err := decodeURLMeta(v, &m); err != nil {
			return fmt.Errorf("store: url meta %s: %w", keyString(key, urlHash), err)
		}
		return fn(key, urlHash, m)
	})
}

func encodeURLMeta(m *URLMeta) []byte {
	dst := make([]byte, 0, 64+len(m.URL)+len(m.ETag)+len(m.LastModified))
	dst = append(dst, recordVersion1)
	dst = appendString(dst, m.URL)
	dst = appendString(dst, m.ETag)
	dst = appendString(dst, m.LastModified)
	dst = binary.BigEndian.AppendUint64(dst, m.Fingerprint)
	dst = binary.BigEndian.AppendUint64(dst, m.ContentHash)
	dst = appendTime(dst, m.LastFetch)
	dst = appendTime(dst, m.NextCrawl)
	dst = binary.AppendVarint(dst, int64(m.Interval))
	dst = binary.AppendVarint(dst, int64(m.Status))
	dst = binary.AppendVarint(dst, int64(m.Changes))
	return binary.AppendVarint(dst, int64(m.Fetches))
}

func decodeURLMeta(v []byte, m *URLMeta) error {
	d := decoder{b: v}
	if ver := d.byte(); d.err == nil && ver != recordVersion1 {
		return fmt.Errorf("%w: unknown url meta record version %d", ErrCorrupt, ver)
	}
	m.URL = d.str()
	m.ETag = d.str()
	m.LastModified = d.str()
	m.Fingerprint = d.fixed64()
	m.ContentHash = d.fixed64()
	m.LastFetch = d.stamp()
	m.NextCrawl = d.stamp()
	m.Interval = time.Duration(d.varint())
	m.Status = d.int()
	m.Changes = d.int()
	m.Fetches = d.int()
	return d.finish()
}
