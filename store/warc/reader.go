package warc

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/textproto"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrMalformed is wrapped by every error about input that is not a valid
// WARC record.
var ErrMalformed = errors.New("warc: malformed record")

// Record is one WARC record as read by a Reader.
type Record struct {
	// Version is the version line, e.g. "WARC/1.1".
	Version string
	// Type is WARC-Type: "warcinfo", "response", "request",
	// "conversion"...
	Type string
	// ID is WARC-Record-ID, e.g. "<urn:uuid:...>".
	ID string
	// TargetURI is WARC-Target-URI ("" for warcinfo).
	TargetURI string
	// RefersTo is WARC-Refers-To ("" if absent).
	RefersTo string
	// Date is WARC-Date (zero if absent or unreadable).
	Date time.Time
	// Header holds all named fields; look them up with Get, which ignores
	// case (Header.Get("WARC-Concurrent-To")).
	Header textproto.MIMEHeader
	// Content is the record block, Content-Length bytes.
	Content []byte
	// Offset is where the record starts in the input: the offset of its
	// gzip member in a compressed file.
	Offset int64
}

// Reader reads the records of a WARC file, compressed (one or more
// records per gzip member) or not.
type Reader struct {
	src *countingReader // the input; counts bytes consumed
	gz  *gzip.Reader
	br  *bufio.Reader // record bytes: the current member, or the input
	tp  *textproto.Reader

	started  bool
	gzipped  bool
	inMember bool  // br is reading a gzip member that may hold more records
	end      int64 // input offset after the last record, when it ended a member
	err      error // sticky
}

// NewReader returns a Reader of the WARC data in r.
func NewReader(r io.Reader) *Reader {
	return &Reader{src: &countingReader{r: bufio.NewReaderSize(r, 64<<10)}}
}

// Next returns the next record, or io.EOF after the last one. After an error
// every call returns the same error; errors about the data wrap
// ErrMalformed, and a file cut in the middle of a record yields one wrapping
// io.ErrUnexpectedEOF.
func (r *Reader) Next() (*Record, error) {
	if r.err != nil {
		return nil, r.err
	}
	rec, err := r.next()
	if err != nil {
		r.err = err
		return nil, err
	}
	return rec, nil
}

func (r *Reader) next() (*Record, error) {
	if !r.started {
		r.started = true
		magic, err := r.src.r.Peek(2)
		if len(magic) == 0 && err != nil {
			if err == io.EOF {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("warc: read: %w", err)
		}
		r.gzipped = len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b
		if !r.gzipped {
			r.br = bufio.NewReaderSize(r.src, 64<<10)
			r.tp = textproto.NewReader(r.br)
		}
	}
	offset := r.src.n
	if r.gzipped {
		if !r.inMember {
			if err := r.startMember(); err != nil {
				return nil, err
			}
		} else {
			offset = r.end // records after the first of a member share its offset
		}
	} else {
		offset -= int64(r.br.Buffered())
		if _, err := r.br.Peek(1); err == io.EOF {
			return nil, io.EOF
		}
	}
	rec, err := r.readRecord()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("warc: record at offset %d: %w", offset, err)
	}
	rec.Offset = offset
	if r.gzipped {
		// Finish the member now, so that its checksum is verified and
		// the offset of the next one is known.
		if _, err := r.br.Peek(1); err == io.EOF {
			r.inMember = false
			r.end = r.src.n
		} else if err != nil {
			return nil, fmt.Errorf("warc: record at offset %d: %w", offset, gzipErr(err))
		} else {
			r.end = offset
		}
	}
	return rec, nil
}

// startMember begins the next gzip member, or returns io.EOF at the end.
func (r *Reader) startMember() error {
	start := r.src.n
	var err error
	if r.gz == nil {
		r.gz, err = gzip.NewReader(r.src)
	} else {
		err = r.gz.Reset(r.src)
	}
	if err == io.EOF && r.src.n == start {
		return io.EOF
	}
	if err != nil {
		return fmt.Errorf("warc: gzip member at offset %d: %w", start, gzipErr(err))
	}
	r.gz.Multistream(false)
	if r.br == nil {
		r.br = bufio.NewReaderSize(r.gz, 64<<10)
		r.tp = textproto.NewReader(r.br)
	} else {
		r.br.Reset(r.gz)
	}
	r.inMember = true
	return nil
}

// gzipErr classifies an error of the gzip layer.
func gzipErr(err error) error {
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return io.ErrUnexpectedEOF
	case errors.Is(err, gzip.ErrChecksum), errors.Is(err, gzip.ErrHeader):
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	default:
		var ce flate.CorruptInputError
		if errors.As(err, &ce) {
			return fmt.Errorf("%w: %w", ErrMalformed, err)
		}
		return err
	}
}

// readRecord reads one record from br.
func (r *Reader) readRecord() (*Record, error) {
	var version string
	for version == "" { // tolerate blank lines between records
		line, err := r.tp.ReadLine()
		if err != nil {
			return nil, gzipErr(err)
		}
		version = strings.TrimSpace(line)
	}
	if !strings.HasPrefix(version, "WARC/") {
		return nil, fmt.Errorf("%w: version line %.40q", ErrMalformed, version)
	}
	hdr, err := r.tp.ReadMIMEHeader()
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, gzipErr(err)
		}
		return nil, fmt.Errorf("%w: header: %w", ErrMalformed, err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(hdr.Get(hContentLength)), 10, 64)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("%w: Content-Length %q", ErrMalformed, hdr.Get(hContentLength))
	}
	// Grow with the data actually read, not with what the header claims.
	var content bytes.Buffer
	if m, err := io.CopyN(&content, r.br, n); err != nil {
		return nil, fmt.Errorf("block of %d bytes, got %d: %w", n, m, gzipErr(err))
	}
	for range 2 { // the record ends with CRLF CRLF
		line, err := r.br.ReadSlice('\n')
		if err != nil {
			return nil, fmt.Errorf("end of record: %w", gzipErr(err))
		}
		if len(bytes.TrimRight(line, "\r\n")) != 0 {
			return nil, fmt.Errorf("%w: %d bytes after the block of %d bytes", ErrMalformed, len(line), n)
		}
	}
	rec := &Record{
		Version:   version,
		Type:      hdr.Get(hType),
		ID:        hdr.Get(hRecordID),
		TargetURI: strings.Trim(hdr.Get(hTargetURI), "<>"), // WARC 1.0 writers bracket it
		RefersTo:  hdr.Get(hRefersTo),
		Header:    hdr,
		Content:   content.Bytes(),
	}
	rec.Date, _ = parseDate(hdr.Get(hDate))
	return rec, nil
}

// parseDate reads a WARC-Date, which may be given to any precision.
func parseDate(s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02", "2006-01", "2006"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%w: WARC-Date %q", ErrMalformed, s)
}

// countingReader counts the bytes read through it. It is an io.ByteReader
// so that the gzip reader reads exactly to the end of each member and no
// further, which makes member offsets exact.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// Files returns the paths of the WARC files in dir (names ending in .warc.gz
// or .warc), sorted by name, which for a Writer's files is the order they
// were written in. With includeOpen it also returns files still being
// written (ending in .open), in the same order as if they were complete.
func Files(dir string, includeOpen bool) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("warc: list %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() {
			continue
		}
		base := strings.TrimSuffix(name, openSuffix)
		if base != name && !includeOpen {
			continue
		}
		if strings.HasSuffix(base, ".warc.gz") || strings.HasSuffix(base, ".warc") {
			names = append(names, name)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		return strings.Compare(strings.TrimSuffix(a, openSuffix), strings.TrimSuffix(b, openSuffix))
	})
	paths := make([]string, len(names))
	for i, name := range names {
		paths[i] = filepath.Join(dir, name)
	}
	return paths, nil
}
