package node

import (
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
	"github.com/swarmcrawl/swarmcrawl/store"
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
