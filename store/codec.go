package store

// The primitive encodings records are made of (see "Record formats" in
// doc.go): the writers and the decoder the store reads its records with.
// They are the store's own: no other package, and nothing on the wire,
// depends on them.

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// appendBytes appends b to dst as a uvarint length followed by the bytes
// (the "bytes" encoding of the store's records).
func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

// appendString appends s as a uvarint length followed by the bytes.
func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// appendTime appends t to dst as a presence byte (0 for the zero time,
// which ends the encoding, else 1), then Unix seconds (varint) and
// nanoseconds (uvarint), so that the zero time survives a round trip. The
// location is not kept: decoder.stamp returns UTC.
func appendTime(dst []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	dst = binary.AppendVarint(dst, t.Unix())
	return binary.AppendUvarint(dst, uint64(t.Nanosecond()))
}

// decoder reads a record; the first error sticks and later reads return zero
// values. Its errors wrap ErrCorrupt.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
	}
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("truncated record")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// fixed64 reads 8 big-endian bytes.
func (d *decoder) fixed64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail("truncated record")
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("truncated or invalid uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("truncated or invalid varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int {
	v := d.varint()
	if int64(int(v)) != v {
		d.fail("integer %d out of range", v)
		return 0
	}
	return int(v)
}

// bytes returns a length-prefixed byte string; it aliases the record.
func (d *decoder) bytes() []byte { return d.bytesMax(math.MaxInt) }

// bytesMax is bytes for a string of at most limit bytes.
func (d *decoder) bytesMax(limit int) []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(max(limit, 0)) {
		d.fail("field of %d bytes, more than %d", n, max(limit, 0))
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("length %d exceeds the %d bytes left", n, len(d.b))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string { return string(d.bytes()) }

// stamp reads a time written by appendTime, in UTC.
func (d *decoder) stamp() time.Time {
	switch d.byte() {
	case 0:
		return time.Time{}
	case 1:
	default:
		d.fail("bad time presence byte")
		return time.Time{}
	}
	sec := d.varint()
	nsec := d.uvarint()
	if d.err == nil && nsec >= 1e9 {
		d.fail("nanoseconds %d out of range", nsec)
	}
	if d.err != nil {
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

// finish reports the first error, or an error if bytes are left over.
func (d *decoder) finish() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	return d.err
}
