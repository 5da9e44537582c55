package store

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/syndtr/goleveldb/leveldb"
	"github.com/syndtr/goleveldb/leveldb/journal"
	"github.com/syndtr/goleveldb/leveldb/opt"
)

// journalOf writes records of the given sizes in leveldb's journal format.
func journalOf(t *testing.T, sizes ...int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := journal.NewWriter(&buf)
	for i, n := range sizes {
		rw, err := w.Next()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rw.Write(bytes.Repeat([]byte{byte('a' + i)}, n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A write cut short at the end of the journal (a killed process, a power
// loss) is found and cut off; damage anywhere else is not mistaken for it.
func TestTornTail(t *testing.T) {
	small := journalOf(t, 100, 200)           // two records in one block
	big := journalOf(t, 100, 80_000)          // the second spans three blocks
	ends := []int{100 + 7, 100 + 7 + 200 + 7} // record ends in small
	bigFirst := 100 + 7
	flip := func(b []byte, i int) []byte { b = slices.Clone(b); b[i] ^= 0x40; return b }
	cases := []struct {
		name string
		data []byte
		keep int
		torn bool
	}{
		{"clean", small, len(small), false},
		{"empty", nil, 0, false},
		{"header cut short", small[:ends[0]+3], ends[0], true},
		{"payload cut short", small[:ends[1]-50], ends[0], true},
		{"killed between the blocks of one record", big[:32<<10], bigFirst, true},
		{"killed inside the last block of a record", big[:64<<10+100], bigFirst, true},
		{"zeros where unsynced bytes were", append(slices.Clone(small), make([]byte, 5000)...), len(small), true},
		{"zeros over the last record", append(slices.Clone(small[:ends[0]]), make([]byte, 300)...), ends[0], true},
		{"checksum broken in the first record", flip(small, 50), 0, false},
		{"checksum broken in the last record", flip(small, ends[1]-10), ends[0], false},
		{"checksum broken in the middle of a long record", flip(big, 40_000), bigFirst, false},
		{"zero header with data after it", append(append(slices.Clone(small[:ends[0]]), make([]byte, 7)...), small[ends[0]+7:]...), ends[0], false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			keep, torn := tornTail(c.data)
			if keep != c.keep || torn != c.torn {
				t.Fatalf("tornTail = (%d, %v), want (%d, %v)", keep, torn, c.keep, c.torn)
			}
		})
	}
}

// fillSeen marks n entries seen, in batches of 100, and returns them.
func fillSeen(t *testing.T, db *DB, n int) []SeenEntry {
	t.Helper()
	es := entries(42, n)
	for i := 0; i < n; i += 100 {
		markSeen(t, db, es[i:min(i+100, n)])
	}
	return es
}

// newestLog returns the path of the newest leveldb journal of the store in dir.
func newestLog(t *testing.T, dir string) string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "leveldb", "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no leveldb journal in %s: %v", dir, err)
	}
	slices.Sort(logs)
	return logs[len(logs)-1]
}

// overwrite writes 8 bytes of garbage at the middle of a file, as the
// attacker of issue 9 did.
func overwrite(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("GARBAGE!"), fi.Size()/2); err != nil {
		t.Fatal(err)
	}
}

// A journal with 8 bytes overwritten is refused: leveldb on its own would
// drop the rest of the damaged block and open without a word, with a
// part of the seen set gone.
func TestOpenRefusesDamagedJournal(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, testOptions(SeenExact))
	fillSeen(t, db, 2000)
	crash(t, db)
	overwrite(t, newestLog(t, dir))

	_, err := Open(dir, testOptions(SeenExact))
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open of a damaged journal: %v, want an error wrapping ErrCorrupt", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error is not one line: %q", err)
	}

	// What the default (lenient) leveldb open would have done with it.
	ldb, err := leveldb.OpenFile(filepath.Join(dir, "leveldb"), &opt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ldb.Close()
	it := ldb.NewIterator(tableRange(prefixSeen), nil)
	n := 0
	for it.Next() {
		n++
	}
	it.Release()
	if n >= 2000 {
		t.Fatalf("the damage lost nothing (%d entries): the test proves nothing", n)
	}
	t.Logf("a lenient open would have started with %d of 2000 seen entries", n)
}

// A write a killed process left unfinished at the end of the journal
// does not stop the store from opening: it was never acknowledged. What
// was written before it is all there.
func TestOpenCutsUnfinishedWrite(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, testOptions(SeenExact))
	es := fillSeen(t, db, 1000)
	// One batch of 2000 entries is written in several blocks, one write
	// each: the process dies after the first.
	last := entries(43, 2000)
	markSeen(t, db, last)
	crash(t, db)
	log := newestLog(t, dir)
	fi, err := os.Stat(log)
	if err != nil {
		t.Fatal(err)
	}
	cut := (fi.Size() - 40_000) / (32 << 10) * (32 << 10)
	if err := os.Truncate(log, cut); err != nil {
		t.Fatal(err)
	}

	db = openTest(t, dir, testOptions(SeenExact))
	if db.JournalTailTrimmed() == 0 {
		t.Error("JournalTailTrimmed = 0 after a cut-short write")
	}
	if n := db.SeenCount(); n < 1000 || n >= 3000 {
		t.Fatalf("SeenCount = %d, want the 1000 entries before the unfinished write and not all of it", n)
	}
	for i, e := range es {
		if ok, err := db.Seen(e.Key, e.URLHash); err != nil || !ok {
			t.Fatalf("entry %d written before the unfinished write is gone (%v)", i, err)
		}
	}
}

func TestOpenLocked(t *testing.T) {
	dir := t.TempDir()
	openTest(t, dir, testOptions(SeenExact))
	_, err := Open(dir, testOptions(SeenExact))
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want an error wrapping ErrLocked", err)
	}
}

// salvageJournal drops only the records with a damaged chunk, whether
// the damage hits a payload, a header (the next chunk is found by its
// checksum) or one block of a record spanning several; leveldb's reader
// would drop the rest of the block each time.
func TestSalvageJournal(t *testing.T) {
	sizes := []int{100, 200, 300, 80_000, 50}
	data := journalOf(t, sizes...)
	// starts[i] is the offset of record i's first header.
	starts := []int{0, 107, 107 + 207, 107 + 207 + 307}
	last := len(data) - 50 - 7
	garbage := func(at int) []byte {
		b := slices.Clone(data)
		copy(b[at:], "GARBAGE!")
		return b
	}
	cases := []struct {
		name string
		data []byte
		kept []int // indexes of the records kept
		tail bool
	}{
		{"clean", data, []int{0, 1, 2, 3, 4}, false},
		{"payload of record 1", garbage(starts[1] + 50), []int{0, 2, 3, 4}, false},
		{"header of record 1", garbage(starts[1]), []int{0, 2, 3, 4}, false},
		{"second block of the long record", garbage(40_000), []int{0, 1, 2, 4}, false},
		{"last record", garbage(last + 10), []int{0, 1, 2, 3}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := salvageJournal(c.data)
			var kept []int
			for _, rec := range s.records {
				i := int(rec[0] - 'a')
				if len(rec) != sizes[i] || !allSame(rec) {
					t.Fatalf("salvaged a damaged record %d (%d bytes)", i, len(rec))
				}
				kept = append(kept, i)
			}
			if !slices.Equal(kept, c.kept) || s.tailDamaged != c.tail {
				t.Fatalf("kept %v (tail damaged %v), want %v (%v); reasons %v", kept, s.tailDamaged, c.kept, c.tail, s.reasons)
			}
			if damaged := len(c.kept) < len(sizes); damaged != (s.dropped > 0 && len(s.reasons) > 0) {
				t.Fatalf("dropped %d bytes (%v) for damaged=%v", s.dropped, s.reasons, damaged)
			}
		})
	}
}

func allSame(b []byte) bool { return len(bytes.Trim(b, string(b[:1]))) == 0 }
