package warc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// pagesOf parses a pages.jsonl: its header line, then URL → timestamps.
func pagesOf(t *testing.T, data []byte) map[string][]string {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(data))
	if !sc.Scan() || sc.Text()+"\n" != pagesHeader {
		t.Fatalf("pages list does not start with its header: %q", sc.Text())
	}
	out := map[string][]string{}
	for sc.Scan() {
		var p waczPage
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		out[p.URL] = append(out[p.URL], p.TS)
	}
	return out
}

// TestLatestPages: when the same URL was captured twice (in two files, as
// when a page is fetched again after its holder left), the pages list with
// LatestPages holds it once, at its later time, in WritePages and in a
// WACZ package alike; without it, both captures are listed.
func TestLatestPages(t *testing.T) {
	exs := replayExchanges()
	later := exs[0]
	later.Date = later.Date.Add(time.Hour)
	later.Text = "refetched"
	dir := t.TempDir()
	paths := writeIndexed(t, dir, 1<<10, append(exs, later))
	const page = "http://replay.example/page.html"
	wantTS := later.Date.UTC().Format(time.RFC3339)

	var all bytes.Buffer
	if _, err := WritePages(&all, paths, PackageInfo{TempDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if got := pagesOf(t, all.Bytes())[page]; len(got) != 2 {
		t.Fatalf("without LatestPages: %s listed %d times, want 2 (%v)", page, len(got), got)
	}
	var latest bytes.Buffer
	n, err := WritePages(&latest, paths, PackageInfo{TempDir: t.TempDir(), LatestPages: true})
	if err != nil {
		t.Fatal(err)
	}
	pages := pagesOf(t, latest.Bytes())
	if got := pages[page]; len(got) != 1 || got[0] != wantTS {
		t.Fatalf("with LatestPages: %s listed at %v, want once at %s", page, got, wantTS)
	}
	if n != len(pages) || n != 3 {
		t.Errorf("WritePages counted %d pages, the list has %d URLs, want 3", n, len(pages))
	}
	if !strings.Contains(latest.String(), `"text":"refetched"`) {
		t.Errorf("the kept page is not the later capture's:\n%s", latest.String())
	}

	var wacz bytes.Buffer
	st, err := WriteWACZ(&wacz, paths, PackageInfo{TempDir: t.TempDir(), LatestPages: true})
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := readZip(t, wacz.Bytes())
	if got := entries["pages/pages.jsonl"]; !bytes.Equal(got, latest.Bytes()) {
		t.Errorf("the WACZ's pages list differs from WritePages':\n%s\nwant\n%s", got, latest.Bytes())
	}
	if st.Pages != 3 {
		t.Errorf("WACZ stats: %d pages, want 3", st.Pages)
	}
}

// TestCompleteLengthFrom: reading on from a record's end finds the same
// complete prefix as reading from the start, also when the file ends in a
// partly written record.
func TestCompleteLengthFrom(t *testing.T) {
	dir := t.TempDir()
	paths := writeIndexed(t, dir, 1<<30, replayExchanges())
	data, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	entries := readEntries(t, bytes.NewReader(mustRead(t, paths[0]+IndexSuffix)))
	mid := entries[len(entries)/2].Offset // a record's start is the previous one's end
	cut := paths[0] + ".cut"
	if err := os.WriteFile(cut, data[:len(data)-7], 0o644); err != nil {
		t.Fatal(err)
	}
	whole, err := CompleteLength(cut, 0)
	if err != nil {
		t.Fatal(err)
	}
	if whole <= mid || whole >= int64(len(data)) {
		t.Fatalf("complete length %d of a file of %d cut by 7 bytes (a record starts at %d)", whole, len(data), mid)
	}
	from, err := CompleteLength(cut, mid)
	if err != nil || from != whole {
		t.Errorf("from %d: %d, %v; from 0: %d", mid, from, err, whole)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
