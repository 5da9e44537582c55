package warc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed is returned by writes to a closed Writer.
var ErrClosed = errors.New("warc: writer closed")

// openSuffix marks a file that is still being written.
const openSuffix = ".open"

// Options configures a Writer. Zero fields take their defaults.
type Options struct {
	// MaxFileBytes is the size after which a file is complete and the next
	// exchange starts a new one. A file holds at most this much plus one
	// exchange. Default 1 GiB, the size the specification suggests.
	MaxFileBytes int64
	// Prefix starts every file name. It may not contain a path separator.
	// Default "swarmcrawl".
	Prefix string
	// Software is named in each file's warcinfo record. Default
	// "swarmcrawl".
	Software string
	// Now is the clock for file names, warcinfo dates and exchanges
	// without a Date. Default time.Now.
	Now func() time.Time
}

// DefaultOptions returns the defaults noted on Options' fields.
func DefaultOptions() Options {
	return Options{MaxFileBytes: 1 << 30, Prefix: "swarmcrawl", Software: "swarmcrawl", Now: time.Now}
}

// withDefaults fills the zero fields of o from DefaultOptions and checks
// the rest.
func (o Options) withDefaults() (Options, error) {
	d := DefaultOptions()
	if o.MaxFileBytes == 0 {
		o.MaxFileBytes = d.MaxFileBytes
	}
	if o.MaxFileBytes < 0 {
		return o, fmt.Errorf("warc: negative MaxFileBytes %d", o.MaxFileBytes)
	}
	if o.Prefix == "" {
		o.Prefix = d.Prefix
	}
	if strings.ContainsAny(o.Prefix, `/\`) || o.Prefix == "." || o.Prefix == ".." {
		return o, fmt.Errorf("warc: file prefix %q is not a plain name", o.Prefix)
	}
	if o.Software == "" {
		o.Software = d.Software
	}
	if o.Now == nil {
		o.Now = d.Now
	}
	return o, nil
}

// Writer appends exchanges to the WARC files of a directory, rotating them
// by size. It is safe for concurrent use: the records of an exchange are
// built and compressed by the calling goroutine and then appended to the
// current file in one write, so exchanges never interleave. Only one
// Writer may use a directory and prefix at a time.
type Writer struct {
	dir  string
	opts Options

	mu     sync.Mutex
	f      *os.File // current file, nil until the next write
	name   string   // final path of f (without openSuffix)
	size   int64    // bytes in f
	seq    int      // sequence number of the next file
	closed bool

	// idx is the CDXJ index of f being written (nil when it could not
	// be: readers then build it from the file), idxFile its file.
	idx     *bufio.Writer
	idxFile *os.File
	line    []byte // scratch for index lines

	written atomic.Int64 // compressed bytes written to every file
}

// BytesWritten is how many (compressed) bytes the Writer wrote to its
// files since it was made.
func (w *Writer) BytesWritten() int64 { return w.written.Load() }

// NewWriter returns a Writer for dir, creating dir if needed. The first
// file is created by the first write.
//
// A directory that a crashed Writer left .open files of the same prefix in
// is repaired first: each such file is cut after its last complete record
// (a partial record at the end is what a crash leaves) and renamed to its
// final name; a file without a complete record is removed. Records after
// damage inside a file, which a crash does not cause, are dropped with it.
func NewWriter(dir string, opts Options) (*Writer, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("warc: create %s: %w", dir, err)
	}
	stale, err := filepath.Glob(filepath.Join(globEscape(dir), globEscape(opts.Prefix)+"-*.warc.gz"+openSuffix))
	if err != nil {
		return nil, fmt.Errorf("warc: list %s: %w", dir, err)
	}
	for _, p := range stale {
		if err := recoverOpenFile(p); err != nil {
			return nil, err
		}
	}
	// Indexes of files that recovery removed, or left by a crash between
	// the index's rename and its file's.
	staleIdx, err := filepath.Glob(filepath.Join(globEscape(dir), globEscape(opts.Prefix)+"-*.warc.gz"+IndexSuffix+openSuffix))
	if err != nil {
		return nil, fmt.Errorf("warc: list %s: %w", dir, err)
	}
	tmpIdx, err := filepath.Glob(filepath.Join(globEscape(dir), globEscape(opts.Prefix)+"-*.warc.gz"+IndexSuffix+".tmp"))
	if err != nil {
		return nil, fmt.Errorf("warc: list %s: %w", dir, err)
	}
	for _, p := range append(staleIdx, tmpIdx...) {
		if err := os.Remove(p); err != nil {
			return nil, fmt.Errorf("warc: remove stale index: %w", err)
		}
	}
	return &Writer{dir: dir, opts: opts}, nil
}

// globEscape quotes the glob metacharacters of a literal path.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// WriteExchange appends the records of one fetch (see the package
// documentation) to the current file, starting a new file first if there is
// none. A failed write is cut off again, so the file never keeps a partial
// exchange from this process.
func (w *Writer) WriteExchange(ex Exchange) error {
	_, err := w.WriteExchangeAt(ex)
	return err
}

// WriteExchangeAt is WriteExchange, and returns where the exchange's
// records are, for ReadExchange.
func (w *Writer) WriteExchangeAt(ex Exchange) (Location, error) {
	loc, err := w.writeExchange(ex)
	return loc, err
}

func (w *Writer) writeExchange(ex Exchange) (Location, error) {
	if ex.URL == "" {
		return Location{}, errors.New("warc: write exchange: empty URL")
	}
	if ex.Date.IsZero() {
		ex.Date = w.opts.Now()
	}
	buf := getBuffer()
	defer putBuffer(buf)
	var idx exchangeIndex
	if err := encodeExchange(buf, &ex, &idx); err != nil {
		return Location{}, fmt.Errorf("warc: write exchange %s: %w", ex.URL, err)
	}
	// The index entries but for their offsets and file name.
	resp := CDXJEntry{Key: SURT(ex.URL), Timestamp: ex.Date.UTC().Format("20060102150405"), URL: oneLine(ex.URL),
		MIME: responseMIME(ex.ResponseHeader), Digest: idx.respDigest, Length: int64(idx.respEnd - idx.respStart)}
	if ex.Status >= 100 && ex.Status <= 999 {
		resp.Status = strconv.Itoa(ex.Status)
	}
	conv := resp
	conv.MIME, conv.Status, conv.Digest, conv.Length = conversionType, "", idx.convDigest, int64(idx.convEnd-idx.convStart)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return Location{}, ErrClosed
	}
	if w.f == nil {
		if err := w.openFile(); err != nil {
			return Location{}, fmt.Errorf("warc: write exchange %s: %w", ex.URL, err)
		}
	}
	base := w.size
	loc := Location{File: filepath.Base(w.name), Offset: base, Length: int64(buf.Len())}
	if err := w.append(buf.Bytes()); err != nil {
		return Location{}, fmt.Errorf("warc: write exchange %s: %w", ex.URL, err)
	}
	if w.idx != nil {
		name := filepath.Base(w.name)
		resp.Offset, resp.Filename = base+int64(idx.respStart), name
		w.line = resp.AppendLine(w.line[:0])
		if idx.convEnd > 0 {
			conv.Offset, conv.Filename = base+int64(idx.convStart), name
			w.line = conv.AppendLine(w.line)
		}
		if _, err := w.idx.Write(w.line); err != nil {
			w.dropIndex()
		}
	}
	if w.size >= w.opts.MaxFileBytes {
		return loc, w.finish()
	}
	return loc, nil
}

// append writes b at the end of the current file; on failure it truncates
// what was written of b. Called with mu held.
func (w *Writer) append(b []byte) error {
	n, err := w.f.Write(b)
	if err == nil {
		w.size += int64(n)
		w.written.Add(int64(n))
		return nil
	}
	if n > 0 {
		if terr := w.f.Truncate(w.size); terr != nil {
			return errors.Join(err, fmt.Errorf("cut partial write: %w", terr))
		}
		if _, serr := w.f.Seek(w.size, 0); serr != nil {
			return errors.Join(err, serr)
		}
	}
	return err
}

// openFile creates the next file and writes its warcinfo record. Called with
// mu held.
func (w *Writer) openFile() error {
	now := w.opts.Now().UTC()
	stamp := fmt.Sprintf("%s%03d", now.Format("20060102150405"), now.Nanosecond()/1e6)
	for {
		base := fmt.Sprintf("%s-%s-%05d.warc.gz", w.opts.Prefix, stamp, w.seq)
		w.seq++
		final := filepath.Join(w.dir, base)
		if _, err := os.Lstat(final); err == nil {
			continue // a file of an earlier Writer, same millisecond
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("create %s: %w", base, err)
		}
		f, err := os.OpenFile(final+openSuffix, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", base, err)
		}
		buf := getBuffer()
		defer putBuffer(buf)
		if err := encodeWarcinfo(buf, base, now, w.opts.Software); err != nil {
			f.Close()
			os.Remove(final + openSuffix)
			return err
		}
		w.f, w.name, w.size = f, final, 0
		if err := w.append(buf.Bytes()); err != nil {
			f.Close()
			os.Remove(final + openSuffix)
			w.f = nil
			return fmt.Errorf("write warcinfo of %s: %w", base, err)
		}
		// The index is derived data: without one, readers build it from
		// the file (BuildIndex), so failing to create it fails no write.
		if xf, err := os.OpenFile(final+IndexSuffix+openSuffix, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644); err == nil {
			w.idxFile, w.idx = xf, bufio.NewWriterSize(xf, 32<<10)
		}
		return nil
	}
}

// dropIndex gives up the index of the current file after a failed write:
// readers will build it from the file. Called with mu held.
func (w *Writer) dropIndex() {
	if w.idxFile == nil {
		return
	}
	w.idxFile.Close()
	os.Remove(w.idxFile.Name())
	w.idx, w.idxFile = nil, nil
}

// finishIndex makes the current file's index durable and gives it its
// final name, before the file gets its own: an index without the .open
// suffix is complete when its file is. Called with mu held.
func (w *Writer) finishIndex() {
	if w.idxFile == nil {
		return
	}
	errFlush := w.idx.Flush()
	errSync := w.idxFile.Sync()
	errClose := w.idxFile.Close()
	if errFlush != nil || errSync != nil || errClose != nil {
		os.Remove(w.idxFile.Name())
	} else if err := os.Rename(w.idxFile.Name(), w.name+IndexSuffix); err != nil {
		os.Remove(w.idxFile.Name())
	}
	w.idx, w.idxFile = nil, nil
}

// finish makes the current file durable and gives it its final name.
// Called with mu held; afterwards there is no current file.
func (w *Writer) finish() error {
	w.finishIndex()
	f, name := w.f, w.name
	w.f, w.name, w.size = nil, "", 0
	errSync := f.Sync()
	errClose := f.Close()
	if err := errors.Join(errSync, errClose); err != nil {
		return fmt.Errorf("warc: complete %s: %w", filepath.Base(name), err)
	}
	if err := os.Rename(name+openSuffix, name); err != nil {
		return fmt.Errorf("warc: complete %s: %w", filepath.Base(name), err)
	}
	syncDir(w.dir)
	return nil
}

// syncDir makes a rename in dir durable where the platform allows it.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync() // best effort: not every file system syncs directories
		d.Close()
	}
}

// Flush makes everything written so far durable (fsync). Records reach the
// file on every WriteExchange already; Flush only guards them against a
// machine crash.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	if w.f == nil {
		return nil
	}
	if w.idx != nil && w.idx.Flush() != nil {
		w.dropIndex()
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("warc: flush %s: %w", filepath.Base(w.name), err)
	}
	return nil
}

// Close completes the current file (see the package documentation). It is
// safe to call more than once; later calls return nil.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if w.f == nil {
		return nil
	}
	return w.finish()
}

// responseMIME returns the media type of a response's Content-Type as
// its record holds it and warcio reads it back: the values joined, control
// characters made spaces, the parameters dropped.
func responseMIME(h http.Header) string {
	vs := h.Values("Content-Type")
	if len(vs) == 0 {
		return ""
	}
	return mimeOf(oneLine(strings.Join(vs, ", ")))
}

// oneLine returns s as appendOneLine writes it into a header.
func oneLine(s string) string {
	for i := 0; i < len(s); i++ {
		if isCtl(rune(s[i])) {
			return string(appendOneLine(nil, s))
		}
	}
	return s
}

// buffers holds the scratch buffers exchanges are encoded into.
var buffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getBuffer() *bytes.Buffer {
	b := buffers.Get().(*bytes.Buffer)
	b.Reset()
	return b
}

func putBuffer(b *bytes.Buffer) {
	if b.Cap() <= 4<<20 { // do not pin the buffer of a rare huge page
		buffers.Put(b)
	}
}
