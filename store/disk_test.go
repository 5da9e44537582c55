package store

import (
	"errors"
	"testing"
	"time"
)

func TestDiskSpace(t *testing.T) {
	free := uint64(5 << 30)
	opts := testOptions(SeenExact)
	opts.FreeSpace = func(string) (uint64, error) { return free, nil }
	db := openTest(t, t.TempDir(), opts)
	if d := db.DiskSpace(); d.Low || d.Free != 5<<30 || d.MinFree != 1<<30 || d.Err != nil {
		t.Fatalf("5 GiB free: %+v, want not low with the default 1 GiB threshold", d)
	}
	free = 1<<30 - 1
	if d := db.DiskSpace(); !d.Low {
		t.Fatalf("1 byte under the threshold: %+v, want low", d)
	}

	opts.MinFreeBytes = -1
	off := openTest(t, t.TempDir(), opts)
	if d := off.DiskSpace(); d != (DiskSpace{}) {
		t.Fatalf("check off: %+v, want zero", d)
	}

	opts.MinFreeBytes = 0
	opts.FreeSpace = func(string) (uint64, error) { return 0, errors.New("no statfs here") }
	broken := openTest(t, t.TempDir(), opts)
	if d := broken.DiskSpace(); d.Low || d.Err == nil {
		t.Fatalf("failing check: %+v, want an error and not low", d)
	}
}

// The default check reads the filesystem at most once a second, however
// often it is asked.
func TestDiskSpaceCached(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	if d := db.DiskSpace(); d.Err != nil || d.Free == 0 {
		t.Fatalf("statfs of a temporary directory: %+v", d)
	}
	now := time.Unix(1000, 0)
	calls := 0
	db.disk.mu.Lock()
	db.disk.at = time.Time{}
	db.disk.now = func() time.Time { return now }
	db.disk.statfs = func(string) (uint64, error) { calls++; return uint64(calls) << 40, nil }
	db.disk.mu.Unlock()
	for range 100 {
		db.DiskSpace()
	}
	now = now.Add(diskCheckInterval - 1)
	if d := db.DiskSpace(); calls != 1 || d.Free != 1<<40 {
		t.Fatalf("%d statfs calls within a second (free %d), want 1", calls, d.Free)
	}
	now = now.Add(1)
	if d := db.DiskSpace(); calls != 2 || d.Free != 2<<40 {
		t.Fatalf("after a second: %d statfs calls (free %d), want 2", calls, d.Free)
	}
}
