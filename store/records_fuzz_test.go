package store

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/internal/fuzzcorpus"
)

// storeCodec is one of the store's record or key formats: decode reads
// bytes as leveldb hands them back, encode writes the value decode
// returned. They are what the store trusts on disk: a value or key that
// a crash, a bad disk or an old version left behind.
type storeCodec struct {
	name   string
	decode func(v []byte) (any, error)
	encode func(x any) []byte
}

var fuzzTime = time.Date(2026, 1, 2, 15, 4, 5, 123456789, time.UTC)

// storeCodecs are the formats FuzzStoreRecords decodes, in the order its
// kind byte picks them.
var storeCodecs = []storeCodec{
	{"seen", func(v []byte) (any, error) { var e SeenEntry; return e, decodeSeen(v, &e) },
		func(x any) []byte { e := x.(SeenEntry); return encodeSeen(nil, &e) }},
	{"page", func(v []byte) (any, error) { var p Page; return p, decodePage(v, &p) },
		func(x any) []byte {
			p := x.(Page)
			b, err := encodePage(&p)
			if err != nil {
				panic(err)
			}
			return b
		}},
	{"urlmeta", func(v []byte) (any, error) { var m URLMeta; return m, decodeURLMeta(v, &m) },
		func(x any) []byte { m := x.(URLMeta); return encodeURLMeta(&m) }},
	{"dead", func(v []byte) (any, error) { var d DeadLetter; return d, decodeDeadLetter(v, &d) },
		func(x any) []byte { d := x.(DeadLetter); return encodeDeadLetter(&d) }},
	{"host", func(v []byte) (any, error) { var h HostState; return h, decodeHostState(v, &h) },
		func(x any) []byte { h := x.(HostState); return encodeHostState(&h) }},
	{"queue", func(v []byte) (any, error) { var e QueueEntry; return e, decodeQueueEntry(v, &e, false) },
		func(x any) []byte { e := x.(QueueEntry); return encodeQueueEntry(nil, &e, false) }},
	{"schedule", func(v []byte) (any, error) { var e QueueEntry; return e, decodeQueueEntry(v, &e, true) },
		func(x any) []byte { e := x.(QueueEntry); return encodeQueueEntry(nil, &e, true) }},
	{"outbox", func(v []byte) (any, error) { var e OutboxEntry; return e, decodeOutbox(v, &e) },
		func(x any) []byte { e := x.(OutboxEntry); return encodeOutbox(&e) }},
	{"shard", func(v []byte) (any, error) {
		var r ShardRecord
		err := decodeShardRecord(v, &r)
		if len(r.Meta) == 0 {
			r.Meta = nil // no metadata, read as nil (version 1) or empty (version 2)
		}
		return r, err
	},
		func(x any) []byte { r := x.(ShardRecord); return encodeShardRecord(nil, &r) }},
	{"fingerprint", func(v []byte) (any, error) {
		fp, u, err := decodeFingerprint(v)
		return [2]any{fp, u}, err
	}, func(x any) []byte { a := x.([2]any); return encodeFingerprint(a[0].(uint64), a[1].(string)) }},
	{"url-key", func(v []byte) (any, error) {
		if len(v) == 0 {
			return nil, ErrCorrupt
		}
		k, h, err := parseURLKey(v, v[0])
		return [3]uint64{uint64(v[0]), k, h}, err
	}, func(x any) []byte { a := x.([3]uint64); return urlKey(byte(a[0]), a[1], a[2]) }},
	{"queue-key", func(v []byte) (any, error) { var e QueueEntry; return e, decodeQueueKey(v, &e) },
		func(x any) []byte { e := x.(QueueEntry); return queueKey(e.HostKey, e.Priority, e.Seq) }},
	{"schedule-key", func(v []byte) (any, error) {
		var e QueueEntry
		err := decodeScheduleKey(v, &e)
		if err == nil && e.Due.UnixNano() < 0 {
			// A due time past 2262 reads as negative nanoseconds, which
			// scheduleKey writes as 1970: not a key the store writes.
			return nil, fmt.Errorf("%w: due time out of range", ErrCorrupt)
		}
		return e, err
	}, func(x any) []byte { e := x.(QueueEntry); return scheduleKey(e.Due, e.Seq) }},
	{"seed", func(v []byte) (any, error) { return decodeSeed(v) },
		func(x any) []byte { return encodeSeed(x.(string)) }},
}

// storeSamples are records as the store writes them, one or more per
// codec (by name).
func storeSamples() map[string][]byte {
	page := &Page{URL: "http://a.test/p?q=1", FinalURL: "https://a.test/p?q=1", Status: 200, ContentType: "text/html; charset=utf-8",
		Header:    http.Header{"Etag": {`"e1"`}, "Last-Modified": {"Fri, 02 Jan 2026 15:04:05 GMT"}, "Vary": {"Accept-Encoding", "Cookie"}},
		FetchedAt: fuzzTime, Duration: 250 * time.Millisecond, Depth: 3, Links: 12,
		Body: []byte("<html><title>t</title>" + strings.Repeat("<p>words and more words</p>", 40) + "</html>")}
	pageBytes, err := encodePage(page)
	if err != nil {
		panic(err)
	}
	small := *page
	small.Header, small.Body = nil, []byte("short")
	smallBytes, _ := encodePage(&small)
	queued := QueueEntry{HostKey: 7, RingKey: 7, URLHash: 0x1234, URL: "http://a.test/", Depth: 2, Priority: 1, Attempts: 1, Redirects: 1, Recrawl: true, Seq: 99, Due: fuzzTime}
	return map[string][]byte{
		"seen":             encodeSeen(nil, &SeenEntry{URL: "http://a.test/p", Depth: 4}),
		"page":             pageBytes,
		"page-raw-body":    smallBytes,
		"urlmeta":          encodeURLMeta(&URLMeta{URL: "http://a.test/p", ETag: `"e1"`, LastModified: "Fri, 02 Jan 2026 15:04:05 GMT", Fingerprint: 0xfeed, ContentHash: 0xbeef, LastFetch: fuzzTime, NextCrawl: fuzzTime.Add(24 * time.Hour), Interval: 24 * time.Hour, Status: 200, Changes: 1, Fetches: 3}),
		"urlmeta-never":    encodeURLMeta(&URLMeta{URL: "http://a.test/q", Status: 304}),
		"dead":             encodeDeadLetter(&DeadLetter{URL: "http://a.test/gone", HostKey: 7, Depth: 1, Attempts: 3, Redirects: 0, Kind: "http_5xx", LastError: "503 Service Unavailable", At: fuzzTime}),
		"host":             encodeHostState(&HostState{Host: "a.test", Fetched: 100_000, Dropped: 12, NotBefore: fuzzTime}),
		"host-crawl-delay": encodeHostState(&HostState{Host: "a.test", Fetched: 3, CrawlDelay: 2 * time.Second}),
		"queue":            encodeQueueEntry(nil, &queued, false),
		"schedule":         encodeQueueEntry(nil, &queued, true),
		"outbox":           encodeOutbox(&OutboxEntry{URL: "http://b.test/x", Depth: 5, Redirects: 1, Attempts: 2}),
		"shard":            encodeShardRecord(nil, &ShardRecord{URL: "http://a.test/p", Depth: 2, Redirects: 1, Done: true, Meta: []byte("\x0a\x0fhttp://a.test/p"), MetaVersion: uint64(fuzzTime.UnixNano())}),
		"shard-version-1":  append([]byte{1, 0, 4, 0}, appendString(nil, "http://a.test/old")...),
		"shard-version-2":  append(append([]byte{2, 1, 4, 0}, appendString(nil, "http://a.test/v2")...), 0, 0),
		"shard-seeded":     encodeShardRecord(nil, &ShardRecord{URL: "http://a.test/", Seed: true}),
		"seed":             encodeSeed("http://a.test/"),
		"fingerprint":      encodeFingerprint(0x0123456789abcdef, "http://a.test/p"),
		"url-key":          urlKey(prefixSeen, 0x0102030405060708, 0x1112131415161718),
		"queue-key":        queueKey(7, 3, 99),
		"schedule-key":     scheduleKey(fuzzTime, 99),
	}
}

// FuzzStoreRecords decodes arbitrary bytes as one of the store's record or
// key formats (kind picks it), as the store does with what leveldb hands
// back. An error wraps ErrCorrupt; what decodes encodes to bytes that
// decode to the same value and encode to the same bytes again (so a
// record read and rewritten means what it meant); and a page's body and a
// shard record's metadata do not alias the bytes read, whose buffer the
// scan reuses.
func FuzzStoreRecords(f *testing.F) {
	index := map[string]uint8{}
	for i, c := range storeCodecs {
		index[c.name] = uint8(i)
	}
	codecOf := func(name string) uint8 {
		i, ok := index[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "-raw-body"), "-never"), "-version-1"), "-version-2"), "-seeded"), "-crawl-delay")]
		if !ok {
			panic("no codec for sample " + name)
		}
		return i
	}
	samples := storeSamples()
	for name, v := range samples {
		f.Add(codecOf(name), v)
	}
	fuzzcorpus.Write(f, func() map[string][]any {
		out := map[string][]any{}
		for name, v := range samples {
			out[name] = []any{codecOf(name), v}
		}
		return out
	})
	f.Fuzz(func(t *testing.T, kind uint8, v []byte) {
		c := storeCodecs[int(kind)%len(storeCodecs)]
		orig := bytes.Clone(v)
		x, err := c.decode(v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s: error %v does not wrap ErrCorrupt", c.name, err)
			}
			return
		}
		snapshot := fmt.Sprintf("%#v", x)
		for i := range v {
			v[i] ^= 0xff
		}
		if again := fmt.Sprintf("%#v", x); again != snapshot {
			t.Fatalf("%s: the decoded value aliases the record:\n%s\nthen\n%s", c.name, snapshot, again)
		}
		copy(v, orig)
		enc := c.encode(x)
		back, err := c.decode(enc)
		if err != nil {
			t.Fatalf("%s: %x decodes to %#v, which encodes to %x, which does not decode: %v", c.name, v, x, enc, err)
		}
		if !reflect.DeepEqual(back, x) {
			t.Fatalf("%s: %#v does not survive a round trip: %#v", c.name, x, back)
		}
		if again := c.encode(back); !bytes.Equal(again, enc) {
			t.Fatalf("%s: encodings differ: %x then %x", c.name, enc, again)
		}
	})
}
