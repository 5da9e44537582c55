package store

import (
	"sync"
	"testing"

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
	return &lossyWriter{Writer: w, d: d, f: f}, nil
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
	d *lossyDisk
	f *lossyFile
}

func (w *lossyWriter) Write(p []byte) (int, error) {
	w.d.mu.Lock()
	w.f.data = append(w.f.data, p...)
	w.d.mu.Unlock()
	return w.Writer.Write(p)
}

func (w *lossyWriter) Sync() error {
	w.d.mu.Lock()
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
