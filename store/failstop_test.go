package store

import (
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/syndtr/goleveldb/leveldb/storage"
)

// fullDisk is an in-memory disk that refuses every write once full is set,
// as a disk out of space does.
type fullDisk struct {
	storage.Storage
	full atomic.Bool
}

func (d *fullDisk) open(string) (storage.Storage, error) { return d, nil }

func (d *fullDisk) Create(fd storage.FileDesc) (storage.Writer, error) {
	w, err := d.Storage.Create(fd)
	if err != nil {
		return nil, err
	}
	return fullWriter{Writer: w, d: d}, nil
}

type fullWriter struct {
	storage.Writer
	d *fullDisk
}

func (w fullWriter) Write(p []byte) (int, error) {
	if w.d.full.Load() {
		return 0, syscall.ENOSPC
	}
	return w.Writer.Write(p)
}

// TestFailedAfterRefusedWrite: a store is not failed while its disk takes
// every write; once the disk refuses one, the write fails, Failed names
// the disk's error, later writes fail too (leveldb keeps the error), and
// what was stored before can still be read.
func TestFailedAfterRefusedWrite(t *testing.T) {
	disk := &fullDisk{Storage: storage.NewMemStorage()}
	db, err := Open(t.TempDir(), Options{openStorage: disk.open})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	before := SeenEntry{Key: 1, URLHash: 1, URL: "http://a.test/"}
	if _, err := db.MarkSeen([]SeenEntry{before}); err != nil {
		t.Fatal(err)
	}
	if err := db.Failed(); err != nil {
		t.Fatalf("Failed on a healthy disk: %v", err)
	}

	disk.full.Store(true)
	if _, err := db.MarkSeen([]SeenEntry{{Key: 2, URLHash: 2, URL: "http://b.test/"}}); err == nil {
		t.Fatal("MarkSeen succeeded on a full disk")
	}
	err = db.Failed()
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "write") {
		t.Fatalf("Failed after a refused write = %v, want the disk's ENOSPC and the operation", err)
	}
	disk.full.Store(false)
	if _, err := db.MarkSeen([]SeenEntry{{Key: 3, URLHash: 3, URL: "http://c.test/"}}); err == nil {
		t.Error("a write succeeded after the journal failed: leveldb no longer keeps its error, so Failed may report a store that works")
	}
	if seen, err := db.Seen(before.Key, before.URLHash); err != nil || !seen {
		t.Errorf("Seen(stored before the failure) = %v, %v", seen, err)
	}
}
