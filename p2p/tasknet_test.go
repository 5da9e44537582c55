package p2p_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// TestTasksRefusedAcrossKeyModes: an owner refuses, whole and before
// judging a task, a batch from a node that computes ring keys another way
// (started with another --key), and the sender gets a KeyModeError naming
// both modes; nodes that agree exchange batches, and so does a sender that
// does not say its mode (a release from before the check).
func TestTasksRefusedAcrossKeyModes(t *testing.T) {
	client, server := pair(t)
	var judged atomic.Int64
	p2p.NewTaskTransport(p2p.NewStreams(server, 0, p2p.NoRingWork), "host").ServeTasks(
		func(_ context.Context, _ p2p.Inbound, tasks []*pb.Task) *pb.TaskBatchResult {
			judged.Add(int64(len(tasks)))
			return &pb.TaskBatchResult{Accepted: uint32(len(tasks))}
		})
	owner := ring.Peer{Addr: server.ID().String()}
	tasks := []*pb.Task{{Url: "http://a.test/"}, {Url: "http://b.test/"}}
	ctx := context.Background()

	streams := p2p.NewStreams(client, 0, p2p.NoRingWork)
	_, err := p2p.NewTaskTransport(streams, "url").Send(ctx, owner, tasks)
	kerr, ok := errors.AsType[*p2p.KeyModeError](err)
	if !ok {
		t.Fatalf("a batch keyed by url to an owner keying by host: %v, want a KeyModeError", err)
	}
	if kerr.Ours != "url" || kerr.Theirs != "host" || !strings.Contains(err.Error(), "--key must be the same") {
		t.Errorf("error %+v: %v", kerr, err)
	}
	if n := judged.Load(); n != 0 {
		t.Errorf("the owner judged %d tasks of a batch keyed another way", n)
	}

	if resp, err := p2p.NewTaskTransport(streams, "host").Send(ctx, owner, tasks); err != nil || resp.Accepted != 2 {
		t.Fatalf("a batch keyed the same way: %v %v", resp, err)
	}
	resp := &pb.TaskBatchResult{}
	if err := streams.Call(ctx, server.ID(), protocol.TasksID, &pb.TaskBatch{Tasks: tasks}, resp); err != nil || resp.Accepted != 2 || resp.Error != "" {
		t.Fatalf("a batch without a key mode: %v %v", resp, err)
	}
	if n := judged.Load(); n != 4 {
		t.Errorf("the owner judged %d tasks, want the 4 of the two batches it took", n)
	}
}
