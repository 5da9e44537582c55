package store

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// TestScanShardPageWalksEveryRecordOnce: a walk page by page meets every
// shard record exactly once, in key order, whatever the page size,
// records sharing a ring key (host keys) and the keys at the table's ends
// included, and nothing of the other tables.
func TestScanShardPageWalksEveryRecordOnce(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	var recs []ShardRecord
	for _, k := range []uint64{0, 1, 7, 7, 7, 1 << 40, math.MaxUint64, math.MaxUint64} {
		h := uint64(len(recs)) * 3
		if k == math.MaxUint64 && len(recs) == 7 {
			h = math.MaxUint64
		}
		recs = append(recs, ShardRecord{Key: k, URLHash: h, URL: fmt.Sprintf("http://h%d.test/%d", k, h), Done: len(recs)%2 == 0})
	}
	if err := db.PutShardRecords(recs); err != nil {
		t.Fatal(err)
	}
	// Other tables beside it: not walked.
	if err := db.PutURLMeta(7, 3, URLMeta{URL: "http://h7.test/3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.MarkSeen([]SeenEntry{{Key: 7, URLHash: 99, URL: "http://h7.test/99"}}); err != nil {
		t.Fatal(err)
	}
	// In key order: recs is written that way.
	want := make([]string, len(recs))
	for i, r := range recs {
		want[i] = r.URL
	}
	for _, limit := range []int{1, 2, 3, len(recs), len(recs) + 5} {
		var got []string
		var c ShardCursor
		for pages := 0; ; pages++ {
			if pages > len(recs)+2 {
				t.Fatalf("limit %d: the walk does not end", limit)
			}
			next, more, err := db.ScanShardPage(c, limit, func(r ShardRecord) error {
				got = append(got, r.URL)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			c = next
			if !more {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("limit %d: walked %v, want %v", limit, got, want)
		}
	}
}
