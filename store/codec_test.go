package store

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestDecoderRoundTrip: what appendBytes, appendTime and the binary
// package write, the decoder reads back; truncation, an overlong field, a bad
// time presence byte and trailing bytes are errors wrapping ErrCorrupt,
// and the first error sticks.
func TestDecoderRoundTrip(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("x", 3600))
	b := []byte{7}
	b = binary.BigEndian.AppendUint64(b, 1<<63|5)
	b = binary.AppendUvarint(b, 300)
	b = binary.AppendVarint(b, -42)
	b = appendBytes(b, []byte("hello"))
	b = appendBytes(b, nil)
	b = appendTime(b, at)
	b = appendTime(b, time.Time{})

	d := newTestDecoder(b)
	if v := d.byte(); v != 7 {
		t.Errorf("Byte = %d", v)
	}
	if v := d.fixed64(); v != 1<<63|5 {
		t.Errorf("Fixed64 = %x", v)
	}
	if v := d.uvarint(); v != 300 {
		t.Errorf("Uvarint = %d", v)
	}
	if v := d.varint(); v != -42 {
		t.Errorf("Varint = %d", v)
	}
	if v := d.bytesMax(5); string(v) != "hello" {
		t.Errorf("Bytes = %q", v)
	}
	if v := d.bytesMax(0); len(v) != 0 {
		t.Errorf("empty Bytes = %q", v)
	}
	if v := d.stamp(); !v.Equal(at) || v.Location() != time.UTC {
		t.Errorf("Time = %v, want %v in UTC", v, at)
	}
	if v := d.stamp(); !v.IsZero() {
		t.Errorf("zero Time = %v", v)
	}
	if err := d.finish(); err != nil {
		t.Fatalf("Finish: %v", err)
	}

	fails := map[string]func() error{
		"truncated": func() error {
			d := newTestDecoder(b[:5])
			d.byte()
			d.fixed64()
			return d.err
		},
		"overlong field": func() error {
			d := newTestDecoder(appendBytes(nil, []byte("hello")))
			if v := d.bytesMax(4); v != nil {
				t.Errorf("overlong Bytes = %q", v)
			}
			return d.err
		},
		"length beyond the input": func() error {
			d := newTestDecoder(binary.AppendUvarint(nil, 10))
			d.bytesMax(100)
			return d.err
		},
		"time presence byte 2": func() error {
			d := newTestDecoder(append([]byte{2}, appendTime(nil, at)[1:]...))
			if v := d.stamp(); !v.IsZero() {
				t.Errorf("Time with a bad presence byte = %v", v)
			}
			return d.err
		},
		"nanoseconds out of range": func() error {
			bad := binary.AppendVarint([]byte{1}, 1)
			d := newTestDecoder(binary.AppendUvarint(bad, 1e9))
			d.stamp()
			return d.err
		},
		"trailing bytes": func() error {
			d := newTestDecoder([]byte{1, 2})
			d.byte()
			return d.finish()
		},
		"Fail": func() error {
			d := newTestDecoder([]byte{1})
			d.fail("bad %s", "thing")
			if v := d.byte(); v != 0 {
				t.Errorf("Byte after Fail = %d, want 0", v)
			}
			return d.finish()
		},
	}
	for name, run := range fails {
		if err := run(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}

	// The first error sticks.
	d = newTestDecoder([]byte{})
	d.byte()
	first := d.err
	d.fail("later")
	d.uvarint()
	if d.err != first || !strings.Contains(first.Error(), "truncated") {
		t.Errorf("error after more failures = %v, want the first, %v", d.err, first)
	}
}

// newTestDecoder returns the record decoder over b.
func newTestDecoder(b []byte) *decoder { return &decoder{b: b} }
