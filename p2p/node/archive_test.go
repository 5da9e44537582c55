package node

import (
	"context"
	"crypto/sha256"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/store/warc"
)

// TestArchiveServer: the archive protocol's server offers a complete file
// whole and the file being written up to its last complete record (a
// partly written record at its end is not offered), with the SHA-256 of
// exactly what it offers, the digest carried forward as the file grows;
// it serves only listed files, within the size it listed, and refuses
// names that would leave the WARC directory.
func TestArchiveServer(t *testing.T) {
	dir := t.TempDir()
	w, err := warc.NewWriter(dir, warc.Options{MaxFileBytes: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	write := func(i int) {
		t.Helper()
		if err := w.WriteExchange(warc.Exchange{URL: "http://a.example/" + strings.Repeat("x", i), Date: time.Unix(1e9, 0), Status: 200,
			ResponseHeader: http.Header{"Content-Type": {"text/html"}}, Body: []byte(strings.Repeat("<p>page</p>", 100+i)), Text: "page"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		write(i)
	}
	a := newArchiveServer(dir)
	ctx := context.Background()
	check := func() []p2p.ArchiveFile {
		t.Helper()
		files, more, err := a.list(ctx, p2p.Inbound{})
		if err != nil || more {
			t.Fatalf("list: %v, more %v", err, more)
		}
		for _, f := range files {
			path := filepath.Join(dir, f.Name)
			if f.Open {
				path += ".open"
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(data)) < f.Size || sha256.Sum256(data[:f.Size]) != f.SHA256 {
				t.Errorf("%s: offered %d bytes with a digest that is not theirs (file %d bytes)", f.Name, f.Size, len(data))
			}
			got, err := a.read(ctx, p2p.Inbound{}, f.Name, 0, int(f.Size)+100)
			if err != nil || int64(len(got)) != f.Size {
				t.Errorf("%s: read %d bytes (%v), want the %d listed", f.Name, len(got), err, f.Size)
			}
			if _, err := a.read(ctx, p2p.Inbound{}, f.Name, f.Size+1, 10); err == nil {
				t.Errorf("%s: read beyond the listed size served", f.Name)
			}
		}
		return files
	}
	files := check()
	if len(files) < 2 || !files[len(files)-1].Open {
		t.Fatalf("want complete files and an open one, got %+v", files)
	}
	open := files[len(files)-1]
	// A record half written at the open file's end is not offered.
	f, err := os.OpenFile(filepath.Join(dir, open.Name+".open"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0x1f, 0x8b, 8, 0, 0, 0})
	f.Close()
	if again := check(); again[len(again)-1].Size != open.Size {
		t.Errorf("open file offered with %d bytes after a partial record was appended, want %d", again[len(again)-1].Size, open.Size)
	}

	for _, name := range []string{"../x.warc.gz", "a/b.warc.gz", ".hidden.warc.gz", "x.txt", "x.warc.gz.open", strings.Repeat("a", 200) + ".warc.gz"} {
		if p2p.ValidArchiveName(name) {
			t.Errorf("%q accepted as an archive name", name)
		}
	}
	if _, err := a.read(ctx, p2p.Inbound{}, "never-listed.warc.gz", 0, 10); err == nil {
		t.Errorf("a file never listed was served")
	}
}
