package p2p

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// FetchTransport carries the fetch batches of hot hosts from their owner
// to a helper and the helper's outcomes back (/swarmcrawl/fetch/1.1.0).
// The batch's meaning (which owner may send it, what its tasks and
// outcomes must say) is the node's to check; this side bounds the
// exchange: the request is read within 10s, the handler works at most
// MaxFetchWait and the reply is written within 5s (see limits).
type FetchTransport struct {
	host    host.Host
	streams *Streams
	log     *slog.Logger
}

// NewFetchTransport returns the fetch transport of h over s.
func NewFetchTransport(h host.Host, s *Streams, log *slog.Logger) *FetchTransport {
	return &FetchTransport{host: h, streams: s, log: log}
}

// Connected reports whether the host has a connection to p: an owner only
// offers a batch to a helper it is connected to.
func (t *FetchTransport) Connected(p ring.Peer) bool {
	id, _, err := PositionOf(p)
	return err == nil && t.host.Network().Connectedness(id) == network.Connected
}

// Fetch sends req to the helper to and waits at most wait for its reply.
// An error that wraps ErrNotDelivered means the helper never saw the
// batch; any other error means it may have acted on it. A batch above the
// protocol's cap is refused before any helper is contacted.
func (t *FetchTransport) Fetch(ctx context.Context, to ring.Peer, req *pb.FetchBatchRequest, wait time.Duration) (*pb.FetchBatchReply, error) {
	id, _, err := PositionOf(to)
	if err != nil {
		return nil, fmt.Errorf("helper %q: %w: %w", to.Addr, err, ErrNotDelivered)
	}
	if size, max := proto.Size(req), limits[protocol.FetchID].MaxBytes; size > max {
		return nil, fmt.Errorf("fetch batch of %d bytes: %w (cap %d): %w", size, protocol.ErrTooLarge, max, ErrNotDelivered)
	}
	reply := &pb.FetchBatchReply{}
	if err := t.streams.CallWithin(ctx, id, protocol.FetchID, req, reply, wait); err != nil {
		return nil, err
	}
	return reply, nil
}

// Serve answers the fetch protocol with serve, which learns when the
// batch's stream arrived (the helper's deadline for its reply counts from
// then). A reply
// above the protocol's cap is replaced by one that reports the batch
// failed, so the owner fetches its tasks again. Unhandle(FetchID) on the
// Streams stops serving and waits for the batches in progress.
func (t *FetchTransport) Serve(serve func(ctx context.Context, in Inbound, req *pb.FetchBatchRequest) *pb.FetchBatchReply) {
	t.streams.Handle(protocol.FetchID, func() proto.Message { return &pb.FetchBatchRequest{} },
		func(ctx context.Context, in Inbound, m proto.Message) proto.Message {
			reply := serve(ctx, in, m.(*pb.FetchBatchRequest))
			if size := proto.Size(reply); size > protocol.MaxFetchMsgBytes {
				t.log.Warn("fetch reply too large; reporting the batch failed", "bytes", size)
				reply = &pb.FetchBatchReply{Error: fmt.Sprintf("reply of %d bytes exceeds %d", size, protocol.MaxFetchMsgBytes), Failed: true}
			}
			return reply
		})
}
