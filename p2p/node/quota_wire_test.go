package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/localswarm"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// A peer that floods a node with seeds or tasks beyond its quota is
// refused, told when to retry and has nothing taken, while another
// peer's seeds and tasks are taken at once; the flooder's retry is taken
// once its quota allows, and every URL accepted is in the seen set.
func TestPeerQuotas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	quota := node.Quota{Rate: 100, Burst: 100}
	s, err := localswarm.Start(ctx, localswarm.Options{Nodes: 1, Dir: t.TempDir(), Crawl: noWeb(),
		Configure: func(_ int, cfg *node.Config) { cfg.SeedQuota, cfg.TaskQuota = quota, quota }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	target := s.Nodes[0]
	flooder, other := newClient(t), newClient(t)
	id := connect(t, flooder, target)
	connect(t, other, target)
	urls := func(kind string, i int) []string {
		var out []string
		for j := range quota.Burst {
			out = append(out, fmt.Sprintf("http://%s%d-%d.test/", kind, i, j))
		}
		return out
	}

	// Seeds: 20 requests of a full burst each, back to back. 19 bursts
	// refill in 19 s, far longer than the flood takes.
	fs := p2p.NewStreams(flooder, 0, p2p.NoRingWork)
	accepted, refused := 0, -1
	for i := range 20 {
		resp := &pb.SeedResponse{}
		if err := fs.Call(ctx, id, protocol.SeedID, &pb.SeedRequest{Urls: urls("seed", i)}, resp); err != nil {
			t.Fatal(err)
		}
		switch {
		case resp.RetryAfterNs > 0:
			if resp.Error == "" || resp.Accepted+resp.Duplicates+resp.Pending != 0 || len(resp.Rejected) != 0 {
				t.Fatalf("refused seed request: %v; want an error and nothing taken", resp)
			}
			if refused < 0 {
				refused = i
			}
		case resp.Error != "":
			t.Fatalf("seed request %d: %s", i, resp.Error)
		default:
			accepted += int(resp.Accepted + resp.Duplicates + resp.Pending)
		}
	}
	if refused < 0 {
		t.Fatal("a flood of 20 bursts of seeds was never refused")
	}
	res, err := p2p.SubmitSeeds(ctx, other, target.Addrs()[0], urls("other", 0))
	if err != nil || res.Accepted+res.Pending != quota.Burst {
		t.Fatalf("another client's seeds during the flood: %+v, %v", res, err)
	}
	// The flooder's retry of a refused request is taken once its quota
	// allows (SubmitSeeds waits as told).
	res, err = p2p.SubmitSeeds(ctx, flooder, target.Addrs()[0], urls("seed", refused))
	if err != nil || res.Accepted+res.Pending != quota.Burst {
		t.Fatalf("the flooder's retry: %+v, %v", res, err)
	}
	accepted += 2 * quota.Burst

	// Tasks: the same flood on the task protocol.
	throttled := false
	for i := range 20 {
		batch := &pb.TaskBatch{}
		for _, u := range urls("task", i) {
			batch.Tasks = append(batch.Tasks, &pb.Task{Url: u})
		}
		resp := &pb.TaskBatchResult{}
		if err := fs.Call(ctx, id, protocol.TasksID, batch, resp); err != nil {
			t.Fatal(err)
		}
		if resp.RetryAfterNs > 0 {
			throttled = true
			if resp.Error == "" || resp.Accepted+resp.Duplicates != 0 || len(resp.NotOwned)+len(resp.Rejected) != 0 {
				t.Fatalf("refused task batch: %v; want an error and nothing taken", resp)
			}
			continue
		}
		if resp.Error != "" {
			t.Fatalf("task batch %d: %s", i, resp.Error)
		}
		accepted += int(resp.Accepted+resp.Duplicates) + len(resp.NotOwned)
	}
	if !throttled {
		t.Fatal("a flood of 20 bursts of tasks was never refused")
	}
	batch := &pb.TaskBatch{}
	for _, u := range urls("othertask", 0) {
		batch.Tasks = append(batch.Tasks, &pb.Task{Url: u})
	}
	resp := &pb.TaskBatchResult{}
	if err := p2p.NewStreams(other, 0, p2p.NoRingWork).Call(ctx, id, protocol.TasksID, batch, resp); err != nil || resp.Error != "" || int(resp.Accepted) != quota.Burst {
		t.Fatalf("another peer's tasks during the flood: %v, %v", resp, err)
	}
	accepted += quota.Burst

	st := target.Status()
	if st.Resources.SeedsRefused == 0 || st.Resources.TasksRefused == 0 {
		t.Errorf("status counts no refusals: %+v", st.Resources)
	}
	// Nothing accepted is lost: every URL taken reaches the seen set.
	for i := 0; i < 200 && target.Status().Seen < int64(accepted); i++ {
		time.Sleep(25 * time.Millisecond)
	}
	if seen := target.Status().Seen; seen != int64(accepted) {
		t.Fatalf("%d URLs taken, %d in the seen set", accepted, seen)
	}
}

// A node keeps its ring neighbours' connections from the connection
// manager's trimming: a flood of strangers' connections cannot cut it off
// its ring.
func TestRingNeighboursProtected(t *testing.T) {
	s := startSwarm(t, 3)
	for _, n := range s.Nodes {
		// The first successor on another machine (the next positions
		// may be the node's own).
		var id peer.ID
		for _, succ := range n.Ring().Successors() {
			m, err := p2p.MachineOf(succ)
			if err != nil {
				t.Fatal(err)
			}
			if m != n.ID() {
				id = m
				break
			}
		}
		if id == "" {
			t.Fatalf("node %s: no successor on another machine: %v", n.ID(), n.Ring().Successors())
		}
		protected := func() bool {
			return n.Host().ConnManager().IsProtected(id, "swarmcrawl-ring") && n.Status().Resources.ProtectedPeers >= 2
		}
		for i := 0; i < 200 && !protected(); i++ {
			time.Sleep(25 * time.Millisecond)
		}
		if !protected() {
			t.Fatalf("node %s: successor %s not protected (%d peers protected)", n.ID(), id, n.Status().Resources.ProtectedPeers)
		}
	}
}
