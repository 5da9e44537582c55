package p2p

import (
	"fmt"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/pnet"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	"github.com/libp2p/go-libp2p/p2p/protocol/circuitv2/relay"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	"github.com/libp2p/go-libp2p/p2p/transport/tcp"
	"github.com/libp2p/go-libp2p/p2p/transport/websocket"
	ma "github.com/multiformats/go-multiaddr"
	"github.com/prometheus/client_golang/prometheus"
)

// Config configures the libp2p host of a node. A zero field takes its
// default.
type Config struct {
	// Listen are the multiaddrs to listen on. Default
	// /ip4/0.0.0.0/tcp/4001 and /ip4/0.0.0.0/udp/4001/quic-v1.
	Listen []string
	// DisableNAT turns off port mapping (UPnP / NAT-PMP), the AutoNAT
	// service and hole punching, which are on by default. Tests turn them
	// off so that they never send traffic off the machine.
	DisableNAT bool
	// Relays are static circuit-relay peers (full /p2p multiaddrs). When
	// set, the node reserves a slot on them once it is private (behind
	// NAT: forced by Reachability, or found by AutoNAT) and advertises
	// the relayed addresses.
	Relays []string
	// Reachability forces what the node assumes about being reachable
	// instead of waiting for AutoNAT (ReachabilityAuto, the default).
	Reachability Reachability
	// RelayService makes the node serve circuit v2 reservations and
	// relayed connections to other peers, within RelayResources. A relay
	// must be publicly reachable: with Reachability auto the node is
	// declared public.
	RelayService bool
	// SwarmKey, when set, makes the swarm private (libp2p pnet): a peer
	// without the same key cannot complete a connection. A private swarm
	// runs over TCP and WebSocket only (QUIC cannot carry a pre-shared
	// key), so the default listen addresses are cut to TCP and a QUIC
	// listen address is an error. See LoadSwarmKey.
	SwarmKey pnet.PSK
	// AllowPeers, when set, admits only these peers (and the node itself),
	// in both directions, once the peer has authenticated: bootstrap
	// peers, relays and seed clients must be listed too.
	AllowPeers []peer.ID
	// Metrics, when set, is where libp2p registers its Prometheus metrics
	// (swarm, identify, hole punching, AutoNAT, relays; the resource
	// manager's with ResourceMetrics). Unset: libp2p's default registerer.
	Metrics prometheus.Registerer
	// ResourceMetrics feeds the resource manager's metrics on Metrics,
	// when set (libp2p_rcmgr_*: connections, streams and memory by
	// scope). Its reporter handles every reservation, stream and
	// connection event: 11% of an idle node's CPU with 16 ring positions,
	// 6.5% while it crawls. Off by default, and then off even where
	// libp2p would turn it on by itself.
	ResourceMetrics bool
}

// DefaultConfig returns the defaults noted on Config's fields.
func DefaultConfig() Config {
	return Config{Listen: []string{"/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/udp/4001/quic-v1"}}
}

// RelayResources are the limits of a relay service (Config.RelayService):
// at most 128 reservations (one a peer, 8 per IP address, 32 per AS), each
// kept an hour and renewed by its holder, 16 relayed connections per peer
// at once, each ended after 2 minutes or 128 KiB either way. A relayed
// connection is for signalling and hole punching, not for bulk traffic.
func RelayResources() relay.Resources { return relay.DefaultResources() }

// Host is a libp2p host with its NAT monitor; Close closes both.
type Host struct {
	host.Host
	// NAT reports the host's reachability, relay reservations and hole
	// punching.
	NAT *NAT
}

// Close stops the NAT monitor and closes the host.
func (h *Host) Close() error {
	h.NAT.Close()
	return h.Host.Close()
}

// NewHost builds the libp2p host with the node's persisted identity.
func NewHost(key crypto.PrivKey, cfg Config) (*Host, error) {
	listen, err := listenAddrs(cfg)
	if err != nil {
		return nil, err
	}
	cfg.Listen = listen
	var relays []peer.AddrInfo
	if len(cfg.Relays) > 0 {
		if relays, err = ParseAddrInfos(cfg.Relays); err != nil {
			return nil, fmt.Errorf("relay: %w", err)
		}
	}
	if cfg.RelayService {
		switch cfg.Reachability {
		case ReachabilityPrivate:
			return nil, fmt.Errorf("new host: a relay service must be publicly reachable, not behind NAT (reachability private)")
		case ReachabilityAuto:
			cfg.Reachability = ReachabilityPublic
		}
	}
	nat := newNAT(cfg, relays)
	cm, err := connmgr.NewConnManager(64, 256, connmgr.WithGracePeriod(time.Minute))
	if err != nil {
		return nil, fmt.Errorf("new host: connection manager: %w", err)
	}
	opts := []libp2p.Option{
		libp2p.Identity(key),
		libp2p.ListenAddrStrings(cfg.Listen...),
		libp2p.ConnectionManager(cm),
		libp2p.UserAgent("swarmcrawl/0.1"),
	}
	opts = append(opts, privateSwarm(cfg.SwarmKey)...)
	if len(cfg.AllowPeers) > 0 {
		id, err := peer.IDFromPrivateKey(key)
		if err != nil {
			return nil, fmt.Errorf("new host: %w", err)
		}
		opts = append(opts, libp2p.ConnectionGater(newAllowlist(id, cfg.AllowPeers)))
	}
	if !cfg.DisableNAT {
		// libp2p's own metrics tracer is kept next to the counters of
		// status, on Config.Metrics when set.
		var mopts []holepunch.MetricsTracerOption
		if cfg.Metrics != nil {
			mopts = append(mopts, holepunch.WithRegisterer(cfg.Metrics))
		}
		opts = append(opts,
			libp2p.NATPortMap(),
			libp2p.EnableNATService(),
			libp2p.EnableHolePunching(holepunch.WithMetricsAndEventTracer(holepunch.NewMetricsTracer(mopts...), nat)),
		)
	}
	switch cfg.Reachability {
	case ReachabilityPrivate:
		opts = append(opts, libp2p.ForceReachabilityPrivate())
	case ReachabilityPublic:
		opts = append(opts, libp2p.ForceReachabilityPublic())
	}
	if cfg.RelayService {
		opts = append(opts, libp2p.EnableRelayService(relay.WithResources(RelayResources())))
	}
	if len(relays) > 0 {
		opts = append(opts, libp2p.EnableAutoRelayWithStaticRelays(relays))
	}
	// The resource manager is made last: libp2p.New owns it from here,
	// and closes it with the host or when it fails.
	if cfg.Metrics != nil {
		opts = append(opts, libp2p.PrometheusRegisterer(cfg.Metrics))
	}
	var rmetrics prometheus.Registerer
	if cfg.ResourceMetrics {
		rmetrics = cfg.Metrics
	}
	mgr, err := newResourceManager(rmetrics)
	if err != nil {
		return nil, fmt.Errorf("new host: %w", err)
	}
	opts = append(opts, libp2p.ResourceManager(mgr))
	h, err := libp2p.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("new host: %w", err)
	}
	if err := nat.start(h); err != nil {
		_ = h.Close()
		return nil, fmt.Errorf("new host: %w", err)
	}
	return &Host{Host: h, NAT: nat}, nil
}

// privateSwarm returns the options of a private swarm with key psk: the
// key, and the transports that can carry it. None without a key.
func privateSwarm(psk pnet.PSK) []libp2p.Option {
	if len(psk) == 0 {
		return nil
	}
	return []libp2p.Option{
		libp2p.PrivateNetwork(psk),
		libp2p.Transport(tcp.NewTCPTransport),
		libp2p.Transport(websocket.New),
	}
}

// listenAddrs checks cfg's listen addresses, or picks the defaults; in a
// private swarm the defaults are cut to those a pre-shared key can use, and
// any other is an error.
func listenAddrs(cfg Config) ([]string, error) {
	explicit := len(cfg.Listen) > 0
	addrs := cfg.Listen
	if !explicit {
		addrs = DefaultConfig().Listen
	}
	var out []string
	for _, a := range addrs {
		m, err := ma.NewMultiaddr(a)
		if err != nil {
			return nil, fmt.Errorf("listen address %q: %w", a, err)
		}
		if len(cfg.SwarmKey) > 0 && !privateCapable(m) {
			if explicit {
				return nil, fmt.Errorf("listen address %s: a private swarm (swarm key) runs over TCP and WebSocket only", a)
			}
			continue
		}
		out = append(out, a)
	}
	return out, nil
}

// privateCapable reports whether a pre-shared key can protect connections
// on m: plain TCP, or WebSocket over it.
func privateCapable(m ma.Multiaddr) bool {
	for _, c := range m {
		switch c.Protocol().Code {
		case ma.P_UDP, ma.P_QUIC, ma.P_QUIC_V1, ma.P_WEBTRANSPORT, ma.P_WEBRTC, ma.P_WEBRTC_DIRECT:
			return false
		}
	}
	return true
}

// NewClientHost returns a short-lived host that listens nowhere, for a
// client of the swarm (seed submission): with psk, it can reach a private
// swarm. Its identity is new each time unless key is given.
func NewClientHost(key crypto.PrivKey, psk pnet.PSK) (host.Host, error) {
	// A client reads replies under the node's limits (a get's reply and
	// its decoding take up to protocol.FrameMemory), not libp2p's
	// defaults, whose 16 MiB a stream would refuse a large page.
	mgr, err := newResourceManager(nil)
	if err != nil {
		return nil, fmt.Errorf("client host: %w", err)
	}
	opts := append([]libp2p.Option{libp2p.NoListenAddrs, libp2p.ResourceManager(mgr)}, privateSwarm(psk)...)
	if key != nil {
		opts = append(opts, libp2p.Identity(key))
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("client host: %w", err)
	}
	return h, nil
}

// ParseAddrInfos parses full peer multiaddrs (/ip4/1.2.3.4/tcp/4001/p2p/<id>)
// and merges addresses of the same peer.
func ParseAddrInfos(addrs []string) ([]peer.AddrInfo, error) {
	var out []peer.AddrInfo
	index := map[peer.ID]int{}
	for _, s := range addrs {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		m, err := ma.NewMultiaddr(s)
		if err != nil {
			return nil, fmt.Errorf("multiaddr %q: %w", s, err)
		}
		info, err := peer.AddrInfoFromP2pAddr(m)
		if err != nil {
			return nil, fmt.Errorf("multiaddr %q: must end in /p2p/<peer id>: %w", s, err)
		}
		if i, ok := index[info.ID]; ok {
			out[i].Addrs = append(out[i].Addrs, info.Addrs...)
			continue
		}
		index[info.ID] = len(out)
		out = append(out, *info)
	}
	return out, nil
}

// FullAddrs returns the host's listen addresses with its /p2p/ component,
// the form other peers and the seed command take as --bootstrap / --peer.
func FullAddrs(h host.Host) []string {
	var out []string
	for _, a := range h.Addrs() {
		out = append(out, a.String()+"/p2p/"+h.ID().String())
	}
	return out
}
