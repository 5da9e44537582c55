package warc

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// warcioVersion is the version of the npm package warcio the cross-check
// runs; .ci/run installs the same one (see warcioDir).
const warcioVersion = "2.4.11"

// warcioDir returns a directory whose node_modules holds warcio
// warcioVersion. It is $SWARMCRAWL_NPM_DIR, or .cache/npm at the root of
// the repository, where .ci/run pre-installs it with
//
//	npm install --prefix .cache/npm --no-audit --no-fund warcio@2.4.11
//
// When the package is not there yet the test runs that command itself. The
// test is skipped when node or npm is missing, except under CI (the CI
// environment variable set), where that is a failure.
func warcioDir(t *testing.T) (node, dir string) {
	t.Helper()
	node, errNode := exec.LookPath("node")
	npm, errNPM := exec.LookPath("npm")
	if errNode != nil || errNPM != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the warcio cross-check needs node and npm on PATH in CI: node: %v, npm: %v", errNode, errNPM)
		}
		t.Skip("skipping the warcio cross-check: node and/or npm are not on PATH (with CI set this is a failure)")
	}
	dir = os.Getenv("SWARMCRAWL_NPM_DIR")
	if dir == "" {
		root, err := filepath.Abs(filepath.Join("..", ".."))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
			t.Fatalf("repository root not found from the test directory: %v", err)
		}
		dir = filepath.Join(root, ".cache", "npm")
	}
	if installedVersion(dir) == warcioVersion {
		return node, dir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", dir, "--no-audit", "--no-fund", "warcio@"+warcioVersion)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	if v := installedVersion(dir); v != warcioVersion {
		t.Fatalf("after npm install, %s has warcio %q, want %s", dir, v, warcioVersion)
	}
	return node, dir
}

// installedVersion returns the version of warcio installed under dir, or "".
func installedVersion(dir string) string {
	data, err := os.ReadFile(filepath.Join(dir, "node_modules", "warcio", "package.json"))
	if err != nil {
		return ""
	}
	var pkg struct{ Version string }
	if json.Unmarshal(data, &pkg) != nil {
		return ""
	}
	return pkg.Version
}

// warcioReport is the output of testdata/warcio-check.mjs.
type warcioReport struct {
	Warcio string
	Files  []struct {
		File    string
		Records []warcioRecord
		CDX     []map[string]any
	}
}

type warcioRecord struct {
	Offset                                       int64
	Type, ID, TargetURI, Date, ContentType       string
	ContentLength, BlockLength                   int
	BlockDigest, ComputedBlockDigest             string
	PayloadDigest                                string
	ConcurrentTo, RefersTo, IPAddress, Truncated string
	Filename, Title, Simhash                     string
	Text                                         string
	HTTP                                         *struct {
		Statusline            string
		Status                int
		Method, RequestPath   string
		Headers               map[string]string
		PayloadLength         int
		ComputedPayloadDigest string
		Payload, Decoded      []byte // base64 in JSON
		DecodeError           string
	}
}

// TestWarcioReadsOurFiles writes exchanges of every kind the crawler
// produces and has the independent warcio reader parse them: every record
// must be found with its type, target URI, links, digests (recomputed from
// the bytes warcio returns), HTTP message and text, and warcio's CDX
// indexer must index each response where our reader finds it.
func TestWarcioReadsOurFiles(t *testing.T) {
	node, npmDir := warcioDir(t)

	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, 9)
	plainHTML := "<html><head><title>Compressed</title></head><body><p>" + strings.Repeat("squeezed words ", 40) + "</p></body></html>"
	zw.Write([]byte(plainHTML))
	zw.Close()
	binary := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\r\n\r\n\x00\xff\xfe")
	r := rand.New(rand.NewPCG(1, 2))
	cut := make([]byte, 3000)
	for i := range cut {
		cut[i] = byte(r.Uint32())
	}
	date := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	exchanges := []Exchange{
		{
			URL: "https://example.com/caf%C3%A9?q=1", Date: date, RemoteAddr: "192.0.2.1:443",
			RequestHeader:  http.Header{"User-Agent": {"swarmcrawl/test"}, "Accept-Encoding": {"gzip, deflate"}},
			Status:         200,
			ResponseHeader: http.Header{"Content-Type": {"text/html; charset=utf-8"}, "Etag": {`"v1"`}},
			Body:           []byte("<title>Grüße ✓ 世界</title><p>Grüße, 世界 — ✓</p><p>second line</p>"),
			Title:          "Grüße ✓ 世界", Text: "Grüße, 世界 — ✓\nsecond line", Simhash: 0xfedcba9876543210,
		},
		{
			URL: "https://example.com/logo.png", Date: date, RemoteAddr: "192.0.2.1:443", Status: 200,
			ResponseHeader: http.Header{"Content-Type": {"image/png"}, "Content-Length": {fmt.Sprint(len(binary))}},
			Body:           binary,
		},
		{
			URL: "https://example.com/huge.bin", Date: date, RemoteAddr: "192.0.2.1:443", Status: 200,
			ResponseHeader: http.Header{"Content-Type": {"application/octet-stream"}, "Content-Length": {"20971520"}},
			Body:           cut, Truncated: true,
		},
		{
			URL: "http://gz.example/page", Date: date, RemoteAddr: "[2001:db8::2]:80", Status: 200,
			RequestHeader: http.Header{"Accept-Encoding": {"gzip, deflate"}},
			ResponseHeader: http.Header{"Content-Type": {"text/html"}, "Content-Encoding": {"gzip"},
				"Transfer-Encoding": {"chunked"}, "Vary": {"Accept-Encoding"}},
			Body:  gz.Bytes(),
			Title: "Compressed", Text: strings.TrimSpace(strings.Repeat("squeezed words ", 40)),
		},
		{
			URL: "https://example.com/gone", Date: date, Status: 404,
			ResponseHeader: http.Header{"Content-Type": {"text/plain"}},
			Body:           []byte("Not Found\n"), Text: "Not Found",
		},
		{
			URL: "https://example.com/old", Date: date, Status: 301,
			ResponseHeader: http.Header{"Location": {"https://example.com/new"}, "Content-Length": {"0"}},
		},
		{
			URL: "https://h2.example/", Date: date, Proto: "HTTP/2.0", Status: 200,
			ResponseHeader: http.Header{"Content-Type": {"text/html"}},
			Body:           []byte("<p>over h2</p>"), Text: "over h2",
		},
	}
	byURL := map[string]Exchange{}
	for _, ex := range exchanges {
		byURL[ex.URL] = ex
	}

	dir := t.TempDir()
	w, err := NewWriter(dir, Options{MaxFileBytes: 4 << 10, Software: "swarmcrawl/warcio-test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range exchanges {
		if err := w.WriteExchange(ex); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	paths := files(t, dir, false)
	if len(paths) < 2 {
		t.Fatalf("want several files to check rotation too, got %d", len(paths))
	}

	report := runWarcio(t, node, npmDir, paths)
	if report.Warcio != warcioVersion || len(report.Files) != len(paths) {
		t.Fatalf("warcio %s read %d files, want %s and %d", report.Warcio, len(report.Files), warcioVersion, len(paths))
	}

	counts := map[string]int{}
	for fi, f := range report.Files {
		ours := readAll(t, paths[fi])
		if len(f.Records) != len(ours) {
			t.Fatalf("%s: warcio found %d records, we wrote %d", f.File, len(f.Records), len(ours))
		}
		ids := map[string]warcioRecord{}
		for _, rec := range f.Records {
			ids[rec.ID] = rec
		}
		responses := map[int64]warcioRecord{}
		for i, rec := range f.Records {
			counts[rec.Type]++
			where := fmt.Sprintf("%s record %d (%s %s)", f.File, i, rec.Type, rec.TargetURI)
			if rec.ID != ours[i].ID || rec.Type != ours[i].Type || rec.Offset != ours[i].Offset {
				t.Errorf("%s: warcio sees %s %s at %d, we wrote %s %s at %d", where, rec.Type, rec.ID, rec.Offset, ours[i].Type, ours[i].ID, ours[i].Offset)
			}
			if rec.BlockDigest == "" || rec.BlockDigest != rec.ComputedBlockDigest {
				t.Errorf("%s: WARC-Block-Digest %q, block hashes to %s", where, rec.BlockDigest, rec.ComputedBlockDigest)
			}
			if rec.ContentLength != rec.BlockLength {
				t.Errorf("%s: Content-Length %d, block has %d bytes", where, rec.ContentLength, rec.BlockLength)
			}
			if i == 0 {
				if rec.Type != "warcinfo" || rec.Filename != f.File || rec.ContentType != "application/warc-fields" {
					t.Errorf("%s: file does not start with its warcinfo record", where)
				}
				continue
			}
			ex, ok := byURL[rec.TargetURI]
			if !ok {
				t.Errorf("%s: unknown target URI", where)
				continue
			}
			if rec.Date != "2025-03-14T15:09:26Z" {
				t.Errorf("%s: WARC-Date %q", where, rec.Date)
			}
			switch rec.Type {
			case "response":
				responses[rec.Offset] = rec
				checkWarcioResponse(t, where, rec, ids, ex, plainHTML)
			case "request":
				h := rec.HTTP
				if h == nil || h.Method != "GET" || h.Headers["host"] == "" || !strings.Contains(ex.URL, h.Headers["host"]+h.RequestPath) {
					t.Errorf("%s: HTTP request as warcio parsed it: %+v", where, h)
				}
				if resp, ok := ids[rec.ConcurrentTo]; !ok || resp.Type != "response" || resp.ConcurrentTo != rec.ID {
					t.Errorf("%s: WARC-Concurrent-To %q does not name its response", where, rec.ConcurrentTo)
				}
			case "conversion":
				if rec.Text != ex.Text || rec.Title != ex.Title || rec.ContentType != "text/plain; charset=utf-8" {
					t.Errorf("%s: text %q title %q type %q, want %q %q", where, rec.Text, rec.Title, rec.ContentType, ex.Text, ex.Title)
				}
				if rec.PayloadDigest != rec.ComputedBlockDigest {
					t.Errorf("%s: payload digest %q, text hashes to %s", where, rec.PayloadDigest, rec.ComputedBlockDigest)
				}
				if resp, ok := ids[rec.RefersTo]; !ok || resp.Type != "response" || resp.TargetURI != rec.TargetURI {
					t.Errorf("%s: WARC-Refers-To %q does not name its response", where, rec.RefersTo)
				}
				if want := fmt.Sprintf("%016x", ex.Simhash); ex.Simhash != 0 && rec.Simhash != want {
					t.Errorf("%s: WARC-Simhash %q, want %s", where, rec.Simhash, want)
				}
			default:
				t.Errorf("%s: unexpected record type", where)
			}
		}
		// warcio's CDX indexer finds every response where we wrote it.
		indexed := 0
		for _, c := range f.CDX {
			off, _ := c["offset"].(float64)
			resp, ok := responses[int64(off)]
			if !ok {
				continue // conversion records are indexed too
			}
			indexed++
			ex := byURL[resp.TargetURI]
			mime, _, _ := strings.Cut(ex.ResponseHeader.Get("Content-Type"), ";")
			if c["url"] != resp.TargetURI || fmt.Sprint(c["status"]) != fmt.Sprint(ex.Status) ||
				"sha1:"+fmt.Sprint(c["digest"]) != resp.PayloadDigest || (mime != "" && c["mime"] != mime) {
				t.Errorf("%s: CDX line %v does not match the response %s", f.File, c, resp.TargetURI)
			}
		}
		if indexed != len(responses) {
			t.Errorf("%s: warcio's CDX indexed %d of %d responses", f.File, indexed, len(responses))
		}
	}
	wantConversions := 0
	for _, ex := range exchanges {
		if ex.Text != "" {
			wantConversions++
		}
	}
	if counts["response"] != len(exchanges) || counts["request"] != len(exchanges) || counts["conversion"] != wantConversions || counts["warcinfo"] != len(paths) {
		t.Errorf("warcio found %v, want %d exchanges with %d conversions in %d files", counts, len(exchanges), wantConversions, len(paths))
	}
	if !t.Failed() {
		t.Logf("warcio %s read %d files: %v; all digests, links, HTTP messages, texts and CDX entries agree", report.Warcio, len(paths), counts)
	}
}

// checkWarcioResponse checks one response record as warcio parsed it.
func checkWarcioResponse(t *testing.T, where string, rec warcioRecord, ids map[string]warcioRecord, ex Exchange, plainHTML string) {
	t.Helper()
	h := rec.HTTP
	if h == nil {
		t.Errorf("%s: warcio parsed no HTTP response", where)
		return
	}
	if rec.ContentType != "application/http;msgtype=response" || h.Status != ex.Status {
		t.Errorf("%s: content type %q, status %d (%q)", where, rec.ContentType, h.Status, h.Statusline)
	}
	if rec.PayloadDigest == "" || rec.PayloadDigest != h.ComputedPayloadDigest {
		t.Errorf("%s: WARC-Payload-Digest %q, payload hashes to %s", where, rec.PayloadDigest, h.ComputedPayloadDigest)
	}
	if !bytes.Equal(h.Payload, ex.Body) {
		t.Errorf("%s: payload of %d bytes differs from the %d-byte body", where, len(h.Payload), len(ex.Body))
	}
	if _, ok := h.Headers["transfer-encoding"]; ok {
		t.Errorf("%s: Transfer-Encoding kept for a de-chunked body", where)
	}
	for name := range ex.ResponseHeader {
		if name != "Transfer-Encoding" && h.Headers[strings.ToLower(name)] != ex.ResponseHeader.Get(name) {
			t.Errorf("%s: header %s = %q, want %q", where, name, h.Headers[strings.ToLower(name)], ex.ResponseHeader.Get(name))
		}
	}
	switch {
	case ex.ResponseHeader.Get("Content-Encoding") == "gzip":
		// warcio decodes the content coding from the recorded headers.
		if string(h.Decoded) != plainHTML {
			t.Errorf("%s: decoded gzip body %.60q (error %q), want the original HTML", where, h.Decoded, h.DecodeError)
		}
	case !ex.Truncated && !bytes.Equal(h.Decoded, ex.Body):
		t.Errorf("%s: decoded body differs (error %q)", where, h.DecodeError)
	}
	if want := map[bool]string{true: "length"}[ex.Truncated]; rec.Truncated != want {
		t.Errorf("%s: WARC-Truncated %q, want %q", where, rec.Truncated, want)
	}
	wantIP := strings.Trim(strings.TrimSuffix(strings.TrimSuffix(ex.RemoteAddr, ":443"), ":80"), "[]")
	if rec.IPAddress != wantIP {
		t.Errorf("%s: WARC-IP-Address %q, want %q", where, rec.IPAddress, wantIP)
	}
	if req, ok := ids[rec.ConcurrentTo]; !ok || req.Type != "request" || req.TargetURI != rec.TargetURI {
		t.Errorf("%s: WARC-Concurrent-To %q does not name its request", where, rec.ConcurrentTo)
	}
}

// runWarcio reads paths with warcio through testdata/warcio-check.mjs.
// Anything warcio prints on stderr (it warns about records it finds odd,
// e.g. a Content-Length that does not match the block) fails the test.
func runWarcio(t *testing.T, node, npmDir string, paths []string) warcioReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join("testdata", "warcio-check.mjs"), npmDir}, paths...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("warcio-check.mjs: %v\n%s", err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("warcio complained:\n%s", stderr.String())
	}
	var report warcioReport
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("warcio-check.mjs output: %v\n%.2000s", err, out)
	}
	return report
}
