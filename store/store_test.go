package store

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// goleveldb's mpoolDrain lingers for up to a second after Close by
	// design; an unclosed DB still shows up through its other goroutines.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/syndtr/goleveldb/leveldb.(*DB).mpoolDrain"))
}

// testOptions are small options so tests do not allocate a 10M-entry filter.
func testOptions(mode SeenMode) Options {
	return Options{BloomExpected: 100_000, BloomFPRate: 0.001, SeenMode: mode, CacheBytes: 1 << 20}
}

func openTest(t testing.TB, dir string, opts Options) *DB {
	t.Helper()
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func entry(key, urlHash uint64) SeenEntry {
	return SeenEntry{Key: key, URLHash: urlHash, URL: fmt.Sprintf("https://h%x.example/%x", key, urlHash), Depth: int(urlHash % 7)}
}

// entries returns n distinct entries spread over the ring.
func entries(seed uint64, n int) []SeenEntry {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]SeenEntry, n)
	for i := range out {
		out[i] = entry(r.Uint64(), r.Uint64())
	}
	return out
}

func markSeen(t testing.TB, db *DB, es []SeenEntry) []bool {
	t.Helper()
	got, err := db.MarkSeen(es)
	if err != nil {
		t.Fatalf("MarkSeen: %v", err)
	}
	if len(got) != len(es) {
		t.Fatalf("MarkSeen returned %d results for %d entries", len(got), len(es))
	}
	return got
}

func TestMarkSeenNewAndDuplicate(t *testing.T) {
	for _, mode := range []SeenMode{SeenExact, SeenBloomOnly} {
		t.Run(mode.String(), func(t *testing.T) {
			db := openTest(t, t.TempDir(), testOptions(mode))
			a, b, c := entry(1, 10), entry(1, 11), entry(2, 10)
			if got := markSeen(t, db, []SeenEntry{a, b}); !reflect.DeepEqual(got, []bool{true, true}) {
				t.Fatalf("first batch: got %v", got)
			}
			if got := markSeen(t, db, []SeenEntry{b, c}); !reflect.DeepEqual(got, []bool{false, true}) {
				t.Fatalf("second batch: got %v", got)
			}
			// Same identity with other URL text is still a duplicate.
			a2 := a
			a2.URL = "https://other/"
			if got := markSeen(t, db, []SeenEntry{a2}); got[0] {
				t.Fatalf("same (Key, URLHash) with another URL reported new")
			}
			if n := db.SeenCount(); n != 3 {
				t.Fatalf("SeenCount = %d, want 3", n)
			}
			for _, e := range []SeenEntry{a, b, c} {
				if ok, err := db.Seen(e.Key, e.URLHash); err != nil || !ok {
					t.Fatalf("Seen(%x,%x) = %v, %v; want true", e.Key, e.URLHash, ok, err)
				}
			}
			if ok, err := db.Seen(2, 11); err != nil || ok {
				t.Fatalf("Seen(unseen) = %v, %v; want false", ok, err)
			}
			if got, err := db.MarkSeen(nil); err != nil || len(got) != 0 {
				t.Fatalf("MarkSeen(nil) = %v, %v", got, err)
			}
		})
	}
}

func TestMarkSeenDuplicatesWithinBatch(t *testing.T) {
	for _, mode := range []SeenMode{SeenExact, SeenBloomOnly} {
		t.Run(mode.String(), func(t *testing.T) {
			db := openTest(t, t.TempDir(), testOptions(mode))
			a, b := entry(5, 1), entry(5, 2)
			got := markSeen(t, db, []SeenEntry{a, a, b, a, b})
			if want := []bool{true, false, true, false, false}; !reflect.DeepEqual(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			if n := db.SeenCount(); n != 2 {
				t.Fatalf("SeenCount = %d, want 2", n)
			}
			if mode == SeenExact {
				var n int
				if err := db.ScanSeen(0, 0, func(SeenEntry) error { n++; return nil }); err != nil {
					t.Fatal(err)
				}
				if n != 2 {
					t.Fatalf("seen table holds %d entries, want 2", n)
				}
			}
		})
	}
}

func TestMarkSeenConcurrent(t *testing.T) {
	for _, mode := range []SeenMode{SeenExact, SeenBloomOnly} {
		t.Run(mode.String(), func(t *testing.T) {
			db := openTest(t, t.TempDir(), testOptions(mode))
			universe := entries(42, 3000)
			newCount := make([]atomic.Int32, len(universe))
			const workers = 8
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(w), 7))
					// Every worker marks every URL once, in its own
					// order, in overlapping batches with repeats.
					order := r.Perm(len(universe))
					for len(order) > 0 {
						n := min(len(order), 1+r.IntN(80))
						idx := slices.Clone(order[:n])
						order = order[n:]
						idx = append(idx, idx[r.IntN(len(idx))]) // an in-batch duplicate
						batch := make([]SeenEntry, len(idx))
						for i, j := range idx {
							batch[i] = universe[j]
						}
						got, err := db.MarkSeen(batch)
						if err != nil {
							errs <- err
							return
						}
						for i, j := range idx {
							if got[i] {
								newCount[j].Add(1)
							}
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			total := 0
			for i := range newCount {
				n := int(newCount[i].Load())
				total += n
				if n > 1 {
					t.Fatalf("URL %d reported new %d times", i, n)
				}
				// In bloom-only mode a false positive may hide a URL.
				if n == 0 && mode == SeenExact {
					t.Fatalf("URL %d never reported new", i)
				}
			}
			if int64(total) != db.SeenCount() {
				t.Fatalf("SeenCount = %d, but %d URLs reported new", db.SeenCount(), total)
			}
			if mode == SeenExact && total != len(universe) {
				t.Fatalf("%d URLs reported new, want %d", total, len(universe))
			}
		})
	}
}

func TestPersistenceExact(t *testing.T) {
	dir := t.TempDir()
	es := entries(1, 2000)
	db, err := Open(dir, testOptions(SeenExact))
	if err != nil {
		t.Fatal(err)
	}
	markSeen(t, db, es)
	if err := db.PutMeta("ring/epoch", []byte{7}); err != nil {
		t.Fatal(err)
	}
	if err := db.PutPage(&Page{Key: 3, URLHash: 4, URL: "https://a/", Body: []byte("hi")}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openTest(t, dir, testOptions(SeenExact))
	if n := db.SeenCount(); n != int64(len(es)) {
		t.Fatalf("SeenCount after reopen = %d, want %d", n, len(es))
	}
	if n := db.PageCount(); n != 1 {
		t.Fatalf("PageCount after reopen = %d, want 1", n)
	}
	if v, err := db.Meta("ring/epoch"); err != nil || !bytes.Equal(v, []byte{7}) {
		t.Fatalf("Meta after reopen = %v, %v", v, err)
	}
	// The Bloom filter was rebuilt: every seen URL passes it ...
	for _, e := range es {
		if !db.bloom.Test(bloomKey(urlKey(prefixSeen, e.Key, e.URLHash))) {
			t.Fatalf("Bloom filter not rebuilt: %x/%x missing", e.Key, e.URLHash)
		}
	}
	// ... so they are still duplicates (an empty filter would call them new).
	for i, isNew := range markSeen(t, db, es) {
		if isNew {
			t.Fatalf("entry %d reported new after reopen", i)
		}
	}
	if n := db.SeenCount(); n != int64(len(es)) {
		t.Fatalf("SeenCount = %d after re-marking duplicates", n)
	}
	// Entries survive with their payload.
	want := map[[2]uint64]SeenEntry{}
	for _, e := range es {
		want[[2]uint64{e.Key, e.URLHash}] = e
	}
	n := 0
	err = db.ScanSeen(0, 0, func(e SeenEntry) error {
		n++
		if w := want[[2]uint64{e.Key, e.URLHash}]; w != e {
			return fmt.Errorf("scanned %+v, stored %+v", e, w)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(es) {
		t.Fatalf("scanned %d entries, want %d", n, len(es))
	}
}

func TestSeenCountRepairedOnOpen(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, testOptions(SeenExact))
	if err != nil {
		t.Fatal(err)
	}
	markSeen(t, db, entries(3, 10))
	// Damage the counter behind the store's back.
	if err := db.ldb.Put(metaKey(metaSeenCount), make([]byte, 8), nil); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openTest(t, dir, testOptions(SeenExact))
	if n := db.SeenCount(); n != 10 {
		t.Fatalf("SeenCount = %d, want 10 (recounted from the table)", n)
	}
}

func TestBloomOnlyPersistence(t *testing.T) {
	dir := t.TempDir()
	es := entries(2, 2000)
	db, err := Open(dir, testOptions(SeenBloomOnly))
	if err != nil {
		t.Fatal(err)
	}
	got := markSeen(t, db, es)
	added := db.SeenCount()
	if int(added) != countTrue(got) {
		t.Fatalf("SeenCount %d != %d reported new", added, countTrue(got))
	}
	if err := db.ScanSeen(0, 0, func(SeenEntry) error { return nil }); !errors.Is(err, ErrBloomOnly) {
		t.Fatalf("ScanSeen in bloom-only mode: %v, want ErrBloomOnly", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "seen.bloom")); err != nil {
		t.Fatalf("filter not persisted: %v", err)
	}

	db = openTest(t, dir, testOptions(SeenBloomOnly))
	if db.journalLen != 0 {
		t.Fatalf("journal holds %d entries after a clean close", db.journalLen)
	}
	if n := db.SeenCount(); n != added {
		t.Fatalf("SeenCount after reopen = %d, want %d", n, added)
	}
	for i, isNew := range markSeen(t, db, es) {
		if isNew {
			t.Fatalf("entry %d reported new after reopen: filter not reloaded", i)
		}
	}
	fresh := entries(99, 100)
	if c := countTrue(markSeen(t, db, fresh)); c < 99 {
		t.Fatalf("only %d of 100 fresh URLs reported new", c)
	}
	// Nothing went into the exact seen table.
	it := db.ldb.NewIterator(tableRange(prefixSeen), nil)
	defer it.Release()
	if it.Next() {
		t.Fatalf("bloom-only mode wrote seen key %x", it.Key())
	}
}

// crash closes leveldb without the store's shutdown work, as if the process
// died.
func crash(t *testing.T, db *DB) {
	t.Helper()
	db.closed.Store(true)
	if err := db.ldb.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.stor.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestBloomOnlyCrashReplaysJournal(t *testing.T) {
	dir := t.TempDir()
	opts := testOptions(SeenBloomOnly)
	opts.journalLimit = 300
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	es := entries(4, 1000)
	for i := 0; i < len(es); i += 100 {
		markSeen(t, db, es[i:i+100])
	}
	if _, err := os.Stat(filepath.Join(dir, "seen.bloom")); err != nil {
		t.Fatalf("no checkpoint after %d entries with limit 300: %v", len(es), err)
	}
	if db.journalLen >= 300 || db.journalLen == 0 {
		t.Fatalf("journalLen = %d, want in (0, 300)", db.journalLen)
	}
	count := db.SeenCount()
	crash(t, db)

	db = openTest(t, dir, opts)
	if n := db.SeenCount(); n != count {
		t.Fatalf("SeenCount after crash = %d, want %d", n, count)
	}
	for i, isNew := range markSeen(t, db, es) {
		if isNew {
			t.Fatalf("entry %d reported new after crash: journal not replayed", i)
		}
	}
}

func TestCorruptBloomFile(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, testOptions(SeenBloomOnly))
	if err != nil {
		t.Fatal(err)
	}
	markSeen(t, db, entries(5, 10))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "seen.bloom")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string][]byte{
		"flipped bit": func() []byte { b := bytes.Clone(data); b[len(b)/2] ^= 4; return b }(),
		"truncated":   data[:len(data)-9],
		"short":       data[:5],
		"empty":       nil,
	} {
		if err := os.WriteFile(path, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		db, err := Open(dir, testOptions(SeenBloomOnly))
		if err == nil {
			db.Close()
			t.Fatalf("%s: Open accepted a corrupt filter", name)
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: error %v does not wrap ErrCorrupt", name, err)
		}
	}
}

func TestModeMismatch(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, testOptions(SeenExact))
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err := Open(dir, testOptions(SeenBloomOnly)); err == nil {
		db.Close()
		t.Fatal("opened an exact-mode database in bloom-only mode")
	}
}

func TestInvalidOptions(t *testing.T) {
	for _, o := range []Options{
		{BloomFPRate: 1},
		{BloomFPRate: -0.1},
		{SeenMode: 9},
		{CacheBytes: -1},
	} {
		if db, err := Open(t.TempDir(), o); err == nil {
			db.Close()
			t.Errorf("Open accepted %+v", o)
		}
	}
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// TestBloomAvoidsDiskReads fails if MarkSeen or Seen consult leveldb for URLs
// that the Bloom filter rules out.
func TestBloomAvoidsDiskReads(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	first := entries(10, 1000)
	markSeen(t, db, first)
	if n := db.seenReads.Load(); n != 0 {
		t.Fatalf("marking 1000 new URLs into an empty set did %d leveldb reads, want 0", n)
	}
	second := entries(11, 1000)
	if c := countTrue(markSeen(t, db, second)); c != 1000 {
		t.Fatalf("%d of 1000 new URLs reported new", c)
	}
	// With 1000 of 100000 expected entries the false positive rate is far
	// below 1%; allow a few.
	if n := db.seenReads.Load(); n > 5 {
		t.Fatalf("marking 1000 new URLs did %d leveldb reads, want ~0", n)
	}
	before := db.seenReads.Load()
	for _, e := range entries(12, 1000) {
		if ok, err := db.Seen(e.Key, e.URLHash); err != nil || ok {
			t.Fatalf("Seen(new) = %v, %v", ok, err)
		}
	}
	if n := db.seenReads.Load() - before; n > 5 {
		t.Fatalf("Seen of 1000 new URLs did %d leveldb reads, want ~0", n)
	}
	// Control: duplicates must be confirmed on disk, one read each.
	before = db.seenReads.Load()
	if c := countTrue(markSeen(t, db, first[:500])); c != 0 {
		t.Fatalf("%d duplicates reported new", c)
	}
	if n := db.seenReads.Load() - before; n != 500 {
		t.Fatalf("500 duplicates did %d leveldb reads, want 500", n)
	}
}

// TestBloomFalsePositiveCheckedOnDisk proves the exact mode never trusts the
// filter alone: with a saturated filter every URL passes it, yet new URLs are
// still reported new.
func TestBloomFalsePositiveCheckedOnDisk(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	db.mu.Lock()
	db.bloom.BitSet().SetAll() // all ones: always "maybe"
	db.mu.Unlock()
	es := entries(13, 100)
	if c := countTrue(markSeen(t, db, es)); c != 100 {
		t.Fatalf("%d of 100 new URLs reported new behind a saturated filter", c)
	}
	if n := db.seenReads.Load(); n != 100 {
		t.Fatalf("%d reads, want 100", n)
	}
}

// ringModel is the reference definition of the ring range (from, to].
func ringModel(k, from, to uint64) bool {
	switch {
	case from == to:
		return true
	case from < to:
		return k > from && k <= to
	default:
		return k > from || k <= to
	}
}

func TestScanSeenRanges(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	const max = math.MaxUint64
	ringKeys := []uint64{0, 1, 5, 100, 1 << 63, max - 1, max}
	var es []SeenEntry
	for _, k := range ringKeys {
		es = append(es, entry(k, 2), entry(k, 1), entry(k, max))
	}
	markSeen(t, db, es)

	scan := func(from, to uint64) []SeenEntry {
		t.Helper()
		var got []SeenEntry
		if err := db.ScanSeen(from, to, func(e SeenEntry) error { got = append(got, e); return nil }); err != nil {
			t.Fatalf("ScanSeen(%d, %d): %v", from, to, err)
		}
		return got
	}
	ringOf := func(es []SeenEntry) []uint64 {
		var ks []uint64
		for _, e := range es {
			if len(ks) == 0 || ks[len(ks)-1] != e.Key {
				ks = append(ks, e.Key)
			}
		}
		return ks
	}
	for _, tc := range []struct {
		from, to uint64
		want     []uint64
	}{
		{0, 5, []uint64{1, 5}},
		{1, 100, []uint64{5, 100}},
		{5, 5, []uint64{100, 1 << 63, max - 1, max, 0, 1, 5}}, // whole ring, from after 5
		{0, 0, []uint64{1, 5, 100, 1 << 63, max - 1, max, 0}},
		{max, max, []uint64{0, 1, 5, 100, 1 << 63, max - 1, max}},
		{100, 1, []uint64{1 << 63, max - 1, max, 0, 1}}, // wraps
		{max - 1, 0, []uint64{max, 0}},
		{max, 1, []uint64{0, 1}},
		{1 << 63, max, []uint64{max - 1, max}},
		{2, 4, nil},
		{max - 1, max, []uint64{max}},
	} {
		got := scan(tc.from, tc.to)
		if keys := ringOf(got); !slices.Equal(keys, tc.want) {
			t.Errorf("ScanSeen(%d, %d) ring keys %v, want %v", tc.from, tc.to, keys, tc.want)
		}
		if len(got) != 3*len(tc.want) {
			t.Errorf("ScanSeen(%d, %d) returned %d entries, want %d", tc.from, tc.to, len(got), 3*len(tc.want))
		}
		for i := 1; i < len(got); i++ {
			if got[i].Key == got[i-1].Key && got[i].URLHash <= got[i-1].URLHash {
				t.Errorf("ScanSeen(%d, %d): URL hashes out of order", tc.from, tc.to)
			}
		}
	}

	// Random ranges over random keys against the reference definition.
	db2 := openTest(t, t.TempDir(), testOptions(SeenExact))
	all := entries(20, 500)
	markSeen(t, db2, all)
	r := rand.New(rand.NewPCG(3, 3))
	for range 200 {
		from, to := r.Uint64(), r.Uint64()
		if r.IntN(4) == 0 {
			to = from
		}
		want := 0
		for _, e := range all {
			if ringModel(e.Key, from, to) {
				want++
			}
		}
		got := 0
		err := db2.ScanSeen(from, to, func(e SeenEntry) error {
			if !ringModel(e.Key, from, to) {
				return fmt.Errorf("key %x outside (%x, %x]", e.Key, from, to)
			}
			got++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("ScanSeen(%x, %x) returned %d entries, want %d", from, to, got, want)
		}
	}
}

func TestScanCallbackError(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	markSeen(t, db, entries(6, 50))
	stop := errors.New("stop")
	n := 0
	err := db.ScanSeen(0, 0, func(SeenEntry) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	if err != stop || n != 3 {
		t.Fatalf("ScanSeen returned %v after %d calls, want stop after 3", err, n)
	}
}

func TestScanWhileWriting(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	markSeen(t, db, entries(7, 100))
	n := 0
	err := db.ScanSeen(0, 0, func(e SeenEntry) error {
		n++
		// Calling back into the store must not deadlock, and the scan
		// sees a snapshot.
		_, err := db.MarkSeen([]SeenEntry{entry(e.Key, e.URLHash+1)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != 100 {
		t.Fatalf("scan saw %d entries, want the 100 of its snapshot", n)
	}
}

func testPage(key, urlHash uint64, body []byte) *Page {
	return &Page{
		Key: key, URLHash: urlHash,
		URL:         fmt.Sprintf("https://h%x/p%x", key, urlHash),
		FinalURL:    fmt.Sprintf("https://h%x/final/%x", key, urlHash),
		Status:      200,
		ContentType: "text/html; charset=utf-8",
		Header:      http.Header{"Etag": {`"abc"`}, "Set-Cookie": {"a=1", "b=2"}, "X-Empty": {}},
		FetchedAt:   time.Date(2025, 3, 4, 5, 6, 7, 891011, time.UTC),
		Duration:    1234 * time.Millisecond,
		Depth:       3,
		Body:        body,
		Links:       42,
	}
}

func TestPagesRoundTrip(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	allBytes := make([]byte, 256*40)
	for i := range allBytes {
		allBytes[i] = byte(i)
	}
	random := make([]byte, 100_000)
	rc := rand.NewChaCha8([32]byte{1, 2})
	rc.Read(random)
	html := bytes.Repeat([]byte("<html><body><a href=\"/x\">link</a>\x00\xff</body></html>\n"), 2000)
	bodies := map[string][]byte{
		"nil":          nil,
		"tiny":         []byte{0, 1, 2},
		"all bytes":    allBytes,
		"incompressed": random,
		"html":         html,
	}
	i := uint64(0)
	for name, body := range bodies {
		i++
		p := testPage(i, i*1000, body)
		if err := db.PutPage(p); err != nil {
			t.Fatalf("%s: PutPage: %v", name, err)
		}
		got, err := db.Page(p.Key, p.URLHash)
		if err != nil {
			t.Fatalf("%s: Page: %v", name, err)
		}
		want := *p
		if len(want.Body) == 0 {
			want.Body = nil
		}
		if len(got.Body) == 0 {
			got.Body = nil
		}
		if !reflect.DeepEqual(got, &want) {
			t.Fatalf("%s: round trip\n got %+v\nwant %+v", name, got, &want)
		}
	}
	if n := db.PageCount(); n != int64(len(bodies)) {
		t.Fatalf("PageCount = %d, want %d", n, len(bodies))
	}
	// Overwriting keeps the count; zero time and empty fields round-trip.
	p := &Page{Key: 1, URLHash: 1000}
	if err := db.PutPage(p); err != nil {
		t.Fatal(err)
	}
	if n := db.PageCount(); n != int64(len(bodies)) {
		t.Fatalf("PageCount after overwrite = %d, want %d", n, len(bodies))
	}
	got, err := db.Page(1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, p) {
		t.Fatalf("empty page round trip: got %+v", got)
	}
	if _, err := db.Page(77, 77); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Page(missing) error %v, want ErrNotFound", err)
	}
}

func TestPageCompression(t *testing.T) {
	html := bytes.Repeat([]byte("<p>swarmcrawl</p>"), 1000)
	p := testPage(1, 2, html)
	v, err := encodePage(p)
	if err != nil {
		t.Fatal(err)
	}
	if v[0] != recordVersion1 {
		t.Fatalf("version byte %d", v[0])
	}
	if len(v) > len(html)/5 {
		t.Fatalf("record of %d bytes for a %d-byte repetitive body: not compressed", len(v), len(html))
	}
}

func TestScanPages(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	for _, k := range []uint64{10, 20, 30, math.MaxUint64} {
		if err := db.PutPage(testPage(k, k, []byte("body"))); err != nil {
			t.Fatal(err)
		}
	}
	var got []uint64
	err := db.ScanPages(20, 10, func(p *Page) error {
		if string(p.Body) != "body" || p.URLHash != p.Key {
			return fmt.Errorf("bad page %+v", p)
		}
		got = append(got, p.Key)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []uint64{30, math.MaxUint64, 10}; !slices.Equal(got, want) {
		t.Fatalf("ScanPages(20, 10) = %v, want %v", got, want)
	}
}

func TestCorruptPageRecords(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	good, err := encodePage(testPage(1, 1, bytes.Repeat([]byte("compress me "), 300)))
	if err != nil {
		t.Fatal(err)
	}
	put := func(v []byte) {
		t.Helper()
		db.putRaw(t, urlKey(prefixPage, 9, 9), v)
	}
	check := func(what string, v []byte) {
		t.Helper()
		put(v)
		_, err := db.Page(9, 9)
		if err == nil {
			t.Fatalf("%s: Page accepted a corrupt record", what)
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: error %v does not wrap ErrCorrupt", what, err)
		}
		if !bytes.Contains([]byte(err.Error()), []byte(keyString(9, 9))) {
			t.Fatalf("%s: error %q does not name the key", what, err)
		}
	}
	check("empty", nil)
	check("unknown version", append([]byte{2}, good[1:]...))
	check("trailing bytes", append(bytes.Clone(good), 0))
	for n := 0; n < len(good); n++ {
		check(fmt.Sprintf("truncated to %d", n), good[:n])
	}
	// Damaged compressed body (last byte of the payload).
	bad := bytes.Clone(good)
	bad[len(bad)-1] ^= 0xff
	put(bad)
	if _, err := db.Page(9, 9); err == nil {
		// A flip may still decode to some body, but never to the
		// recorded length check passing silently with the wrong data;
		// at least it must not panic. Nothing to assert then.
		t.Log("flipped payload byte still decoded")
	}
	// Random mutations never panic.
	r := rand.New(rand.NewPCG(5, 5))
	for range 3000 {
		v := bytes.Clone(good)
		for range 1 + r.IntN(4) {
			v[r.IntN(len(v))] = byte(r.Uint32())
		}
		put(v)
		db.Page(9, 9) // must not panic
	}
	// A corrupt record stops a scan with an error.
	check("scan setup", good[:10])
	err = db.ScanPages(0, 0, func(*Page) error { return nil })
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ScanPages over a corrupt record: %v, want ErrCorrupt", err)
	}
}

func TestCorruptSeenRecord(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	markSeen(t, db, []SeenEntry{entry(1, 1)})
	for _, v := range [][]byte{nil, {9, 0, 0}, {1}, {1, 0, 5, 'a'}, {1, 0, 1, 'a', 'b'}} {
		if err := db.ldb.Put(urlKey(prefixSeen, 1, 1), v, nil); err != nil {
			t.Fatal(err)
		}
		err := db.ScanSeen(0, 0, func(SeenEntry) error { return nil })
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("ScanSeen over seen record %x: %v, want ErrCorrupt", v, err)
		}
	}
	// A malformed key in the table is reported, not mis-parsed.
	if err := db.ldb.Put([]byte{prefixSeen, 1, 2}, []byte{1, 0, 0}, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.ScanSeen(0, 0, func(SeenEntry) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ScanSeen over a malformed key: %v, want ErrCorrupt", err)
	}
}

func FuzzDecodePage(f *testing.F) {
	good, err := encodePage(testPage(1, 1, bytes.Repeat([]byte("abc"), 100)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte{1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, v []byte) {
		var p Page
		if err := decodePage(v, &p); err != nil && !errors.Is(err, ErrCorrupt) {
			t.Fatalf("error %v does not wrap ErrCorrupt", err)
		}
	})
}

func TestMeta(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	if _, err := db.Meta("ring/epoch"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Meta(missing): %v, want ErrNotFound", err)
	}
	if err := db.PutMeta("ring/epoch", []byte("12")); err != nil {
		t.Fatal(err)
	}
	if v, err := db.Meta("ring/epoch"); err != nil || string(v) != "12" {
		t.Fatalf("Meta = %q, %v", v, err)
	}
	if err := db.PutMeta("store/seen_count", []byte("x")); !errors.Is(err, ErrReservedName) {
		t.Fatalf("PutMeta(reserved): %v, want ErrReservedName", err)
	}
	if err := db.PutMeta("", nil); err == nil {
		t.Fatal("PutMeta accepted an empty name")
	}
	// The counter is persisted with the batch.
	markSeen(t, db, entries(8, 5))
	v, err := db.Meta(metaSeenCount)
	if err != nil || len(v) != 8 || v[7] != 5 {
		t.Fatalf("persisted seen count = %x, %v; want 5", v, err)
	}
}

func TestClosed(t *testing.T) {
	db, err := Open(t.TempDir(), testOptions(SeenExact))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := db.MarkSeen([]SeenEntry{entry(1, 1)}); !errors.Is(err, ErrClosed) {
		t.Errorf("MarkSeen: %v", err)
	}
	if _, err := db.Seen(1, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Seen: %v", err)
	}
	if err := db.ScanSeen(0, 0, func(SeenEntry) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("ScanSeen: %v", err)
	}
	if err := db.PutPage(&Page{}); !errors.Is(err, ErrClosed) {
		t.Errorf("PutPage: %v", err)
	}
	if _, err := db.Page(1, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Page: %v", err)
	}
	if err := db.PutMeta("a", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("PutMeta: %v", err)
	}
	if _, err := db.Meta("a"); !errors.Is(err, ErrClosed) {
		t.Errorf("Meta: %v", err)
	}
}

func TestSeenRecordEncoding(t *testing.T) {
	e := SeenEntry{URL: "https://example.com/ä?q=1", Depth: -3}
	v := encodeSeen(nil, &e)
	if v[0] != recordVersion1 {
		t.Fatalf("version byte %d", v[0])
	}
	var got SeenEntry
	if err := decodeSeen(v, &got); err != nil || got != e {
		t.Fatalf("decode = %+v, %v", got, err)
	}
}
