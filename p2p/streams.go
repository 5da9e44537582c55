package p2p

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pproto "github.com/libp2p/go-libp2p/core/protocol"
	msmux "github.com/multiformats/go-multistream"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/protocol"
)

// DefaultExchangeTimeout bounds one request/response exchange when the
// caller's context has no earlier deadline.
const DefaultExchangeTimeout = 10 * time.Second

// Streams owns every swarmcrawl stream of a host: each exchange is one
// request and one response on a fresh stream, under a deadline, with a size
// cap on both messages. Keeping this in one place is what lets the rest of
// the p2p package ignore stream lifetimes entirely.
type Streams struct {
	host    host.Host
	timeout time.Duration
}

// NewStreams wraps h. timeout bounds every exchange (0 means
// DefaultExchangeTimeout).
func NewStreams(h host.Host, timeout time.Duration) *Streams {
	if timeout <= 0 {
		timeout = DefaultExchangeTimeout
	}
	return &Streams{host: h, timeout: timeout}
}

// ErrNotDelivered marks a failed exchange whose request never reached the
// peer's handler: the stream did not open, or the peer does not (or no
// longer) speak the protocol. Any other failure may come after the peer
// acted on the request.
var ErrNotDelivered = errors.New("request not delivered")

// Call sends req to peer to on protocol pid and reads its response into resp.
func (s *Streams) Call(ctx context.Context, to peer.ID, pid string, req, resp proto.Message, max int) error {
	return s.CallWithin(ctx, to, pid, req, resp, max, s.timeout)
}

// CallWithin is Call bounded by timeout instead of the Streams' own.
func (s *Streams) CallWithin(ctx context.Context, to peer.ID, pid string, req, resp proto.Message, max int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := s.host.NewStream(ctx, to, libp2pproto.ID(pid))
	if err != nil {
		return fmt.Errorf("open %s to %s: %w: %w", pid, shortID(to), err, ErrNotDelivered)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = st.SetDeadline(dl)
	}
	// Reset unless the exchange completes, so a failed exchange never
	// leaves a half-open stream behind.
	done := false
	defer func() {
		if done {
			_ = st.Close()
		} else {
			_ = st.Reset()
		}
	}()
	if err := protocol.WriteMsg(st, req, max); err != nil {
		return fmt.Errorf("%s to %s: %w", pid, shortID(to), err)
	}
	if err := st.CloseWrite(); err != nil {
		return fmt.Errorf("%s to %s: close write: %w", pid, shortID(to), err)
	}
	if err := protocol.ReadMsg(st, resp, max); err != nil {
		// A stream to a peer known to speak the protocol is negotiated
		// lazily, with the request; a peer that no longer does answers
		// "not supported" or resets the stream for failed negotiation,
		// and never saw the request.
		var notSupported msmux.ErrNotSupported[libp2pproto.ID]
		var reset *network.StreamError
		if errors.As(err, &notSupported) ||
			errors.As(err, &reset) && reset.Remote && reset.ErrorCode == network.StreamProtocolNegotiationFailed {
			return fmt.Errorf("%s from %s: %w: %w", pid, shortID(to), err, ErrNotDelivered)
		}
		return fmt.Errorf("%s from %s: %w", pid, shortID(to), err)
	}
	done = true
	return nil
}

// Handle serves protocol pid: each incoming stream carries one request,
// decoded into a fresh message from newReq, answered by serve. A request
// that cannot be read is dropped with a stream reset: the peer sees an
// error, and nothing half-read is acted on.
func (s *Streams) Handle(pid string, max int, newReq func() proto.Message, serve func(ctx context.Context, from peer.ID, req proto.Message) proto.Message) {
	s.host.SetStreamHandler(libp2pproto.ID(pid), func(st network.Stream) {
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		defer cancel()
		_ = st.SetDeadline(time.Now().Add(s.timeout))
		req := newReq()
		if err := protocol.ReadMsg(st, req, max); err != nil {
			_ = st.Reset()
			return
		}
		resp := serve(ctx, st.Conn().RemotePeer(), req)
		if err := protocol.WriteMsg(st, resp, max); err != nil {
			_ = st.Reset()
			return
		}
		_ = st.Close()
	})
}

// Unhandle removes the handler of pid.
func (s *Streams) Unhandle(pid string) {
	s.host.RemoveStreamHandler(libp2pproto.ID(pid))
}

func shortID(id peer.ID) string {
	s := id.String()
	if len(s) > 12 {
		return s[len(s)-8:]
	}
	return s
}
