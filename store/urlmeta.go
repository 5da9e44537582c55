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
//
// Version 2 is version 1 followed by the outlinks:
//
//	flags          byte (1 = known, 2 = followed)
//	depth          varint
//	links          uvarint count, then each link as bytes
//
// Version 3 is version 2 followed by the captures, newest first:
//
//	count          uvarint (at most MaxCaptures)
//	each           holder bytes, record ID bytes, payload digest bytes, time

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
	// Outlinks is what became of the page's links when this node fetched
	// it. It stays on this node: metadata handed to another node (in a
	// shard record) arrives without it.
	Outlinks Outlinks
	// Captures are where the URL's last archived fetches are, newest
	// first, at most MaxCaptures: the peer holding each in its WARC files
	// and the record to ask it for. They travel with the metadata (shard
	// records, a helper's results), so the URL's owner and replicas know
	// them.
	Captures []Capture
}

// MaxCaptures bounds URLMeta.Captures: the newest capture and a short
// history to pick one nearest a time from.
const MaxCaptures = 4

// Bounds of a Capture's fields, for what a peer sends.
const (
	// MaxHolderLen bounds Capture.Holder (a peer ID in text is about 52
	// bytes).
	MaxHolderLen = 128
	// MaxRecordIDLen bounds Capture.RecordID ("<urn:uuid:...>" is 47).
	MaxRecordIDLen = 128
	// MaxDigestLen bounds Capture.Digest ("sha1:" and 32 base32 digits
	// is 37).
	MaxDigestLen = 128
)

// Capture is where one archived fetch of a URL is.
type Capture struct {
	// Holder is the peer ID (text form) of the node whose WARC files hold
	// the records: the node that fetched the page, owner or helper.
	Holder string
	// RecordID is the WARC-Record-ID of the response record.
	RecordID string
	// Digest is the response record's WARC-Payload-Digest, "sha1:...".
	Digest string
	// Time is when the page was fetched (the record's WARC-Date).
	Time time.Time
}

// Valid reports whether c is within bounds and complete, as a capture a
// peer sent must be.
func (c Capture) Valid() bool {
	return c.Holder != "" && len(c.Holder) <= MaxHolderLen &&
		c.RecordID != "" && len(c.RecordID) <= MaxRecordIDLen &&
		c.Digest != "" && len(c.Digest) <= MaxDigestLen && !c.Time.IsZero()
}

// AddCapture returns caps with c put first, keeping at most MaxCaptures,
// newest first. caps is not modified.
func AddCapture(caps []Capture, c Capture) []Capture {
	out := make([]Capture, 0, min(len(caps)+1, MaxCaptures))
	out = append(out, c)
	for _, o := range caps {
		if len(out) == MaxCaptures {
			break
		}
		out = append(out, o)
	}
	return out
}

// NearestCapture returns the capture in caps whose time is nearest at;
// with a zero at, the newest. ok is false when caps is empty.
func NearestCapture(caps []Capture, at time.Time) (c Capture, ok bool) {
	if len(caps) == 0 {
		return c, false
	}
	if at.IsZero() {
		best := caps[0]
		for _, o := range caps[1:] {
			if o.Time.After(best.Time) {
				best = o
			}
		}
		return best, true
	}
	best, bestD := caps[0], absDuration(caps[0].Time.Sub(at))
	for _, o := range caps[1:] {
		if d := absDuration(o.Time.Sub(at)); d < bestD {
			best, bestD = o, d
		}
	}
	return best, true
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// Outlinks records the links of a fetched page and how deep they were
// followed, so that a shorter path to the page found later has them
// followed again from its depth without fetching the page again.
type Outlinks struct {
	// Known is set when this node fetched the page and kept its links: the
	// other fields mean something. Metadata adopted from another node,
	// or written before outlinks were kept, has it unset.
	Known bool
	// Followed is set when the links were reported, from a page at Depth
	// (page links go one deeper, a redirect's target keeps the depth).
	// Unset: the page was as deep as links are followed, and its links
	// wait here for a shorter path to it.
	Followed bool
	// Depth is the depth of the page whose links were followed.
	Depth int
	// Links are the followable links found on the page, normalised, in
	// page order (for a redirect, its target).
	Links []string
}

// URLMeta returns the metadata stored for (ringKey, urlHash); ok is false
// when there is none.
func (db *DB) URLMeta(ringKey, urlHash uint64) (m URLMeta, ok bool, err error) {
	if db.closed.Load() {
		return m, false, ErrClosed
	}
	v, err := db.getFiltered(urlKey(prefixURLMeta, ringKey, urlHash))
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
	k := urlKey(prefixURLMeta, ringKey, urlHash)
	db.keys.add(k)
	if err := db.ldb.Put(k, encodeURLMeta(&m), nil); err != nil {
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

// urlMetaVersion2 is the URL metadata record with outlinks, and
// urlMetaVersion3 with outlinks and captures.
const (
	urlMetaVersion2 = 2
	urlMetaVersion3 = 3
)

// Outlinks flags.
const (
	outlinksKnown    = 1
	outlinksFollowed = 2
)

func encodeURLMeta(m *URLMeta) []byte {
	n := 64 + len(m.URL) + len(m.ETag) + len(m.LastModified)
	for _, l := range m.Outlinks.Links {
		n += len(l) + 2
	}
	dst := make([]byte, 0, n)
	for _, c := range m.Captures {
		n += len(c.Holder) + len(c.RecordID) + len(c.Digest) + 24
	}
	ver := byte(urlMetaVersion2)
	if len(m.Captures) > 0 {
		ver = urlMetaVersion3
	}
	dst = append(dst, ver)
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
	dst = binary.AppendVarint(dst, int64(m.Fetches))
	dst = appendOutlinks(dst, &m.Outlinks)
	if ver == urlMetaVersion3 {
		caps := m.Captures[:min(len(m.Captures), MaxCaptures)]
		dst = binary.AppendUvarint(dst, uint64(len(caps)))
		for _, c := range caps {
			dst = appendString(dst, c.Holder)
			dst = appendString(dst, c.RecordID)
			dst = appendString(dst, c.Digest)
			dst = appendTime(dst, c.Time)
		}
	}
	return dst
}

func decodeCaptures(d *decoder) []Capture {
	n := d.uvarint()
	if n > MaxCaptures {
		d.fail("%d captures", n)
		return nil
	}
	if n == 0 {
		return nil
	}
	caps := make([]Capture, n)
	for i := range caps {
		caps[i] = Capture{Holder: d.str(), RecordID: d.str(), Digest: d.str(), Time: d.stamp()}
	}
	return caps
}

// appendOutlinks appends the encoding of o to dst: the outlinks part of a
// URL metadata record.
func appendOutlinks(dst []byte, o *Outlinks) []byte {
	var flags byte
	if o.Known {
		flags |= outlinksKnown
	}
	if o.Followed {
		flags |= outlinksFollowed
	}
	dst = append(dst, flags)
	dst = binary.AppendVarint(dst, int64(o.Depth))
	dst = binary.AppendUvarint(dst, uint64(len(o.Links)))
	for _, l := range o.Links {
		dst = appendString(dst, l)
	}
	return dst
}

func decodeOutlinks(d *decoder) Outlinks {
	var o Outlinks
	flags := d.byte()
	o.Known = flags&outlinksKnown != 0
	o.Followed = flags&outlinksFollowed != 0
	o.Depth = d.int()
	n := d.uvarint()
	if n > uint64(len(d.b)) { // each link takes at least a byte
		d.fail("%d links in %d bytes", n, len(d.b))
		return Outlinks{}
	}
	if n > 0 {
		o.Links = make([]string, n)
		for i := range o.Links {
			o.Links[i] = d.str()
		}
	}
	return o
}

func decodeURLMeta(v []byte, m *URLMeta) error {
	d := decoder{b: v}
	ver := d.byte()
	if d.err == nil && ver != recordVersion1 && ver != urlMetaVersion2 && ver != urlMetaVersion3 {
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
	m.Outlinks = Outlinks{}
	m.Captures = nil
	if ver >= urlMetaVersion2 {
		m.Outlinks = decodeOutlinks(&d)
	}
	if ver == urlMetaVersion3 {
		m.Captures = decodeCaptures(&d)
	}
	return d.finish()
}
