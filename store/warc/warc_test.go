package warc

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

var fetchTime = time.Date(2025, 3, 14, 15, 9, 26, 535_000_000, time.UTC)

// fixedClock returns a clock that advances by a millisecond per call.
func fixedClock() func() time.Time {
	var mu sync.Mutex
	t := fetchTime
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Millisecond)
		return t
	}
}

func newTestWriter(t *testing.T, dir string, opts Options) *Writer {
	t.Helper()
	if opts.Now == nil {
		opts.Now = fixedClock()
	}
	w, err := NewWriter(dir, opts)
	if err != nil {
		t.Fatalf("NewWriter: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func gzipBytes(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// page returns a typical HTML exchange.
func page(url, text string) Exchange {
	return Exchange{
		URL:            url,
		Date:           fetchTime,
		RemoteAddr:     "192.0.2.7:443",
		RequestHeader:  http.Header{"User-Agent": {"swarmcrawl/test"}, "Accept-Encoding": {"gzip, deflate"}},
		Proto:          "HTTP/1.1",
		Status:         200,
		ResponseHeader: http.Header{"Content-Type": {"text/html; charset=utf-8"}},
		Body:           []byte("<html><title>T</title><p>" + text + "</p></html>"),
		Title:          "T",
		Text:           text,
		Simhash:        0x0123456789abcdef,
	}
}

// readAll returns every record of the files, failing the test on error.
func readAll(t *testing.T, paths ...string) []*Record {
	t.Helper()
	var recs []*Record
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		r := NewReader(f)
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				f.Close()
				t.Fatalf("read %s: %v", filepath.Base(p), err)
			}
			recs = append(recs, rec)
		}
		f.Close()
	}
	return recs
}

func files(t *testing.T, dir string, includeOpen bool) []string {
	t.Helper()
	fs, err := Files(dir, includeOpen)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

var recordIDPattern = regexp.MustCompile(`^<urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}>$`)

// sha1Base32 is an independent computation of a WARC digest.
func sha1Base32(b []byte) string {
	sum := sha1.Sum(b)
	return "sha1:" + base32.StdEncoding.EncodeToString(sum[:])
}

// checkDigests verifies a record's block and payload digests.
func checkDigests(t *testing.T, rec *Record) {
	t.Helper()
	if got, want := rec.Header.Get("WARC-Block-Digest"), sha1Base32(rec.Content); got != want {
		t.Errorf("%s %s: block digest %s, content hashes to %s", rec.Type, rec.TargetURI, got, want)
	}
	pd := rec.Header.Get("WARC-Payload-Digest")
	switch rec.Type {
	case "response":
		_, body, ok := bytes.Cut(rec.Content, []byte("\r\n\r\n"))
		if !ok {
			t.Fatalf("response block has no end of headers")
		}
		if want := sha1Base32(body); pd != want {
			t.Errorf("response %s: payload digest %s, body hashes to %s", rec.TargetURI, pd, want)
		}
	case "conversion":
		if want := sha1Base32(rec.Content); pd != want {
			t.Errorf("conversion %s: payload digest %s, text hashes to %s", rec.TargetURI, pd, want)
		}
	}
}

func TestWriteExchangeRecords(t *testing.T) {
	dir := t.TempDir()
	w := newTestWriter(t, dir, Options{Software: "swarmcrawl/test"})
	gz := gzipBytes(t, "<p>compressed page</p>")
	exchanges := []Exchange{
		page("https://example.com/a?q=1", "Hello\nworld"),
		{
			URL:            "http://[2001:db8::1]:8080/gz",
			Date:           fetchTime.Add(time.Second),
			RemoteAddr:     "[2001:db8::1]:8080",
			Method:         "GET",
			Proto:          "HTTP/2.0",
			Status:         200,
			ResponseHeader: http.Header{"Content-Encoding": {"gzip"}, "Transfer-Encoding": {"chunked"}, "Set-Cookie": {"a=1", "b=2"}},
			Body:           gz,
		},
		{
			URL:            "https://example.com/big.bin",
			Status:         206,
			ResponseHeader: http.Header{"Content-Type": {"application/octet-stream"}, "Content-Length": {"99999"}},
			Body:           []byte{0, 1, 2, 0xff, '\r', '\n', '\r', '\n', 0},
			Truncated:      true,
		},
		{URL: "https://example.com/missing", Status: 404, Text: "Not found", Title: "Ünïcode\r\nWARC-Type: injected"},
	}
	// A header name that is not an HTTP token would break the message.
	exchanges[0].RequestHeader["Bad Name"] = []string{"x"}
	exchanges[0].RequestHeader[""] = []string{"y"}
	for _, ex := range exchanges {
		if err := w.WriteExchange(ex); err != nil {
			t.Fatalf("WriteExchange(%s): %v", ex.URL, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	paths := files(t, dir, true)
	if len(paths) != 1 || strings.HasSuffix(paths[0], openSuffix) {
		t.Fatalf("files after Close: %v", paths)
	}
	if !regexp.MustCompile(`^swarmcrawl-\d{17}-00000\.warc\.gz$`).MatchString(filepath.Base(paths[0])) {
		t.Errorf("file name %s", filepath.Base(paths[0]))
	}
	recs := readAll(t, paths...)

	var types []string
	ids := map[string]bool{}
	for _, r := range recs {
		types = append(types, r.Type)
		if r.Version != "WARC/1.1" {
			t.Errorf("version %q", r.Version)
		}
		if !recordIDPattern.MatchString(r.ID) || ids[r.ID] {
			t.Errorf("record ID %q is malformed or repeated", r.ID)
		}
		ids[r.ID] = true
		checkDigests(t, r)
	}
	want := "warcinfo response request conversion response request response request response request conversion"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("record types:\n got %s\nwant %s", got, want)
	}

	info := recs[0]
	if info.Header.Get("Content-Type") != "application/warc-fields" || info.Header.Get("WARC-Filename") != filepath.Base(paths[0]) ||
		!bytes.Contains(info.Content, []byte("software: swarmcrawl/test\r\n")) || !info.Date.Equal(fetchTime.Add(time.Millisecond).Truncate(time.Second)) {
		t.Errorf("warcinfo: %v\n%s", info.Header, info.Content)
	}

	// First exchange: a page with text.
	resp, req, conv := recs[1], recs[2], recs[3]
	for _, r := range []*Record{resp, req, conv} {
		if r.TargetURI != "https://example.com/a?q=1" || !r.Date.Equal(fetchTime.Truncate(time.Second)) {
			t.Errorf("%s: target %q date %v", r.Type, r.TargetURI, r.Date)
		}
	}
	if resp.Header.Get("WARC-Concurrent-To") != req.ID || req.Header.Get("WARC-Concurrent-To") != resp.ID {
		t.Error("request and response do not name each other in WARC-Concurrent-To")
	}
	if conv.RefersTo != resp.ID {
		t.Errorf("conversion refers to %q, want the response %q", conv.RefersTo, resp.ID)
	}
	if resp.Header.Get("WARC-IP-Address") != "192.0.2.7" || req.Header.Get("WARC-IP-Address") != "192.0.2.7" {
		t.Errorf("WARC-IP-Address %q / %q", resp.Header.Get("WARC-IP-Address"), req.Header.Get("WARC-IP-Address"))
	}
	if resp.Header.Get("Content-Type") != "application/http;msgtype=response" || req.Header.Get("Content-Type") != "application/http;msgtype=request" {
		t.Error("wrong HTTP record content types")
	}
	hr, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(resp.Content)), nil)
	if err != nil {
		t.Fatalf("response block is not an HTTP response: %v", err)
	}
	body, _ := io.ReadAll(hr.Body)
	if hr.StatusCode != 200 || hr.Header.Get("Content-Type") != "text/html; charset=utf-8" || string(body) != string(exchanges[0].Body) {
		t.Errorf("HTTP response: %d %v %q", hr.StatusCode, hr.Header, body)
	}
	hq, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(req.Content)))
	if err != nil {
		t.Fatalf("request block is not an HTTP request: %v", err)
	}
	if hq.Method != "GET" || hq.RequestURI != "/a?q=1" || hq.Host != "example.com" || hq.UserAgent() != "swarmcrawl/test" ||
		hq.Header.Get("Accept-Encoding") != "gzip, deflate" {
		t.Errorf("HTTP request: %s %s host %q %v", hq.Method, hq.RequestURI, hq.Host, hq.Header)
	}
	if string(conv.Content) != "Hello\nworld" || conv.Header.Get("Content-Type") != "text/plain; charset=utf-8" ||
		conv.Header.Get("WARC-Title") != "T" || conv.Header.Get("WARC-Simhash") != "0123456789abcdef" {
		t.Errorf("conversion: %v %q", conv.Header, conv.Content)
	}

	// Second: gzip-coded body kept as received, chunking dropped, IPv6.
	resp = recs[4]
	if !bytes.HasPrefix(resp.Content, []byte("HTTP/2.0 200 OK\r\n")) {
		t.Errorf("status line: %q", resp.Content[:20])
	}
	if bytes.Contains(resp.Content, []byte("Transfer-Encoding")) {
		t.Error("Transfer-Encoding written for a de-chunked body")
	}
	if !bytes.HasSuffix(resp.Content, gz) || !bytes.Contains(resp.Content, []byte("Content-Encoding: gzip\r\n")) ||
		!bytes.Contains(resp.Content, []byte("Set-Cookie: a=1\r\nSet-Cookie: b=2\r\n")) {
		t.Errorf("gzip response block: %q", resp.Content)
	}
	if ip := resp.Header.Get("WARC-IP-Address"); ip != "2001:db8::1" {
		t.Errorf("IPv6 address %q", ip)
	}
	if resp.Header.Get("WARC-Truncated") != "" {
		t.Error("untruncated body marked truncated")
	}

	// Third: truncated binary body, no address known, default clock date.
	resp, req = recs[6], recs[7]
	if resp.Header.Get("WARC-Truncated") != "length" {
		t.Error("truncated body not marked WARC-Truncated: length")
	}
	if resp.Header.Get("WARC-IP-Address") != "" || req.Header.Get("WARC-IP-Address") != "" {
		t.Error("WARC-IP-Address written without an address")
	}
	if !bytes.HasSuffix(resp.Content, exchanges[2].Body) {
		t.Errorf("binary body altered: %q", resp.Content)
	}
	if resp.Date.IsZero() || resp.Date.Year() != 2025 {
		t.Errorf("exchange without Date got %v, want the writer's clock", resp.Date)
	}

	// Fourth: the title cannot inject a header.
	conv = recs[10]
	if got := conv.Header.Get("WARC-Title"); got != "Ünïcode  WARC-Type: injected" || conv.Type != "conversion" {
		t.Errorf("title %q, type %q", got, conv.Type)
	}
}

func TestWriterRotation(t *testing.T) {
	dir := t.TempDir()
	const max = 8 << 10
	w := newTestWriter(t, dir, Options{MaxFileBytes: max, Prefix: "rot"})
	const n = 60
	for i := range n {
		ex := page(fmt.Sprintf("https://example.com/%03d", i), strings.Repeat(fmt.Sprintf("word%d ", i), 200))
		if err := w.WriteExchange(ex); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if got := files(t, dir, false); len(got) != 0 {
				t.Fatalf("complete files while the first is written: %v", got)
			}
			if got := files(t, dir, true); len(got) != 1 || !strings.HasSuffix(got[0], ".warc.gz.open") {
				t.Fatalf("open files: %v", got)
			}
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	paths := files(t, dir, true)
	if len(paths) < 5 {
		t.Fatalf("%d files for %d exchanges of ~1.5 KB with an 8 KiB limit", len(paths), n)
	}
	next := 0
	for i, p := range paths {
		if strings.HasSuffix(p, openSuffix) {
			t.Errorf("%s left open after Close", p)
		}
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if i < len(paths)-1 && (st.Size() < max || st.Size() > max+4<<10) {
			t.Errorf("%s is %d bytes, want the limit plus at most one exchange", filepath.Base(p), st.Size())
		}
		recs := readAll(t, p)
		if recs[0].Type != "warcinfo" || recs[0].Header.Get("WARC-Filename") != filepath.Base(p) {
			t.Errorf("%s does not start with its warcinfo record", filepath.Base(p))
		}
		for _, r := range recs[1:] {
			if r.Type != "response" {
				continue
			}
			if want := fmt.Sprintf("https://example.com/%03d", next); r.TargetURI != want {
				t.Fatalf("%s: response for %s, want %s (files out of order?)", filepath.Base(p), r.TargetURI, want)
			}
			next++
		}
	}
	if next != n {
		t.Errorf("%d of %d exchanges found", next, n)
	}
}

func TestWriterConcurrentExchanges(t *testing.T) {
	dir := t.TempDir()
	w := newTestWriter(t, dir, Options{MaxFileBytes: 32 << 10})
	const workers, each = 8, 40
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				ex := page(fmt.Sprintf("https://w%d.example/%d", g, i), fmt.Sprintf("worker %d page %d", g, i))
				if err := w.WriteExchange(ex); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range files(t, dir, true) {
		recs := readAll(t, p)
		if recs[0].Type != "warcinfo" {
			t.Errorf("%s starts with %s", p, recs[0].Type)
		}
		// Each exchange is three consecutive records of one URL.
		rest := recs[1:]
		if len(rest)%3 != 0 {
			t.Fatalf("%s: %d records after warcinfo", p, len(rest))
		}
		for i := 0; i < len(rest); i += 3 {
			a, b, c := rest[i], rest[i+1], rest[i+2]
			if a.Type != "response" || b.Type != "request" || c.Type != "conversion" ||
				a.TargetURI != b.TargetURI || b.TargetURI != c.TargetURI || c.RefersTo != a.ID {
				t.Fatalf("%s: interleaved exchange: %s %s %s / %s %s %s", p, a.Type, b.Type, c.Type, a.TargetURI, b.TargetURI, c.TargetURI)
			}
			if seen[a.TargetURI] {
				t.Errorf("%s written twice", a.TargetURI)
			}
			seen[a.TargetURI] = true
			checkDigests(t, a)
		}
	}
	if len(seen) != workers*each {
		t.Errorf("%d of %d exchanges found", len(seen), workers*each)
	}
}

func TestWriterCloseFlushAndErrors(t *testing.T) {
	dir := t.TempDir()
	w := newTestWriter(t, dir, Options{})
	if err := w.Flush(); err != nil {
		t.Errorf("Flush before any write: %v", err)
	}
	if err := w.WriteExchange(Exchange{}); err == nil {
		t.Error("exchange without URL accepted")
	}
	if err := w.WriteExchange(page("https://example.com/", "x")); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Errorf("Flush: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := w.WriteExchange(page("https://example.com/", "x")); !errors.Is(err, ErrClosed) {
		t.Errorf("write after Close: %v", err)
	}
	if err := w.Flush(); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close: %v", err)
	}
	// A writer that never wrote leaves no file.
	empty := t.TempDir()
	w2 := newTestWriter(t, empty, Options{})
	w2.Close()
	if got := files(t, empty, true); len(got) != 0 {
		t.Errorf("idle writer left %v", got)
	}
	for _, opts := range []Options{{MaxFileBytes: -1}, {Prefix: "a/b"}, {Prefix: ".."}} {
		if _, err := NewWriter(t.TempDir(), opts); err == nil {
			t.Errorf("NewWriter accepted %+v", opts)
		}
	}
}

func TestNewWriterRecoversCrashedFiles(t *testing.T) {
	dir := t.TempDir()
	w := newTestWriter(t, dir, Options{Prefix: "node"})
	for i := range 5 {
		if err := w.WriteExchange(page(fmt.Sprintf("https://example.com/%d", i), "text")); err != nil {
			t.Fatal(err)
		}
	}
	// A kill -9: the file stays .open, and the last write was cut short.
	open := files(t, dir, true)[0]
	st, _ := os.Stat(open)
	if err := os.Truncate(open, st.Size()-30); err != nil {
		t.Fatal(err)
	}
	// Another crashed file holding only part of its warcinfo record, and a
	// file of another prefix that is none of this writer's business.
	partial := filepath.Join(dir, "node-20250101000000000-00000.warc.gz.open")
	os.WriteFile(partial, gzipBytes(t, "WARC/1.1\r\n")[:15], 0o644)
	foreign := filepath.Join(dir, "other-20250101000000000-00000.warc.gz.open")
	os.WriteFile(foreign, []byte("junk"), 0o644)

	w2 := newTestWriter(t, dir, Options{Prefix: "node"})
	if _, err := os.Stat(partial); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file without a complete record kept: %v", err)
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Errorf("file of another prefix touched: %v", err)
	}
	recovered := strings.TrimSuffix(open, openSuffix)
	recs := readAll(t, recovered) // fails on any damage left
	// warcinfo, four whole exchanges, and the response and request of the
	// fifth, whose conversion record was cut.
	if len(recs) != 1+4*3+2 {
		t.Errorf("%d records recovered, want %d", len(recs), 1+4*3+2)
	}
	// The new writer carries on in a new file.
	if err := w2.WriteExchange(page("https://example.com/after", "text")); err != nil {
		t.Fatal(err)
	}
	w2.Close()
	complete := files(t, dir, false)
	if len(complete) != 2 || complete[0] != recovered {
		t.Errorf("files after recovery: %v", complete)
	}
	// The original writer's handle still points at the renamed file;
	// closing it must not resurrect or clobber anything.
	w.Close()
}

func TestReaderErrors(t *testing.T) {
	dir := t.TempDir()
	w := newTestWriter(t, dir, Options{})
	for i := range 3 {
		if err := w.WriteExchange(page(fmt.Sprintf("https://example.com/%d", i), "text")); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	data, err := os.ReadFile(files(t, dir, false)[0])
	if err != nil {
		t.Fatal(err)
	}
	readErr := func(b []byte) error {
		r := NewReader(bytes.NewReader(b))
		for {
			if _, err := r.Next(); err != nil {
				if err == io.EOF {
					return nil
				}
				if _, again := r.Next(); again != err {
					t.Errorf("error not sticky: %v then %v", err, again)
				}
				return err
			}
		}
	}
	if err := readErr(data); err != nil {
		t.Fatalf("intact file: %v", err)
	}
	if err := readErr(nil); err != nil {
		t.Errorf("empty input: %v", err)
	}
	if err := readErr(data[:len(data)-10]); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut file: %v, want unexpected EOF", err)
	}
	corrupt := bytes.Clone(data)
	corrupt[len(corrupt)/2] ^= 0x55
	if err := readErr(corrupt); !errors.Is(err, ErrMalformed) && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("corrupt file: %v, want a malformed-record error", err)
	}
	for name, raw := range map[string]string{
		"bad version":         "HTTP/1.1 200 OK\r\n\r\n",
		"no Content-Length":   "WARC/1.1\r\nWARC-Type: resource\r\n\r\n\r\n\r\n",
		"bad Content-Length":  "WARC/1.1\r\nContent-Length: -4\r\n\r\n\r\n\r\n",
		"block overruns":      "WARC/1.1\r\nContent-Length: 3\r\n\r\nabcdef\r\n\r\n",
		"header without name": "WARC/1.1\r\n: x\r\nContent-Length: 0\r\n\r\n\r\n\r\n",
	} {
		if err := readErr(gzipBytes(t, raw)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	if err := readErr([]byte("WARC/1.1\r\nContent-Length: 999999999999\r\n\r\nabc")); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("huge claimed length: %v", err)
	}
}

func TestReaderOtherLayouts(t *testing.T) {
	rec := func(typ, content string) string {
		return fmt.Sprintf("WARC/1.0\r\nWARC-Type: %s\r\nWARC-Target-URI: <http://old.example/>\r\nWARC-Date: 2010-01-02T03:04:05Z\r\nContent-Length: %d\r\n\r\n%s\r\n\r\n", typ, len(content), content)
	}
	plain := rec("resource", "one") + rec("metadata", "two")
	// Uncompressed, and two records in a single gzip member.
	for name, data := range map[string][]byte{"uncompressed": []byte(plain), "one member": gzipBytes(t, plain)} {
		r := NewReader(bytes.NewReader(data))
		var got []string
		var offsets []int64
		for {
			rc, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got = append(got, rc.Type+":"+string(rc.Content)+":"+rc.TargetURI+":"+rc.Date.Format(time.DateOnly))
			offsets = append(offsets, rc.Offset)
		}
		if want := "resource:one:http://old.example/:2010-01-02 metadata:two:http://old.example/:2010-01-02"; strings.Join(got, " ") != want {
			t.Errorf("%s: %v", name, got)
		}
		if name == "uncompressed" && (offsets[0] != 0 || offsets[1] != int64(len(rec("resource", "one")))) {
			t.Errorf("uncompressed offsets %v", offsets)
		}
	}
}

func TestRecordOffsetsAllowRandomAccess(t *testing.T) {
	dir := t.TempDir()
	w := newTestWriter(t, dir, Options{})
	for i := range 4 {
		if err := w.WriteExchange(page(fmt.Sprintf("https://example.com/%d", i), fmt.Sprint("text ", i))); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	path := files(t, dir, false)[0]
	recs := readAll(t, path)
	data, _ := os.ReadFile(path)
	for _, want := range recs {
		// A record can be read alone from its offset, as WARC indexes do.
		got, err := NewReader(bytes.NewReader(data[want.Offset:])).Next()
		if err != nil {
			t.Fatalf("record at %d: %v", want.Offset, err)
		}
		if got.ID != want.ID {
			t.Errorf("offset %d holds %s, want %s", want.Offset, got.ID, want.ID)
		}
	}
}

func TestFilesOrder(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{
		"b-20250101000000000-00001.warc.gz", "a-20250101000000000-00000.warc.gz.open",
		"a-20240101000000000-00000.warc.gz", "notes.txt", "x.warc", "y.warc.gz.tmp",
	} {
		os.WriteFile(filepath.Join(dir, name), nil, 0o644)
	}
	os.Mkdir(filepath.Join(dir, "sub.warc.gz"), 0o755)
	base := func(ps []string) string {
		var names []string
		for _, p := range ps {
			names = append(names, filepath.Base(p))
		}
		return strings.Join(names, " ")
	}
	if got, want := base(files(t, dir, false)), "a-20240101000000000-00000.warc.gz b-20250101000000000-00001.warc.gz x.warc"; got != want {
		t.Errorf("complete files: %s, want %s", got, want)
	}
	if got, want := base(files(t, dir, true)), "a-20240101000000000-00000.warc.gz a-20250101000000000-00000.warc.gz.open b-20250101000000000-00001.warc.gz x.warc"; got != want {
		t.Errorf("all files: %s, want %s", got, want)
	}
	if _, err := Files(filepath.Join(dir, "missing"), true); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing directory: %v", err)
	}
}

func TestExportJSONL(t *testing.T) {
	dir := t.TempDir()
	w := newTestWriter(t, dir, Options{MaxFileBytes: 2 << 10})
	pages := []Exchange{
		page("https://example.com/1", "first <page> & \"text\""),
		{URL: "https://example.com/image.png", Status: 200, Body: []byte{0x89, 'P', 'N', 'G'}}, // no text
		page("https://example.com/2", "zweite Seite ✓"),
	}
	pages[2].Title = ""
	for _, ex := range pages {
		if err := w.WriteExchange(ex); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// Leave the last file open with a partial record at its end, as a
	// running crawler does.
	w2 := newTestWriter(t, dir, Options{Now: func() time.Time { return fetchTime.Add(time.Hour) }})
	if err := w2.WriteExchange(page("https://example.com/3", "third")); err != nil {
		t.Fatal(err)
	}
	all := files(t, dir, true)
	last := all[len(all)-1]
	if !strings.HasSuffix(last, openSuffix) {
		t.Fatalf("last file %s is not open", last)
	}
	f, _ := os.OpenFile(last, os.O_APPEND|os.O_WRONLY, 0)
	f.Write(gzipBytes(t, "WARC/1.1\r\nWARC-Type: conversion\r\n")[:20])
	f.Close()

	// A file listed while open and completed before the export reads is
	// still exported.
	renamed := filepath.Join(dir, "swarmcrawl-20200101000000000-00000.warc.gz")
	if err := os.Rename(all[0], renamed); err != nil {
		t.Fatal(err)
	}
	all[0] = renamed + openSuffix
	var out bytes.Buffer
	n, err := ExportJSONL(all, &out)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"url":"https://example.com/1","date":"2025-03-14T15:09:26Z","title":"T","text":"first <page> & \"text\""}
{"url":"https://example.com/2","date":"2025-03-14T15:09:26Z","text":"zweite Seite ✓"}
{"url":"https://example.com/3","date":"2025-03-14T15:09:26Z","title":"T","text":"third"}
`
	if n != 3 || out.String() != want {
		t.Errorf("ExportJSONL = %d lines:\n%s\nwant 3:\n%s", n, out.String(), want)
	}
	// Damage in a complete file is an error, not silently skipped.
	w2.Close()
	complete := files(t, dir, false)
	data, _ := os.ReadFile(complete[0])
	os.WriteFile(complete[0], data[:len(data)-5], 0o644)
	if _, err := ExportJSONL(complete, io.Discard); !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), filepath.Base(complete[0])) {
		t.Errorf("export of a cut complete file: %v", err)
	}
}

func BenchmarkWriteExchange(b *testing.B) {
	dir := b.TempDir()
	w, err := NewWriter(dir, Options{MaxFileBytes: 64 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	// A 12 KB page with 6 KB of text, like the synthetic web's.
	words := strings.Repeat("lorem ipsum dolor sit amet consectetur ", 160)
	ex := page("https://bench.example/page", words)
	ex.Body = []byte("<html><body><p>" + words + words + "</p></body></html>")
	b.SetBytes(int64(len(ex.Body)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := w.WriteExchange(ex); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
