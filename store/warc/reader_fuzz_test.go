package warc

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/internal/fuzzcorpus"
)

// uuidPattern matches a record ID's UUID URN.
var uuidPattern = regexp.MustCompile(`urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// maxFuzzRecords bounds the records read from one fuzz input.
const maxFuzzRecords = 256

// readRecords reads data to the end, the first error, or maxFuzzRecords
// records, checking what holds for every Reader: errors are io.EOF or
// wrap ErrMalformed or io.ErrUnexpectedEOF, and stick; a record has a
// WARC/ version and as many bytes of content as its Content-Length says.
func readRecords(t *testing.T, data []byte) ([]*Record, error) {
	t.Helper()
	r := NewReader(bytes.NewReader(data))
	var recs []*Record
	for len(recs) < maxFuzzRecords {
		rec, err := r.Next()
		if err != nil {
			if err != io.EOF && !errors.Is(err, ErrMalformed) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("error %v is neither EOF, malformed nor unexpected EOF", err)
			}
			if _, again := r.Next(); again != err {
				t.Fatalf("error not sticky: %v, then %v", err, again)
			}
			return recs, err
		}
		n, err := strconv.ParseInt(strings.TrimSpace(rec.Header.Get(hContentLength)), 10, 64)
		if !strings.HasPrefix(rec.Version, "WARC/") || err != nil || n != int64(len(rec.Content)) {
			t.Fatalf("record %q with Content-Length %q and %d bytes of content", rec.Version, rec.Header.Get(hContentLength), len(rec.Content))
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

// sameRecords fails unless got and want are the same records but for
// their offsets.
func sameRecords(t *testing.T, what string, got, want []*Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d records, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := *got[i], *want[i]
		g.Offset, w.Offset = 0, 0
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("%s: record %d is\n%+v\nwant\n%+v", what, i, g, w)
		}
	}
}

func gzipMember(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestSpeed)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// FuzzReader reads arbitrary bytes as a WARC file, as export does with the
// archive (and anyone with a WARC from elsewhere). Besides readRecords'
// checks, on input that is not gzip: the records hold no more content than
// the input has bytes, their offsets increase, and each record reads the
// same alone from its offset; the same bytes gzipped as one member, or
// one member per record (as the Writer writes them), read as the same
// records, the offsets then those of the members, and end the same way.
func FuzzReader(f *testing.F) {
	addReaderSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := readRecords(t, data)
		if len(data) == 0 || len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b || len(recs) == maxFuzzRecords {
			return // (an empty gzip member is an unexpected EOF, not an empty file)
		}
		total := 0
		for i, rec := range recs {
			total += len(rec.Content)
			if rec.Offset < 0 || rec.Offset >= int64(len(data)) || i > 0 && rec.Offset <= recs[i-1].Offset {
				t.Fatalf("record %d at offset %d (previous %d) in %d bytes", i, rec.Offset, recs[i-1].Offset, len(data))
			}
			alone, err := NewReader(bytes.NewReader(data[rec.Offset:])).Next()
			if err != nil {
				t.Fatalf("record %d does not read alone from offset %d: %v", i, rec.Offset, err)
			}
			sameRecords(t, fmt.Sprintf("record %d alone", i), []*Record{alone}, []*Record{rec})
		}
		if total > len(data) {
			t.Fatalf("%d bytes of content from %d bytes", total, len(data))
		}
		endsLike := func(got error) bool {
			return got == err || errors.Is(got, ErrMalformed) && errors.Is(err, ErrMalformed) ||
				errors.Is(got, io.ErrUnexpectedEOF) && errors.Is(err, io.ErrUnexpectedEOF)
		}
		member := gzipMember(t, data)
		got, gotErr := readRecords(t, member)
		sameRecords(t, "one gzip member", got, recs)
		if !endsLike(gotErr) {
			t.Fatalf("one gzip member ends with %v, uncompressed with %v", gotErr, err)
		}
		if err != io.EOF || len(recs) == 0 {
			return
		}
		var members []byte
		var offsets []int64
		for i, rec := range recs {
			end := int64(len(data))
			if i+1 < len(recs) {
				end = recs[i+1].Offset
			}
			offsets = append(offsets, int64(len(members)))
			members = append(members, gzipMember(t, data[rec.Offset:end])...)
		}
		got, gotErr = readRecords(t, members)
		sameRecords(t, "a member per record", got, recs)
		if gotErr != io.EOF {
			t.Fatalf("a member per record ends with %v", gotErr)
		}
		for i, rec := range got {
			if rec.Offset != offsets[i] {
				t.Fatalf("record %d at offset %d, its member at %d", i, rec.Offset, offsets[i])
			}
		}
	})
}

// readerSeeds are WARC files: the Writer's (as written, and decompressed),
// a WARC/1.0 file of another layout, and the broken ones TestReaderErrors
// reads.
func readerSeeds(tb testing.TB) map[string][]byte {
	dir := tb.TempDir()
	w, err := NewWriter(dir, Options{Now: fixedClock()})
	if err != nil {
		tb.Fatal(err)
	}
	ex := page("https://example.com/a?b=1", "some text")
	ex.Truncated = true
	for _, ex := range []Exchange{ex, {URL: "http://example.com/404", Date: fetchTime, Status: 404, Body: []byte("not found")}} {
		if err := w.WriteExchange(ex); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	paths, err := Files(dir, false)
	if err != nil || len(paths) != 1 {
		tb.Fatalf("files %v, %v", paths, err)
	}
	written, err := os.ReadFile(paths[0])
	if err != nil {
		tb.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(written))
	if err != nil {
		tb.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		tb.Fatal(err)
	}
	// Record IDs are random: number them, so that the corpus is the same
	// each time it is made, and gzip the records one member each, as the
	// Writer does.
	ids := map[string]string{}
	plain = uuidPattern.ReplaceAllFunc(plain, func(id []byte) []byte {
		if ids[string(id)] == "" {
			ids[string(id)] = fmt.Sprintf("urn:uuid:00000000-0000-4000-8000-%012d", len(ids)+1)
		}
		return []byte(ids[string(id)])
	})
	var members []byte
	r := NewReader(bytes.NewReader(plain))
	var offsets []int64
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			tb.Fatal(err)
		}
		offsets = append(offsets, rec.Offset)
	}
	for i, off := range offsets {
		end := int64(len(plain))
		if i+1 < len(offsets) {
			end = offsets[i+1]
		}
		members = append(members, gzipMember(tb, plain[off:end])...)
	}
	written = members
	rec := func(typ, content string) string {
		return fmt.Sprintf("WARC/1.0\r\nWARC-Type: %s\r\nWARC-Target-URI: <http://old.example/>\r\nWARC-Date: 2010-01-02T03:04:05Z\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n", typ, len(content), content)
	}
	return map[string][]byte{
		"writer-gzip":         written,
		"writer-plain":        plain,
		"warc-1.0":            []byte(rec("resource", "one") + "\r\n" + rec("metadata", "two")),
		"no-content-length":   []byte("WARC/1.1\r\nWARC-Type: resource\r\n\r\n\r\n\r\n"),
		"block-overruns":      []byte("WARC/1.1\r\nContent-Length: 3\r\n\r\nabcdef\r\n\r\n"),
		"huge-claimed-length": []byte("WARC/1.1\r\nContent-Length: 999999999999\r\n\r\nabc"),
	}
}

// addReaderSeeds gives a fuzz target of WARC bytes the reader's seeds:
// real files the Writer wrote, cut and damaged (readerSeeds); they are
// also its committed corpus (make fuzz-corpus).
func addReaderSeeds(f *testing.F) {
	seeds := readerSeeds(f)
	for _, s := range seeds {
		f.Add(s)
	}
	fuzzcorpus.Write(f, func() map[string][]any {
		out := map[string][]any{}
		for name, s := range seeds {
			out[name] = []any{s}
		}
		return out
	})
}
