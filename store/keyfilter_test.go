package store

import (
	"fmt"
	"path/filepath"
	"testing"
)

// putRaw writes a record as is, past the codecs, as damage would: its key
// goes into the key filter first, as every writer's does.
func (db *DB) putRaw(t *testing.T, k, v []byte) {
	t.Helper()
	db.keys.add(k)
	if err := db.ldb.Put(k, v, nil); err != nil {
		t.Fatal(err)
	}
}

// waitKeyScan waits until the scan of the keys Open started has returned.
func (db *DB) waitKeyScan() { <-db.keyScan.done }

// The key filter never loses a key, however many it holds: it grows a new
// Bloom filter when the last is full. Keys it was never given mostly pass
// as absent.
func TestKeyFilterGrows(t *testing.T) {
	var f keyFilter
	f.ready = true
	const n = 5 * keyFilterFirst
	key := func(i int) []byte { return urlKey(prefixURLMeta, uint64(i)*0x9e3779b97f4a7c15, uint64(i)) }
	for i := range n {
		f.add(key(i))
	}
	if len(f.filters) < 3 {
		t.Fatalf("%d keys in %d filters: it did not grow", n, len(f.filters))
	}
	for i := range n {
		if !f.mayHold(key(i)) {
			t.Fatalf("key %d of %d lost", i, n)
		}
	}
	fp := 0
	const absent = 20000
	for i := n; i < n+absent; i++ {
		if f.mayHold(key(i)) {
			fp++
		}
	}
	// About 1% per filter, three filters.
	if fp > absent*6/100 {
		t.Errorf("%d of %d absent keys pass", fp, absent)
	}
	var notReady keyFilter
	if !notReady.mayHold(key(1)) {
		t.Error("a filter whose scan has not finished ruled a key out")
	}
}

// What a store held before a restart is found again after it, in every
// table the key filter guards, and lookups of keys that were never written
// read nothing once the scan is done. Without the scan at Open (or with a
// table left out of it) the reopened store would report the records of the
// last run as missing: a page counted twice, a fetched URL fetched again.
func TestKeyFilterAfterReopen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "db")
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 3000 // several scan chunks
	for i := range n {
		k, h := uint64(i)<<40, uint64(i)
		if err := db.PutURLMeta(k, h, URLMeta{URL: fmt.Sprintf("http://a.test/%d", i), Status: 200}); err != nil {
			t.Fatal(err)
		}
		if err := db.PutShardRecords([]ShardRecord{{Key: k, URLHash: h, URL: fmt.Sprintf("http://a.test/%d", i), Done: true}}); err != nil {
			t.Fatal(err)
		}
		if err := db.PutPage(&Page{Key: k, URLHash: h, URL: fmt.Sprintf("http://a.test/%d", i), Status: 200}); err != nil {
			t.Fatal(err)
		}
		if _, dup, err := db.FollowContent(h, h+1, 2, fmt.Sprintf("http://a.test/%d", i)); err != nil || dup {
			t.Fatalf("FollowContent: dup %v, %v", dup, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.waitKeyScan()
	if !db.keys.ready {
		t.Fatal("the scan of the keys did not finish")
	}
	for i := range n {
		k, h := uint64(i)<<40, uint64(i)
		if _, ok, err := db.URLMeta(k, h); !ok || err != nil {
			t.Fatalf("URL meta %d lost: %v", i, err)
		}
		if r, ok, err := db.ShardRecord(k, h); !ok || !r.Done || err != nil {
			t.Fatalf("shard record %d lost: %+v %v", i, r, err)
		}
		if _, err := db.Page(k, h); err != nil {
			t.Fatalf("page %d lost: %v", i, err)
		}
		if first, dup, err := db.FollowContent(h, h+1, 3, "http://b.test/"); !dup || err != nil {
			t.Fatalf("content %d lost: %q %v %v", i, first, dup, err)
		}
	}
	// A page stored again is not counted again; a merge keeps the done mark.
	if err := db.PutPage(&Page{Key: 0, URLHash: 0, URL: "http://a.test/0", Status: 200}); err != nil {
		t.Fatal(err)
	}
	if got := db.PageCount(); got != n {
		t.Fatalf("page count %d after storing a page again, want %d", got, n)
	}
	if err := db.PutShardRecords([]ShardRecord{{Key: 1 << 40, URLHash: 1, URL: "http://a.test/1"}}); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := db.ShardRecord(1<<40, 1); !r.Done {
		t.Fatal("a merge into a record from before the restart lost its done mark")
	}
	// Written now, with the filter ready: every writer adds its key.
	const k, h = uint64(7) << 50, uint64(7)
	if err := db.PutURLMeta(k, h, URLMeta{URL: "http://c.test/1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ApplyQueue(&QueueUpdate{URLMeta: []URLMetaRecord{{RingKey: k + 1, URLHash: h, Meta: URLMeta{URL: "http://c.test/2"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := db.PutShardRecords([]ShardRecord{{Key: k, URLHash: h, URL: "http://c.test/1"}}); err != nil {
		t.Fatal(err)
	}
	if err := db.PutPage(&Page{Key: k, URLHash: h, URL: "http://c.test/1", Status: 200}); err != nil {
		t.Fatal(err)
	}
	if _, dup, err := db.FollowContent(k, h, 1, "http://c.test/1"); dup || err != nil {
		t.Fatalf("FollowContent: dup %v, %v", dup, err)
	}
	for i, k := range []uint64{k, k + 1} {
		if _, ok, err := db.URLMeta(k, h); !ok || err != nil {
			t.Fatalf("URL meta %d written after the scan not found: %v", i, err)
		}
	}
	if _, ok, err := db.ShardRecord(k, h); !ok || err != nil {
		t.Fatalf("shard record written after the scan not found: %v", err)
	}
	if _, err := db.Page(k, h); err != nil {
		t.Fatalf("page written after the scan not found: %v", err)
	}
	if _, dup, err := db.FollowContent(k, h, 1, "http://c.test/2"); !dup || err != nil {
		t.Fatalf("content written after the scan not found: dup %v, %v", dup, err)
	}

	// Keys never written: nearly all are answered without a read.
	passed := 0
	for i := range 1000 {
		if db.keys.mayHold(urlKey(prefixURLMeta, uint64(i)<<40+7, uint64(i)+n)) {
			passed++
		}
		if _, ok, err := db.URLMeta(uint64(i)<<40+7, uint64(i)+n); ok || err != nil {
			t.Fatalf("URL meta never written: %v %v", ok, err)
		}
	}
	if passed > 50 {
		t.Errorf("%d of 1000 keys never written pass the filter", passed)
	}
}
