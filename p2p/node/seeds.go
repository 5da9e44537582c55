package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// acceptTasks answers a task batch from another node with the owner,
// within the sender's task quota. Its tasks at depth 0 (that no redirect
// led to) are seeds only if the sender may seed here (maySeed): a member
// that forwards its clients' seeds to their owners must be one this node
// takes seeds from, or those seeds count as links, and in a scoped crawl
// are refused unless their host is in scope already.
func (n *Node) acceptTasks(ctx context.Context, in p2p.Inbound, tasks []*pb.Task) *pb.TaskBatchResult {
	from := in.From
	if ok, after := n.taskQuota.take(from, len(tasks)); !ok {
		n.log.Debug("tasks refused: sender over its quota", "from", p2p.ShortID(from), "tasks", len(tasks), "retry_after", after)
		return &pb.TaskBatchResult{RetryAfterNs: int64(after),
			Error: fmt.Sprintf("peer %s is over its quota of %d tasks a second: nothing taken, retry in %v", p2p.ShortID(from), n.cfg.TaskQuota.Rate, after.Round(time.Millisecond))}
	}
	res, err := n.owner.Accept(ctx, decodeTasks(tasks), n.maySeed(in), false)
	if err != nil {
		return &pb.TaskBatchResult{Error: err.Error()}
	}
	out := &pb.TaskBatchResult{Accepted: uint32(res.Accepted), Duplicates: uint32(res.Duplicates), NotOwned: encodeTasks(res.NotOwned),
		Receipts: p2p.EncodeReceipts(res.Receipts)}
	for _, r := range res.Rejected {
		out.Rejected = append(out.Rejected, &pb.Rejection{Url: r.URL, Reason: r.Reason})
	}
	return out
}

// submitSeeds answers the seed protocol: it routes the seeds of a client
// that may seed (see Config.SeedFrom).
func (n *Node) submitSeeds(ctx context.Context, in p2p.Inbound, seeds []string) *pb.SeedResponse {
	from := in.From
	if !n.maySeed(in) {
		n.log.Warn("seeds refused: sender may not seed", "from", from.String(), "addr", in.RemoteAddr)
		return &pb.SeedResponse{Error: fmt.Sprintf("this node does not take seeds from peer %s: seed from the node's machine over a loopback address, or start the node with --seed-from %s", from, from)}
	}
	if ok, after := n.seedQuota.take(from, len(seeds)); !ok {
		n.log.Warn("seeds refused: sender over its quota", "from", p2p.ShortID(from), "seeds", len(seeds), "retry_after", after)
		return &pb.SeedResponse{RetryAfterNs: int64(after),
			Error: fmt.Sprintf("peer %s is over its quota of %d seeds a second: nothing taken, retry in %v", p2p.ShortID(from), n.cfg.SeedQuota.Rate, after.Round(time.Millisecond))}
	}
	res := n.Seed(ctx, seeds)
	n.log.Info("seeds submitted", "from", p2p.ShortID(from), "accepted", res.Accepted, "duplicates", res.Duplicates, "pending", res.Pending, "rejected", len(res.Rejected))
	out := &pb.SeedResponse{Accepted: uint32(res.Accepted), Duplicates: uint32(res.Duplicates), Pending: uint32(res.Pending)}
	for _, r := range res.Rejected {
		out.Rejected = append(out.Rejected, &pb.Rejection{Url: r.URL, Reason: r.Reason})
	}
	return out
}

// maySeed reports whether the sender of in may submit seeds: a client on
// this machine (connected over loopback), an allowed member, a listed
// seeder, or anyone when the node says so.
func (n *Node) maySeed(in p2p.Inbound) bool {
	switch {
	case n.cfg.SeedFromAnyone:
		return true
	case in.RemoteAddr != nil && manet.IsIPLoopback(in.RemoteAddr):
		return true
	}
	return slices.Contains(n.cfg.SeedFrom, in.From) || slices.Contains(n.cfg.Host.AllowPeers, in.From)
}

// Seed routes seed URLs to their owners, as the seed protocol does for
// remote clients.
func (n *Node) Seed(ctx context.Context, seeds []string) p2p.SeedResult {
	var res p2p.SeedResult
	tasks := make([]frontier.Task, 0, len(seeds))
	for _, raw := range seeds {
		u, err := urls.Normalize(nil, strings.TrimSpace(raw))
		if err != nil {
			res.Rejected = append(res.Rejected, p2p.Rejection{URL: raw, Reason: err.Error()})
			continue
		}
		tasks = append(tasks, frontier.Task{URL: u})
	}
	// A few quick passes absorb owners that moved or answered slowly;
	// whatever is left goes to the outbox and is retried until delivered.
	for attempt := 0; attempt < 3 && len(tasks) > 0; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(backoff(attempt)):
			}
		}
		r := n.links.Route(ctx, tasks, false)
		res.Accepted += r.accepted
		res.Duplicates += r.duplicates
		for _, rj := range r.rejected {
			res.Rejected = append(res.Rejected, p2p.Rejection{URL: rj.URL, Reason: rj.Reason})
		}
		tasks = r.undelivered
		if ctx.Err() != nil {
			break
		}
	}
	res.Pending = len(tasks)
	n.links.Defer(tasks, 1)
	return res
}
