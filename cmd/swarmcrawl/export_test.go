package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/node"
	"github.com/swarmcrawl/swarmcrawl/store/warc"
)

// exportData writes a node data dir whose WARC directory holds complete
// files with their indexes, an older file without one, and, with open, a
// file still being written.
func exportData(t *testing.T) (data string, pages int) {
	t.Helper()
	data = t.TempDir()
	dir := filepath.Join(data, node.WARCDir)
	w, err := warc.NewWriter(dir, warc.Options{MaxFileBytes: 900})
	if err != nil {
		t.Fatal(err)
	}
	date := time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)
	for i, u := range []string{"https://b.example/1", "https://a.example/2", "https://www.c.example/3", "https://a.example/1"} {
		if err := w.WriteExchange(warc.Exchange{URL: u, Date: date.Add(time.Duration(i) * time.Second), Status: 200,
			ResponseHeader: http.Header{"Content-Type": {"text/html"}}, Body: []byte("<title>t</title>page " + u),
			Title: "t", Text: "page " + u}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := warc.Files(dir, false)
	if err != nil || len(files) < 2 {
		t.Fatalf("files %v, %v", files, err)
	}
	// The oldest file predates indexes.
	if err := os.Remove(files[0] + warc.IndexSuffix); err != nil {
		t.Fatal(err)
	}
	return data, 4
}

// TestExportCDXJ: export --format cdxj writes one sorted index of all of
// a node's WARC files, from the indexes written with them and, for a file
// without one, from the file itself: the same as BuildIndex over every
// file, merged.
func TestExportCDXJ(t *testing.T) {
	data, pages := exportData(t)
	var stdout, stderr bytes.Buffer
	if err := runExport([]string{"--data", data, "--format", "cdxj"}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	files, _ := warc.Files(filepath.Join(data, node.WARCDir), false)
	s := warc.NewIndexSorter(t.TempDir(), 0)
	defer s.Close()
	for _, f := range files {
		var b bytes.Buffer
		if _, err := warc.BuildIndex(f, &b); err != nil {
			t.Fatal(err)
		}
		if err := s.AddIndex(&b, f); err != nil {
			t.Fatal(err)
		}
	}
	var want bytes.Buffer
	n, err := s.WriteTo(&want)
	if err != nil {
		t.Fatal(err)
	}
	if stdout.String() != want.String() || n != int64(2*pages) {
		t.Errorf("export --format cdxj wrote\n%s\nwant (%d entries)\n%s", stdout.String(), n, want.String())
	}
	if !strings.Contains(stderr.String(), "exported 8 index entries") {
		t.Errorf("stderr: %s", stderr.String())
	}
}

// TestExportWACZ: export --format wacz writes a WACZ of a node's WARC
// files, stored, with its index, pages and manifest.
func TestExportWACZ(t *testing.T) {
	data, pages := exportData(t)
	out := filepath.Join(t.TempDir(), "crawl.wacz")
	var stdout, stderr bytes.Buffer
	if err := runExport([]string{"--data", data, "--format", "wacz", "--out", out}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	zr, err := zip.OpenReader(out)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	files, _ := warc.Files(filepath.Join(data, node.WARCDir), false)
	got := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		got[f.Name], err = io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		want, _ := os.ReadFile(f)
		if !bytes.Equal(got["archive/"+filepath.Base(f)], want) {
			t.Errorf("archive/%s differs from the node's file", filepath.Base(f))
		}
	}
	if n := bytes.Count(got["indexes/index.cdx"], []byte("\n")); n != pages {
		t.Errorf("index of %d entries, want %d (the responses)", n, pages)
	}
	if n := bytes.Count(got["pages/pages.jsonl"], []byte("\n")); n != 1+pages {
		t.Errorf("pages.jsonl of %d lines, want a header and %d pages", n, pages)
	}
	var manifest struct {
		WACZVersion string `json:"wacz_version"`
		Resources   []struct{ Path string }
	}
	if err := json.Unmarshal(got["datapackage.json"], &manifest); err != nil || manifest.WACZVersion != "1.1.1" || len(manifest.Resources) != len(files)+2 {
		t.Errorf("datapackage.json %s: %v", got["datapackage.json"], err)
	}
	if _, ok := got["datapackage-digest.json"]; !ok {
		t.Error("no datapackage-digest.json")
	}
	if !strings.Contains(stderr.String(), "4 pages") {
		t.Errorf("stderr: %s", stderr.String())
	}
}
