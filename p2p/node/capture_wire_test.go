package node

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
	"github.com/swarmcrawl/swarmcrawl/store"
	"github.com/swarmcrawl/swarmcrawl/store/warc"
)

// TestDecodeCapturesBounded: a peer's captures are kept only within
// bounds: at most store.MaxCaptures, none with an empty or oversized field
// or without a time; good ones round-trip.
func TestDecodeCapturesBounded(t *testing.T) {
	good := &pb.Capture{Holder: "12D3KooWX", RecordId: "<urn:uuid:1>", PayloadDigest: "sha1:AAAA", FetchedNs: time.Unix(5, 0).UnixNano()}
	long := strings.Repeat("x", store.MaxRecordIDLen+1)
	in := []*pb.Capture{
		nil,
		{Holder: "", RecordId: "<urn:uuid:2>", PayloadDigest: "sha1:B", FetchedNs: 1},
		{Holder: "h", RecordId: long, PayloadDigest: "sha1:B", FetchedNs: 1},
		{Holder: "h", RecordId: "r", PayloadDigest: "sha1:B", FetchedNs: 0},
	}
	got := decodeCaptures(append(in, good))
	if len(got) != 0 {
		t.Errorf("captures past the first %d kept: %+v", store.MaxCaptures, got)
	}
	got = decodeCaptures(append(in[:3], good))
	if len(got) != 1 || got[0].RecordID != "<urn:uuid:1>" || !got[0].Time.Equal(time.Unix(5, 0)) {
		t.Errorf("decodeCaptures = %+v, want only the good one", got)
	}
	var many []*pb.Capture
	for range 1000 {
		many = append(many, good)
	}
	if got := decodeCaptures(many); len(got) != store.MaxCaptures {
		t.Errorf("%d captures kept of 1000, want %d", len(got), store.MaxCaptures)
	}
	m := store.URLMeta{URL: "http://a.test/", Status: 200, Fetches: 1, LastFetch: time.Unix(5, 0),
		Captures: []store.Capture{{Holder: "h", RecordID: "r", Digest: "sha1:C", Time: time.Unix(5, 0)}}}
	back, err := decodeURLMeta(encodeURLMeta(m))
	if err != nil || len(back.Captures) != 1 || back.Captures[0] != m.Captures[0] {
		t.Errorf("round trip: %+v, %v; want %+v", back.Captures, err, m.Captures)
	}
}

// TestGetVerifiesDigest: the client takes records only when the response
// record is the capture the owner recorded (ID, URL) and its payload
// hashes to the recorded digest: a holder that serves another body, or
// another record, is caught.
func TestGetVerifiesDigest(t *testing.T) {
	dir := t.TempDir()
	w, err := warc.NewWriter(dir, warc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	id, _ := warc.NewRecordID()
	body := []byte("<html>the page as fetched</html>")
	const u = "http://a.test/p/1"
	loc, err := w.WriteExchangeAt(warc.Exchange{URL: u, Date: time.Unix(100, 0), Status: 200, ResponseHeader: http.Header{}, Body: body, ResponseID: id})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := warc.ReadExchange(dir, loc, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	good := store.Capture{Holder: "h", RecordID: id, Digest: warc.PayloadDigest(body), Time: time.Unix(100, 0)}
	r := &GetResult{URL: u, Capture: good, WARC: recs}
	if err := r.verify(); err != nil || !bytes.Equal(r.Body, body) {
		t.Fatalf("verify good records: %v, body %q", err, r.Body)
	}
	for name, c := range map[string]store.Capture{
		"other body":   {Holder: "h", RecordID: id, Digest: warc.PayloadDigest([]byte("tampered")), Time: time.Unix(100, 0)},
		"other record": {Holder: "h", RecordID: "<urn:uuid:0>", Digest: good.Digest, Time: time.Unix(100, 0)},
	} {
		r := &GetResult{URL: u, Capture: c, WARC: recs}
		if err := r.verify(); !errors.Is(err, ErrDigestMismatch) {
			t.Errorf("%s: verify = %v, want ErrDigestMismatch", name, err)
		}
	}
	r = &GetResult{URL: "http://a.test/p/2", Capture: good, WARC: recs}
	if err := r.verify(); !errors.Is(err, ErrDigestMismatch) {
		t.Errorf("records of another URL: verify = %v, want ErrDigestMismatch", err)
	}
}
