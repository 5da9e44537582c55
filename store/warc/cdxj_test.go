package warc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// indexExchanges are exchanges of every kind the crawler writes, with the
// URL spellings a SURT key must get right: case, www prefixes, ports,
// default ports, query order, IPv6, IDN hosts, escapes, fragments.
func indexExchanges() []Exchange {
	date := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	html := http.Header{"Content-Type": {"text/html; charset=utf-8"}}
	var out []Exchange
	for i, u := range []string{
		"https://Example.com/caf%C3%A9?q=1&a=2",
		"http://www.example.com:8080/x/",
		"https://www2.example.com/y",
		"https://wwwexample.com/",
		"https://example.com:443/explicit-port",
		"http://example.com",
		"http://[2001:db8::2]/v6?z=1",
		"http://192.0.2.7:81/ip",
		"https://bücher.example/straße",
		"https://sub.example.org/page#frag",
		"https://example.com/search?q=a%20b&lang=en&lang=de",
		"https://example.com/?",
	} {
		out = append(out, Exchange{URL: u, Date: date.Add(time.Duration(i) * time.Second), RemoteAddr: "192.0.2.1:443",
			Status: 200, ResponseHeader: html,
			Body: []byte(fmt.Sprintf("<title>Page %d</title><p>text of page %d</p>", i, i)), Title: fmt.Sprintf("Page %d", i), Text: fmt.Sprintf("text of page %d", i)})
	}
	out = append(out,
		Exchange{URL: "https://example.com/gone", Date: date, Status: 404, ResponseHeader: http.Header{"Content-Type": {"text/plain"}}, Body: []byte("Not Found\n"), Text: "Not Found"},
		Exchange{URL: "https://example.com/old", Date: date, Status: 301, ResponseHeader: http.Header{"Location": {"https://example.com/new"}}},
		Exchange{URL: "https://example.com/logo.png", Date: date, Status: 200, ResponseHeader: http.Header{"Content-Type": {"IMAGE/PNG"}}, Body: []byte("\x89PNG\r\n\x1a\n")},
		Exchange{URL: "https://example.com/two-types", Date: date, Status: 200, ResponseHeader: http.Header{"Content-Type": {"text/html", "text/plain"}}, Body: []byte("x")},
		Exchange{URL: "https://example.com/empty-type", Date: date, Status: 200, ResponseHeader: http.Header{"Content-Type": {""}}, Body: []byte("x")},
		Exchange{URL: "https://example.com/cut", Date: date, Status: 206, ResponseHeader: http.Header{"Content-Type": {"application/octet-stream"}}, Body: bytes.Repeat([]byte{7}, 3000), Truncated: true},
	)
	return out
}

// writeIndexed writes exchanges into dir in files of about maxBytes and
// returns the complete files.
func writeIndexed(t *testing.T, dir string, maxBytes int64, exchanges []Exchange) []string {
	t.Helper()
	w := newTestWriter(t, dir, Options{MaxFileBytes: maxBytes})
	for _, ex := range exchanges {
		if err := w.WriteExchange(ex); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return files(t, dir, false)
}

func readEntries(t *testing.T, r io.Reader) []CDXJEntry {
	t.Helper()
	var out []CDXJEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		e, err := ParseCDXJLine(sc.Bytes())
		if err != nil {
			t.Fatalf("line %d: %v", len(out)+1, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func readIndexFile(t *testing.T, path string) []CDXJEntry {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return readEntries(t, f)
}

// TestIndexWrittenWithFile: each complete WARC file has a CDXJ index
// beside it with one entry per response and conversion record, the same
// bytes BuildIndex makes from the file, and each entry's offset and
// length cut out exactly one gzip member holding the record it names.
func TestIndexWrittenWithFile(t *testing.T) {
	dir := t.TempDir()
	exchanges := indexExchanges()
	paths := writeIndexed(t, dir, 4<<10, exchanges)
	if len(paths) < 2 {
		t.Fatalf("want several files, got %d", len(paths))
	}
	total := 0
	for _, p := range paths {
		written, err := os.ReadFile(p + IndexSuffix)
		if err != nil {
			t.Fatalf("no index beside %s: %v", p, err)
		}
		var built bytes.Buffer
		if _, err := BuildIndex(p, &built); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(written, built.Bytes()) {
			t.Errorf("%s: index written\n%s\nindex built from the file\n%s", filepath.Base(p), written, built.Bytes())
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range readEntries(t, bytes.NewReader(written)) {
			total++
			if e.Filename != filepath.Base(p) || e.Offset+e.Length > int64(len(data)) {
				t.Fatalf("entry %+v out of %s (%d bytes)", e, filepath.Base(p), len(data))
			}
			r := NewReader(bytes.NewReader(data[e.Offset : e.Offset+e.Length]))
			rec, err := r.Next()
			if err != nil {
				t.Fatalf("entry %+v: %v", e, err)
			}
			if _, err := r.Next(); err != io.EOF {
				t.Errorf("entry %+v: more than one record in its bytes: %v", e, err)
			}
			if rec.TargetURI != e.URL || rec.Type != "response" && rec.Type != "conversion" || e.Key != SURT(e.URL) || e.Timestamp != rec.Date.Format("20060102150405") {
				t.Errorf("entry %+v names a %s record of %s", e, rec.Type, rec.TargetURI)
			}
		}
	}
	want := len(exchanges)
	for _, ex := range exchanges {
		if ex.Text != "" {
			want++
		}
	}
	if total != want {
		t.Errorf("%d index entries, want %d (responses and conversions)", total, want)
	}
}

// warcioCDX runs warcio's own indexer (cdx-index, CDXJ output) over paths.
func warcioCDX(t *testing.T, node, npmDir string, paths []string) []CDXJEntry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli := filepath.Join(npmDir, "node_modules", "warcio", "dist", "cli.js")
	cmd := exec.CommandContext(ctx, node, append([]string{cli, "cdx-index", "--format", "cdxj"}, paths...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("warcio cdx-index: %v\n%s", err, stderr.String())
	}
	return readEntries(t, bytes.NewReader(out))
}

func sameEntries(t *testing.T, what string, ours, theirs []CDXJEntry) {
	t.Helper()
	if len(ours) != len(theirs) {
		t.Errorf("%s: %d entries, warcio %d", what, len(ours), len(theirs))
	}
	for i := range min(len(ours), len(theirs)) {
		if ours[i] != theirs[i] {
			t.Errorf("%s entry %d:\nours   %+v\nwarcio %+v", what, i, ours[i], theirs[i])
		}
	}
}

// TestWarcioCDXIndexAgrees: the index each file gets as it is written,
// and the merged index of all files, agree record for record (key,
// timestamp, URL, media type, status, digest, offset, length, file name)
// with what npm warcio's cdx-index makes of the same files, sorted as
// pywb sorts an index for the merged one.
func TestWarcioCDXIndexAgrees(t *testing.T) {
	node, npmDir := warcioDir(t)
	dir := t.TempDir()
	paths := writeIndexed(t, dir, 4<<10, indexExchanges())
	var all []CDXJEntry
	var indexes []string
	for _, p := range paths {
		theirs := warcioCDX(t, node, npmDir, []string{p})
		sameEntries(t, filepath.Base(p), readIndexFile(t, p+IndexSuffix), theirs)
		all = append(all, theirs...)
		indexes = append(indexes, p+IndexSuffix)
	}
	// warcio does not sort; pywb and ReplayWeb.page want lines in byte
	// order.
	slices.SortFunc(all, func(a, b CDXJEntry) int { return bytes.Compare(a.AppendLine(nil), b.AppendLine(nil)) })
	var merged bytes.Buffer
	n, err := MergeIndexes(&merged, indexes, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	got := readEntries(t, &merged)
	if n != int64(len(got)) {
		t.Errorf("MergeIndexes says %d lines, wrote %d", n, len(got))
	}
	sameEntries(t, "merged", got, all)
	for i := 1; i < len(got); i++ {
		if got[i-1].Key > got[i].Key || got[i-1].Key == got[i].Key && got[i-1].Timestamp > got[i].Timestamp {
			t.Errorf("merged index out of order at %d: %s %s after %s %s", i, got[i].Key, got[i].Timestamp, got[i-1].Key, got[i-1].Timestamp)
		}
	}
	if !t.Failed() {
		t.Logf("%d files, %d entries: ours and warcio's agree, per file and merged", len(paths), len(all))
	}
}

// TestRecoveryRebuildsIndex: after a crash, the recovered file's index
// names exactly the records the file kept, however much of the index had
// reached the disk.
func TestRecoveryRebuildsIndex(t *testing.T) {
	dir := t.TempDir()
	w := newTestWriter(t, dir, Options{Prefix: "node"})
	for i := range 5 {
		if err := w.WriteExchange(page(fmt.Sprintf("https://example.com/%d", i), "text")); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil { // the index of all five reaches the file
		t.Fatal(err)
	}
	open := files(t, dir, true)[0]
	st, _ := os.Stat(open)
	if err := os.Truncate(open, st.Size()-30); err != nil { // the last record cut
		t.Fatal(err)
	}
	if before := readIndexFile(t, strings.TrimSuffix(open, openSuffix)+IndexSuffix+openSuffix); len(before) != 10 {
		t.Fatalf("index being written has %d entries, want 10", len(before))
	}
	newTestWriter(t, dir, Options{Prefix: "node"}).Close()
	recovered := strings.TrimSuffix(open, openSuffix)
	got := readIndexFile(t, recovered+IndexSuffix)
	var built bytes.Buffer
	if _, err := BuildIndex(recovered, &built); err != nil {
		t.Fatal(err)
	}
	if want := readEntries(t, &built); !slices.Equal(got, want) || len(got) != 9 {
		t.Errorf("recovered index has %d entries, the file %d (want 9: the fifth conversion was cut)", len(got), len(want))
	}
	if _, err := os.Stat(recovered + IndexSuffix + openSuffix); err == nil {
		t.Error("the index being written was left behind")
	}
	w.Close()
	if again := readIndexFile(t, recovered+IndexSuffix); !slices.Equal(again, got) {
		t.Error("closing the crashed writer changed the recovered index")
	}
}

// TestIndexSorterSpills: with little memory the sorter spills runs to
// disk and merges them; the output is the same as sorting in memory:
// every distinct line once, in byte order.
func TestIndexSorterSpills(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var lines []string
	for i := range 2000 {
		e := CDXJEntry{Key: SURT(fmt.Sprintf("https://h%d.example/p%d", r.IntN(50), r.IntN(100))), Timestamp: fmt.Sprintf("2025%010d", r.IntN(1000)),
			URL: "https://x.example/", Length: int64(1 + i), Offset: int64(r.IntN(5)), Filename: "a.warc.gz"}
		line := string(e.AppendLine(nil))
		lines = append(lines, line)
		if i%7 == 0 {
			lines = append(lines, line) // duplicates
		}
	}
	want := slices.Clone(lines)
	slices.Sort(want)
	want = slices.Compact(want)
	tmp := t.TempDir()
	s := NewIndexSorter(tmp, 16<<10)
	defer s.Close()
	for _, l := range lines {
		if err := s.Add([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.runs) < 10 {
		t.Fatalf("%d runs spilled, want many", len(s.runs))
	}
	var out bytes.Buffer
	n, err := s.WriteTo(&out)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(want, ""); out.String() != got || n != int64(len(want)) {
		t.Errorf("sorted %d lines (%d bytes), want %d (%d bytes)", n, out.Len(), len(want), len(got))
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("%d temporary files left", len(left))
	}
}

// TestIndexSorterRefusesBadLines: a CDXJ file from elsewhere is checked
// line by line.
func TestIndexSorterRefusesBadLines(t *testing.T) {
	for _, bad := range []string{
		"no-timestamp",
		"com,example)/ 2025 not-json",
		`com,example)/ 2025x {"url":"u","length":"1","offset":"0","filename":"a.warc.gz"}`,
		`com,example)/ 2025 {"url":"u","length":"-1","offset":"0","filename":"a.warc.gz"}`,
		`com,example)/ 2025 {"url":"u","length":"1","offset":"0","filename":"../etc/passwd"}`,
		`com,example)/ 2025 {"url":"u","length":"1","offset":"0"}`,
		"com,example)/ 2025 {" + strings.Repeat("x", maxCDXJLine) + "}",
	} {
		s := NewIndexSorter(t.TempDir(), 0)
		if err := s.AddIndex(strings.NewReader("com,example)/ 2025 {\"url\":\"u\",\"length\":\"1\",\"offset\":\"0\",\"filename\":\"a.warc.gz\"}\n"+bad+"\n"), "x"); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%.60q: %v", bad, err)
		}
		s.Close()
	}
}

// FuzzIndexRecords indexes arbitrary bytes as a WARC file, as BuildIndex
// does with old files and WriteWACZ with every file it packages: it must
// not panic, must fail only with io.EOF-free errors that say what broke
// (ErrMalformed or io.ErrUnexpectedEOF), and every entry it emits must lie
// inside the input, after the previous one, at a record that reads alone
// from its offset, and make a line that parses back to the same entry.
func FuzzIndexRecords(f *testing.F) {
	addReaderSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var entries []CDXJEntry
		records := 0
		good, err := IndexRecords(bytes.NewReader(data), "f.warc.gz", func(e CDXJEntry) error {
			entries = append(entries, e)
			return nil
		}, func(*Record) error {
			records++
			if records > maxFuzzRecords {
				return errTooMany
			}
			return nil
		})
		if err != nil && err != errTooMany && !errors.Is(err, ErrMalformed) && !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("error %v is neither malformed nor unexpected EOF", err)
		}
		if good < 0 || good > int64(len(data)) {
			t.Fatalf("%d good bytes of %d", good, len(data))
		}
		var prev int64 = -1
		for _, e := range entries {
			if e.Offset < 0 || e.Length <= 0 || e.Offset+e.Length > good || e.Offset < prev {
				t.Fatalf("entry at %d+%d (previous at %d) in %d good bytes", e.Offset, e.Length, prev, good)
			}
			prev = e.Offset
			if _, err := NewReader(bytes.NewReader(data[e.Offset : e.Offset+e.Length])).Next(); err != nil {
				t.Fatalf("entry at %d+%d does not read alone: %v", e.Offset, e.Length, err)
			}
			back, err := ParseCDXJLine(e.AppendLine(nil))
			if err != nil || back != e {
				t.Fatalf("entry %+v reads back as %+v, %v", e, back, err)
			}
		}
	})
}

var errTooMany = errors.New("too many records")
