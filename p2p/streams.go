package p2p

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pproto "github.com/libp2p/go-libp2p/core/protocol"
	yamux "github.com/libp2p/go-yamux/v5"
	ma "github.com/multiformats/go-multiaddr"
	msmux "github.com/multiformats/go-multistream"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/protocol"
)

// DefaultExchangeTimeout bounds one request/response exchange of the
// short protocols (ring, tasks, seeds, shard) when the caller's context
// has no earlier deadline.
const DefaultExchangeTimeout = 10 * time.Second

// Limits bound the exchanges of one protocol: the size and deadlines of
// each exchange here, and what all of them together may hold through the
// libp2p resource manager (see resources.go).
type Limits struct {
	// MaxBytes caps the request and the response.
	MaxBytes int
	// Timeout bounds a whole exchange: the request, the handler's work and
	// the response. 0 means the Streams' timeout.
	Timeout time.Duration
	// ReadTimeout, when set, bounds reading the request on the serving
	// side instead of Timeout, and WriteTimeout writing the response once
	// the handler returned: for protocols whose handler may work far
	// longer than a message takes to travel.
	ReadTimeout, WriteTimeout time.Duration
	// FirstByteTimeout bounds, on the serving side, the wait for the
	// request's first byte: a stream that stays silent is reset long
	// before its read deadline. 0 means DefaultFirstByteTimeout.
	FirstByteTimeout time.Duration
	// Streams bounds the inbound streams of the protocol open at once,
	// from all peers together; PeerStreams from any one peer.
	Streams, PeerStreams int
	// Memory bounds the memory the protocol's frames may hold at once
	// (requests read and responses being read, and what decoding them
	// allocates), PeerMemory the part of it one peer's streams may hold:
	// at least protocol.FrameMemory(MaxBytes), one honest frame's worth.
	Memory, PeerMemory int64
	// Critical protocols may take the last fifth of every memory limit;
	// the others stop at four fifths, so that what is left is kept for
	// ring maintenance.
	Critical bool
	// MembersOnly protocols are served only to peers whose identity
	// carries the ring work the node asks of members (RingWork): a
	// stream from any other peer is reset with NotMemberCode before a
	// byte of it is read.
	MembersOnly bool
	// A node never has more than PeerStreams calls of a protocol open to
	// one peer, so that an honest node stays within the limits it
	// expects of others: a further call waits for one to end (within
	// its context), or, with NoWait, fails at once as not delivered.
	NoWait bool
}

// DefaultFirstByteTimeout is how long a served stream may stay silent
// before it is reset, unless its protocol's limits say otherwise. A caller
// writes its request as soon as the stream is open, so only an idle or
// hostile stream waits this long.
const DefaultFirstByteTimeout = 2 * time.Second

// MaxFetchWait is the longest a fetch batch's handler may run: it bounds
// how long one batch can hold a helper, whatever wait the owner asks for.
const MaxFetchWait = 10 * time.Minute

// limits are the bounds of every swarmcrawl protocol. This table is the
// one place that sets a protocol's size cap, deadlines and share of the
// node's resources: no other code opens, reads or writes a swarmcrawl
// stream. The per-peer stream limits of the swarmcrawl protocols add up to
// less than peerStreamsInbound, leaving room for the DHT and libp2p's own
// protocols (a test checks it); the ring, small and latency-critical, gets
// the most streams per peer and protocol-wide.
var limits = map[string]Limits{
	protocol.RingID: {MaxBytes: protocol.MaxRingMsgBytes,
		Streams: 4096, PeerStreams: 16, Memory: 64 << 20, PeerMemory: 2 << 20, Critical: true},
	protocol.TasksID: {MaxBytes: protocol.MaxTaskMsgBytes,
		Streams: 512, PeerStreams: 4, Memory: 128 << 20, PeerMemory: 16 << 20, MembersOnly: true},
	protocol.SeedID: {MaxBytes: protocol.MaxSeedMsgBytes,
		Streams: 64, PeerStreams: 2, Memory: 32 << 20, PeerMemory: 12 << 20},
	protocol.ReplicateID: {MaxBytes: protocol.MaxShardMsgBytes,
		Streams: 512, PeerStreams: 12, Memory: 256 << 20, PeerMemory: 48 << 20, MembersOnly: true},
	protocol.HandoffID: {MaxBytes: protocol.MaxShardMsgBytes,
		Streams: 256, PeerStreams: 2, Memory: 128 << 20, PeerMemory: 48 << 20, MembersOnly: true},
	protocol.DigestID: {MaxBytes: protocol.MaxShardMsgBytes,
		Streams: 256, PeerStreams: 2, Memory: 64 << 20, PeerMemory: 48 << 20, MembersOnly: true},
	protocol.PullID: {MaxBytes: protocol.MaxShardMsgBytes,
		Streams: 256, PeerStreams: 2, Memory: 64 << 20, PeerMemory: 48 << 20, MembersOnly: true},
	// A census asks many members; its handler runs one at a time and
	// serves a recent one again (p2p/node/swarmstatus.go).
	protocol.StatusID: {MaxBytes: protocol.MaxStatusMsgBytes, Timeout: 2 * time.Minute,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
		Streams: 64, PeerStreams: 2, Memory: 32 << 20, PeerMemory: 12 << 20},
	// A helper reads a batch within 10s, works on it until the owner's
	// wait (at most MaxFetchWait) and writes its reply within 5s. An
	// owner with more batches for one helper than it takes at once gives
	// them to others, or fetches them itself, rather than wait.
	protocol.FetchID: {MaxBytes: protocol.MaxFetchMsgBytes, Timeout: MaxFetchWait,
		ReadTimeout: 10 * time.Second, WriteTimeout: 5 * time.Second,
		Streams: 256, PeerStreams: 8, Memory: 128 << 20, PeerMemory: 32 << 20, NoWait: true, MembersOnly: true},
	// An export client reads a member's archive a chunk (at most
	// MaxArchiveChunk) a call, at most 2 calls at once from one peer; the
	// node paces the bytes it serves (see node/archive.go).
	protocol.ArchiveID: {MaxBytes: protocol.MaxArchiveMsgBytes, Timeout: 30 * time.Second,
		Streams: 32, PeerStreams: 2, Memory: 64 << 20, PeerMemory: 8 << 20},
	// A get waits for the owner and the holder in turn.
	protocol.GetID: {MaxBytes: protocol.MaxCaptureMsgBytes, Timeout: 30 * time.Second,
		Streams: 64, PeerStreams: 2, Memory: 128 << 20, PeerMemory: 48 << 20},
	// Only members fetch a capture's records from its holder (for a
	// client's get).
	protocol.CaptureID: {MaxBytes: protocol.MaxCaptureMsgBytes, Timeout: 20 * time.Second,
		Streams: 64, PeerStreams: 2, Memory: 128 << 20, PeerMemory: 48 << 20, MembersOnly: true},
}

// LimitsOf returns the limits of protocol pid, and false for a protocol
// that is not swarmcrawl's.
func LimitsOf(pid string) (Limits, bool) {
	l, ok := limits[pid]
	return l, ok
}

// Streams owns every swarmcrawl stream of a host: each exchange is one
// request and one response on a fresh stream, under the deadlines and size
// caps of its protocol (see limits). Handlers run under a context that
// Unhandle and Close cancel, and Unhandle and Close wait for them, so no
// handler outlives the component that serves it. Keeping this in one place
// is what lets the rest of the code ignore stream lifetimes entirely.
type Streams struct {
	host    host.Host
	timeout time.Duration
	work    RingWork

	mu       sync.Mutex
	handlers map[string]*served
	// calls holds the calls open to each peer on each protocol, while
	// there are any: it is never larger than the calls in progress.
	calls map[callKey]*callSlots

	// learned holds the addresses ring messages named for peers; a call
	// to one of them puts them in the peerstore (see learnedAddrs).
	learned *learnedAddrs
}

// callKey names the calls of one protocol to one peer.
type callKey struct {
	to  peer.ID
	pid string
}

// callSlots bounds the calls of one protocol to one peer: a call holds a
// slot of slots; refs counts the calls holding or waiting for one.
type callSlots struct {
	slots chan struct{}
	refs  int
}

// served is one registered protocol: its running handlers and the context
// they run under.
type served struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed bool // guarded by Streams.mu
}

// NewStreams wraps h. timeout bounds every exchange of the protocols whose
// limits set none (0 means DefaultExchangeTimeout); work is the ring work
// the node asks of members: a protocol for members only
// (Limits.MembersOnly) serves no peer whose identity lacks it, and ring
// messages name no such peer (RingTransport).
func NewStreams(h host.Host, timeout time.Duration, work RingWork) *Streams {
	if timeout <= 0 {
		timeout = DefaultExchangeTimeout
	}
	return &Streams{host: h, timeout: timeout, work: work, handlers: map[string]*served{}, calls: map[callKey]*callSlots{},
		learned: newLearnedAddrs(maxLearnedPeers)}
}

// useLearned puts the addresses ring messages named for to into the
// peerstore, once, before this node dials it.
func (s *Streams) useLearned(to peer.ID) {
	if addrs, added := s.learned.lookup(to, time.Now()); len(addrs) > 0 && !added {
		s.host.Peerstore().AddAddrs(to, addrs, learnedAddrTTL)
		s.learned.markAdded(to)
	}
}

// addrsOf returns the addresses this node knows for id: those ring
// messages named (the peer's own list, its relay's circuit address
// included) and then the peerstore's (what identify and dials found),
// without repeats. Both count: a peer behind NAT that a node met before it
// held a relay reservation is in the peerstore with only its private
// addresses.
func (s *Streams) addrsOf(id peer.ID) []ma.Multiaddr {
	learned, _ := s.learned.lookup(id, time.Now())
	out := slices.Clone(learned)
	for _, a := range s.host.Peerstore().Addrs(id) {
		if !slices.ContainsFunc(out, a.Equal) {
			out = append(out, a)
		}
	}
	return out
}

// limitsOf returns pid's limits with the Streams' timeout filled in.
func (s *Streams) limitsOf(pid string) (Limits, error) {
	l, ok := limits[pid]
	if !ok {
		return Limits{}, fmt.Errorf("protocol %s: not a swarmcrawl protocol", pid)
	}
	if l.Timeout <= 0 {
		l.Timeout = s.timeout
	}
	if l.FirstByteTimeout <= 0 {
		l.FirstByteTimeout = DefaultFirstByteTimeout
	}
	return l, nil
}

// refusedUnread reports whether err is the peer's reset of a stream its
// handler never read: negotiation failed, or its resource manager refused
// the stream.
func refusedUnread(err error) bool {
	remote, code, ok := streamReset(err)
	return ok && remote && (code == network.StreamProtocolNegotiationFailed || code == network.StreamResourceLimitExceeded)
}

// streamReset returns the side and code of a stream reset err carries.
// libp2p's yamux stream turns yamux's reset error into a
// network.StreamError on Read and Write but not on CloseWrite, where a
// peer's refusal often arrives: both forms are read here.
func streamReset(err error) (remote bool, code network.StreamErrorCode, ok bool) {
	if se, ok := errors.AsType[*network.StreamError](err); ok {
		return se.Remote, se.ErrorCode, true
	}
	if ye, ok := errors.AsType[*yamux.StreamError](err); ok {
		return ye.Remote, network.StreamErrorCode(ye.ErrorCode), true
	}
	return false, 0, false
}

// refusedAsMember reports whether err is the peer's reset of a stream
// from an identity without the swarm's ring work.
func refusedAsMember(err error) bool {
	remote, code, ok := streamReset(err)
	return ok && remote && code == NotMemberCode
}

// notMemberError is the error of a call the peer refused because this
// node's identity lacks the ring work the peer asks.
func (s *Streams) notMemberError(pid string, to peer.ID) error {
	return fmt.Errorf("%s to %s: refused as a ring member: %w (this node's identity carries %d bits, the peer asks more)",
		pid, ShortID(to), ErrNoRingWork, WorkOf(s.host.ID()))
}

// ErrNotDelivered marks a failed exchange whose request never reached the
// peer's handler: the stream did not open, or the peer does not (or no
// longer) speak the protocol. Any other failure may come after the peer
// acted on the request.
var ErrNotDelivered = errors.New("request not delivered")

// Call sends req to peer to on protocol pid and reads its response into
// resp, within the protocol's timeout.
func (s *Streams) Call(ctx context.Context, to peer.ID, pid string, req, resp proto.Message) error {
	l, err := s.limitsOf(pid)
	if err != nil {
		return err
	}
	return s.exchange(ctx, to, pid, req, resp, l, l.Timeout)
}

// CallWithin is Call bounded by timeout instead of the protocol's own, for
// an exchange whose length the request itself sets (a fetch batch).
func (s *Streams) CallWithin(ctx context.Context, to peer.ID, pid string, req, resp proto.Message, timeout time.Duration) error {
	l, err := s.limitsOf(pid)
	if err != nil {
		return err
	}
	return s.exchange(ctx, to, pid, req, resp, l, timeout)
}

func (s *Streams) exchange(ctx context.Context, to peer.ID, pid string, req, resp proto.Message, l Limits, timeout time.Duration) (err error) {
	// A peer's refusal of a non-member can reach this node as it writes
	// the request, closes its side or reads the answer, depending on how
	// fast the peer refused: whichever, it says why.
	defer func() {
		if refusedAsMember(err) {
			err = s.notMemberError(pid, to)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	release, err := s.acquire(ctx, to, pid, l)
	if err != nil {
		return fmt.Errorf("%s to %s: %w: %w", pid, ShortID(to), err, ErrNotDelivered)
	}
	defer release()
	// A stream never rides on a relayed connection (limited in bytes and
	// time): libp2p waits for a direct one, made by hole punching.
	s.useLearned(to)
	st, err := s.host.NewStream(ctx, to, libp2pproto.ID(pid))
	if err != nil {
		closeStaleRelayed(s.host, to)
		return fmt.Errorf("open %s to %s: %w: %w", pid, ShortID(to), err, ErrNotDelivered)
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
	if err := protocol.WriteMsg(st, req, l.MaxBytes); err != nil {
		if errors.Is(err, protocol.ErrTooLarge) {
			// Refused before a byte was written.
			return fmt.Errorf("%s to %s: %w: %w", pid, ShortID(to), err, ErrNotDelivered)
		}
		if refusedUnread(err) {
			return fmt.Errorf("%s to %s: %w: %w", pid, ShortID(to), err, ErrNotDelivered)
		}
		return fmt.Errorf("%s to %s: %w", pid, ShortID(to), err)
	}
	if err := st.CloseWrite(); err != nil {
		// The peer's refusal (its resource manager's reset) can come
		// while the request is still being written.
		if refusedUnread(err) {
			return fmt.Errorf("%s to %s: close write: %w: %w", pid, ShortID(to), err, ErrNotDelivered)
		}
		return fmt.Errorf("%s to %s: close write: %w", pid, ShortID(to), err)
	}
	// The response's memory is reserved in the stream's scope as it
	// arrives, like a request's, and given back once it is decoded.
	budget := budgetOf(st, l)
	reserved, err := protocol.ReadMsgBudget(st, resp, l.MaxBytes, budget)
	budget.Release(reserved)
	if err != nil {
		// A stream to a peer known to speak the protocol is negotiated
		// lazily, with the request; a peer that no longer does answers
		// "not supported" or resets the stream for failed negotiation,
		// and a peer whose resource manager refused the stream resets it
		// before its handler ran: either way it never saw the request.
		var notSupported msmux.ErrNotSupported[libp2pproto.ID]
		if errors.As(err, &notSupported) || refusedUnread(err) {
			return fmt.Errorf("%s from %s: %w: %w", pid, ShortID(to), err, ErrNotDelivered)
		}
		return fmt.Errorf("%s from %s: %w", pid, ShortID(to), err)
	}
	done = true
	return nil
}

// ErrPeerBusy is the error of a call that would have gone beyond the
// calls its protocol allows to one peer at once (Limits.NoWait).
var ErrPeerBusy = errors.New("as many calls open to the peer as it takes")

// acquire takes a slot for a call of pid to peer to, waiting for one
// (within ctx) unless l says not to, and returns its release.
func (s *Streams) acquire(ctx context.Context, to peer.ID, pid string, l Limits) (release func(), err error) {
	if l.PeerStreams <= 0 {
		return func() {}, nil
	}
	key := callKey{to, pid}
	s.mu.Lock()
	c := s.calls[key]
	if c == nil {
		c = &callSlots{slots: make(chan struct{}, l.PeerStreams)}
		s.calls[key] = c
	}
	c.refs++
	s.mu.Unlock()
	unref := func() {
		s.mu.Lock()
		if c.refs--; c.refs == 0 {
			delete(s.calls, key)
		}
		s.mu.Unlock()
	}
	if l.NoWait {
		select {
		case c.slots <- struct{}{}:
		default:
			unref()
			return nil, ErrPeerBusy
		}
	} else {
		select {
		case c.slots <- struct{}{}:
		case <-ctx.Done():
			unref()
			return nil, fmt.Errorf("waiting for a free call: %w", ctx.Err())
		}
	}
	return func() {
		<-c.slots
		unref()
	}, nil
}

// Inbound describes an incoming request: the authenticated peer that
// sent it, the address its connection comes from, and when its stream
// arrived.
type Inbound struct {
	From       peer.ID
	RemoteAddr ma.Multiaddr
	Received   time.Time
}

// Handler answers one request of a protocol. ctx ends when the protocol's
// timeout passes or the protocol is unhandled.
type Handler func(ctx context.Context, in Inbound, req proto.Message) proto.Message

// Handle serves protocol pid: each incoming stream carries one request,
// decoded into a fresh message from newReq, answered by serve. A request
// that cannot be read is dropped with a stream reset: the peer sees an
// error, and nothing half-read is acted on. A response that cannot be
// written (larger than the protocol's cap) resets the stream too. Handle
// panics for a protocol without limits: that is a programming error.
func (s *Streams) Handle(pid string, newReq func() proto.Message, serve Handler) {
	l, err := s.limitsOf(pid)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &served{ctx: ctx, cancel: cancel}
	s.mu.Lock()
	if old := s.handlers[pid]; old != nil {
		s.mu.Unlock()
		cancel()
		panic(fmt.Sprintf("protocol %s is already handled", pid))
	}
	s.handlers[pid] = h
	s.mu.Unlock()
	s.host.SetStreamHandler(libp2pproto.ID(pid), func(st network.Stream) {
		if !s.enter(h) {
			_ = st.Reset()
			return
		}
		defer h.wg.Done()
		s.serveStream(h.ctx, st, l, newReq, serve)
	})
}

// enter registers a running handler of h unless h is closed.
func (s *Streams) enter(h *served) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.closed {
		return false
	}
	h.wg.Add(1)
	return true
}

func (s *Streams) serveStream(base context.Context, st network.Stream, l Limits, newReq func() proto.Message, serve Handler) {
	if l.MembersOnly && !s.work.Admits(st.Conn().RemotePeer()) {
		_ = st.ResetWithError(NotMemberCode)
		return
	}
	start := time.Now()
	ctx, cancel := context.WithDeadline(base, start.Add(l.Timeout))
	defer cancel()
	readDeadline := start.Add(l.Timeout)
	if l.ReadTimeout > 0 {
		readDeadline = start.Add(l.ReadTimeout)
	} else {
		_ = st.SetWriteDeadline(readDeadline)
	}
	// A silent stream is reset at the first-byte deadline; once the
	// request starts arriving it has until the read deadline.
	firstDeadline := start.Add(l.FirstByteTimeout)
	if readDeadline.Before(firstDeadline) {
		firstDeadline = readDeadline
	}
	_ = st.SetReadDeadline(firstDeadline)
	r := &firstByte{Reader: st, arrived: func() { _ = st.SetReadDeadline(readDeadline) }}
	// The request's memory is reserved in the stream's scope as its bytes
	// arrive, and held until the response is written.
	budget := budgetOf(st, l)
	req := newReq()
	reserved, err := protocol.ReadMsgBudget(r, req, l.MaxBytes, budget)
	defer budget.Release(reserved)
	if err != nil {
		if errors.Is(err, network.ErrResourceLimitExceeded) {
			_ = st.ResetWithError(network.StreamResourceLimitExceeded)
		} else {
			_ = st.Reset()
		}
		return
	}
	conn := st.Conn()
	resp := serve(ctx, Inbound{From: conn.RemotePeer(), RemoteAddr: conn.RemoteMultiaddr(), Received: start}, req)
	if l.WriteTimeout > 0 {
		_ = st.SetWriteDeadline(time.Now().Add(l.WriteTimeout))
	}
	if err := protocol.WriteMsg(st, resp, l.MaxBytes); err != nil {
		_ = st.Reset()
		return
	}
	_ = st.Close()
}

// firstByte calls arrived once, when the first bytes are read.
type firstByte struct {
	io.Reader
	arrived func()
	seen    bool
}

func (f *firstByte) Read(p []byte) (int, error) {
	n, err := f.Reader.Read(p)
	if n > 0 && !f.seen {
		f.seen = true
		f.arrived()
	}
	return n, err
}

// Unhandle stops serving pid: new streams are refused, the handlers
// running are cancelled, and Unhandle returns once they have answered and
// returned.
func (s *Streams) Unhandle(pid string) {
	s.host.RemoveStreamHandler(libp2pproto.ID(pid))
	s.mu.Lock()
	h := s.handlers[pid]
	delete(s.handlers, pid)
	if h != nil {
		h.closed = true
	}
	s.mu.Unlock()
	if h != nil {
		h.cancel()
		h.wg.Wait()
	}
}

// Close unhandles every protocol, waiting for their running handlers.
func (s *Streams) Close() {
	s.mu.Lock()
	pids := make([]string, 0, len(s.handlers))
	for pid := range s.handlers {
		pids = append(pids, pid)
	}
	s.mu.Unlock()
	for _, pid := range pids {
		s.Unhandle(pid)
	}
}

// ShortID is the tail of a peer ID, enough to tell peers apart in logs
// and errors.
func ShortID(id peer.ID) string {
	s := id.String()
	if len(s) > 12 {
		return s[len(s)-8:]
	}
	return s
}
