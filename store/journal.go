package store

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/syndtr/goleveldb/leveldb/storage"
)

// The write that acknowledges new URLs (PutShardRecords) must be on disk
// before it returns, but leveldb syncs a write while it holds its write
// lock, so that every other write of the node (the frontier's, the pages',
// the outbox's) waits for the disk too. The journal files are therefore
// synced here instead, outside leveldb's lock: PutShardRecords writes
// unsynced, then syncs the journal up to that point. Concurrent syncs
// coalesce: one that starts after a write covers it, and whoever comes
// later finds nothing left to sync.
//
// A write is in exactly one journal file, the one leveldb was writing when
// the write happened. leveldb closes a journal file when it starts the
// next one, and a closed file is not in openJournals: so a journal file is
// synced as it is closed, and a sync covers every write once it has synced
// the files open at its start.

// openJournals is the set of journal files leveldb has open (at most two,
// briefly, when it switches files).
type openJournals struct {
	mu    sync.Mutex
	files []*journalFile
}

// journalFile is a journal file leveldb writes, with what of it was
// synced.
type journalFile struct {
	storage.Writer
	set *openJournals
	// writes counts the writes that returned.
	writes atomic.Uint64

	syncMu sync.Mutex
	synced uint64 // writes covered by a sync
	// err is the sync that failed, after which the file's writes are not
	// known to be on disk.
	err error
}

func (s *openJournals) add(w storage.Writer) *journalFile {
	f := &journalFile{Writer: w, set: s}
	s.mu.Lock()
	s.files = append(s.files, f)
	s.mu.Unlock()
	return f
}

// sync syncs the writes to every open journal file that no sync covers
// yet; when it returns nil, every write that returned before it was called
// is on disk.
func (s *openJournals) sync() error {
	s.mu.Lock()
	files := slices.Clone(s.files)
	s.mu.Unlock()
	for _, f := range files {
		if err := f.syncWrites(); err != nil {
			return err
		}
	}
	return nil
}

func (f *journalFile) Write(p []byte) (int, error) {
	n, err := f.Writer.Write(p)
	f.writes.Add(1)
	return n, err
}

// Sync is leveldb's own sync of the journal (a write with
// opt.WriteOptions.Sync).
func (f *journalFile) Sync() error { return f.syncWrites() }

// syncWrites syncs the file unless a sync already covers every write that
// returned before the call.
func (f *journalFile) syncWrites() error {
	target := f.writes.Load()
	f.syncMu.Lock()
	defer f.syncMu.Unlock()
	if f.err == nil && f.synced >= target {
		return nil
	}
	return f.syncLocked()
}

// syncLocked syncs every write that returned so far, unless a sync already
// covers them or one failed. Called with syncMu held.
func (f *journalFile) syncLocked() error {
	if f.err != nil {
		return f.err
	}
	covered := f.writes.Load()
	if f.synced >= covered {
		return nil
	}
	if err := f.Writer.Sync(); err != nil {
		f.err = fmt.Errorf("sync journal: %w", err)
		return f.err
	}
	f.synced = covered
	return nil
}

// Close syncs what no sync covers yet, then closes the file: after that,
// openJournals.sync no longer sees it, and a sync of it that was under way
// finds nothing left to do.
func (f *journalFile) Close() error {
	f.syncMu.Lock()
	err := f.syncLocked()
	f.syncMu.Unlock()
	f.set.mu.Lock()
	f.set.files = slices.DeleteFunc(f.set.files, func(g *journalFile) bool { return g == f })
	f.set.mu.Unlock()
	return errors.Join(err, f.Writer.Close())
}
