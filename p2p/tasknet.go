package p2p

import (
	"context"
	"errors"
	"fmt"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// sendTasks delivers a batch to a remote owner on the tasks protocol.
func sendTasks(s *Streams) sendFunc {
	return func(ctx context.Context, to ring.Peer, tasks []crawl.Task) (acceptResult, error) {
		id, err := peer.Decode(to.Addr)
		if err != nil {
			return acceptResult{}, fmt.Errorf("send tasks: owner %q: %w", to.Addr, err)
		}
		req := &pb.TaskBatch{Tasks: encodeTasks(tasks)}
		resp := &pb.TaskBatchResult{}
		if err := s.Call(ctx, id, protocol.TasksID, req, resp, protocol.MaxTaskMsgBytes); err != nil {
			return acceptResult{}, fmt.Errorf("send %d tasks: %w", len(tasks), err)
		}
		if resp.Error != "" {
			return acceptResult{}, fmt.Errorf("send %d tasks: owner %s: %s", len(tasks), shortID(id), resp.Error)
		}
		res := acceptResult{accepted: int(resp.Accepted), duplicates: int(resp.Duplicates), notOwned: decodeTasks(resp.NotOwned)}
		for _, r := range resp.Rejected {
			res.rejected = append(res.rejected, rejection{r.Url, r.Reason})
		}
		if got := res.accepted + res.duplicates + len(res.notOwned) + len(res.rejected); got != len(tasks) {
			// An owner that loses count cannot be trusted with the batch:
			// treat it as undelivered so nothing silently disappears.
			return acceptResult{}, fmt.Errorf("send %d tasks: owner %s accounted for %d", len(tasks), shortID(id), got)
		}
		return res, nil
	}
}

// serveTasks answers the tasks protocol with the local owner.
func serveTasks(s *Streams, o *owner) {
	s.Handle(protocol.TasksID, protocol.MaxTaskMsgBytes,
		func() proto.Message { return &pb.TaskBatch{} },
		func(ctx context.Context, _ peer.ID, m proto.Message) proto.Message {
			batch := m.(*pb.TaskBatch)
			if len(batch.Tasks) > protocol.MaxBatchTasks {
				return &pb.TaskBatchResult{Error: fmt.Sprintf("batch of %d tasks exceeds %d", len(batch.Tasks), protocol.MaxBatchTasks)}
			}
			res, err := o.Accept(ctx, decodeTasks(batch.Tasks))
			if err != nil {
				return &pb.TaskBatchResult{Error: err.Error()}
			}
			out := &pb.TaskBatchResult{Accepted: uint32(res.accepted), Duplicates: uint32(res.duplicates), NotOwned: encodeTasks(res.notOwned)}
			for _, r := range res.rejected {
				out.Rejected = append(out.Rejected, &pb.Rejection{Url: r.url, Reason: r.reason})
			}
			return out
		})
}

func encodeTasks(ts []crawl.Task) []*pb.Task {
	out := make([]*pb.Task, len(ts))
	for i, t := range ts {
		out[i] = &pb.Task{Url: t.URL, Depth: uint32(t.Depth), Redirects: uint32(t.Redirects)}
	}
	return out
}

func decodeTasks(ts []*pb.Task) []crawl.Task {
	out := make([]crawl.Task, len(ts))
	for i, t := range ts {
		out[i] = crawl.Task{URL: t.GetUrl(), Depth: int(t.GetDepth()), Redirects: int(t.GetRedirects())}
	}
	return out
}

// SeedResult is what a member did with submitted seeds.
type SeedResult struct {
	Accepted   int // new URLs queued by their owners
	Duplicates int // already seen by their owners
	Pending    int // owner not reachable yet; the member keeps retrying
	Rejected   []Rejection
}

// Rejection is a seed refused for good, with the reason.
type Rejection struct {
	URL, Reason string
}

// SubmitSeeds sends seed URLs to the swarm member at addr (a full
// /p2p/ multiaddr) over the seed protocol, from a short-lived host h.
func SubmitSeeds(ctx context.Context, h host.Host, addr string, urls []string) (SeedResult, error) {
	if len(urls) == 0 {
		return SeedResult{}, errors.New("submit seeds: no URLs")
	}
	infos, err := ParseAddrInfos([]string{addr})
	if err != nil {
		return SeedResult{}, fmt.Errorf("submit seeds: %w", err)
	}
	if len(infos) != 1 {
		return SeedResult{}, fmt.Errorf("submit seeds: peer %q: need exactly one /p2p/ address", addr)
	}
	if err := h.Connect(ctx, infos[0]); err != nil {
		return SeedResult{}, fmt.Errorf("submit seeds: connect %s: %w", addr, err)
	}
	s := NewStreams(h, 0)
	var total SeedResult
	for len(urls) > 0 {
		n := min(len(urls), protocol.MaxSeedURLs)
		resp := &pb.SeedResponse{}
		if err := s.Call(ctx, infos[0].ID, protocol.SeedID, &pb.SeedRequest{Urls: urls[:n]}, resp, protocol.MaxSeedMsgBytes); err != nil {
			return total, fmt.Errorf("submit seeds: %w", err)
		}
		if resp.Error != "" {
			return total, fmt.Errorf("submit seeds: %s", resp.Error)
		}
		total.Accepted += int(resp.Accepted)
		total.Duplicates += int(resp.Duplicates)
		total.Pending += int(resp.Pending)
		for _, r := range resp.Rejected {
			total.Rejected = append(total.Rejected, Rejection{URL: r.Url, Reason: r.Reason})
		}
		urls = urls[n:]
	}
	return total, nil
}
