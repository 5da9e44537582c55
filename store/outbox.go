package store

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/syndtr/goleveldb/leveldb"
	"github.com/syndtr/goleveldb/leveldb/util"
)

// The outbox table holds URLs a node discovered and has not yet delivered
// to their owners, so a crash between fetching a page and routing its
// links loses none of them.
//
//	outbox    'o'     'o' | sequence (8, BE)                        outbox record
//
// Outbox record, version 1: version byte, URL (bytes), depth (varint),
// redirects (varint), attempts (varint). Version 2, written for a task
// with a seed statement only, adds the statement (bytes).
const prefixOutbox byte = 'o'

// OutboxEntry is one undelivered task.
type OutboxEntry struct {
	// ID orders entries; PutOutbox assigns it, starting at 1.
	ID        uint64
	URL       string
	Depth     int
	Redirects int
	Attempts  int
	// SeedProof is a seed's signed statement, opaque here: it waits for
	// delivery with its task.
	SeedProof string
}

// outboxState assigns outbox sequence numbers.
type outboxState struct {
	mu     sync.Mutex
	loaded bool
	next   uint64
}

func outboxKey(id uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefixOutbox
	binary.BigEndian.PutUint64(k[1:], id)
	return k
}

// PutOutbox records entries durably, assigning their IDs, in one batch.
func (db *DB) PutOutbox(entries []OutboxEntry) error {
	if db.closed.Load() {
		return ErrClosed
	}
	db.outbox.mu.Lock()
	defer db.outbox.mu.Unlock()
	if !db.outbox.loaded {
		// Continue after the highest ID on disk so a restart never reuses
		// one; IDs start at 1 so that 0 can mean "not persisted".
		db.outbox.next = 1
		it := db.ldb.NewIterator(util.BytesPrefix([]byte{prefixOutbox}), nil)
		if it.Last() {
			if len(it.Key()) != 9 {
				it.Release()
				return fmt.Errorf("%w: malformed outbox key %x", ErrCorrupt, it.Key())
			}
			db.outbox.next = binary.BigEndian.Uint64(it.Key()[1:]) + 1
		}
		it.Release()
		if err := it.Error(); err != nil {
			return ldbErr(err, "scan outbox")
		}
		db.outbox.loaded = true
	}
	b := new(leveldb.Batch)
	for i := range entries {
		entries[i].ID = db.outbox.next
		db.outbox.next++
		b.Put(outboxKey(entries[i].ID), encodeOutbox(&entries[i]))
	}
	if err := db.ldb.Write(b, nil); err != nil {
		return ldbErr(err, "put %d outbox entries", len(entries))
	}
	return nil
}

// DeleteOutbox removes delivered entries.
func (db *DB) DeleteOutbox(ids []uint64) error {
	if db.closed.Load() {
		return ErrClosed
	}
	b := new(leveldb.Batch)
	for _, id := range ids {
		b.Delete(outboxKey(id))
	}
	if err := db.ldb.Write(b, nil); err != nil {
		return ldbErr(err, "delete %d outbox entries", len(ids))
	}
	return nil
}

// ScanOutbox calls fn for every undelivered entry, oldest first.
func (db *DB) ScanOutbox(fn func(OutboxEntry) error) error {
	if db.closed.Load() {
		return ErrClosed
	}
	it := db.ldb.NewIterator(util.BytesPrefix([]byte{prefixOutbox}), nil)
	defer it.Release()
	for it.Next() {
		k := it.Key()
		if len(k) != 9 {
			return fmt.Errorf("%w: malformed outbox key %x", ErrCorrupt, k)
		}
		e := OutboxEntry{ID: binary.BigEndian.Uint64(k[1:])}
		if err := decodeOutbox(it.Value(), &e); err != nil {
			return fmt.Errorf("outbox entry %d: %w", e.ID, err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return ldbErr(err, "scan outbox")
	}
	return nil
}

// outboxVersionSeed is the outbox record version with a seed statement.
const outboxVersionSeed byte = 2

func encodeOutbox(e *OutboxEntry) []byte {
	b := make([]byte, 0, 16+len(e.URL)+len(e.SeedProof))
	version := byte(recordVersion1)
	if len(e.SeedProof) > 0 {
		version = outboxVersionSeed
	}
	b = append(b, version)
	b = appendString(b, e.URL)
	b = binary.AppendVarint(b, int64(e.Depth))
	b = binary.AppendVarint(b, int64(e.Redirects))
	b = binary.AppendVarint(b, int64(e.Attempts))
	if version == outboxVersionSeed {
		b = appendString(b, e.SeedProof)
	}
	return b
}

func decodeOutbox(v []byte, e *OutboxEntry) error {
	d := decoder{b: v}
	ver := d.byte()
	if d.err == nil && ver != recordVersion1 && ver != outboxVersionSeed {
		return fmt.Errorf("%w: outbox record version %d", ErrCorrupt, ver)
	}
	e.URL = d.str()
	e.Depth = d.int()
	e.Redirects = d.int()
	e.Attempts = d.int()
	if ver == outboxVersionSeed {
		e.SeedProof = d.str()
	}
	return d.finish()
}
