package store

// Record locations: where this node's WARC files hold each archived
// exchange, by the WARC-Record-ID of its response record, so that a
// capture asked for by ID is read without scanning the archive.
//
//	table      prefix  key                    value
//	recordloc  'k'     'k' | record ID bytes  file bytes, offset uvarint, length uvarint

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/syndtr/goleveldb/leveldb"
)

const prefixRecordLoc byte = 'k'

// RecordLocation is where an exchange's records are in the node's WARC
// files: File (a base name), Length bytes from Offset.
type RecordLocation struct {
	File           string
	Offset, Length int64
}

func recordLocKey(id string) []byte {
	k := make([]byte, 0, 1+len(id))
	return append(append(k, prefixRecordLoc), id...)
}

func encodeRecordLocation(loc RecordLocation) []byte {
	v := appendString(nil, loc.File)
	v = binary.AppendUvarint(v, uint64(loc.Offset))
	return binary.AppendUvarint(v, uint64(loc.Length))
}

// RecordLocationOf returns where the exchange whose response record is id
// lies; ok is false when this node archived no such record.
func (db *DB) RecordLocationOf(id string) (loc RecordLocation, ok bool, err error) {
	if db.closed.Load() {
		return loc, false, ErrClosed
	}
	if id == "" || len(id) > MaxRecordIDLen {
		return loc, false, nil
	}
	v, err := db.ldb.Get(recordLocKey(id), nil)
	if errors.Is(err, leveldb.ErrNotFound) {
		return loc, false, nil
	}
	if err != nil {
		return loc, false, ldbErr(err, "record location %.60q", id)
	}
	d := decoder{b: v}
	loc.File = d.str()
	off, n := d.uvarint(), d.uvarint()
	if err := d.finish(); err != nil {
		return loc, false, fmt.Errorf("store: record location %.60q: %w", id, err)
	}
	if off > 1<<62 || n > 1<<62 {
		return loc, false, fmt.Errorf("%w: record location %.60q at %d, %d bytes", ErrCorrupt, id, off, n)
	}
	loc.Offset, loc.Length = int64(off), int64(n)
	return loc, true, nil
}
