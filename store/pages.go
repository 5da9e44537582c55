package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/syndtr/goleveldb/leveldb"
)

// Page is a fetched page as stored by the owner node.
type Page struct {
	// Key is the ring key of the URL.
	Key uint64
	// URLHash is the hash of the normalised URL.
	URLHash uint64
	// URL is the URL that was requested.
	URL string
	// FinalURL is the URL after redirects ("" or URL if none).
	FinalURL string
	// Status is the HTTP status code.
	Status int
	// ContentType is the media type of the body.
	ContentType string
	// Header holds the response headers worth keeping. A nil or empty
	// header is read back as nil.
	Header http.Header
	// FetchedAt is when the fetch started. It is stored with nanosecond
	// precision and read back in UTC (compare with Equal).
	FetchedAt time.Time
	// Duration is how long the fetch took.
	Duration time.Duration
	// Depth is the crawl depth of the URL.
	Depth int
	// Body is the (possibly truncated) response body. It is stored
	// DEFLATE-compressed when that makes it smaller. An empty body is read
	// back as nil.
	Body []byte
	// Links is the number of links extracted from the body.
	Links int
	// ResponseID, when set, is the WARC-Record-ID of the page's archived
	// response record, and Location where its exchange lies in the node's
	// WARC files: PutPage records it (RecordLocationOf) in the same write
	// as the page. Neither is part of the stored page.
	ResponseID string
	Location   RecordLocation
}

// PutPage stores p under (p.Key, p.URLHash), replacing any page stored
// there. The page count only grows when no page was stored there before.
func (db *DB) PutPage(p *Page) error {
	if p == nil {
		return errors.New("store: put page: nil page")
	}
	if len(p.ResponseID) > MaxRecordIDLen {
		return fmt.Errorf("store: put page %s: record ID of %d bytes", keyString(p.Key, p.URLHash), len(p.ResponseID))
	}
	v, err := encodePage(p)
	if err != nil {
		return fmt.Errorf("store: put page %s: %w", keyString(p.Key, p.URLHash), err)
	}
	k := urlKey(prefixPage, p.Key, p.URLHash)
	db.pageMu.Lock()
	defer db.pageMu.Unlock()
	if db.closed.Load() {
		return ErrClosed
	}
	exists, err := db.hasFiltered(k)
	if err != nil {
		return ldbErr(err, "put page %s", keyString(p.Key, p.URLHash))
	}
	db.keys.add(k)
	// One write: the page, its record's location and, for a new page,
	// the page count.
	b := new(leveldb.Batch)
	b.Put(k, v)
	if p.ResponseID != "" {
		b.Put(recordLocKey(p.ResponseID), encodeRecordLocation(p.Location))
	}
	total := db.pageCount.Load()
	if !exists {
		total++
		b.Put(metaKey(metaPageCount), binary.BigEndian.AppendUint64(nil, uint64(total)))
	}
	if err := db.ldb.Write(b, nil); err != nil {
		return ldbErr(err, "put page %s", keyString(p.Key, p.URLHash))
	}
	db.pageCount.Store(total)
	return nil
}

// Page returns the page stored under (key, urlHash), or an error wrapping
// ErrNotFound, or one wrapping ErrCorrupt if the record cannot be decoded.
func (db *DB) Page(key, urlHash uint64) (*Page, error) {
	if db.closed.Load() {
		return nil, ErrClosed
	}
	v, err := db.getFiltered(urlKey(prefixPage, key, urlHash))
	if err != nil {
		return nil, ldbErr(err, "page %s", keyString(key, urlHash))
	}
	p := &Page{Key: key, URLHash: urlHash}
	if err := decodePage(v, p); err != nil {
		return nil, fmt.Errorf("store: page %s: %w", keyString(key, urlHash), err)
	}
	return p, nil
}

// ScanPages calls fn for every page whose ring key lies in (from, to], with
// the range conventions of ScanSeen. An error from fn stops the scan and is
// returned as is; an undecodable record stops it with an error wrapping
// ErrCorrupt.
func (db *DB) ScanPages(from, to uint64, fn func(*Page) error) error {
	if db.closed.Load() {
		return ErrClosed
	}
	return db.scan(prefixPage, from, to, func(key, urlHash uint64, v []byte) error {
		p := &Page{Key: key, URLHash: urlHash}
		if err := decodePage(v, p); err != nil {
			return fmt.Errorf("store: page %s: %w", keyString(key, urlHash), err)
		}
		return fn(p)
	})
}

// PageCount returns the number of stored pages.
func (db *DB) PageCount() int64 { return db.pageCount.Load() }
