package store

import (
	"bytes"
	"testing"
)

// The signed statement behind a seed mark is kept with the mark: through
// merges of unmarked copies and of a second marked one, in scans, and
// across a reopen; a record of version 3 (before statements) reads with
// none.
func TestSeedProofKeptWithMark(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, testOptions(SeenExact))
	proof := []byte("statement of the first seeder")
	seed := ShardRecord{Key: 9, URLHash: 2, URL: "http://a.test/", Seed: true, SeedProof: proof}
	pending := ShardRecord{Key: 9, URLHash: 2, URL: "http://a.test/", Depth: 1}
	if err := db.PutShardRecords([]ShardRecord{pending}); err != nil {
		t.Fatal(err)
	}
	if err := db.PutShardRecords([]ShardRecord{seed}); err != nil {
		t.Fatal(err)
	}
	done := pending
	done.Done = true
	other := seed
	other.SeedProof = []byte("statement of another seeder")
	if err := db.PutShardRecords([]ShardRecord{done, other}); err != nil {
		t.Fatal(err)
	}
	check := func(db *DB) {
		t.Helper()
		r, ok, err := db.ShardRecord(9, 2)
		if err != nil || !ok || !r.Seed || !r.Done || !bytes.Equal(r.SeedProof, proof) {
			t.Fatalf("record %+v (%v, %v): want seed, done, with the first statement", r, ok, err)
		}
		n := 0
		if err := db.ScanShard(8, 9, func(r ShardRecord) error {
			n++
			if !bytes.Equal(r.SeedProof, proof) {
				t.Errorf("scanned %+v without the statement", r)
			}
			return nil
		}); err != nil || n != 1 {
			t.Fatalf("scan: %d records, %v", n, err)
		}
	}
	check(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, testOptions(SeenExact))
	check(db)

	// Version 3: the same without the statement.
	v4 := encodeShardRecord(nil, &ShardRecord{URL: "http://a.test/", Seed: true})
	v3 := append([]byte{3}, v4[1:len(v4)-1]...)
	var r ShardRecord
	if err := decodeShardRecord(v3, &r); err != nil || !r.Seed || r.SeedProof != nil || r.URL != "http://a.test/" {
		t.Fatalf("version 3 record: %+v, %v", r, err)
	}
}
