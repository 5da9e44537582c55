package p2p

import (
	"fmt"
	"sync"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pproto "github.com/libp2p/go-libp2p/core/protocol"
	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/swarmcrawl/swarmcrawl/protocol"
)

// What peers can make a node hold is bounded by the libp2p resource
// manager, at four levels: each stream, each peer, each protocol (the
// limits table in streams.go, also per peer), and the whole node. A
// stranger runs into its own peer's limits long before the node's: the
// node's inbound stream limit holds every inbound connection's peer at
// its full share, so strangers cannot take the streams honest peers need,
// and memory is reserved at a priority that keeps the last fifth of every
// limit for ring maintenance (Limits.Critical).
const (
	// peerStreamsInbound bounds the streams one peer may have open to the
	// node at once, on every protocol together, those still negotiating
	// their protocol included.
	peerStreamsInbound = 72
	// peerMemory bounds what one peer's connections and streams may hold:
	// stream windows (256 KiB a stream, more while a large message flows)
	// and the frames being read.
	peerMemory = 64 << 20
	// maxInboundConns bounds the connections peers open to the node.
	maxInboundConns = 128
	// systemStreamsInbound bounds the inbound streams of all peers: every
	// inbound connection's peer at its peer limit.
	systemStreamsInbound = maxInboundConns * peerStreamsInbound
	// minSystemMemory is the least the node's memory limit may be: libp2p
	// scales it with the machine's memory (an eighth of it, and 128 MiB),
	// which on a small machine would let a few strangers at their peer
	// limits take it all.
	minSystemMemory = 1 << 30
	// outboundStreams bounds a protocol's streams the node opens itself,
	// and outboundPeerStreams those to one peer: generous, they are the
	// node's own.
	outboundStreams, outboundPeerStreams = 4096, 256
)

// resourceLimits returns the limits of the node's resource manager:
// libp2p's defaults scaled to the machine, with the limits of every
// swarmcrawl protocol (the limits table) and the node's own bounds on
// peers, connections and streams laid over them.
func resourceLimits() rcmgr.ConcreteLimitConfig {
	scaling := rcmgr.DefaultLimits
	libp2p.SetDefaultServiceLimits(&scaling)
	for pid, l := range limits {
		prio := priority(l)
		scaling.AddProtocolLimit(libp2pproto.ID(pid), rcmgr.BaseLimit{
			StreamsInbound: l.Streams, StreamsOutbound: outboundStreams, Streams: l.Streams + outboundStreams,
			Memory: memoryLimit(l.Memory, prio),
		}, rcmgr.BaseLimitIncrease{})
		scaling.AddProtocolPeerLimit(libp2pproto.ID(pid), rcmgr.BaseLimit{
			StreamsInbound: l.PeerStreams, StreamsOutbound: outboundPeerStreams, Streams: l.PeerStreams + outboundPeerStreams,
			Memory: memoryLimit(l.PeerMemory, prio),
		}, rcmgr.BaseLimitIncrease{})
	}
	scaled := scaling.AutoScale()
	def := scaled.ToPartialLimitConfig()
	var maxFrame int64
	for _, l := range limits {
		maxFrame = max(maxFrame, memoryLimit(protocol.FrameMemory(l.MaxBytes), priority(l)))
	}
	over := rcmgr.PartialLimitConfig{
		System: rcmgr.ResourceLimits{
			ConnsInbound:   maxInboundConns,
			StreamsInbound: systemStreamsInbound,
			Streams:        systemStreamsInbound + def.System.StreamsOutbound,
			Memory:         max(def.System.Memory, minSystemMemory),
		},
		// A stream is transient until its protocol is negotiated; each
		// peer's limit bounds its transient streams, so the transient
		// scope needs no smaller bound than the whole node's.
		Transient: rcmgr.ResourceLimits{
			StreamsInbound: systemStreamsInbound,
			Streams:        systemStreamsInbound + def.Transient.StreamsOutbound,
		},
		PeerDefault: rcmgr.ResourceLimits{
			StreamsInbound: peerStreamsInbound,
			Streams:        peerStreamsInbound + def.PeerDefault.StreamsOutbound,
			Memory:         peerMemory,
		},
		// A stream holds the frame being read on it and what decoding it
		// allocates, up to the most an honest frame of any protocol needs
		// (protocol.FrameMemory).
		Stream: rcmgr.ResourceLimits{Memory: rcmgr.LimitVal64(maxFrame)},
	}
	return over.Build(scaled)
}

// newResourceManager returns the resource manager of a node's host, its
// metrics fed on metrics when set (Config.ResourceMetrics). Without, its
// stats reporter, which the package turns on by default, is off.
func newResourceManager(metrics prometheus.Registerer) (network.ResourceManager, error) {
	opts := []rcmgr.Option{rcmgr.WithMetricsDisabled()}
	if metrics != nil {
		opts = nil
		rcmgr.MustRegisterWith(metrics)
		str, err := rcmgr.NewStatsTraceReporter()
		if err != nil {
			return nil, fmt.Errorf("resource manager: %w", err)
		}
		opts = append(opts, rcmgr.WithTraceReporter(str))
	}
	mgr, err := rcmgr.NewResourceManager(rcmgr.NewFixedLimiter(resourceLimits()), opts...)
	if err != nil {
		return nil, fmt.Errorf("resource manager: %w", err)
	}
	return mgr, nil
}

// priority is the priority at which the frames of a protocol with
// limits l reserve memory.
func priority(l Limits) uint8 {
	if l.Critical {
		return network.ReservationPriorityAlways
	}
	return network.ReservationPriorityHigh
}

// memoryLimit is the limit of a scope in which reservations at prio may
// take up to n bytes: the resource manager grants a reservation at prio
// only while the scope stays within (prio+1)/256 of its limit.
func memoryLimit(n int64, prio uint8) int64 {
	return (n*256 + int64(prio)) / (int64(prio) + 1)
}

// scopeBudget reserves the memory of frames in a stream's resource scope
// (protocol.Budget), at prio.
type scopeBudget struct {
	scope network.ResourceScope
	prio  uint8
}

func (b scopeBudget) Reserve(n int) error { return b.scope.ReserveMemory(n, b.prio) }
func (b scopeBudget) Release(n int)       { b.scope.ReleaseMemory(n) }

// budgetOf is the budget of frames read on st under limits l.
func budgetOf(st network.Stream, l Limits) scopeBudget {
	return scopeBudget{scope: st.Scope(), prio: priority(l)}
}

// Protected keeps a set of peers' connections safe from the connection
// manager's trimming: the ring's neighbours, so that a flood of
// connections from strangers cannot cut the node off its ring.
type Protected struct {
	host host.Host
	tag  string

	mu  sync.Mutex
	ids map[peer.ID]struct{}
}

// NewProtected returns an empty protected set of h's peers, tagged tag in
// its connection manager.
func NewProtected(h host.Host, tag string) *Protected {
	return &Protected{host: h, tag: tag, ids: map[peer.ID]struct{}{}}
}

// Set protects exactly ids: those not protected yet become so, and those
// protected before and not in ids no longer are. The set is as large as
// the last ids given, never larger.
func (p *Protected) Set(ids []peer.ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cm := p.host.ConnManager()
	next := make(map[peer.ID]struct{}, len(ids))
	for _, id := range ids {
		if id == p.host.ID() {
			continue
		}
		next[id] = struct{}{}
		if _, ok := p.ids[id]; !ok {
			cm.Protect(id, p.tag)
		}
	}
	for id := range p.ids {
		if _, ok := next[id]; !ok {
			cm.Unprotect(id, p.tag)
		}
	}
	p.ids = next
}

// Len is the number of peers protected.
func (p *Protected) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ids)
}
