package store

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestURLMetaKeepsCaptures: where a URL's captures are survives the store,
// newest first, with the outlinks beside them.
func TestURLMetaKeepsCaptures(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	caps := []Capture{
		{Holder: "12D3KooWB", RecordID: "<urn:uuid:2>", Digest: "sha1:BBBB", Time: time.Unix(200, 5).UTC()},
		{Holder: "12D3KooWA", RecordID: "<urn:uuid:1>", Digest: "sha1:AAAA", Time: time.Unix(100, 0).UTC()},
	}
	m := URLMeta{URL: "http://a.test/", Status: 200, LastFetch: time.Unix(200, 5).UTC(), Fetches: 2,
		Outlinks: Outlinks{Known: true, Followed: true, Depth: 1, Links: []string{"http://a.test/b"}}, Captures: caps}
	if err := db.PutURLMeta(1, 2, m); err != nil {
		t.Fatal(err)
	}
	got, ok, err := db.URLMeta(1, 2)
	if err != nil || !ok || len(got.Captures) != 2 || got.Captures[0] != caps[0] || got.Captures[1] != caps[1] || !got.Outlinks.Known {
		t.Fatalf("URLMeta = %+v, %v, %v; want captures %+v", got, ok, err, caps)
	}
}

// TestURLMetaCaptureCountBounded: a record claiming more captures than kept
// is corrupt, not a large allocation.
func TestURLMetaCaptureCountBounded(t *testing.T) {
	// A version 2 record (no captures) made version 3 with a huge count.
	v := encodeURLMeta(&URLMeta{URL: "http://a.test/"})
	if v[0] != urlMetaVersion2 {
		t.Fatalf("record without captures has version %d", v[0])
	}
	good := append([]byte{urlMetaVersion3}, v[1:]...)
	good = binary.AppendUvarint(good, 0)
	var m URLMeta
	if err := decodeURLMeta(good, &m); err != nil {
		t.Fatalf("decode with 0 captures: %v", err)
	}
	bad := binary.AppendUvarint(append([]byte{urlMetaVersion3}, v[1:]...), MaxCaptures+1)
	for range MaxCaptures + 1 {
		bad = append(bad, 1, 'h', 1, 'r', 1, 'd', 0)
	}
	var got URLMeta
	if err := decodeURLMeta(bad, &got); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("decode with %d captures: %v, want ErrCorrupt", MaxCaptures+1, err)
	}
}

// TestAddCaptureKeepsNewestFew: the history is the newest MaxCaptures,
// newest first, and NearestCapture picks by time.
func TestAddCaptureKeepsNewestFew(t *testing.T) {
	var caps []Capture
	for i := 1; i <= MaxCaptures+3; i++ {
		caps = AddCapture(caps, Capture{RecordID: string(rune('a' + i)), Time: time.Unix(int64(100*i), 0)})
	}
	if len(caps) != MaxCaptures || caps[0].Time.Unix() != int64(100*(MaxCaptures+3)) {
		t.Fatalf("captures = %+v; want the newest %d, newest first", caps, MaxCaptures)
	}
	if c, _ := NearestCapture(caps, time.Time{}); c != caps[0] {
		t.Errorf("nearest to no time = %+v, want newest %+v", c, caps[0])
	}
	if c, _ := NearestCapture(caps, time.Unix(510, 0)); c.Time.Unix() != 500 {
		t.Errorf("nearest to 510 = %+v, want the one at 500", c)
	}
	if _, ok := NearestCapture(nil, time.Time{}); ok {
		t.Error("nearest of none found one")
	}
}

// TestPutPageRecordsCaptureLocation: a page stored with its response
// record's ID can be found by that ID (get reads the capture through it),
// a refetch moves it without counting a second page, and an over-long ID
// is refused with nothing written.
func TestPutPageRecordsCaptureLocation(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	p := &Page{Key: 1, URLHash: 2, URL: "http://a.test/", Status: 200, FetchedAt: time.Unix(100, 0),
		ResponseID: "<urn:uuid:1>", Location: RecordLocation{File: "a.warc.gz", Offset: 10, Length: 20}}
	if err := db.PutPage(p); err != nil {
		t.Fatal(err)
	}
	if loc, ok, err := db.RecordLocationOf("<urn:uuid:1>"); err != nil || !ok || loc != p.Location {
		t.Fatalf("RecordLocationOf = %+v, %v, %v; want %+v", loc, ok, err, p.Location)
	}
	again := *p
	again.ResponseID, again.Location = "<urn:uuid:2>", RecordLocation{File: "b.warc.gz", Offset: 5, Length: 7}
	if err := db.PutPage(&again); err != nil {
		t.Fatal(err)
	}
	if loc, ok, err := db.RecordLocationOf("<urn:uuid:2>"); err != nil || !ok || loc != again.Location {
		t.Fatalf("after a refetch RecordLocationOf = %+v, %v, %v; want %+v", loc, ok, err, again.Location)
	}
	if n := db.PageCount(); n != 1 {
		t.Fatalf("page count %d after storing one page twice, want 1", n)
	}
	long := *p
	long.URLHash, long.ResponseID = 3, "<urn:uuid:"+strings.Repeat("x", MaxRecordIDLen)+">"
	if err := db.PutPage(&long); err == nil {
		t.Fatal("PutPage took a record ID longer than MaxRecordIDLen")
	}
	if _, err := db.Page(1, 3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("refused page was stored: %v", err)
	}
}
