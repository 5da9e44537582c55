package node

import (
	"context"
	"slices"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// SeeAsRemote makes n's seed and task protocols see the connections of
// peers as coming from 203.0.113.7, off the node's machine, and its seed
// policy judge their signatures as those of peers off the machine. An in-process
// attacker reaches a node over loopback, which the seed policy rightly
// counts as the operator's machine; the adversary suite needs a stranger
// from elsewhere. Only the address the policy reads changes: the request
// is served by the node's own handler.
func (n *Node) SeeAsRemote(peers ...peer.ID) {
	remote := ma.StringCast("/ip4/203.0.113.7/tcp/4001")
	see := func(in p2p.Inbound) p2p.Inbound {
		if slices.Contains(peers, in.From) {
			in.RemoteAddr = remote
		}
		return in
	}
	n.seeds.seeAsRemote(peers...)
	n.streams.Unhandle(protocol.SeedID)
	n.tasks.ServeSeeds(func(ctx context.Context, in p2p.Inbound, urls []string, proofs []*pb.SeedProof) *pb.SeedResponse {
		return n.submitSeeds(ctx, see(in), urls, proofs)
	})
	n.streams.Unhandle(protocol.TasksID)
	n.tasks.ServeTasks(func(ctx context.Context, in p2p.Inbound, tasks []*pb.Task) *pb.TaskBatchResult {
		return n.acceptTasks(ctx, see(in), tasks)
	})
}
