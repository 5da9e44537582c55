package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/syndtr/goleveldb/leveldb"
	"github.com/syndtr/goleveldb/leveldb/comparer"
	"github.com/syndtr/goleveldb/leveldb/journal"
	"github.com/syndtr/goleveldb/leveldb/opt"
	"github.com/syndtr/goleveldb/leveldb/storage"
)

// RepairReport is what Repair found and did. What was lost is known
// exactly only where the store kept a count of it: see TableCount.
type RepairReport struct {
	// Dir is the store's directory.
	Dir string
	// Mode is the store's seen mode, as recorded in it (or, if that
	// record was lost, as its files show).
	Mode SeenMode
	// TornTail counts the bytes of a write a crash cut short at the end
	// of the newest journal or manifest, which the repair cut off (as Open
	// does): such a write was never acknowledged.
	TornTail int64
	// Journals lists the leveldb journal files with records that could
	// not be read; the repair dropped those records and kept the rest.
	Journals []JournalDamage
	// Saved is the directory the damaged journal files were copied to
	// before the repair, for a closer look; "" when none was damaged.
	Saved string
	// TableFiles is the number of leveldb table files the repair read;
	// TablesRebuilt of them had unreadable blocks and were rebuilt from
	// the rest, TablesDropped had nothing readable left. BadBlocks and
	// BadKeys count what the rebuilt tables lost: each block held many
	// entries, of any table, which cannot be counted.
	TableFiles, TablesRebuilt, TablesDropped, BadBlocks, BadKeys int
	// Malformed counts entries whose key had the wrong shape for its
	// table; the repair deleted them. Unknown counts entries of no table
	// this version knows; the repair left them alone.
	Malformed, Unknown int
	// Tables counts each table's entries, with the store's own counter
	// of it from before the repair where it keeps one.
	Tables []TableCount
	// BloomRebuilt is set when seen.bloom (SeenBloomOnly mode) was missing
	// or damaged and was rebuilt from BloomFrom entries: the seen journal
	// and the shard records. URLs seen before the filter's last checkpoint
	// that are in neither are forgotten.
	BloomRebuilt bool
	BloomFrom    int64
	// BloomErr is why seen.bloom was rebuilt.
	BloomErr string
}

// JournalDamage is the damage found in one leveldb journal file (the log
// of the writes not yet in a table file).
type JournalDamage struct {
	// File is the journal's file name.
	File string
	// DroppedBytes counts the bytes that could not be read, Reasons says
	// why ("checksum mismatch", ...).
	DroppedBytes int
	Reasons      []string
	// LostWrites counts the writes (puts and deletes, in any table) lost
	// between records that could be read, from the sequence numbers of
	// those records.
	LostWrites uint64
	// TailLost is set when the damage reaches past the journal's last
	// readable record: the writes lost there cannot be counted.
	TailLost bool
}

// TableCount is one table's size after a repair, and before it where the
// store counts the table.
type TableCount struct {
	// Table is the table's name in the package documentation.
	Table string
	// Counted is set for the tables whose size the store keeps in a
	// counter; Recorded is that counter as it was found. For the others
	// the size before the damage is not known.
	Counted  bool
	Recorded int64
	// Found is the number of entries after the repair.
	Found int64
}

// Lost returns how many entries the table lost, as far as its counter
// tells: at least this many, since a counter is written with its
// entries and may have been lost with the last of them. ok is false for
// tables without a counter.
func (c TableCount) Lost() (lost int64, ok bool) {
	if !c.Counted {
		return 0, false
	}
	return max(c.Recorded-c.Found, 0), true
}

// Damaged reports whether the repair found anything wrong.
func (r *RepairReport) Damaged() bool {
	if len(r.Journals) > 0 || r.TablesRebuilt > 0 || r.TablesDropped > 0 || r.Malformed > 0 || r.BloomRebuilt {
		return true
	}
	for _, c := range r.Tables {
		if c.Counted && c.Recorded != c.Found {
			return true
		}
	}
	return false
}

// Repair recovers the store in dir, which no process may have open (it
// fails with an error wrapping ErrLocked otherwise), and reports what it
// found and what was lost. It cuts off a write a crash left unfinished
// at the end of the newest journal (as Open does), reads every leveldb
// journal chunk by chunk, keeps a copy of each damaged one and rewrites it
// with every record that is intact (only the damaged records are lost,
// counted by the gaps in their sequence numbers), then lets leveldb
// rebuild its manifest from the table files (rebuilding tables with
// unreadable blocks from the rest) and replay the journals. It then counts every table, deletes malformed entries, rewrites
// the store's counters to match the tables and, in SeenBloomOnly mode,
// rebuilds a missing or damaged seen.bloom from the seen journal and the
// shard records. Only opts' Bloom filter sizing is used. A store Repair
// has returned from opens with Open again.
func Repair(dir string, opts Options) (*RepairReport, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	ldbPath := filepath.Join(dir, "leveldb")
	if fi, err := os.Stat(ldbPath); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("store: no store in %s (no leveldb directory)", dir)
	}
	stor, err := storage.OpenFile(ldbPath, false)
	if err != nil {
		if isLocked(err) {
			return nil, fmt.Errorf("%w: %s is locked (is a node running on this data dir? stop it first)", ErrLocked, ldbPath)
		}
		return nil, fmt.Errorf("store: open leveldb %s: %w", ldbPath, err)
	}
	defer stor.Close()
	rep := &RepairReport{Dir: dir}
	if rep.TornTail, err = trimTornTails(ldbPath, stor); err != nil {
		return nil, err
	}
	if rep.Journals, rep.Saved, err = salvageJournals(dir, ldbPath, stor); err != nil {
		return nil, err
	}
	logs := &recoveryLog{Storage: stor}
	ldb, err := leveldb.Recover(logs, &opt.Options{
		BlockCacheCapacity: opts.CacheBytes,
		// No Filter and no shortened index keys: leveldb's recovery
		// builds tables with the options as given, not wrapped for its
		// internal keys as everywhere else (see unshortenedBytewise).
		// A filter built so would hash the wrong bytes and make reads
		// miss keys that are there; without one, the tables it rebuilds
		// have none until the node compacts them.
		// leveldb's defaults: damaged journal blocks are dropped (and
		// counted above), damaged table blocks make their table rebuilt.
		Strict:   opt.DefaultStrict,
		Comparer: unshortenedBytewise{},
	})
	if err != nil {
		return nil, fmt.Errorf("store: recover leveldb %s: %w", ldbPath, err)
	}
	defer ldb.Close()
	logs.tally(rep)
	r := repairer{ldb: ldb, rep: rep, bloomPath: filepath.Join(dir, "seen.bloom"), opts: opts}
	if err := r.run(); err != nil {
		return nil, err
	}
	return rep, nil
}

// unshortenedBytewise is leveldb's bytewise comparer (same name, same
// order) without the shortening of index keys. leveldb's recovery rebuilds
// a damaged table with the comparer of the options as given, not wrapped
// for its internal keys as everywhere else, so the shortened index keys
// it writes are not internal keys, and the first read of the table
// panics. Without shortening, an index key is the last key of its block.
type unshortenedBytewise struct{}

func (unshortenedBytewise) Compare(a, b []byte) int           { return bytes.Compare(a, b) }
func (unshortenedBytewise) Name() string                      { return comparer.DefaultComparer.Name() }
func (unshortenedBytewise) Separator(dst, a, b []byte) []byte { return nil }
func (unshortenedBytewise) Successor(dst, b []byte) []byte    { return nil }

// salvageJournals reads every journal in stor (in ldbPath) chunk by chunk,
// and rewrites each damaged one with the records it could read, after a
// copy of it was saved in a new directory of dir (returned). leveldb's
// recovery then replays them, having lost only the damaged records, where
// its own reader would drop the rest of every damaged 32 KiB block.
func salvageJournals(dir, ldbPath string, stor storage.Storage) ([]JournalDamage, string, error) {
	fds, err := stor.List(storage.TypeJournal)
	if err != nil {
		return nil, "", fmt.Errorf("store: list leveldb journals: %w", err)
	}
	slices.SortFunc(fds, func(a, b storage.FileDesc) int { return cmp.Compare(a.Num, b.Num) })
	var out []JournalDamage
	var fixed [][][]byte // the records of out[i]'s journal
	var fixedFD []storage.FileDesc
	var prevEnd uint64 // the sequence number after the previous journal's last write
	prevTail := -1     // index in out of the previous journal, if its tail was lost
	for _, fd := range fds {
		name := levelFileName(fd)
		data, err := os.ReadFile(filepath.Join(ldbPath, name))
		if err != nil {
			return nil, "", fmt.Errorf("store: read journal %s: %w", name, err)
		}
		sv := salvageJournal(data)
		d := JournalDamage{File: name, DroppedBytes: sv.dropped, Reasons: sv.reasons, TailLost: sv.tailDamaged}
		recs := sv.records[:0:0]
		have := false
		var next uint64
		for _, rec := range sv.records {
			if len(rec) < batchHeaderLen {
				d.DroppedBytes += len(rec)
				if !slices.Contains(d.Reasons, "record too short for a write batch") {
					d.Reasons = append(d.Reasons, "record too short for a write batch")
				}
				continue
			}
			seq := binary.LittleEndian.Uint64(rec)
			n := uint64(binary.LittleEndian.Uint32(rec[8:]))
			if !have && prevTail >= 0 && seq > prevEnd {
				// The writes lost at the end of the previous journal
				// are counted by where this one starts.
				out[prevTail].LostWrites += seq - prevEnd
				out[prevTail].TailLost = false
			}
			if have && seq > next {
				d.LostWrites += seq - next
			}
			next, have = seq+n, true
			recs = append(recs, rec)
		}
		if have {
			prevEnd, prevTail = next, -1
		}
		if d.DroppedBytes == 0 && len(d.Reasons) == 0 {
			continue
		}
		out = append(out, d)
		fixed = append(fixed, recs)
		fixedFD = append(fixedFD, fd)
		if d.TailLost {
			prevTail = len(out) - 1
		}
	}
	if len(out) == 0 {
		return nil, "", nil
	}
	saved, err := saveJournals(dir, ldbPath, out)
	if err != nil {
		return nil, "", err
	}
	for i, fd := range fixedFD {
		if err := rewriteJournal(stor, fd, fixed[i]); err != nil {
			return nil, "", err
		}
	}
	return out, saved, nil
}

// batchHeaderLen is the header of a leveldb write batch in the journal:
// its first sequence number (8 bytes LE) and its number of writes (4 bytes
// LE). The writes of a batch take consecutive sequence numbers.
const batchHeaderLen = 12

// rewriteJournal replaces the journal fd with records, synced.
func rewriteJournal(stor storage.Storage, fd storage.FileDesc, records [][]byte) error {
	name := levelFileName(fd)
	w, err := stor.Create(fd)
	if err != nil {
		return fmt.Errorf("store: rewrite journal %s: %w", name, err)
	}
	jw := journal.NewWriter(w)
	for _, rec := range records {
		rw, err := jw.Next()
		if err == nil {
			_, err = rw.Write(rec)
		}
		if err != nil {
			w.Close()
			return fmt.Errorf("store: rewrite journal %s: %w", name, err)
		}
	}
	err = jw.Close()
	if err == nil {
		err = w.Sync()
	}
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store: rewrite journal %s: %w", name, err)
	}
	return nil
}

// saveJournals copies the damaged journals into a new directory of dir
// and returns its path: the repair rewrites them, and leveldb's recovery
// deletes them.
func saveJournals(dir, ldbPath string, damaged []JournalDamage) (string, error) {
	saved := filepath.Join(dir, "damaged-"+time.Now().UTC().Format("20060102T150405Z"))
	if err := os.MkdirAll(saved, 0o755); err != nil {
		return "", fmt.Errorf("store: keep damaged journals: %w", err)
	}
	for _, d := range damaged {
		data, err := os.ReadFile(filepath.Join(ldbPath, d.File))
		if err != nil {
			return "", fmt.Errorf("store: keep damaged journal: %w", err)
		}
		if err := os.WriteFile(filepath.Join(saved, d.File), data, 0o644); err != nil {
			return "", fmt.Errorf("store: keep damaged journal: %w", err)
		}
	}
	return saved, nil
}

// recoveryLog is leveldb's storage with its log lines kept: they are the
// only account of what table recovery found.
type recoveryLog struct {
	storage.Storage
	mu    sync.Mutex
	lines []string
}

func (l *recoveryLog) Log(s string) {
	l.mu.Lock()
	l.lines = append(l.lines, s)
	l.mu.Unlock()
	l.Storage.Log(s)
}

// tally reads leveldb's table recovery lines into rep:
//
//	table@recovery recovered @N Gk·good Ck·badkeys Cb·badblocks S·size Q·seq
//	table@recovery unrecoverable @N Ck·badkeys Cb·badblocks S·size
func (l *recoveryLog) tally(rep *RepairReport) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		var dropped bool
		switch {
		case strings.HasPrefix(line, "table@recovery recovered @"):
		case strings.HasPrefix(line, "table@recovery unrecoverable @"):
			dropped = true
		default:
			continue
		}
		badKeys, badBlocks := logField(line, "Ck·"), logField(line, "Cb·")
		rep.TableFiles++
		rep.BadKeys += badKeys
		rep.BadBlocks += badBlocks
		switch {
		case dropped:
			rep.TablesDropped++
		case badKeys > 0 || badBlocks > 0:
			rep.TablesRebuilt++
		}
	}
}

// logField returns the number after name in a leveldb log line.
func logField(line, name string) int {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, name); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// repairer recounts the tables of a recovered database and puts the
// store's own state (counters, mode, seen.bloom) back in line with them.
type repairer struct {
	ldb       *leveldb.DB
	rep       *RepairReport
	bloomPath string
	opts      Options

	counts   map[byte]int64 // entries per table prefix
	fpURLs   int64          // fingerprint table: per-URL entries
	retries  int64          // schedule entries with attempts > 0
	maxSeq   uint64         // highest queue or schedule sequence number
	recorded map[string]uint64
}

// repairTables are the tables in report order, with their key length
// (0: any) and the counter that counts them ("" for none).
var repairTables = []struct {
	name    string
	prefix  byte
	keyLen  int
	counter string
}{
	{"seen", prefixSeen, urlKeyLen, metaSeenCount},
	{"journal", prefixJournal, urlKeyLen, ""},
	{"shard", prefixShard, urlKeyLen, ""},
	{"pages", prefixPage, urlKeyLen, metaPageCount},
	{"queue", prefixQueue, queueKeyLen, metaQueueCount},
	{"schedule", prefixSchedule, scheduleKeyLen, metaScheduleCount},
	{"dead", prefixDead, urlKeyLen, metaDeadCount},
	{"urlmeta", prefixURLMeta, urlKeyLen, ""},
	{"hosts", prefixHost, 9, ""},
	{"shardhost", prefixShardHost, urlKeyLen, ""},
	{"seeds", prefixSeeds, urlKeyLen, ""},
	{"fingerprint", prefixFingerprint, 0, ""},
	{"content", prefixContent, urlKeyLen, ""},
	{"outbox", prefixOutbox, 9, ""},
	{"meta", prefixMeta, 0, ""},
}

func (r *repairer) run() error {
	r.recorded = map[string]uint64{}
	for _, name := range []string{metaSeenCount, metaPageCount, metaQueueCount, metaScheduleCount, metaDeadCount, metaRetryCount, metaQueueSeq} {
		v, err := r.ldb.Get(metaKey(name), nil)
		if err == nil && len(v) == 8 {
			r.recorded[name] = binary.BigEndian.Uint64(v)
		}
	}
	if err := r.count(); err != nil {
		return err
	}
	if err := r.reindexSeeds(); err != nil {
		return err
	}
	mode, err := r.mode()
	if err != nil {
		return err
	}
	r.rep.Mode = mode
	for _, t := range repairTables {
		if mode == SeenBloomOnly && t.prefix == prefixSeen || mode == SeenExact && t.prefix == prefixJournal {
			if r.counts[t.prefix] == 0 {
				continue // the table of the other mode
			}
		}
		c := TableCount{Table: t.name, Found: r.counts[t.prefix]}
		if t.prefix == prefixFingerprint {
			c.Found = r.fpURLs
		}
		// In SeenBloomOnly mode the seen count includes URLs that live
		// only in seen.bloom: it cannot be recounted.
		if t.counter != "" && !(t.prefix == prefixSeen && mode == SeenBloomOnly) {
			c.Counted, c.Recorded = true, int64(r.recorded[t.counter])
		}
		r.rep.Tables = append(r.rep.Tables, c)
	}
	if err := r.writeCounters(mode); err != nil {
		return err
	}
	if mode == SeenBloomOnly {
		return r.repairBloom()
	}
	return nil
}

// count scans the whole database once, counting each table and deleting
// entries whose key has the wrong shape for its table.
func (r *repairer) count() error {
	r.counts = map[byte]int64{}
	keyLen := map[byte]int{}
	for _, t := range repairTables {
		keyLen[t.prefix] = t.keyLen
	}
	it := r.ldb.NewIterator(nil, &opt.ReadOptions{DontFillCache: true})
	defer it.Release()
	bad := new(leveldb.Batch)
	for it.Next() {
		k := it.Key()
		want, known := keyLen[k[0]]
		if !known {
			// Not a table of this version: nothing here reads it, and
			// nothing here may delete it.
			r.rep.Unknown++
			continue
		}
		if want != 0 && len(k) != want || !r.countKey(k, it.Value()) {
			bad.Delete(slices.Clone(k))
			continue
		}
		r.counts[k[0]]++
	}
	if err := it.Error(); err != nil {
		return ldbErr(err, "repair: scan")
	}
	r.rep.Malformed = bad.Len()
	if bad.Len() > 0 {
		if err := r.ldb.Write(bad, &opt.WriteOptions{Sync: true}); err != nil {
			return ldbErr(err, "repair: delete %d malformed entries", bad.Len())
		}
	}
	return nil
}

// reindexSeeds makes the seeds table an index of the shard records marked
// seed again: the two may have lost different writes.
func (r *repairer) reindexSeeds() error {
	want := map[string]string{} // seeds key -> URL
	it := r.ldb.NewIterator(tableRange(prefixShard), &opt.ReadOptions{DontFillCache: true})
	for it.Next() {
		k := it.Key()
		rec := ShardRecord{}
		if len(k) != urlKeyLen || decodeShardRecord(it.Value(), &rec) != nil || !rec.Seed {
			continue
		}
		sk := slices.Clone(k)
		sk[0] = prefixSeeds
		want[string(sk)] = rec.URL
	}
	err := it.Error()
	it.Release()
	if err != nil {
		return ldbErr(err, "repair: scan shard records for seeds")
	}
	b := new(leveldb.Batch)
	it = r.ldb.NewIterator(tableRange(prefixSeeds), &opt.ReadOptions{DontFillCache: true})
	for it.Next() {
		k := string(it.Key())
		if u, ok := want[k]; ok {
			if got, err := decodeSeed(it.Value()); err == nil && got == u {
				delete(want, k)
				continue
			}
		} else {
			b.Delete([]byte(k))
			r.counts[prefixSeeds]--
		}
	}
	err = it.Error()
	it.Release()
	if err != nil {
		return ldbErr(err, "repair: scan seeds")
	}
	for k, u := range want {
		if _, err := r.ldb.Get([]byte(k), nil); err != nil {
			r.counts[prefixSeeds]++ // missing, not merely damaged
		}
		b.Put([]byte(k), encodeSeed(u))
	}
	if b.Len() == 0 {
		return nil
	}
	if err := r.ldb.Write(b, &opt.WriteOptions{Sync: true}); err != nil {
		return ldbErr(err, "repair: rebuild %d seeds", b.Len())
	}
	return nil
}

// countKey notes what the counters need from one entry, and reports
// whether its key is well formed.
func (r *repairer) countKey(k, v []byte) bool {
	var e QueueEntry
	switch k[0] {
	case prefixQueue:
		if decodeQueueKey(k, &e) != nil {
			return false
		}
		r.maxSeq = max(r.maxSeq, e.Seq)
	case prefixSchedule:
		if decodeScheduleKey(k, &e) != nil {
			return false
		}
		r.maxSeq = max(r.maxSeq, e.Seq)
		if decodeQueueEntry(v, &e, true) == nil && e.Attempts > 0 {
			r.retries++
		}
	case prefixFingerprint:
		switch {
		case len(k) == fpURLKeyLen && k[1] == fpKindURL:
			r.fpURLs++
		case len(k) == fpBandKeyLen && k[1] == fpKindBand:
		default:
			return false
		}
	case prefixMeta:
		return len(k) > 1
	}
	return true
}

// mode reads the seen mode, or works it out from the files when its record
// was lost, and records schema and mode again if they are missing.
func (r *repairer) mode() (SeenMode, error) {
	b := new(leveldb.Batch)
	if _, err := r.ldb.Get(metaKey(metaSchema), nil); err != nil {
		b.Put(metaKey(metaSchema), binary.AppendUvarint(nil, schemaVersion))
	}
	v, err := r.ldb.Get(metaKey(metaSeenMode), nil)
	mode := SeenExact
	switch {
	case err == nil && len(v) == 1 && (SeenMode(v[0]) == SeenExact || SeenMode(v[0]) == SeenBloomOnly):
		mode = SeenMode(v[0])
	default:
		if _, err := os.Stat(r.bloomPath); err == nil || r.counts[prefixJournal] > 0 {
			mode = SeenBloomOnly
		}
		b.Put(metaKey(metaSeenMode), []byte{byte(mode)})
	}
	if b.Len() == 0 {
		return mode, nil
	}
	if err := r.ldb.Write(b, &opt.WriteOptions{Sync: true}); err != nil {
		return mode, ldbErr(err, "repair: record seen mode")
	}
	return mode, nil
}

// writeCounters makes the store's counters match the tables.
func (r *repairer) writeCounters(mode SeenMode) error {
	b := new(leveldb.Batch)
	put := func(name string, v uint64) {
		b.Put(metaKey(name), binary.BigEndian.AppendUint64(nil, v))
	}
	if mode == SeenExact {
		put(metaSeenCount, uint64(r.counts[prefixSeen]))
	}
	put(metaPageCount, uint64(r.counts[prefixPage]))
	put(metaQueueCount, uint64(r.counts[prefixQueue]))
	put(metaScheduleCount, uint64(r.counts[prefixSchedule]))
	put(metaRetryCount, uint64(r.retries))
	put(metaDeadCount, uint64(r.counts[prefixDead]))
	// A sequence number must never be reused.
	put(metaQueueSeq, max(r.maxSeq, r.recorded[metaQueueSeq]))
	if err := r.ldb.Write(b, &opt.WriteOptions{Sync: true}); err != nil {
		return ldbErr(err, "repair: write counters")
	}
	return nil
}

// repairBloom rebuilds seen.bloom when it is missing (and the store has
// seen more than its journal holds) or damaged.
func (r *repairer) repairBloom() error {
	_, err := readBloomFile(r.bloomPath)
	switch {
	case err == nil:
		return nil
	case isNotExist(err) && int64(r.recorded[metaSeenCount]) <= r.counts[prefixJournal]:
		return nil // never checkpointed: the journal holds every seen URL
	case !isNotExist(err) && !errors.Is(err, ErrCorrupt):
		return err
	}
	r.rep.BloomErr = err.Error()
	n := r.opts.BloomExpected
	if seen := uint(r.recorded[metaSeenCount]); n < 2*seen {
		n = 2 * seen
	}
	f := newBloom(n, r.opts.BloomFPRate)
	for _, p := range []byte{prefixJournal, prefixShard} {
		it := r.ldb.NewIterator(tableRange(p), &opt.ReadOptions{DontFillCache: true})
		for it.Next() {
			f.Add(bloomKey(it.Key()))
			r.rep.BloomFrom++
		}
		err := it.Error()
		it.Release()
		if err != nil {
			return ldbErr(err, "repair: rebuild bloom filter")
		}
	}
	if err := writeBloomFile(r.bloomPath, f); err != nil {
		return err
	}
	r.rep.BloomRebuilt = true
	return nil
}
