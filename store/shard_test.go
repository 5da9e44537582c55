package store

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

func scanShard(t *testing.T, db *DB, from, to uint64) []ShardRecord {
	t.Helper()
	var out []ShardRecord
	if err := db.ScanShard(from, to, func(r ShardRecord) error { out = append(out, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// Replicas receive the same records in any order, any number of times;
// they must end up agreeing, and a fetched URL must never become pending
// again.
func TestShardRecordsMergeDoneWins(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	pending := ShardRecord{Key: 5, URLHash: 1, URL: "http://a.test/x", Depth: 3}
	done := pending
	done.Done = true
	shallow := pending
	shallow.Depth, shallow.URL = 1, "http://a.test/x?shallow"
	for _, order := range [][]ShardRecord{{pending, done, pending}, {done, pending}, {pending, shallow, done}} {
		db := openTest(t, t.TempDir(), testOptions(SeenExact))
		for _, r := range order {
			if err := db.PutShardRecords([]ShardRecord{r}); err != nil {
				t.Fatal(err)
			}
		}
		got, ok, err := db.ShardRecord(5, 1)
		if err != nil || !ok || !got.Done {
			t.Fatalf("order %v: got %+v ok=%v err=%v, want done", order, got, ok, err)
		}
	}
	if err := db.PutShardRecords([]ShardRecord{pending, shallow}); err != nil {
		t.Fatal(err)
	}
	got, _, _ := db.ShardRecord(5, 1)
	if got.Depth != 1 || got.Done {
		t.Fatalf("got %+v, want the shallower pending record", got)
	}
	if err := db.PutShardRecords([]ShardRecord{{Key: 1, URLHash: 2}}); err == nil {
		t.Fatal("a record without URL was stored")
	}
}

// TestShardMergesAcrossRecentRecords: merges read the records written
// lately from memory (DB.recentShard) and the older ones from leveldb, and
// both give the same merge: a done mark and a shallower path written in
// turn, with more than two generations of other records written between,
// all stay.
func TestShardMergesAcrossRecentRecords(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, testOptions(SeenExact))
	put := func(recs ...ShardRecord) {
		t.Helper()
		if err := db.PutShardRecordsNoSync(recs); err != nil {
			t.Fatal(err)
		}
	}
	r := ShardRecord{Key: 5, URLHash: 1, URL: "http://a.test/x", Depth: 3}
	put(r)
	done := r
	done.Done, done.Meta, done.MetaVersion = true, []byte("fetched"), 1
	put(done) // merged with r from memory
	shallow := r
	shallow.Depth, shallow.URL = 1, "http://a.test/x?shallow"
	put(shallow)
	if got, _, _ := db.ShardRecord(5, 1); !got.Done || got.Depth != 1 || string(got.Meta) != "fetched" {
		t.Fatalf("after merges from memory: %+v", got)
	}
	// Push r out of memory: its next merge reads leveldb.
	others := make([]ShardRecord, 0, 1024)
	for i := range 2*recentShardRecords + 1 {
		others = append(others, ShardRecord{Key: 9, URLHash: uint64(i + 10), URL: fmt.Sprintf("http://b.test/%d", i)})
		if len(others) == cap(others) {
			put(others...)
			others = others[:0]
		}
	}
	put(others...)
	if _, ok := db.recentShard.Get([2]uint64{5, 1}); ok {
		t.Fatal("the record is still in memory after two generations of others")
	}
	seed := r
	seed.Depth, seed.Seed = 0, true
	put(seed)
	got, _, _ := db.ShardRecord(5, 1)
	if !got.Done || !got.Seed || got.Depth != 0 || string(got.Meta) != "fetched" {
		t.Fatalf("after a merge from leveldb: %+v", got)
	}
	// What memory held agrees with what the store holds after a restart.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, testOptions(SeenExact))
	if again, _, _ := db.ShardRecord(5, 1); !again.Done || !again.Seed || again.Depth != 0 {
		t.Fatalf("after a restart: %+v", again)
	}
}

func TestScanShardRanges(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	keys := []uint64{0, 10, 20, math.MaxUint64}
	for _, k := range keys {
		if err := db.PutShardRecords([]ShardRecord{{Key: k, URLHash: 7, URL: "http://h.test/"}}); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		from, to uint64
		want     []uint64
	}{
		{0, 10, []uint64{10}},
		{5, 5, []uint64{10, 20, math.MaxUint64, 0}},
		{15, 5, []uint64{20, math.MaxUint64, 0}},
		{math.MaxUint64, 10, []uint64{0, 10}},
	}
	for _, c := range cases {
		var got []uint64
		for _, r := range scanShard(t, db, c.from, c.to) {
			got = append(got, r.Key)
		}
		if len(got) != len(c.want) {
			t.Fatalf("(%d, %d]: got %v, want %v", c.from, c.to, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("(%d, %d]: got %v, want %v", c.from, c.to, got, c.want)
			}
		}
	}
}

// TestScanShardMeta: each shard record comes with its URL's metadata, nil
// for a URL without; metadata without a record is passed over; the same
// ranges as ScanShard, wrapping ones included.
func TestScanShardMeta(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	for _, k := range []uint64{0, 10, 20, math.MaxUint64} {
		for h := uint64(1); h <= 3; h++ {
			url := fmt.Sprintf("http://h%d.test/%d", k%100, h)
			if err := db.PutShardRecords([]ShardRecord{{Key: k, URLHash: h, URL: url}}); err != nil {
				t.Fatal(err)
			}
			if h != 2 { // URL 2 of each key was never fetched
				m := URLMeta{URL: url, LastFetch: at.Add(time.Duration(k%100+h) * time.Second)}
				if err := db.PutURLMeta(k, h, m); err != nil {
					t.Fatal(err)
				}
			}
		}
		// Metadata of URLs the shard does not hold, before and after
		// the records.
		for _, h := range []uint64{0, 4} {
			if err := db.PutURLMeta(k, h, URLMeta{URL: "http://stray.test/", LastFetch: at}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, c := range [][2]uint64{{0, 10}, {5, 5}, {15, 5}, {math.MaxUint64, 10}} {
		var got []string
		err := db.ScanShardMeta(c[0], c[1], func(r ShardRecord, m *URLMeta) error {
			switch {
			case m == nil:
				got = append(got, r.URL+" none")
			case m.URL != r.URL || !m.LastFetch.Equal(at.Add(time.Duration(r.Key%100+r.URLHash)*time.Second)):
				got = append(got, r.URL+" with the meta of "+m.URL)
			default:
				got = append(got, r.URL)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, r := range scanShard(t, db, c[0], c[1]) {
			if r.URLHash == 2 {
				want = append(want, r.URL+" none")
			} else {
				want = append(want, r.URL)
			}
		}
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("(%d, %d]: got %q, want %q", c[0], c[1], got, want)
		}
	}
}

func TestShardHostsLastWriteWinsAndCorruptRejected(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	if err := db.PutShardHosts([]ShardHost{{Key: 3, Host: "a.test", Data: []byte("old")}, {Key: 3, Host: "b.test", Data: []byte("b")}}); err != nil {
		t.Fatal(err)
	}
	if err := db.PutShardHosts([]ShardHost{{Key: 3, Host: "a.test", Data: []byte("new")}}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	if err := db.ScanShardHosts(2, 3, func(h ShardHost) error { got[h.Host] = string(h.Data); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["a.test"] != "new" || got["b.test"] != "b" {
		t.Fatalf("hosts = %v", got)
	}
	if err := db.ldb.Put(urlKey(prefixShard, 9, 9), []byte{9, 0}, nil); err != nil {
		t.Fatal(err)
	}
	err := db.ScanShard(8, 9, func(ShardRecord) error { return nil })
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt record: err = %v, want ErrCorrupt", err)
	}
}

// A URL's meta (its state after the last fetch) travels with its shard
// record: the newest version wins whatever order updates arrive in, the
// blob survives a reopen, and records written before the meta fields
// existed still read.
func TestShardRecordMetaNewestWins(t *testing.T) {
	base := ShardRecord{Key: 9, URLHash: 4, URL: "http://a.test/m", Depth: 2, Done: true}
	v1, v2 := base, base
	v1.Meta, v1.MetaVersion = []byte("first fetch"), 100
	v2.Meta, v2.MetaVersion = []byte("recrawl"), 200
	for _, order := range [][]ShardRecord{{v1, v2}, {v2, v1}, {v2, base, v1, v2}} {
		dir := t.TempDir()
		db := openTest(t, dir, testOptions(SeenExact))
		for _, r := range order {
			if err := db.PutShardRecords([]ShardRecord{r}); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
		db = openTest(t, dir, testOptions(SeenExact))
		got := scanShard(t, db, 0, 0)
		if len(got) != 1 || string(got[0].Meta) != "recrawl" || got[0].MetaVersion != 200 || !got[0].Done || got[0].Depth != 2 {
			t.Errorf("after %d puts: %+v, want the recrawl's meta", len(order), got)
		}
	}

	// A version 1 record: no meta fields.
	v := []byte{1, 1}
	v = append(v, 4, 0) // depth 2, redirects 0 (zigzag varints)
	v = appendString(v, "http://a.test/old")
	var r ShardRecord
	if err := decodeShardRecord(v, &r); err != nil || r.URL != "http://a.test/old" || !r.Done || r.Depth != 2 || r.Meta != nil {
		t.Errorf("version 1 record: %+v, %v", r, err)
	}
	if err := decodeShardRecord(append([]byte{3}, v[1:]...), &r); !errors.Is(err, ErrCorrupt) {
		t.Errorf("version 3 record: %v, want ErrCorrupt", err)
	}
}

// A record marked seed stays a seed whatever merges into it, and the
// seeds table indexes exactly the records marked seed: written with them,
// read back by ring key, kept across a reopen.
func TestSeedRecordsIndexed(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, testOptions(SeenExact))
	link := ShardRecord{Key: 9, URLHash: 1, URL: "http://a.test/p", Depth: 2}
	seed := ShardRecord{Key: 9, URLHash: 2, URL: "http://a.test/", Seed: true}
	other := ShardRecord{Key: 10, URLHash: 3, URL: "http://b.test/", Seed: true}
	if err := db.PutShardRecords([]ShardRecord{link, seed, other}); err != nil {
		t.Fatal(err)
	}
	// A pending copy, a redirect-depth copy and a done copy merge in:
	// the seed mark stays.
	again := seed
	again.Seed, again.Redirects = false, 1
	done := seed
	done.Seed, done.Done = false, true
	if err := db.PutShardRecords([]ShardRecord{again, done}); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := db.ShardRecord(9, 2); !r.Seed || !r.Done {
		t.Fatalf("merged record %+v, want seed and done", r)
	}
	// A link found later at depth 0 becomes a seed when a seed names it.
	promoted := link
	promoted.Depth, promoted.Seed = 0, true
	if err := db.PutShardRecords([]ShardRecord{promoted}); err != nil {
		t.Fatal(err)
	}
	check := func(db *DB) {
		t.Helper()
		var got []string
		if err := db.SeedURLs(9, func(u string) bool { got = append(got, u); return true }); err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0] != "http://a.test/p" || got[1] != "http://a.test/" {
			t.Fatalf("seeds of key 9: %q, want the promoted link and the seed", got)
		}
		for _, c := range []struct {
			key, hash uint64
			want      bool
		}{{9, 1, true}, {9, 2, true}, {10, 3, true}, {10, 4, false}, {11, 3, false}} {
			if ok, err := db.IsSeed(c.key, c.hash); err != nil || ok != c.want {
				t.Errorf("IsSeed(%d, %d) = %v, %v; want %v", c.key, c.hash, ok, err, c.want)
			}
		}
		n := 0
		if err := db.SeedURLs(9, func(string) bool { n++; return false }); err != nil || n != 1 {
			t.Errorf("SeedURLs went on after fn said stop: %d calls, %v", n, err)
		}
	}
	check(db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	check(openTest(t, dir, testOptions(SeenExact)))
}
