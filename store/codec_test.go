package store

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestDecoderRoundTrip: what AppendBytes, AppendTime and the binary
// package write, Decoder reads back; truncation, an overlong field, a bad
// time presence byte and trailing bytes are errors wrapping ErrCorrupt,
// and the first error sticks.
func TestDecoderRoundTrip(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.FixedZone("x", 3600))
	b := []byte{7}
	b = binary.BigEndian.AppendUint64(b, 1<<63|5)
	b = binary.AppendUvarint(b, 300)
	b = binary.AppendVarint(b, -42)
	b = AppendBytes(b, []byte("hello"))
	b = AppendBytes(b, nil)
	b = AppendTime(b, at)
	b = AppendTime(b, time.Time{})

	d := NewDecoder(b)
	if v := d.Byte(); v != 7 {
		t.Errorf("Byte = %d", v)
	}
	if v := d.Fixed64(); v != 1<<63|5 {
		t.Errorf("Fixed64 = %x", v)
	}
	if v := d.Uvarint(); v != 300 {
		t.Errorf("Uvarint = %d", v)
	}
	if v := d.Varint(); v != -42 {
		t.Errorf("Varint = %d", v)
	}
	if v := d.Bytes(5); string(v) != "hello" {
		t.Errorf("Bytes = %q", v)
	}
	if v := d.Bytes(0); len(v) != 0 {
		t.Errorf("empty Bytes = %q", v)
	}
	if v := d.Time(); !v.Equal(at) || v.Location() != time.UTC {
		t.Errorf("Time = %v, want %v in UTC", v, at)
	}
	if v := d.Time(); !v.IsZero() {
		t.Errorf("zero Time = %v", v)
	}
	if err := d.Finish(); err != nil {
		t.Fatalf("Finish: %v", err)
	}

	fails := map[string]func() error{
		"truncated": func() error {
			d := NewDecoder(b[:5])
			d.Byte()
			d.Fixed64()
			return d.Err()
		},
		"overlong field": func() error {
			d := NewDecoder(AppendBytes(nil, []byte("hello")))
			if v := d.Bytes(4); v != nil {
				t.Errorf("overlong Bytes = %q", v)
			}
			return d.Err()
		},
		"length beyond the input": func() error {
			d := NewDecoder(binary.AppendUvarint(nil, 10))
			d.Bytes(100)
			return d.Err()
		},
		"time presence byte 2": func() error {
			d := NewDecoder(append([]byte{2}, AppendTime(nil, at)[1:]...))
			if v := d.Time(); !v.IsZero() {
				t.Errorf("Time with a bad presence byte = %v", v)
			}
			return d.Err()
		},
		"nanoseconds out of range": func() error {
			bad := binary.AppendVarint([]byte{1}, 1)
			d := NewDecoder(binary.AppendUvarint(bad, 1e9))
			d.Time()
			return d.Err()
		},
		"trailing bytes": func() error {
			d := NewDecoder([]byte{1, 2})
			d.Byte()
			return d.Finish()
		},
		"Fail": func() error {
			d := NewDecoder([]byte{1})
			d.Fail("bad %s", "thing")
			if v := d.Byte(); v != 0 {
				t.Errorf("Byte after Fail = %d, want 0", v)
			}
			return d.Finish()
		},
	}
	for name, run := range fails {
		if err := run(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v, want ErrCorrupt", name, err)
		}
	}

	// The first error sticks.
	d = NewDecoder([]byte{})
	d.Byte()
	first := d.Err()
	d.Fail("later")
	d.Uvarint()
	if d.Err() != first || !strings.Contains(first.Error(), "truncated") {
		t.Errorf("error after more failures = %v, want the first, %v", d.Err(), first)
	}
}
