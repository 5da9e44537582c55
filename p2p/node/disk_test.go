package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
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

// TestLowDiskRefusesNewURLs: below its free-disk threshold an owner
// refuses new URLs with an error (the sender keeps them), says so in
// status and in its log, keeps what it accepted before and still answers
// duplicates; once space is freed it accepts again. The free space is
// injected (store.Options.FreeSpace) rather than a disk filled.
func TestLowDiskRefusesNewURLs(t *testing.T) {
	const threshold = 100 << 20
	var free atomic.Uint64
	free.Store(10 << 30)
	logs := &syncBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := localswarm.Start(ctx, localswarm.Options{Nodes: 2, Dir: t.TempDir(), Crawl: noWeb(),
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Configure: func(i int, cfg *node.Config) {
			cfg.Store.MinFreeBytes = threshold
			cfg.Store.FreeSpace = func(string) (uint64, error) { return free.Load(), nil }
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	target := s.Nodes[0]
	var mine []string
	for i := 0; len(mine) < 6; i++ {
		u := fmt.Sprintf("http://disk%d.test/page", i)
		if k, _ := urls.TaskKey(u, urls.KeyHost); target.Ring().Owns(ring.ID(k)) {
			mine = append(mine, u)
		}
	}
	client := newClient(t)
	id := connect(t, client, target)
	send := func(us ...string) *pb.TaskBatchResult {
		t.Helper()
		batch := &pb.TaskBatch{}
		for _, u := range us {
			batch.Tasks = append(batch.Tasks, &pb.Task{Url: u})
		}
		resp := &pb.TaskBatchResult{}
		if err := p2p.NewStreams(client, 0, p2p.NoRingWork).Call(ctx, id, protocol.TasksID, batch, resp); err != nil {
			t.Fatal(err)
		}
		return resp
	}

	if r := send(mine[:3]...); r.Error != "" || r.Accepted != 3 {
		t.Fatalf("plenty of space: %+v, want 3 accepted", r)
	}
	if st := target.Status().Disk; st.Low || st.FreeBytes != 10<<30 || st.MinFreeBytes != threshold {
		t.Fatalf("status with plenty of space: %+v", st)
	}

	free.Store(threshold - 1)
	r := send(mine[3:]...)
	if r.Accepted != 0 || !strings.Contains(r.Error, "disk space low") {
		t.Fatalf("low disk: %+v, want the new URLs refused with an error naming the disk", r)
	}
	if r := send(mine[0]); r.Error != "" || r.Duplicates != 1 {
		t.Fatalf("low disk, a URL accepted before: %+v, want a duplicate", r)
	}
	st := target.Status()
	if !st.Disk.Low || st.Disk.Refused != 3 || st.Disk.FreeBytes != threshold-1 {
		t.Fatalf("status with a low disk: %+v, want low with 3 refused", st.Disk)
	}
	if st.Seen != 3 {
		t.Fatalf("seen set holds %d URLs with a low disk, want the 3 accepted before", st.Seen)
	}
	if !strings.Contains(logs.String(), "disk space low") {
		t.Errorf("no log line says the disk is low:\n%s", logs)
	}

	free.Store(threshold)
	if r := send(mine[3:]...); r.Error != "" || r.Accepted != 3 {
		t.Fatalf("space freed: %+v, want the 3 new URLs accepted", r)
	}
	if st := target.Status(); st.Disk.Low || st.Seen != 6 {
		t.Fatalf("space freed: disk %+v, seen %d; want not low and 6 seen", st.Disk, st.Seen)
	}
	if !strings.Contains(logs.String(), "accepting new URLs again") {
		t.Errorf("no log line says the node accepts again:\n%s", logs)
	}
}
