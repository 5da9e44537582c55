package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/syndtr/goleveldb/leveldb/util"
)

func addFP(t testing.TB, db *DB, ringKey, urlHash, fp uint64, url string) {
	t.Helper()
	if err := db.AddFingerprint(ringKey, urlHash, fp, url); err != nil {
		t.Fatalf("AddFingerprint(%s): %v", url, err)
	}
}

func nearDup(t testing.TB, db *DB, fp uint64, maxDist int, exclude uint64) (string, bool) {
	t.Helper()
	url, found, err := db.NearDuplicate(fp, maxDist, exclude)
	if err != nil {
		t.Fatalf("NearDuplicate(%016x, %d): %v", fp, maxDist, err)
	}
	return url, found
}

// flip returns fp with the given bits inverted.
func flip(fp uint64, bitIdx ...int) uint64 {
	for _, b := range bitIdx {
		fp ^= 1 << b
	}
	return fp
}

// bandEntries counts the band entries of a URL.
// bandEntries counts the index's band lists that name urlHash.
func bandEntries(t *testing.T, db *DB, urlHash uint64) int {
	t.Helper()
	db.fps.mu.RLock()
	defer db.fps.mu.RUnlock()
	n := 0
	for _, list := range db.fps.bands {
		for _, s := range list {
			if db.fps.slots[s].urlHash == urlHash {
				n++
			}
		}
	}
	return n
}

func TestNearDuplicateWithinDistance(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	const fp = 0x0123_4567_89ab_cdef
	addFP(t, db, 1, 100, fp, "https://a.example/page")
	addFP(t, db, 2, 200, ^uint64(fp), "https://b.example/other") // 64 bits away
	tests := []struct {
		name    string
		query   uint64
		maxDist int
		want    string
	}{
		{"identical", fp, 3, "https://a.example/page"},
		{"identical at distance 0", fp, 0, "https://a.example/page"},
		{"one bit", flip(fp, 5), 3, "https://a.example/page"},
		{"three bits in three bands", flip(fp, 1, 20, 40), 3, "https://a.example/page"},
		{"three bits in one band", flip(fp, 60, 61, 62), 3, "https://a.example/page"},
		{"two bits, distance 1 asked", flip(fp, 1, 2), 1, ""},
		{"one bit in every band, distance 3 asked", flip(fp, 0, 16, 32, 48), 3, ""},
		{"one bit in every band, distance 4 asked", flip(fp, 0, 16, 32, 48), 4, "https://a.example/page"},
		{"ten bits, distance 10 asked", flip(fp, 0, 7, 16, 23, 32, 39, 48, 55, 60, 63), 10, "https://a.example/page"},
		{"far from both", fp ^ 0x0000_ffff_ffff_0000, 20, ""},
		{"the other page", ^uint64(fp), 3, "https://b.example/other"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			url, found := nearDup(t, db, tc.query, tc.maxDist, 0)
			if found != (tc.want != "") || url != tc.want {
				t.Errorf("NearDuplicate = %q, %v; want %q", url, found, tc.want)
			}
		})
	}
}

func TestNearDuplicateFindsEveryFingerprintWithin3(t *testing.T) {
	// The band index must answer for every pattern of three flipped bits
	// (fewer flips are easier: their bands are a subset). Patterns are
	// taken from the bits around each band boundary, where a wrong band
	// layout fails, and at random.
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	const fp = 0x9e37_79b9_7f4a_7c15
	addFP(t, db, 1, 1, fp, "https://a.example/")
	edges := []int{0, 1, 2, 13, 14, 15, 16, 17, 18, 29, 30, 31, 32, 33, 34, 45, 46, 47, 48, 49, 50, 61, 62, 63}
	var patterns [][3]int
	for i, a := range edges {
		for j, b := range edges[i+1:] {
			for _, c := range edges[i+j+2:] {
				patterns = append(patterns, [3]int{a, b, c})
			}
		}
	}
	r := rand.New(rand.NewPCG(5, 5))
	for range 1000 {
		p := r.Perm(64)
		patterns = append(patterns, [3]int{p[0], p[1], p[2]})
	}
	missed := 0
	for _, p := range patterns {
		if _, found := nearDup(t, db, flip(fp, p[:]...), 3, 0); !found {
			if missed++; missed <= 5 {
				t.Errorf("bits %v flipped: not found", p)
			}
		}
	}
	if missed > 0 {
		t.Errorf("%d of %d patterns within distance 3 missed", missed, len(patterns))
	}
}

func TestNearDuplicateExcludesTheURLItself(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	const fp = 0xfeed_f00d_dead_beef
	addFP(t, db, 1, 100, fp, "https://a.example/")
	// A page re-fetched unchanged is not a duplicate of itself...
	if url, found := nearDup(t, db, fp, 3, 100); found {
		t.Fatalf("page is a near duplicate of itself: %q", url)
	}
	if url, found := nearDup(t, db, fp, 10, 100); found {
		t.Fatalf("page is a near duplicate of itself (full scan): %q", url)
	}
	// ...but it is one of another URL with nearly the same text.
	addFP(t, db, 1, 101, flip(fp, 9), "https://a.example/copy")
	for _, maxDist := range []int{3, 10} {
		if url, found := nearDup(t, db, fp, maxDist, 100); !found || url != "https://a.example/copy" {
			t.Errorf("maxDist %d: NearDuplicate = %q, %v; want the copy", maxDist, url, found)
		}
	}
}

func TestNearDuplicateClosestWins(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	const fp = 0x1111_2222_3333_4444
	addFP(t, db, 1, 1, flip(fp, 0, 17, 33), "https://far.example/")     // distance 3
	addFP(t, db, 2, 2, flip(fp, 50), "https://near.example/")           // distance 1
	addFP(t, db, 3, 3, flip(fp, 1, 18, 34, 49), "https://out.example/") // distance 4
	for _, maxDist := range []int{3, 8} {
		if url, _ := nearDup(t, db, fp, maxDist, 0); url != "https://near.example/" {
			t.Errorf("maxDist %d: got %q, want the closest page", maxDist, url)
		}
	}
}

func TestFingerprintReplacement(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	const old, changed = 0xaaaa_bbbb_cccc_dddd, 0x1234_5678_9abc_def0
	addFP(t, db, 7, 70, old, "https://x.example/p")
	addFP(t, db, 7, 70, changed, "https://x.example/p")
	if url, found := nearDup(t, db, old, 3, 0); found {
		t.Errorf("old fingerprint still found: %q", url)
	}
	if url, found := nearDup(t, db, old, 64, 0); !found || url != "https://x.example/p" {
		// With distance 64 anything matches; the URL must be there once.
		t.Errorf("full scan: %q, %v", url, found)
	}
	if url, found := nearDup(t, db, changed, 0, 0); !found || url != "https://x.example/p" {
		t.Errorf("new fingerprint: %q, %v", url, found)
	}
	if n := bandEntries(t, db, 70); n != fpBands {
		t.Errorf("%d band entries after replacement, want %d", n, fpBands)
	}
	// A fingerprint that shares bands with the old one keeps those.
	partly := uint64(changed)&^0xffff | 0x0f0f
	addFP(t, db, 7, 70, partly, "https://x.example/p")
	if n := bandEntries(t, db, 70); n != fpBands {
		t.Errorf("%d band entries after a partial change, want %d", n, fpBands)
	}
	if _, found := nearDup(t, db, changed, 0, 0); found {
		t.Error("previous fingerprint still matches exactly")
	}
	if url, found := nearDup(t, db, partly, 0, 0); !found || url != "https://x.example/p" {
		t.Errorf("partly changed fingerprint: %q, %v", url, found)
	}
	// Zero means no text: the URL leaves the index.
	addFP(t, db, 7, 70, 0, "https://x.example/p")
	if n := bandEntries(t, db, 70); n != 0 {
		t.Errorf("%d band entries after a zero fingerprint", n)
	}
	if url, found := nearDup(t, db, partly, 64, 0); found {
		t.Errorf("URL still indexed after a zero fingerprint: %q", url)
	}
	// Re-adding, then deleting.
	addFP(t, db, 7, 70, old, "https://x.example/p")
	if err := db.DeleteFingerprint(7, 70); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteFingerprint(7, 70); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if url, found := nearDup(t, db, old, 3, 0); found || bandEntries(t, db, 70) != 0 {
		t.Errorf("deleted URL still indexed: %q", url)
	}
}

// TestUpdateFingerprint checks the crawler's way of recording a
// fingerprint, with the one it recorded last in hand instead of read from
// the store: a right prev replaces it in the index at once, and a wrong
// one (metadata a crash lost) never gives a wrong answer nor indexes a URL
// twice.
func TestUpdateFingerprint(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, testOptions(SeenExact))
	const a, b, c = 0xaaaa_bbbb_cccc_dddd, 0x1234_5678_9abc_def0, 0x0f0f_f0f0_3333_cccc
	const u = "https://x.example/p"
	update := func(prev, fp uint64) {
		t.Helper()
		if err := db.UpdateFingerprint(7, 70, prev, fp, u); err != nil {
			t.Fatalf("UpdateFingerprint(%016x, %016x): %v", prev, fp, err)
		}
	}
	update(0, a) // first fetch
	if url, found := nearDup(t, db, a, 0, 0); !found || url != u {
		t.Fatalf("first fingerprint: %q, %v", url, found)
	}
	update(a, a) // unchanged
	update(a, b) // changed, prev right
	if n := bandEntries(t, db, 70); n != fpBands {
		t.Errorf("%d band entries after a change with the right prev, want %d", n, fpBands)
	}
	if url, found := nearDup(t, db, a, 3, 0); found {
		t.Errorf("replaced fingerprint still found: %q", url)
	}
	// prev says none, but b is recorded: the same fingerprint again is
	// not indexed twice.
	update(0, b)
	if n := bandEntries(t, db, 70); n != fpBands {
		t.Errorf("%d band entries after recording the same fingerprint with prev 0, want %d", n, fpBands)
	}
	// prev says none, but b is recorded: c replaces it in the table, and
	// the stale entry of b gives no answer and leaves the index when met.
	update(0, c)
	if url, found := nearDup(t, db, b, 3, 0); found {
		t.Errorf("stale fingerprint answered: %q", url)
	}
	if n := bandEntries(t, db, 70); n != fpBands {
		t.Errorf("%d band entries once the stale one was met, want %d", n, fpBands)
	}
	if url, found := nearDup(t, db, c, 0, 0); !found || url != u {
		t.Errorf("new fingerprint: %q, %v", url, found)
	}
	// A prev the index does not hold is not trusted: the record is read
	// and its entry replaced at once.
	update(a, b)
	if n := bandEntries(t, db, 70); n != fpBands {
		t.Errorf("%d band entries after a change with an unknown prev, want %d", n, fpBands)
	}
	if url, found := nearDup(t, db, b, 0, 0); !found || url != u {
		t.Errorf("fingerprint after an unknown prev: %q, %v", url, found)
	}
	// The index built from the table at the next start agrees.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, testOptions(SeenExact))
	if url, found := nearDup(t, db, b, 0, 0); !found || url != u || bandEntries(t, db, 70) != fpBands {
		t.Errorf("after a restart: %q, %v, %d band entries", url, found, bandEntries(t, db, 70))
	}
}

func TestNearDuplicateNotFound(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	if url, found := nearDup(t, db, 0x42, 3, 0); found {
		t.Errorf("empty index found %q", url)
	}
	if url, found := nearDup(t, db, 0x42, 64, 0); found {
		t.Errorf("empty index (full scan) found %q", url)
	}
	addFP(t, db, 1, 1, 0x42, "https://a.example/")
	// A zero fingerprint is a page without text, never a duplicate, even
	// of a fingerprint one bit away.
	addFP(t, db, 1, 2, 1, "https://one-bit.example/")
	if url, found := nearDup(t, db, 0, 64, 0); found {
		t.Errorf("zero fingerprint matched %q", url)
	}
	if _, _, err := db.NearDuplicate(0x42, -1, 0); err == nil {
		t.Error("negative distance accepted")
	}
}

func TestNearDuplicateMatchesBruteForce(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	r := rand.New(rand.NewPCG(9, 9))
	type rec struct {
		urlHash, fp uint64
		url         string
	}
	var recs []rec
	add := func(fp uint64) {
		h := r.Uint64()
		u := fmt.Sprintf("https://h%d.example/%x", r.IntN(50), h)
		recs = append(recs, rec{h, fp, u})
		addFP(t, db, r.Uint64()%8, h, fp, u)
	}
	for range 1500 {
		fp := r.Uint64()
		add(fp)
		if r.IntN(3) == 0 { // a cluster of near copies
			add(fp ^ 1<<r.IntN(64) ^ 1<<r.IntN(64) ^ 1<<r.IntN(64))
		}
	}
	for q := range 300 {
		base := recs[r.IntN(len(recs))]
		query := base.fp
		for range r.IntN(7) {
			query ^= 1 << r.IntN(64)
		}
		if q%5 == 0 {
			query = r.Uint64() // mostly no match
		}
		exclude := uint64(0)
		if q%2 == 0 {
			exclude = base.urlHash
		}
		dists := []int{0, 1, 2, 3}
		if q%8 == 0 { // full scans are slow; a few are enough
			dists = append(dists, 4, 6)
		}
		for _, maxDist := range dists {
			best := -1
			for _, c := range recs {
				if d := bits.OnesCount64(c.fp ^ query); c.urlHash != exclude && d <= maxDist && (best < 0 || d < best) {
					best = d
				}
			}
			url, found := nearDup(t, db, query, maxDist, exclude)
			if found != (best >= 0) {
				t.Fatalf("query %016x maxDist %d: found %v (%q), brute force distance %d", query, maxDist, found, url, best)
			}
			if !found {
				continue
			}
			i := slices.IndexFunc(recs, func(c rec) bool { return c.url == url })
			if i < 0 || bits.OnesCount64(recs[i].fp^query) != best || recs[i].urlHash == exclude {
				t.Fatalf("query %016x maxDist %d: got %q, not a closest page (distance %d)", query, maxDist, url, best)
			}
		}
	}
}

func TestFingerprintConcurrentReplacement(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for range 200 {
				// All workers rewrite the same few URLs.
				h := uint64(r.IntN(4))
				if err := db.AddFingerprint(h, h, r.Uint64()|1, fmt.Sprintf("https://c.example/%d", h)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for h := range uint64(4) {
		if n := bandEntries(t, db, h); n != fpBands {
			t.Errorf("URL %d has %d band entries after concurrent replacement, want %d", h, n, fpBands)
		}
		v, err := db.ldb.Get(fpURLKey(h, h), nil)
		if err != nil {
			t.Fatal(err)
		}
		fp, _, err := decodeFingerprint(v)
		if err != nil {
			t.Fatal(err)
		}
		if url, found := nearDup(t, db, fp, 0, 99); !found || url != fmt.Sprintf("https://c.example/%d", h) {
			t.Errorf("URL %d: current fingerprint not found: %q %v", h, url, found)
		}
	}
}

func TestFingerprintPersistsAndSurvivesCorruptRecord(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, testOptions(SeenExact))
	if err != nil {
		t.Fatal(err)
	}
	addFP(t, db, 3, 30, 0x5555_6666_7777_8888, "https://p.example/")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, testOptions(SeenExact))
	if url, found := nearDup(t, db, flip(0x5555_6666_7777_8888, 3), 3, 0); !found || url != "https://p.example/" {
		t.Fatalf("after reopen: %q, %v", url, found)
	}
	// A corrupt URL record cannot tell which band entries to delete; a new
	// fingerprint still replaces it and the stale bands match nothing.
	if err := db.ldb.Put(fpURLKey(3, 30), []byte{9, 9}, nil); err != nil {
		t.Fatal(err)
	}
	addFP(t, db, 3, 30, 0x1234_1234_1234_1234, "https://p.example/")
	if url, found := nearDup(t, db, 0x5555_6666_7777_8888, 3, 0); found {
		t.Errorf("stale band entry matched: %q", url)
	}
	// Nor does the stale entry, closer than any other, hide another page.
	addFP(t, db, 4, 40, 0x5555_6666_7777_8888, "https://p.example/stale")
	if err := db.ldb.Put(fpURLKey(4, 40), []byte{9, 9}, nil); err != nil {
		t.Fatal(err)
	}
	addFP(t, db, 4, 40, 0x1234_1234_1234_1234, "https://p.example/stale")
	addFP(t, db, 5, 50, flip(0x5555_6666_7777_8888, 1), "https://q.example/")
	if url, found := nearDup(t, db, 0x5555_6666_7777_8888, 3, 0); !found || url != "https://q.example/" {
		t.Errorf("with a stale entry at distance 0: %q, %v, want https://q.example/", url, found)
	}
	if url, found := nearDup(t, db, 0x1234_1234_1234_1234, 3, 0); !found || url != "https://p.example/" {
		t.Errorf("new fingerprint: %q, %v", url, found)
	}
}

func TestFingerprintClosedDB(t *testing.T) {
	db, err := Open(t.TempDir(), testOptions(SeenExact))
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := db.AddFingerprint(1, 1, 1, "u"); !errors.Is(err, ErrClosed) {
		t.Errorf("AddFingerprint on closed DB: %v", err)
	}
	if _, _, err := db.NearDuplicate(1, 3, 0); !errors.Is(err, ErrClosed) {
		t.Errorf("NearDuplicate on closed DB: %v", err)
	}
}

func BenchmarkNearDuplicate(b *testing.B) {
	opts := testOptions(SeenExact)
	opts.CacheBytes = DefaultOptions().CacheBytes
	db := openTest(b, b.TempDir(), opts)
	r := rand.New(rand.NewPCG(1, 1))
	const n = 100_000
	for i := range n {
		if err := db.AddFingerprint(r.Uint64(), uint64(i), r.Uint64(), "https://bench.example/page"); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := db.NearDuplicate(r.Uint64(), 3, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAddFingerprint(b *testing.B) {
	db := openTest(b, b.TempDir(), testOptions(SeenExact))
	r := rand.New(rand.NewPCG(2, 2))
	i := uint64(0)
	for b.Loop() {
		i++
		if err := db.AddFingerprint(r.Uint64(), i, r.Uint64(), "https://bench.example/page"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestOpenDropsOldBandEntries: a store written by a version that kept the
// band lists in leveldb opens with the index built from the fingerprint
// records and the old band entries gone.
func TestOpenDropsOldBandEntries(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, testOptions(SeenExact))
	if err != nil {
		t.Fatal(err)
	}
	const fp = 0x0bad_cafe_f00d_beef
	addFP(t, db, 7, 70, fp, "https://old.example/")
	for i := range fpBands {
		k := []byte{prefixFingerprint, fpKindBand, byte(i)}
		k = binary.BigEndian.AppendUint16(k, fpBand(fp, i))
		k = binary.BigEndian.AppendUint64(k, 7)
		k = binary.BigEndian.AppendUint64(k, 70)
		if err := db.ldb.Put(k, binary.BigEndian.AppendUint64([]byte{recordVersion1}, fp), nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, dir, testOptions(SeenExact))
	it := db.ldb.NewIterator(util.BytesPrefix([]byte{prefixFingerprint, fpKindBand}), nil)
	n := 0
	for it.Next() {
		n++
	}
	it.Release()
	if n != 0 {
		t.Errorf("%d old band entries left after Open", n)
	}
	if url, found := nearDup(t, db, flip(fp, 2), 3, 0); !found || url != "https://old.example/" {
		t.Errorf("after reopen: %q, %v", url, found)
	}
	if got := db.fps.len(); got != 1 {
		t.Errorf("index holds %d URLs, want 1", got)
	}
}
