package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"

	"github.com/swarmcrawl/swarmcrawl/p2p"
)

// A member whose range calls fail a few times in a row (a reset stream, a
// restart) is asked again, up to 3 times a range, and the file arrives
// whole; one that keeps failing is given up on, with what arrived kept
// for a rerun.
func TestFetchRetries(t *testing.T) {
	content := make([]byte, 50_000)
	for i := range content {
		content[i] = byte(i * 7)
	}
	client, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	server, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	defer server.Close()
	if err := client.Connect(context.Background(), server.Peerstore().PeerInfo(server.ID())); err != nil {
		t.Fatal(err)
	}
	var calls, failNext, failFrom atomic.Int64
	failFrom.Store(1 << 40)
	ss := p2p.NewStreams(server, 0, p2p.NoRingWork)
	defer ss.Close()
	p2p.ServeArchive(ss, func(context.Context, p2p.Inbound) ([]p2p.ArchiveFile, bool, error) { return nil, false, nil },
		func(_ context.Context, _ p2p.Inbound, _ string, off int64, n int) ([]byte, error) {
			calls.Add(1)
			if failNext.Add(-1) >= 0 || off >= failFrom.Load() {
				return nil, errors.New("disk busy")
			}
			return content[off:min(off+int64(n), int64(len(content)))], nil
		})
	f := p2p.ArchiveFile{Name: "a.warc.gz", Size: int64(len(content)), SHA256: sha256.Sum256(content)}
	ex := &swarmExport{streams: p2p.NewStreams(client, 0, p2p.NoRingWork), chunk: 4096, timeout: time.Minute, retryWait: time.Millisecond,
		progress: newProgressLine(io.Discard), stderr: io.Discard}
	part := filepath.Join(t.TempDir(), "a.warc.gz.part")

	failNext.Store(3) // three failures in a row: the fourth try succeeds
	if err := ex.fetchPart(server.ID(), f, part); err != nil {
		t.Fatalf("after 3 failures: %v", err)
	}
	if got, _ := os.ReadFile(part); sha256.Sum256(got) != f.SHA256 {
		t.Fatalf("the file arrived with %d bytes, not the member's", len(got))
	}
	if want := int64(3 + (len(content)+4095)/4096); calls.Load() != want {
		t.Errorf("%d calls, want %d", calls.Load(), want)
	}

	// A member that keeps failing from some byte on: given up after 3
	// retries, with what arrived before kept.
	part2 := filepath.Join(t.TempDir(), "b.warc.gz.part")
	failNext.Store(0)
	failFrom.Store(16384)
	calls.Store(0)
	ex2 := &swarmExport{streams: ex.streams, chunk: 8192, timeout: time.Minute, retryWait: time.Millisecond,
		progress: newProgressLine(io.Discard), stderr: io.Discard}
	if err := ex2.fetchPart(server.ID(), f, part2); err == nil {
		t.Fatal("a member that keeps failing: the fetch succeeded")
	}
	if fi, err := os.Stat(part2); err != nil || fi.Size() != 16384 {
		t.Errorf("after giving up: partial file %v, %v; want the 16384 bytes that arrived kept", fi, err)
	}
	if calls.Load() != 2+4 {
		t.Errorf("%d calls, want 2 that succeeded and 4 that failed (a try and 3 retries)", calls.Load())
	}
}
