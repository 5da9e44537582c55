package store

// Dead letters: tasks the crawler gave up on after its retries, kept so an
// operator can see why and requeue them.
//
//	table     prefix  key                                         value
//	dead      'x'     'x' | ring key (8, BE) | URL hash (8, BE)   dead letter record
//
// Dead letter record, version 1:
//
//	version     byte = 1
//	host key    8 bytes BE
//	url         bytes
//	depth       varint
//	attempts    varint
//	redirects   varint
//	kind        bytes
//	last error  bytes
//	at          time (see urlmeta.go)

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/syndtr/goleveldb/leveldb"
)

// DeadLetter is a task the crawler gave up on.
type DeadLetter struct {
	// URL is the normalised URL.
	URL string
	// RingKey and URLHash identify the URL; HostKey is its host's queue.
	RingKey, URLHash, HostKey uint64
	// Depth and Redirects are those of the task.
	Depth, Redirects int
	// Attempts is the number of fetches that failed.
	Attempts int
	// Kind is the error kind of the last failure ("timeout", "http_5xx",
	// "too_many_redirects", ...).
	Kind string
	// LastError describes the last failure.
	LastError string
	// At is when the task was given up.
	At time.Time
}

// PutDeadLetter stores d, replacing any dead letter for the same URL.
func (db *DB) PutDeadLetter(d DeadLetter) error {
	_, err := db.ApplyQueue(&QueueUpdate{Dead: []DeadLetter{d}})
	return err
}

// DeleteDeadLetter deletes the dead letter of (ringKey, urlHash), if any.
func (db *DB) DeleteDeadLetter(ringKey, urlHash uint64) error {
	_, err := db.ApplyQueue(&QueueUpdate{Undead: []DeadLetter{{RingKey: ringKey, URLHash: urlHash}}})
	return err
}

// DeadLetter returns the dead letter of (ringKey, urlHash); ok is false
// when there is none.
func (db *DB) DeadLetter(ringKey, urlHash uint64) (d DeadLetter, ok bool, err error) {
	if db.closed.Load() {
		return d, false, ErrClosed
	}
	v, err := db.ldb.Get(urlKey(prefixDead, ringKey, urlHash), nil)
	if errors.Is(err, leveldb.ErrNotFound) {
		return d, false, nil
	}
	if err != nil {
		return d, false, ldbErr(err, "dead letter %s", keyString(ringKey, urlHash))
	}
	d = DeadLetter{RingKey: ringKey, URLHash: urlHash}
	if err := decodeDeadLetter(v, &d); err != nil {
		return DeadLetter{}, false, fmt.Errorf("store: dead letter %s: %w", keyString(ringKey, urlHash), err)
	}
	return d, true, nil
}

// DeadLetters calls fn for every dead letter, in ring order, over a
// consistent snapshot; fn may call other methods. An error from fn stops
// the scan and is returned as is.
func (db *DB) DeadLetters(fn func(DeadLetter) error) error {
	if db.closed.Load() {
		return ErrClosed
	}
	return db.scan(prefixDead, 0, 0, func(key, urlHash uint64, v []byte) error {
		d := DeadLetter{RingKey: key, URLHash: urlHash}
		if err := decodeDeadLetter(v, &d); err != nil {
			return fmt.Errorf("store: dead letter %s: %w", keyString(key, urlHash), err)
		}
		return fn(d)
	})
}

// DeadLetterCount returns the number of dead letters (0 if the count
// cannot be read).
func (db *DB) DeadLetterCount() int64 {
	c, err := db.QueueCounts()
	if err != nil {
		return 0
	}
	return c.Dead
}

func encodeDeadLetter(d *DeadLetter) []byte {
	dst := make([]byte, 0, 48+len(d.URL)+len(d.Kind)+len(d.LastError))
	dst = append(dst, recordVersion1)
	dst = binary.BigEndian.AppendUint64(dst, d.HostKey)
	dst = appendString(dst, d.URL)
	dst = binary.AppendVarint(dst, int64(d.Depth))
	dst = binary.AppendVarint(dst, int64(d.Attempts))
	dst = binary.AppendVarint(dst, int64(d.Redirects))
	dst = appendString(dst, d.Kind)
	dst = appendString(dst, d.LastError)
	return appendTime(dst, d.At)
}

func decodeDeadLetter(v []byte, d *DeadLetter) error {
	dec := decoder{b: v}
	if ver := dec.byte(); dec.err == nil && ver != recordVersion1 {
		return fmt.Errorf("%w: unknown dead letter record version %d", ErrCorrupt, ver)
	}
	d.HostKey = dec.fixed64()
	d.URL = dec.str()
	d.Depth = dec.int()
	d.Attempts = dec.int()
	d.Redirects = dec.int()
	d.Kind = dec.str()
	d.LastError = dec.str()
	d.At = dec.stamp()
	return dec.finish()
}
