package node_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/localswarm"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// smallDisk mounts a tmpfs of size bytes on a new directory for the test,
// and unmounts it at the end. It skips the test where it cannot mount (not
// root), except in CI, which runs as root.
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mount a tmpfs (CI runs as root): %v", err)
		}
		t.Skipf("cannot mount a tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fillDisk writes to a file in dir until the filesystem is full.
func fillDisk(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for i := 0; i < 1<<12; i++ {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
	t.Fatal("the disk never filled up")
}

// TestStoreFailureStopsNode: when the disk under a node's store refuses a
// write (here a full tmpfs, with the free-space check off so that the
// write itself fails), the node refuses the URLs it cannot store with an
// error and reports the failure on Failed, naming the disk's error; closed
// then, it leaves the ring and its successor owns its range.
func TestStoreFailureStopsNode(t *testing.T) {
	disk := smallDisk(t, 64<<20)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := localswarm.Start(ctx, localswarm.Options{Nodes: 2, Dir: t.TempDir(), Crawl: noWeb(),
		Configure: func(i int, cfg *node.Config) {
			if i == 0 {
				cfg.DataDir = filepath.Join(disk, "node")
				cfg.Store.MinFreeBytes = -1 // no early refusal: the write itself fails
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	target, other := s.Nodes[0], s.Nodes[1]
	owned := func(from, n int) []string {
		var out []string
		for i := from; len(out) < n; i++ {
			u := fmt.Sprintf("http://full%d.test/page", i)
			if k, _ := urls.TaskKey(u, urls.KeyHost); target.Ring().Owns(ring.ID(k)) {
				out = append(out, u)
			}
		}
		return out
	}
	select {
	case err := <-target.Failed():
		t.Fatalf("Failed before the disk filled: %v", err)
	default:
	}

	// The disk fills up; the node's next writes (new URLs sent to it as
	// their owner) fail once the journal's last page is used up.
	fillDisk(t, disk)
	client := newClient(t)
	id := connect(t, client, target)
	streams := p2p.NewStreams(client, 0, p2p.NoRingWork)
	var failure error
	var refused bool
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; failure == nil && i < 200 && time.Now().Before(deadline); i++ {
		batch := &pb.TaskBatch{}
		for _, u := range owned(i*1000, 100) {
			batch.Tasks = append(batch.Tasks, &pb.Task{Url: u})
		}
		resp := &pb.TaskBatchResult{}
		if err := streams.Call(ctx, id, protocol.TasksID, batch, resp); err != nil {
			t.Fatal(err)
		}
		refused = refused || resp.Error != ""
		select {
		case failure = <-target.Failed():
		case <-time.After(100 * time.Millisecond):
		}
	}
	if !refused {
		t.Error("no batch was refused with an error while the disk was full")
	}
	if failure == nil {
		// A refused write has had time to show: the watch looks twice a second.
		select {
		case failure = <-target.Failed():
		case <-time.After(2 * time.Second):
			t.Fatal("the node did not report its failed store")
		}
	}
	if !errors.Is(failure, syscall.ENOSPC) {
		t.Errorf("Failed = %v, want the disk's ENOSPC", failure)
	}
	key, _ := urls.TaskKey(owned(0, 1)[0], urls.KeyHost)
	if err := target.Close(); err != nil {
		t.Logf("close of the failed node: %v", err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		if other.Owns(ring.ID(key)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failed node's successor does not own its range 20 s after it left: %+v", other.Ring().State())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
