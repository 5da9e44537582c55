package store

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/syndtr/goleveldb/leveldb/storage"
)

// lossyDisk is leveldb storage in memory that knows which bytes of each
// file were synced: cut returns a storage that holds only those, as a
// disk does after a power loss. Writes that were not synced are gone,
// even those a process crash would have kept.
type lossyDisk struct {
	storage.Storage
	mu    sync.Mutex
	files map[storage.FileDesc]*lossyFile
	// hold, while not nil, keeps every sync of a journal file from
	// completing until it is closed; each such sync first says so on
	// holding.
	hold    chan struct{}
	holding chan struct{}
}

// holdJournalSyncs makes journal syncs wait until the returned function is
// called; holding receives once for each sync that waits.
func (d *lossyDisk) holdJournalSyncs() (holding <-chan struct{}, release func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hold, d.holding = make(chan struct{}), make(chan struct{}, 100)
	hold := d.hold
	var once sync.Once
	return d.holding, func() {
		once.Do(func() {
			d.mu.Lock()
			d.hold = nil
			d.mu.Unlock()
			close(hold)
		})
	}
}

type lossyFile struct {
	data   []byte
	synced int
}

func newLossyDisk() *lossyDisk {
	return &lossyDisk{Storage: storage.NewMemStorage(), files: map[storage.FileDesc]*lossyFile{}}
}

// open is Options.openStorage.
func (d *lossyDisk) open(string) (storage.Storage, error) { return d, nil }

func (d *lossyDisk) Create(fd storage.FileDesc) (storage.Writer, error) {
	w, err := d.Storage.Create(fd)
	if err != nil {
		return nil, err
	}
	f := &lossyFile{}
	d.mu.Lock()
	d.files[fd] = f
	d.mu.Unlock()
	return &lossyWriter{Writer: w, d: d, f: f, fd: fd}, nil
}

func (d *lossyDisk) Remove(fd storage.FileDesc) error {
	d.mu.Lock()
	delete(d.files, fd)
	d.mu.Unlock()
	return d.Storage.Remove(fd)
}

func (d *lossyDisk) Rename(from, to storage.FileDesc) error {
	d.mu.Lock()
	if f, ok := d.files[from]; ok {
		d.files[to] = f
		delete(d.files, from)
	}
	d.mu.Unlock()
	return d.Storage.Rename(from, to)
}

// Close keeps the files: the disk outlives the process.
func (d *lossyDisk) Close() error { return nil }

// cut returns what survives a power loss now: the synced part of every
// file, and the database's entry point (leveldb replaces it atomically,
// after a sync).
func (d *lossyDisk) cut(t *testing.T) *lossyDisk {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	after := newLossyDisk()
	for fd, f := range d.files {
		w, err := after.Create(fd)
		if err == nil {
			_, err = w.Write(f.data[:f.synced])
		}
		if err == nil {
			err = w.Sync()
		}
		if err == nil {
			err = w.Close()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	meta, err := d.GetMeta()
	if err != nil {
		t.Fatal(err)
	}
	if err := after.SetMeta(meta); err != nil {
		t.Fatal(err)
	}
	return after
}

type lossyWriter struct {
	storage.Writer
	d  *lossyDisk
	f  *lossyFile
	fd storage.FileDesc
}

func (w *lossyWriter) Write(p []byte) (int, error) {
	w.d.mu.Lock()
	w.f.data = append(w.f.data, p...)
	w.d.mu.Unlock()
	return w.Writer.Write(p)
}

func (w *lossyWriter) Sync() error {
	w.d.mu.Lock()
	if hold := w.d.hold; hold != nil && w.fd.Type == storage.TypeJournal {
		w.d.holding <- struct{}{}
		w.d.mu.Unlock()
		<-hold
		w.d.mu.Lock()
	}
	w.f.synced = len(w.f.data)
	w.d.mu.Unlock()
	return w.Writer.Sync()
}

// An owner acknowledges a URL once its shard record is stored here and at
// the replicas: that record must survive a power loss of this machine, so
// the write is synced. The seen set and the queue are not synced (they
// are rebuilt from the shard records when the node activates its ranges),
// and the lossy disk drops them, which shows that it drops what a sync
// did not cover.
func TestShardRecordsSurvivePowerLoss(t *testing.T) {
	for _, synced := range []bool{true, false} {
		disk := newLossyDisk()
		opts := testOptions(SeenExact)
		opts.openStorage = disk.open
		opts.noSync = !synced
		dir := t.TempDir()
		db, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		recs := make([]ShardRecord, 50)
		for i := range recs {
			e := entry(uint64(i)*7919, uint64(i))
			recs[i] = ShardRecord{Key: e.Key, URLHash: e.URLHash, URL: e.URL, Depth: e.Depth}
		}
		if err := db.PutShardRecords(recs); err != nil {
			t.Fatal(err)
		}
		// What the owner writes after the acknowledgement point.
		markSeen(t, db, entries(9, 20))

		opts.openStorage = disk.cut(t).open
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		db, err = Open(dir, opts)
		if err != nil {
			t.Fatalf("open after power loss: %v", err)
		}
		got := scanShard(t, db, 0, 0)
		seen := db.SeenCount()
		db.Close()
		if !synced {
			if len(got) == len(recs) {
				t.Fatal("unsynced shard records survived the power loss: the lossy disk keeps unsynced writes, and the test proves nothing")
			}
			continue
		}
		if len(got) != len(recs) {
			t.Fatalf("%d of %d acknowledged shard records survived a power loss", len(got), len(recs))
		}
		want := map[[2]uint64]string{}
		for _, r := range recs {
			want[[2]uint64{r.Key, r.URLHash}] = r.URL
		}
		for _, r := range got {
			if want[[2]uint64{r.Key, r.URLHash}] != r.URL {
				t.Fatalf("shard record %+v after power loss is not one that was written", r)
			}
		}
		if seen != 0 {
			t.Fatalf("seen count %d after power loss: the unsynced seen entries survived, so the lossy disk keeps unsynced writes", seen)
		}
	}
}

// The sync that acknowledges new URLs happens outside leveldb's write
// lock: while it waits for the disk, the node's other writes (here the
// seen set's) go on. Synced by leveldb itself, every write of the node
// would wait for that disk.
func TestShardRecordSyncDoesNotStallOtherWrites(t *testing.T) {
	disk := newLossyDisk()
	opts := testOptions(SeenExact)
	opts.openStorage = disk.open
	db := openTest(t, t.TempDir(), opts)
	holding, release := disk.holdJournalSyncs()
	defer release()
	put := make(chan error, 1)
	go func() {
		put <- db.PutShardRecords([]ShardRecord{{Key: 1, URLHash: 2, URL: "http://a.example/", Depth: 1}})
	}()
	<-holding
	seen := make(chan error, 1)
	go func() {
		_, err := db.MarkSeen(entries(3, 10))
		seen <- err
	}()
	select {
	case err := <-seen:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a write of the seen set waited for the sync of shard records")
	}
	select {
	case err := <-put:
		t.Fatalf("PutShardRecords returned (%v) before its sync completed", err)
	default:
	}
	release()
	if err := <-put; err != nil {
		t.Fatal(err)
	}
}

// A record that is already stored may not be on disk yet: a concurrent
// PutShardRecords wrote it and is waiting for its sync. Storing it again
// acknowledges it too, so that call also returns only once the record
// would survive a power loss.
func TestShardRecordAcknowledgedAgainIsSynced(t *testing.T) {
	disk := newLossyDisk()
	opts := testOptions(SeenExact)
	opts.openStorage = disk.open
	dir := t.TempDir()
	db := openTest(t, dir, opts)
	recs := []ShardRecord{{Key: 1, URLHash: 2, URL: "http://a.example/", Depth: 1}, {Key: 3, URLHash: 4, URL: "http://b.example/", Depth: 2}}
	holding, release := disk.holdJournalSyncs()
	first := make(chan error, 1)
	go func() { first <- db.PutShardRecords(recs) }()
	<-holding
	again := make(chan error, 1)
	go func() { again <- db.PutShardRecords(recs) }()
	select {
	case err := <-again:
		// It must not have returned before the records are on disk:
		// cut the power now and see.
		cut := disk.cut(t)
		release()
		<-first
		db.Close()
		t.Fatalf("the second PutShardRecords returned (%v) while the records were not on disk; after a power loss %d of %d are left",
			err, len(shardAfterPowerLoss(t, cut, dir, opts)), len(recs))
	case <-time.After(300 * time.Millisecond):
	}
	release()
	for _, c := range []chan error{first, again} {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	cut := disk.cut(t)
	db.Close()
	if got := shardAfterPowerLoss(t, cut, dir, opts); len(got) != len(recs) {
		t.Fatalf("%d of %d acknowledged records survived a power loss", len(got), len(recs))
	}
}

// A node's own outbox stands for the shard records it accepts from it
// until a sync covers them, so PutShardRecordsNoSync does not wait for the
// disk: its records do not survive a power loss that comes first, and do
// survive one that comes after any synced write.
func TestShardRecordsNoSyncCoveredByLaterSync(t *testing.T) {
	recs := []ShardRecord{{Key: 1, URLHash: 2, URL: "http://a.example/", Depth: 1}, {Key: 3, URLHash: 4, URL: "http://b.example/", Depth: 2}}
	later := []ShardRecord{{Key: 5, URLHash: 6, URL: "http://c.example/", Depth: 0, Seed: true}}
	for _, synced := range []bool{false, true} {
		disk := newLossyDisk()
		opts := testOptions(SeenExact)
		opts.openStorage = disk.open
		dir := t.TempDir()
		db := openTest(t, dir, opts)
		if err := db.PutShardRecordsNoSync(recs); err != nil {
			t.Fatal(err)
		}
		if got := scanShard(t, db, 0, 0); len(got) != len(recs) {
			t.Fatalf("%d of %d records readable after PutShardRecordsNoSync", len(got), len(recs))
		}
		if synced {
			if err := db.PutShardRecords(later); err != nil {
				t.Fatal(err)
			}
		}
		cut := disk.cut(t)
		db.Close()
		got := shardAfterPowerLoss(t, cut, dir, opts)
		switch {
		case !synced && len(got) != 0:
			t.Fatalf("%d records written without a sync survived a power loss: PutShardRecordsNoSync synced", len(got))
		case synced && len(got) != len(recs)+len(later):
			t.Fatalf("%d of %d records survived a power loss after a later sync", len(got), len(recs)+len(later))
		}
	}
}

// shardAfterPowerLoss opens the store in dir on the disk a power loss left
// (see lossyDisk.cut) and returns its shard records.
func shardAfterPowerLoss(t *testing.T, cut *lossyDisk, dir string, opts Options) []ShardRecord {
	t.Helper()
	opts.openStorage = cut.open
	db, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("open after power loss: %v", err)
	}
	defer db.Close()
	return scanShard(t, db, 0, 0)
}

// leveldb closes a journal file when it starts the next one, and the sync
// that acknowledges a write looks only at the files still open: a write
// made just before the switch is on disk only if closing the file synced
// it.
func TestJournalSyncedWhenClosed(t *testing.T) {
	disk := newLossyDisk()
	journals := new(openJournals)
	s := watchedStorage{Storage: disk, failed: new(atomic.Pointer[writeFailure]), journals: journals}
	old, err := s.Create(storage.FileDesc{Type: storage.TypeJournal, Num: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Write([]byte("acknowledged")); err != nil {
		t.Fatal(err)
	}
	next, err := s.Create(storage.FileDesc{Type: storage.TypeJournal, Num: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := next.Write([]byte("later")); err != nil {
		t.Fatal(err)
	}
	if err := journals.sync(); err != nil {
		t.Fatal(err)
	}
	for num, want := range map[int64]string{1: "acknowledged", 2: "later"} {
		f := disk.files[storage.FileDesc{Type: storage.TypeJournal, Num: num}]
		if got := string(f.data[:f.synced]); got != want {
			t.Errorf("journal %d: %q on disk, want %q", num, got, want)
		}
	}
}
