package store

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"
)

// recordVersion1 is the only record format version written so far.
const recordVersion1 = 1

// Body codecs of a page record.
const (
	codecRaw     = 0
	codecDeflate = 1
)

// maxDeflateRatio bounds the expansion of DEFLATE data (the format cannot
// expand by more than about 1032:1); a record that claims a larger ratio is
// corrupt, and checking this avoids allocating absurd buffers for it.
const maxDeflateRatio = 1100

// flateWriters compress page bodies at BestSpeed: bodies are compressed on
// the fetch path, and the default level cost a third of a node's CPU for
// records only slightly smaller.
var flateWriters = sync.Pool{New: func() any {
	w, err := flate.NewWriter(nil, flate.BestSpeed)
	if err != nil { // only for an invalid level
		panic(err)
	}
	return w
}}

var flateReaders = sync.Pool{New: func() any {
	return flate.NewReader(bytes.NewReader(nil))
}}

// encodeSeen appends the version 1 seen record of e to dst.
func encodeSeen(dst []byte, e *SeenEntry) []byte {
	dst = append(dst, recordVersion1)
	dst = binary.AppendVarint(dst, int64(e.Depth))
	return appendString(dst, e.URL)
}

// decodeSeen decodes a seen record into e (whose Key and URLHash the caller
// fills in from the leveldb key).
func decodeSeen(v []byte, e *SeenEntry) error {
	d := decoder{b: v}
	if ver := d.byte(); d.err == nil && ver != recordVersion1 {
		return fmt.Errorf("%w: unknown seen record version %d", ErrCorrupt, ver)
	}
	e.Depth = d.int()
	e.URL = d.str()
	return d.finish()
}

// compressBody returns the codec and payload under which body is stored.
func compressBody(body []byte) (byte, []byte, error) {
	if len(body) < 64 { // not worth it
		return codecRaw, body, nil
	}
	var buf bytes.Buffer
	buf.Grow(len(body) / 3)
	w := flateWriters.Get().(*flate.Writer)
	defer flateWriters.Put(w)
	w.Reset(&buf)
	if _, err := w.Write(body); err != nil {
		return 0, nil, fmt.Errorf("store: compress body: %w", err)
	}
	if err := w.Close(); err != nil {
		return 0, nil, fmt.Errorf("store: compress body: %w", err)
	}
	if buf.Len() >= len(body) {
		return codecRaw, body, nil
	}
	return codecDeflate, buf.Bytes(), nil
}

// encodePage returns the version 1 page record of p. Key and URLHash are not
// part of the record (they are the leveldb key).
func encodePage(p *Page) ([]byte, error) {
	codec, payload, err := compressBody(p.Body)
	if err != nil {
		return nil, err
	}
	n := 64 + len(p.URL) + len(p.FinalURL) + len(p.ContentType) + len(payload)
	for name, vals := range p.Header {
		n += len(name) + 4
		for _, v := range vals {
			n += len(v) + 2
		}
	}
	dst := make([]byte, 0, n)
	dst = append(dst, recordVersion1)
	dst = appendString(dst, p.URL)
	dst = appendString(dst, p.FinalURL)
	dst = binary.AppendVarint(dst, int64(p.Status))
	dst = appendString(dst, p.ContentType)
	names := make([]string, 0, len(p.Header))
	for name := range p.Header {
		names = append(names, name)
	}
	slices.Sort(names)
	dst = binary.AppendUvarint(dst, uint64(len(names)))
	for _, name := range names {
		dst = appendString(dst, name)
		vals := p.Header[name]
		dst = binary.AppendUvarint(dst, uint64(len(vals)))
		for _, v := range vals {
			dst = appendString(dst, v)
		}
	}
	dst = binary.AppendVarint(dst, p.FetchedAt.Unix())
	dst = binary.AppendUvarint(dst, uint64(p.FetchedAt.Nanosecond()))
	dst = binary.AppendVarint(dst, int64(p.Duration))
	dst = binary.AppendVarint(dst, int64(p.Depth))
	dst = binary.AppendVarint(dst, int64(p.Links))
	dst = append(dst, codec)
	dst = binary.AppendUvarint(dst, uint64(len(p.Body)))
	dst = appendBytes(dst, payload)
	return dst, nil
}

// decodePage decodes a page record into p (whose Key and URLHash the caller
// fills in from the leveldb key). p.Body never aliases v.
func decodePage(v []byte, p *Page) error {
	d := decoder{b: v}
	if ver := d.byte(); d.err == nil && ver != recordVersion1 {
		return fmt.Errorf("%w: unknown page record version %d", ErrCorrupt, ver)
	}
	p.URL = d.str()
	p.FinalURL = d.str()
	p.Status = d.int()
	p.ContentType = d.str()
	if n := d.uvarint(); n > 0 && d.err == nil {
		if n > uint64(len(d.b)/2) { // every name takes at least 2 bytes
			d.fail("header count %d exceeds record size", n)
		} else {
			p.Header = make(http.Header, n)
			for i := uint64(0); i < n && d.err == nil; i++ {
				name := d.str()
				nv := d.uvarint()
				if nv > uint64(len(d.b)) { // every value takes at least 1 byte
					d.fail("header value count %d exceeds record size", nv)
					break
				}
				vals := make([]string, 0, nv)
				for j := uint64(0); j < nv && d.err == nil; j++ {
					vals = append(vals, d.str())
				}
				p.Header[name] = vals
			}
		}
	}
	sec := d.varint()
	nsec := d.uvarint()
	if d.err == nil && nsec >= 1e9 {
		d.fail("nanoseconds %d out of range", nsec)
	}
	if d.err == nil {
		p.FetchedAt = time.Unix(sec, int64(nsec)).UTC()
	}
	p.Duration = time.Duration(d.varint())
	p.Depth = d.int()
	p.Links = d.int()
	codec := d.byte()
	rawLen := d.uvarint()
	payload := d.bytes()
	if err := d.finish(); err != nil {
		return err
	}
	switch codec {
	case codecRaw:
		if uint64(len(payload)) != rawLen {
			return fmt.Errorf("%w: raw body is %d bytes, record says %d", ErrCorrupt, len(payload), rawLen)
		}
		if rawLen > 0 {
			p.Body = bytes.Clone(payload)
		}
	case codecDeflate:
		body, err := inflate(payload, rawLen)
		if err != nil {
			return err
		}
		p.Body = body
	default:
		return fmt.Errorf("%w: unknown body codec %d", ErrCorrupt, codec)
	}
	return nil
}

// inflate decompresses a DEFLATE payload that must expand to exactly rawLen
// bytes.
func inflate(payload []byte, rawLen uint64) ([]byte, error) {
	if rawLen > uint64(len(payload))*maxDeflateRatio+64 || rawLen > math.MaxInt32 {
		return nil, fmt.Errorf("%w: compressed body of %d bytes cannot expand to %d", ErrCorrupt, len(payload), rawLen)
	}
	r := flateReaders.Get().(io.ReadCloser)
	defer flateReaders.Put(r)
	if err := r.(flate.Resetter).Reset(bytes.NewReader(payload), nil); err != nil {
		return nil, fmt.Errorf("%w: body: %v", ErrCorrupt, err)
	}
	body := make([]byte, rawLen)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, fmt.Errorf("%w: body: decompress: %v", ErrCorrupt, err)
	}
	// The stream must end exactly here.
	var one [1]byte
	if n, err := r.Read(one[:]); n != 0 || (err != nil && err != io.EOF) {
		if err == nil {
			err = errors.New("longer than recorded length")
		}
		return nil, fmt.Errorf("%w: body: decompress: %v", ErrCorrupt, err)
	}
	return body, nil
}
