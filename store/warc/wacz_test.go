package warc

import (
	"archive/zip"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/internal/replaytest"
)

// replayExchanges are two small sites' pages, with words the replay test
// looks for, and resources that are not pages.
func replayExchanges() []Exchange {
	date := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	html := http.Header{"Content-Type": {"text/html; charset=utf-8"}}
	return []Exchange{
		{URL: "http://replay.example/page.html", Date: date, Status: 200, ResponseHeader: html,
			Body:  []byte(`<!doctype html><html><head><title>Canary page</title></head><body><h1>Swarm canary</h1><p>The quick swarm replays the archived page.</p><a href="/other.html">other</a></body></html>`),
			Title: "Canary page", Text: "Swarm canary\nThe quick swarm replays the archived page.\nother"},
		{URL: "http://replay.example/other.html", Date: date.Add(time.Second), Status: 200, ResponseHeader: html,
			Body:  []byte(`<html><head><title>Other</title></head><body><p>Second page text.</p></body></html>`),
			Title: "Other", Text: "Second page text."},
		{URL: "https://www.second.example/", Date: date.Add(2 * time.Second), Status: 200, ResponseHeader: html,
			Body:  []byte(`<html><head><title>Second site</title></head><body><p>Another host.</p></body></html>`),
			Title: "Second site", Text: "Another host."},
		{URL: "http://replay.example/style.css", Date: date, Status: 200, ResponseHeader: http.Header{"Content-Type": {"text/css"}}, Body: []byte("h1{color:red}")},
		{URL: "http://replay.example/missing", Date: date, Status: 404, ResponseHeader: html, Body: []byte("<p>not here</p>"), Text: "not here"},
		{URL: "http://replay.example/moved", Date: date, Status: 301, ResponseHeader: http.Header{"Location": {"/page.html"}}},
	}
}

// readZip opens a zip file's entries by name.
func readZip(t *testing.T, data []byte) (map[string][]byte, *zip.Reader) {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		out[f.Name] = b
	}
	return out, zr
}

// TestWriteWACZ: the package holds each WARC file stored byte for byte,
// the merged index of their own indexes but for the conversion records,
// the HTML pages with their titles
// and texts (not the 404, the redirect or the stylesheet), and a manifest
// whose sizes and hashes are those of the entries, itself hashed in the
// digest file.
func TestWriteWACZ(t *testing.T) {
	dir := t.TempDir()
	paths := writeIndexed(t, dir, 2<<10, replayExchanges())
	if len(paths) < 2 {
		t.Fatalf("want several files, got %d", len(paths))
	}
	var out bytes.Buffer
	st, err := WriteWACZ(&out, paths, PackageInfo{Title: "test crawl", Created: time.Date(2025, 4, 1, 0, 0, 0, 0, time.UTC), TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	entries, zr := readZip(t, out.Bytes())
	for _, f := range zr.File {
		if strings.HasPrefix(f.Name, "archive/") && f.Method != zip.Store {
			t.Errorf("%s compressed again (method %d), want stored", f.Name, f.Method)
		}
	}
	var indexes []string
	for _, p := range paths {
		want, _ := os.ReadFile(p)
		if got := entries["archive/"+filepath.Base(p)]; !bytes.Equal(got, want) {
			t.Errorf("archive/%s: %d bytes, the file has %d", filepath.Base(p), len(got), len(want))
		}
		indexes = append(indexes, p+IndexSuffix)
	}
	var merged, responses bytes.Buffer
	if _, err := MergeIndexes(&merged, indexes, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.SplitAfter(merged.String(), "\n") {
		if l != "" && !strings.Contains(l, `"mime":"`+conversionType+`"`) {
			responses.WriteString(l) // the conversion records are left out
		}
	}
	merged = responses
	if got := entries["indexes/index.cdx"]; !bytes.Equal(got, merged.Bytes()) || int64(bytes.Count(got, []byte("\n"))) != st.Entries {
		t.Errorf("indexes/index.cdx (%d entries said):\n%s\nwant the merged indexes of the files but for the conversion records:\n%s", st.Entries, got, merged.Bytes())
	}

	lines := strings.Split(strings.TrimSpace(string(entries["pages/pages.jsonl"])), "\n")
	if lines[0] != `{"format":"json-pages-1.0","id":"pages","title":"All Pages"}` {
		t.Errorf("pages header %s", lines[0])
	}
	var pages []waczPage
	for _, l := range lines[1:] {
		var p waczPage
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Fatalf("page line %s: %v", l, err)
		}
		pages = append(pages, p)
	}
	want := []waczPage{
		{URL: "http://replay.example/page.html", TS: "2025-03-14T15:09:26Z", Title: "Canary page", Text: "Swarm canary\nThe quick swarm replays the archived page.\nother"},
		{URL: "http://replay.example/other.html", TS: "2025-03-14T15:09:27Z", Title: "Other", Text: "Second page text."},
		{URL: "https://www.second.example/", TS: "2025-03-14T15:09:28Z", Title: "Second site", Text: "Another host."},
	}
	if len(pages) != len(want) || st.Pages != len(want) {
		t.Fatalf("pages %+v (%d said), want %+v", pages, st.Pages, want)
	}
	for i, p := range pages {
		if p.ID == "" {
			t.Errorf("page %s without an id", p.URL)
		}
		p.ID = ""
		if p != want[i] {
			t.Errorf("page %d: %+v, want %+v", i, p, want[i])
		}
	}

	var manifest struct {
		Profile     string `json:"profile"`
		WACZVersion string `json:"wacz_version"`
		Title       string
		Created     string
		Resources   []waczResource
	}
	if err := json.Unmarshal(entries["datapackage.json"], &manifest); err != nil {
		t.Fatal(err)
	}
	if manifest.Profile != "data-package" || manifest.WACZVersion != "1.1.1" || manifest.Title != "test crawl" || manifest.Created != "2025-04-01T00:00:00Z" {
		t.Errorf("manifest %+v", manifest)
	}
	listed := map[string]bool{}
	for _, r := range manifest.Resources {
		data, ok := entries[r.Path]
		sum := sha256.Sum256(data)
		if !ok || r.Bytes != int64(len(data)) || r.Hash != "sha256:"+hex.EncodeToString(sum[:]) || r.Name != path.Base(r.Path) {
			t.Errorf("resource %+v does not describe its entry (%d bytes)", r, len(data))
		}
		listed[r.Path] = true
	}
	for name := range entries {
		if !listed[name] && name != "datapackage.json" && name != "datapackage-digest.json" {
			t.Errorf("%s not listed in datapackage.json", name)
		}
	}
	var digest struct{ Path, Hash string }
	sum := sha256.Sum256(entries["datapackage.json"])
	if err := json.Unmarshal(entries["datapackage-digest.json"], &digest); err != nil || digest.Path != "datapackage.json" || digest.Hash != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("datapackage-digest.json %s does not hash datapackage.json (%v)", entries["datapackage-digest.json"], err)
	}
}

// TestWriteWACZOpenFile: a file still being written is packaged up to its
// last complete record, under its final name, and two files of one name
// are refused.
func TestWriteWACZOpenFile(t *testing.T) {
	dir := t.TempDir()
	w := newTestWriter(t, dir, Options{})
	defer w.Close()
	for _, ex := range replayExchanges()[:2] {
		if err := w.WriteExchange(ex); err != nil {
			t.Fatal(err)
		}
	}
	open := files(t, dir, true)[0]
	complete, _ := os.ReadFile(open)
	f, err := os.OpenFile(open, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(gzipBytes(t, "WARC/1.1\r\nContent-Length: 100\r\n\r\ncut")[:20]) // a record being written
	f.Close()
	var out bytes.Buffer
	st, err := WriteWACZ(&out, []string{open}, PackageInfo{TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := readZip(t, out.Bytes())
	name := "archive/" + strings.TrimSuffix(filepath.Base(open), openSuffix)
	if !bytes.Equal(entries[name], complete) || st.Pages != 2 {
		t.Errorf("%s: %d bytes and %d pages, want the %d complete bytes and 2 pages", name, len(entries[name]), st.Pages, len(complete))
	}
	if _, err := WriteWACZ(io.Discard, []string{open, open}, PackageInfo{TempDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "two WARC files") {
		t.Errorf("two files of one name: %v", err)
	}
}

// TestWACZReplaysInReplayWebPage packages a small crawl as a WACZ and
// opens it in ReplayWeb.page, served with the package from a loopback
// HTTP server, in headless Chromium: the archived page must replay with
// its text, found in the replay frame's DOM. A screenshot is kept in the
// test's artifacts (go test -artifacts; make test keeps them in
// bin/artifacts).
func TestWACZReplaysInReplayWebPage(t *testing.T) {
	dir := t.TempDir()
	paths := writeIndexed(t, dir, 0, replayExchanges())
	wacz := filepath.Join(t.TempDir(), "crawl.wacz")
	f, err := os.Create(wacz)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(f)
	if _, err := WriteWACZ(bw, paths, PackageInfo{Title: "replay test", TempDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	replaytest.Replay(t, wacz, "http://replay.example/page.html", "20250314150926", "The quick swarm replays the archived page.", "replaywebpage.png")
}
