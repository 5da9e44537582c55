package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/syndtr/goleveldb/leveldb"
	lerrors "github.com/syndtr/goleveldb/leveldb/errors"
	"github.com/syndtr/goleveldb/leveldb/filter"
	"github.com/syndtr/goleveldb/leveldb/opt"
	"github.com/syndtr/goleveldb/leveldb/storage"

	"github.com/swarmcrawl/swarmcrawl/internal/recent"
)

// Errors returned by the store, always wrapped with context; test them with
// errors.Is.
var (
	// ErrNotFound is wrapped by lookups of a page or meta value that does
	// not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrCorrupt is wrapped by every error about a record, key or file that
	// cannot be decoded, and by Open's error when the database fails its
	// checks at start (a damaged journal, manifest or table): Repair
	// recovers such a store.
	ErrCorrupt = errors.New("store: corrupt data")
	// ErrLocked is wrapped by Open's and Repair's error when another
	// process (a running node) holds the database.
	ErrLocked = errors.New("store: in use by another process")
	// ErrClosed is returned by operations on a closed DB.
	ErrClosed = errors.New("store: database closed")
	// ErrBloomOnly is returned by operations that need the exact seen set
	// (ScanSeen) on a DB opened in SeenBloomOnly mode.
	ErrBloomOnly = errors.New("store: seen entries are not stored in SeenBloomOnly mode")
	// ErrReservedName is returned by PutMeta for names in the store's own
	// "store/" namespace.
	ErrReservedName = errors.New("store: reserved meta name")
)

// SeenMode selects how the seen set is kept.
type SeenMode uint8

const (
	// SeenExact keeps every seen URL as an exact key in leveldb, with a
	// Bloom filter in front of it. The filter only saves disk reads for URLs
	// that were never seen; it never decides on its own that a URL was
	// seen. This is the default.
	SeenExact SeenMode = iota
	// SeenBloomOnly keeps only the Bloom filter, for memory- or
	// disk-constrained nodes: a false positive makes the node skip a URL it
	// never crawled. The filter is persisted in <dir>/seen.bloom on Close
	// (and periodically, with a journal in between so a crash loses
	// nothing) and reloaded by Open. ScanSeen is not available.
	SeenBloomOnly
)

// String returns the name of the mode.
func (m SeenMode) String() string {
	switch m {
	case SeenExact:
		return "exact"
	case SeenBloomOnly:
		return "bloom-only"
	default:
		return fmt.Sprintf("SeenMode(%d)", uint8(m))
	}
}

// Options configures Open. Zero fields take the values of DefaultOptions.
type Options struct {
	// BloomExpected is the number of seen URLs the Bloom filter is sized
	// for. In SeenExact mode Open sizes the filter for at least twice the
	// number of URLs already seen, if that is larger. In SeenBloomOnly mode
	// it only sizes a new filter: a filter loaded from seen.bloom keeps its
	// size. Default 10,000,000.
	BloomExpected uint
	// BloomFPRate is the target false positive rate of the Bloom filter, in
	// (0, 1). Default 0.001.
	BloomFPRate float64
	// SeenMode selects the seen set implementation. It is recorded when the
	// database is created; reopening with another mode fails.
	SeenMode SeenMode
	// CacheBytes is the size of the leveldb block cache. Default 8 MiB.
	CacheBytes int
	// MinFreeBytes is the free space on the store's filesystem below
	// which DiskSpace reports the disk low (a node then accepts no new
	// URLs). Default 1 GiB; negative: never low.
	MinFreeBytes int64
	// FreeSpace, if set, replaces DiskSpace's reading of the bytes free
	// for the store in dir. It is called on every check, so it must be
	// cheap. Default (nil): statfs of the store's directory, at most once
	// a second.
	FreeSpace func(dir string) (uint64, error)

	// journalLimit is the number of journal entries (SeenBloomOnly mode)
	// after which MarkSeen writes a checkpoint of the filter. Default
	// defaultJournalLimit; tests lower it.
	journalLimit int
	// openStorage, if set, replaces the leveldb file storage of
	// <dir>/leveldb; tests use it to cut the power.
	openStorage func(path string) (storage.Storage, error)
	// noSync leaves shard record writes unsynced; the benchmark that
	// measures what syncing costs sets it.
	noSync bool
}

const defaultJournalLimit = 1 << 20

// DefaultOptions returns the default options.
func DefaultOptions() Options {
	return Options{
		BloomExpected: 10_000_000,
		BloomFPRate:   0.001,
		SeenMode:      SeenExact,
		CacheBytes:    8 << 20,
		MinFreeBytes:  1 << 30,
		journalLimit:  defaultJournalLimit,
	}
}

// withDefaults fills zero fields and validates the rest.
func (o Options) withDefaults() (Options, error) {
	d := DefaultOptions()
	if o.BloomExpected == 0 {
		o.BloomExpected = d.BloomExpected
	}
	if o.BloomFPRate == 0 {
		o.BloomFPRate = d.BloomFPRate
	}
	if !(o.BloomFPRate > 0 && o.BloomFPRate < 1) {
		return o, fmt.Errorf("store: BloomFPRate %v not in (0, 1)", o.BloomFPRate)
	}
	if o.SeenMode != SeenExact && o.SeenMode != SeenBloomOnly {
		return o, fmt.Errorf("store: unknown %v", o.SeenMode)
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = d.CacheBytes
	}
	if o.CacheBytes < 0 {
		return o, fmt.Errorf("store: negative CacheBytes %d", o.CacheBytes)
	}
	if o.MinFreeBytes == 0 {
		o.MinFreeBytes = d.MinFreeBytes
	}
	if o.journalLimit <= 0 {
		o.journalLimit = d.journalLimit
	}
	return o, nil
}

// DB is an open store. All methods are safe for concurrent use.
type DB struct {
	dir       string
	bloomPath string
	opts      Options
	stor      storage.Storage // leveldb's files; closed after ldb
	ldb       *leveldb.DB
	// fps is the near-duplicate index of the fingerprint table.
	fps *fpIndex
	// journals are leveldb's open journal files, synced by the writes
	// that acknowledge a URL (see "Durability" in doc.go).
	journals *openJournals
	// tailTrimmed is what Open cut off the end of the journal or
	// manifest: a write a crash interrupted (JournalTailTrimmed).
	tailTrimmed int64
	// created is set when Open created the store (Created).
	created bool
	// failed is the first write the disk refused (see Failed).
	failed *atomic.Pointer[writeFailure]

	// mu guards the seen set: the Bloom filter, the seen table or journal,
	// the seen counter record and journalLen. MarkSeen holds it for writing
	// across check and write; Seen holds it for reading.
	mu         sync.RWMutex
	bloom      *bloom.BloomFilter
	batch      *leveldb.Batch // scratch batch of MarkSeen, under mu
	journalLen int            // journal entries not yet in seen.bloom
	seenCount  atomic.Int64

	// pageMu serialises the existence check and write of PutPage so that
	// the page counter stays exact.
	pageMu    sync.Mutex
	pageCount atomic.Int64

	closed atomic.Bool

	outbox outboxState // see outbox.go

	// queueCache holds the queue counters and sequence number as last
	// written, under the queue lock (see queue.go): read once, not on
	// every queue write.
	queueCache queueCounterCache

	// shardMu serialises the read-merge-write of PutShardRecords, and
	// guards recentShard.
	shardMu     sync.Mutex
	recentShard recent.Map[[2]uint64, []byte] // see recentShardRecords

	// contentMu serialises the read and write of FollowContent.
	contentMu sync.Mutex

	// seenReads counts leveldb reads of the seen table; tests use it to
	// prove that the Bloom filter saves reads.
	seenReads atomic.Int64
	// queueLookups counts the leveldb reads ApplyQueue makes to find out
	// whether an entry to remove is there; tests use it to prove that
	// QueueUpdate.RemoveKnown saves them.
	queueLookups atomic.Int64

	disk diskCache // see disk.go

	// keys answers "may the store hold this key?" for the per-URL tables
	// whose lookups mostly miss (see keyfilter.go); keyScan fills it
	// with the keys there were at Open.
	keys    keyFilter
	keyScan keyScan
}

// Open opens the store in dir, creating dir and the database if needed. In
// SeenExact mode it rebuilds the Bloom filter from the seen table; in
// SeenBloomOnly mode it loads <dir>/seen.bloom and replays the journal.
//
// Open checks leveldb's journal and manifest strictly: a record that fails
// its checksum fails Open with an error wrapping ErrCorrupt, where leveldb
// would drop the rest of its block and open without a word. Only a write
// a crash cut short at the very end of the journal or manifest (it was
// never acknowledged) is cut off and opened past; JournalTailTrimmed says
// how many bytes that was. A database another process holds fails with an
// error wrapping ErrLocked.
func Open(dir string, opts Options) (*DB, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("store: create %s: %w", dir, err)
	}
	ldbPath := filepath.Join(dir, "leveldb")
	stor, trimmed, err := openLevelStorage(ldbPath, opts)
	if err != nil {
		return nil, err
	}
	failed := new(atomic.Pointer[writeFailure])
	journals := new(openJournals)
	ldb, err := leveldb.Open(watchedStorage{Storage: stor, failed: failed, journals: journals}, &opt.Options{
		BlockCacheCapacity: opts.CacheBytes,
		// leveldb's own per-table filter saves block reads for keys that
		// are absent, i.e. for our Bloom filter's false positives.
		Filter: filter.NewBloomFilter(10),
		// Setting any flag replaces leveldb's defaults, so they are
		// repeated. Without StrictJournal a damaged journal block is
		// dropped in silence at open; without StrictManifest a damaged
		// manifest record is, and with it the tables it names.
		Strict: opt.DefaultStrict | opt.StrictJournal | opt.StrictManifest,
	})
	if err != nil {
		stor.Close()
		if lerrors.IsCorrupted(err) {
			return nil, fmt.Errorf("%w: leveldb in %s: %v", ErrCorrupt, ldbPath, err)
		}
		return nil, fmt.Errorf("store: open leveldb %s: %w", ldbPath, err)
	}
	db := &DB{
		dir:         dir,
		bloomPath:   filepath.Join(dir, "seen.bloom"),
		opts:        opts,
		stor:        stor,
		ldb:         ldb,
		journals:    journals,
		tailTrimmed: trimmed,
		failed:      failed,
		batch:       new(leveldb.Batch),
		recentShard: recent.New[[2]uint64, []byte](recentShardRecords),
	}
	db.disk.init()
	if err := db.init(); err != nil {
		ldb.Close()
		stor.Close()
		return nil, err
	}
	db.startKeyScan()
	return db, nil
}

// openLevelStorage opens (and locks) leveldb's files in path, and cuts off
// a write a crash interrupted at the end of the journal or manifest. It
// returns how many bytes it cut.
func openLevelStorage(path string, opts Options) (storage.Storage, int64, error) {
	if opts.openStorage != nil {
		stor, err := opts.openStorage(path)
		return stor, 0, err
	}
	stor, err := storage.OpenFile(path, false)
	if err != nil {
		if isLocked(err) {
			return nil, 0, fmt.Errorf("%w: %s is locked (is a node running on this data dir?)", ErrLocked, path)
		}
		return nil, 0, fmt.Errorf("store: open leveldb %s: %w", path, err)
	}
	trimmed, err := trimTornTails(path, stor)
	if err != nil {
		stor.Close()
		return nil, 0, err
	}
	return stor, trimmed, nil
}

// Created reports whether Open created the store: no earlier run wrote to
// it, so nothing it records can have been under way when a run ended.
func (db *DB) Created() bool { return db.created }

// JournalTailTrimmed returns the number of bytes Open cut off the end of
// leveldb's journal or manifest: a write that a crash interrupted, which
// therefore was never acknowledged. 0 after a clean shutdown.
func (db *DB) JournalTailTrimmed() int64 { return db.tailTrimmed }

// init checks or records the schema and mode, loads the counters and the
// near-duplicate index, and builds the Bloom filter.
func (db *DB) init() error {
	schema, err := db.ldb.Get(metaKey(metaSchema), nil)
	switch {
	case errors.Is(err, leveldb.ErrNotFound):
		// New database: record schema and mode.
		b := new(leveldb.Batch)
		b.Put(metaKey(metaSchema), binary.AppendUvarint(nil, schemaVersion))
		b.Put(metaKey(metaSeenMode), []byte{byte(db.opts.SeenMode)})
		if err := db.ldb.Write(b, nil); err != nil {
			return fmt.Errorf("store: initialise %s: %w", db.dir, err)
		}
		db.created = true
	case err != nil:
		return fmt.Errorf("store: read schema: %w", err)
	default:
		v, n := binary.Uvarint(schema)
		if n != len(schema) || v != schemaVersion {
			return fmt.Errorf("store: %s has schema %x, this build reads schema %d only", db.dir, schema, schemaVersion)
		}
		mode, err := db.ldb.Get(metaKey(metaSeenMode), nil)
		if err != nil {
			return fmt.Errorf("store: read seen mode: %w", err)
		}
		if len(mode) != 1 || SeenMode(mode[0]) != db.opts.SeenMode {
			return fmt.Errorf("store: %s was created with seen mode %x, cannot open it in mode %v", db.dir, mode, db.opts.SeenMode)
		}
	}
	seen, err := db.readCounter(metaSeenCount)
	if err != nil {
		return err
	}
	pages, err := db.readCounter(metaPageCount)
	if err != nil {
		return err
	}
	db.seenCount.Store(int64(seen))
	db.pageCount.Store(int64(pages))
	if err := db.loadFingerprints(); err != nil {
		return err
	}
	if db.opts.SeenMode == SeenBloomOnly {
		return db.loadBloomOnly()
	}
	return db.rebuildBloom(seen)
}

// readCounter reads an 8-byte counter from the meta table (0 if absent).
func (db *DB) readCounter(name string) (uint64, error) {
	v, err := db.ldb.Get(metaKey(name), nil)
	if errors.Is(err, leveldb.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, ldbErr(err, "read %s", name)
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("store: meta %s: %w: %d bytes, want 8", name, ErrCorrupt, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// rebuildBloom builds the Bloom filter from the keys of the seen table, and
// repairs the seen counter if it disagrees with the table.
func (db *DB) rebuildBloom(persisted uint64) error {
	n := db.opts.BloomExpected
	if uint64(n) < 2*persisted {
		n = uint(2 * persisted)
	}
	db.bloom = newBloom(n, db.opts.BloomFPRate)
	it := db.ldb.NewIterator(tableRange(prefixSeen), &opt.ReadOptions{DontFillCache: true})
	defer it.Release()
	var count uint64
	for it.Next() {
		k := it.Key()
		if len(k) != urlKeyLen {
			return fmt.Errorf("store: rebuild bloom filter: %w: malformed seen key %x", ErrCorrupt, k)
		}
		db.bloom.Add(bloomKey(k))
		count++
	}
	if err := it.Error(); err != nil {
		return ldbErr(err, "rebuild bloom filter")
	}
	if count != persisted {
		if err := db.ldb.Put(metaKey(metaSeenCount), binary.BigEndian.AppendUint64(nil, count), nil); err != nil {
			return fmt.Errorf("store: repair seen count: %w", err)
		}
		db.seenCount.Store(int64(count))
	}
	return nil
}

// loadBloomOnly loads seen.bloom (or starts an empty filter) and replays the
// journal into it.
func (db *DB) loadBloomOnly() error {
	f, err := readBloomFile(db.bloomPath)
	switch {
	case isNotExist(err):
		f = newBloom(db.opts.BloomExpected, db.opts.BloomFPRate)
	case err != nil:
		return err
	}
	db.bloom = f
	it := db.ldb.NewIterator(tableRange(prefixJournal), &opt.ReadOptions{DontFillCache: true})
	defer it.Release()
	for it.Next() {
		k := it.Key()
		if len(k) != urlKeyLen {
			return fmt.Errorf("store: replay journal: %w: malformed journal key %x", ErrCorrupt, k)
		}
		db.bloom.Add(bloomKey(k))
		db.journalLen++
	}
	if err := it.Error(); err != nil {
		return ldbErr(err, "replay journal")
	}
	return nil
}

// checkpoint writes seen.bloom and then empties the journal. Called with mu
// held for writing, in SeenBloomOnly mode.
func (db *DB) checkpoint() error {
	if err := writeBloomFile(db.bloomPath, db.bloom); err != nil {
		return err
	}
	it := db.ldb.NewIterator(tableRange(prefixJournal), &opt.ReadOptions{DontFillCache: true})
	defer it.Release()
	b := new(leveldb.Batch)
	for it.Next() {
		b.Delete(it.Key())
		if b.Len() >= 64<<10 {
			if err := db.ldb.Write(b, nil); err != nil {
				return fmt.Errorf("store: trim journal: %w", err)
			}
			b.Reset()
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("store: trim journal: %w", err)
	}
	if err := db.ldb.Write(b, nil); err != nil {
		return fmt.Errorf("store: trim journal: %w", err)
	}
	db.journalLen = 0
	return nil
}

// Close writes the Bloom filter (SeenBloomOnly mode) and closes the
// database. Further calls return nil; other methods return ErrClosed.
func (db *DB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.pageMu.Lock()
	defer db.pageMu.Unlock()
	if db.closed.Swap(true) {
		return nil
	}
	db.stopKeyScan()
	var errs []error
	if db.opts.SeenMode == SeenBloomOnly {
		if err := db.checkpoint(); err != nil {
			// The journal still holds everything; the next Open replays it.
			errs = append(errs, err)
		}
	}
	if err := db.ldb.Close(); err != nil {
		errs = append(errs, fmt.Errorf("store: close leveldb: %w", err))
	}
	if err := db.stor.Close(); err != nil {
		errs = append(errs, fmt.Errorf("store: close leveldb files: %w", err))
	}
	db.bloom = nil
	return errors.Join(errs...)
}

// ldbErr wraps an error from leveldb with context, translating leveldb's
// sentinels into the store's.
func ldbErr(err error, format string, args ...any) error {
	switch {
	case errors.Is(err, leveldb.ErrClosed):
		err = ErrClosed
	case errors.Is(err, leveldb.ErrNotFound):
		err = ErrNotFound
	case lerrors.IsCorrupted(err):
		err = fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return fmt.Errorf("store: "+format+": %w", append(args, err)...)
}

// SeenEntry is one URL of the seen set.
type SeenEntry struct {
	// Key is the ring key of the URL.
	Key uint64
	// URLHash is the hash of the normalised URL.
	URLHash uint64
	// URL is the URL text (not used for identity).
	URL string
	// Depth is the crawl depth at which the URL was found.
	Depth int
}

// MarkSeen adds entries to the seen set and reports, per entry, whether it
// was new, i.e. whether its (Key, URLHash) was not seen before. Within one
// call a repeated (Key, URLHash) counts once: only its first occurrence can
// be new. A call is atomic with respect to other calls: concurrent calls
// with the same URL never both report it new. New entries are written in one
// leveldb batch together with the updated seen count.
//
// The seen set keeps the smallest depth each URL was found at: an entry
// already seen at a greater depth (SeenDepth) has its depth lowered to the
// entry's, in the same batch; it is not new.
//
// On error nothing was recorded and the result is nil.
//
// In SeenExact mode, entries that the Bloom filter rules out cost no disk
// read. In SeenBloomOnly mode the filter alone decides, so a false positive
// reports a new URL as seen.
func (db *DB) MarkSeen(entries []SeenEntry) ([]bool, error) {
	isNew := make([]bool, len(entries))
	if len(entries) == 0 {
		return isNew, nil
	}
	keys := make([]byte, urlKeyLen*len(entries))
	for i := range entries {
		putURLKey(keys[i*urlKeyLen:], prefixSeen, entries[i].Key, entries[i].URLHash)
	}
	key := func(i int) []byte { return keys[i*urlKeyLen : (i+1)*urlKeyLen] }

	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed.Load() {
		return nil, ErrClosed
	}
	bloomOnly := db.opts.SeenMode == SeenBloomOnly
	var pending map[[2]uint64]struct{}
	if len(entries) > 1 {
		pending = make(map[[2]uint64]struct{}, len(entries))
	}
	b := db.batch
	b.Reset()
	var val []byte
	added, lowered := 0, 0
	for i := range entries {
		e := &entries[i]
		id := [2]uint64{e.Key, e.URLHash}
		if _, dup := pending[id]; dup {
			continue
		}
		k := key(i)
		if db.bloom.Test(bloomKey(k)) {
			if bloomOnly {
				continue
			}
			db.seenReads.Add(1)
			depth, found, err := db.seenDepth(k)
			if err != nil {
				return nil, fmt.Errorf("mark seen %s: %w", keyString(e.Key, e.URLHash), err)
			}
			if found {
				if e.Depth < depth {
					val = encodeSeen(val[:0], e)
					b.Put(k, val)
					lowered++
				}
				continue
			}
		}
		isNew[i] = true
		added++
		if pending != nil {
			pending[id] = struct{}{}
		}
		if bloomOnly {
			k[0] = prefixJournal
			b.Put(k, nil)
		} else {
			val = encodeSeen(val[:0], e)
			b.Put(k, val)
		}
	}
	if added == 0 && lowered == 0 {
		return isNew, nil
	}
	total := db.seenCount.Load() + int64(added)
	b.Put(metaKey(metaSeenCount), binary.BigEndian.AppendUint64(nil, uint64(total)))
	if err := db.ldb.Write(b, nil); err != nil {
		return nil, ldbErr(err, "mark seen: write %d new entries and %d shallower", added, lowered)
	}
	if b.Len() > 4096 {
		db.batch = new(leveldb.Batch) // do not keep a huge buffer around
	}
	for i := range entries {
		if isNew[i] {
			db.bloom.Add(bloomKey(key(i)))
		}
	}
	db.seenCount.Store(total)
	if bloomOnly {
		db.journalLen += added
		if db.journalLen >= db.opts.journalLimit {
			// A failed checkpoint loses nothing (the journal stays and
			// is replayed on Open); try again after another limit's
			// worth of entries, and on Close.
			if err := db.checkpoint(); err != nil {
				db.journalLen -= db.opts.journalLimit
			}
		}
	}
	return isNew, nil
}

// SeenDepth reports whether the URL (key, urlHash) is in the seen set and
// the smallest depth it was found at. In SeenBloomOnly mode the answer can
// be a false positive, and the depth is always 0: that mode keeps no
// depths, so a shorter path to a URL is never noticed.
func (db *DB) SeenDepth(key, urlHash uint64) (depth int, seen bool, err error) {
	var k [urlKeyLen]byte
	putURLKey(k[:], prefixSeen, key, urlHash)
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed.Load() {
		return 0, false, ErrClosed
	}
	if !db.bloom.Test(bloomKey(k[:])) {
		return 0, false, nil
	}
	if db.opts.SeenMode == SeenBloomOnly {
		return 0, true, nil
	}
	db.seenReads.Add(1)
	depth, seen, err = db.seenDepth(k[:])
	if err != nil {
		return 0, false, fmt.Errorf("seen %s: %w", keyString(key, urlHash), err)
	}
	return depth, seen, nil
}

// seenDepth reads the depth of the seen record under k, if any.
func (db *DB) seenDepth(k []byte) (depth int, found bool, err error) {
	v, err := db.ldb.Get(k, nil)
	if errors.Is(err, leveldb.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, ldbErr(err, "read seen record")
	}
	var e SeenEntry
	if err := decodeSeen(v, &e); err != nil {
		return 0, false, err
	}
	return e.Depth, true, nil
}

// Seen reports whether the URL (key, urlHash) is in the seen set. In
// SeenBloomOnly mode the answer can be a false positive.
func (db *DB) Seen(key, urlHash uint64) (bool, error) {
	var k [urlKeyLen]byte
	putURLKey(k[:], prefixSeen, key, urlHash)
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed.Load() {
		return false, ErrClosed
	}
	if !db.bloom.Test(bloomKey(k[:])) {
		return false, nil
	}
	if db.opts.SeenMode == SeenBloomOnly {
		return true, nil
	}
	db.seenReads.Add(1)
	found, err := db.ldb.Has(k[:], nil)
	if err != nil {
		return false, ldbErr(err, "seen %s", keyString(key, urlHash))
	}
	return found, nil
}

// SeenCount returns the number of URLs in the seen set. It is kept in memory
// and persisted with every MarkSeen batch.
func (db *DB) SeenCount() int64 { return db.seenCount.Load() }

// ScanSeen calls fn for every seen entry whose ring key lies in (from, to],
// in ring order starting just after from. When from > to the range wraps
// around 0; from == to means the whole ring. The scan reads a consistent
// snapshot and holds no lock while fn runs, so fn may call other methods. An
// error from fn stops the scan and is returned as is. ScanSeen returns
// ErrBloomOnly in SeenBloomOnly mode.
func (db *DB) ScanSeen(from, to uint64, fn func(SeenEntry) error) error {
	if db.closed.Load() {
		return ErrClosed
	}
	if db.opts.SeenMode == SeenBloomOnly {
		return ErrBloomOnly
	}
	return db.scan(prefixSeen, from, to, func(key, urlHash uint64, v []byte) error {
		e := SeenEntry{Key: key, URLHash: urlHash}
		if err := decodeSeen(v, &e); err != nil {
			return fmt.Errorf("store: seen %s: %w", keyString(key, urlHash), err)
		}
		return fn(e)
	})
}

// scan iterates the ring range (from, to] of a table over one snapshot.
func (db *DB) scan(prefix byte, from, to uint64, fn func(key, urlHash uint64, v []byte) error) error {
	snap, err := db.ldb.GetSnapshot()
	if err != nil {
		return ldbErr(err, "scan")
	}
	defer snap.Release()
	for _, r := range ringRanges(prefix, from, to) {
		it := snap.NewIterator(&r, &opt.ReadOptions{DontFillCache: true})
		for it.Next() {
			key, urlHash, err := parseURLKey(it.Key(), prefix)
			if err == nil {
				err = fn(key, urlHash, it.Value())
			}
			if err != nil {
				it.Release()
				return err
			}
		}
		err := it.Error()
		it.Release()
		if err != nil {
			return ldbErr(err, "scan table %q", prefix)
		}
	}
	return nil
}

// PutMeta stores a small named value, such as "ring/epoch". Names beginning
// with "store/" are reserved.
func (db *DB) PutMeta(name string, value []byte) error {
	if name == "" {
		return errors.New("store: put meta: empty name")
	}
	if strings.HasPrefix(name, reservedMetaPrefix) {
		return fmt.Errorf("store: put meta %q: %w", name, ErrReservedName)
	}
	if db.closed.Load() {
		return ErrClosed
	}
	if err := db.ldb.Put(metaKey(name), value, nil); err != nil {
		return ldbErr(err, "put meta %q", name)
	}
	return nil
}

// Meta returns the value stored under name, or an error wrapping
// ErrNotFound. The store's own "store/..." values can be read too.
func (db *DB) Meta(name string) ([]byte, error) {
	if db.closed.Load() {
		return nil, ErrClosed
	}
	v, err := db.ldb.Get(metaKey(name), nil)
	if err != nil {
		return nil, ldbErr(err, "meta %q", name)
	}
	return v, nil
}
