package store

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/syndtr/goleveldb/leveldb/storage"
)

// A store whose disk refused a write is failed for good: leveldb keeps the
// error of its journal and fails every later write with it, until the
// database is opened again. Failed says so at once, so that a node stops
// (fail-stop) instead of keeping ranges it can no longer store anything
// for.

// writeFailure is the first write leveldb's storage refused.
type writeFailure struct {
	file string
	op   string
	at   time.Time
	err  error
}

// watchedStorage is leveldb's storage with every write, sync and
// replacement of the manifest pointer watched: the first one that fails is
// kept in failed.
type watchedStorage struct {
	storage.Storage
	failed *atomic.Pointer[writeFailure]
	// journals are the journal files open, for syncs outside leveldb's
	// write lock (see openJournals).
	journals *openJournals
}

func (s watchedStorage) note(fd storage.FileDesc, op string, err error) {
	if err != nil {
		s.failed.CompareAndSwap(nil, &writeFailure{file: fd.String(), op: op, at: time.Now(), err: err})
	}
}

func (s watchedStorage) Create(fd storage.FileDesc) (storage.Writer, error) {
	w, err := s.Storage.Create(fd)
	if err != nil {
		s.note(fd, "create", err)
		return nil, err
	}
	ww := watchedWriter{Writer: w, fd: fd, s: s}
	if fd.Type == storage.TypeJournal {
		return s.journals.add(ww), nil
	}
	return ww, nil
}

func (s watchedStorage) SetMeta(fd storage.FileDesc) error {
	err := s.Storage.SetMeta(fd)
	s.note(fd, "set as current", err)
	return err
}

// watchedWriter is one file leveldb writes, watched.
type watchedWriter struct {
	storage.Writer
	fd storage.FileDesc
	s  watchedStorage
}

func (w watchedWriter) Write(p []byte) (int, error) {
	n, err := w.Writer.Write(p)
	w.s.note(w.fd, "write", err)
	return n, err
}

func (w watchedWriter) Sync() error {
	err := w.Writer.Sync()
	w.s.note(w.fd, "sync", err)
	return err
}

// Failed returns, once the disk has refused one of leveldb's writes, an
// error naming the file, the operation, when, and the disk's error; nil
// while every write succeeded. A failed store stays failed until it is
// closed and opened again: the node that owns it should stop.
func (db *DB) Failed() error {
	f := db.failed.Load()
	if f == nil {
		return nil
	}
	return fmt.Errorf("store: the disk refused a %s of %s at %s: %w", f.op, f.file, f.at.Format(time.RFC3339), f.err)
}
