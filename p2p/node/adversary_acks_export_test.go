package node

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// AckAndDrop makes n answer every task batch "accepted" and drop its URLs,
// as the member of issue 29's "Suppression by a member" did: nothing is
// stored, replicated or queued, and no receipt comes back.
func (n *Node) AckAndDrop() {
	n.streams.Unhandle(protocol.TasksID)
	n.tasks.ServeTasks(func(_ context.Context, _ p2p.Inbound, tasks []*pb.Task) *pb.TaskBatchResult {
		return &pb.TaskBatchResult{Accepted: uint32(len(tasks))}
	})
}

// WithholdLeases makes n refuse every replicate write, as issue 29's
// "Lease withholding" member did: its predecessor gets no acknowledgement
// from it.
func (n *Node) WithholdLeases() {
	n.streams.Unhandle(protocol.ReplicateID)
	n.streams.Handle(protocol.ReplicateID, func() proto.Message { return &pb.WriteRequest{} },
		func(context.Context, p2p.Inbound, proto.Message) proto.Message {
			return &pb.WriteReply{Refused: "withheld"}
		})
}
