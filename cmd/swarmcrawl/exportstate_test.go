package main

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// The member goroutines of a swarm export save its state at the same
// time: every save succeeds, and the state read back holds every file.
func TestExportStateConcurrentSaves(t *testing.T) {
	dir := t.TempDir()
	st, err := loadExportState(dir)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8*50)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				st.set(fmt.Sprintf("m%d-f%d.warc.gz", g, i), &exportFile{Name: "f.warc.gz", Size: int64(i), Complete: true})
				if err := st.save(dir); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("save: %v", err)
	}
	back, err := loadExportState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Files) != 8*50 {
		t.Errorf("state read back has %d files, want %d", len(back.Files), 8*50)
	}
}

// Two swarm exports into one directory at once: the second is refused.
func TestExportDirLocked(t *testing.T) {
	dir := t.TempDir()
	release, err := lockExportDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockExportDir(dir); err == nil {
		t.Fatal("a second export took the directory")
	}
	release()
	again, err := lockExportDir(dir)
	if err != nil {
		t.Fatalf("after the first ended: %v", err)
	}
	again()
}

// Wrong invocations of a swarm export fail with one line saying what to
// do, before anything is contacted.
func TestSwarmExportUsage(t *testing.T) {
	const peer = "/ip4/127.0.0.1/tcp/1/p2p/12D3KooWAwMGQWY2SRk76j3abLGVQs16i9mhgfjVe2jWQQV1gz2n"
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"export", "--swarm", "--out", dir}, "--peer is required"},
		{[]string{"export", "--swarm", "--peer", peer}, "--out DIR is required"},
		{[]string{"export", "--swarm", "--peer", peer, "--out", dir, "--format", "cdxj"}, `--format "cdxj": want wacz or folder`},
		{[]string{"export", "--swarm", "--peer", peer, "--out", dir, "--chunk", "10"}, "--chunk 10"},
		{[]string{"export", "--swarm", "--peer", "/ip4/127.0.0.1/tcp/1", "--out", dir}, "--peer: need one full multiaddr"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(c.args, nil, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line saying %q", c.args[1:], code, stderr.String(), c.want)
		}
	}
}
