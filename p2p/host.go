package p2p

import (
	"fmt"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/net/connmgr"
	ma "github.com/multiformats/go-multiaddr"
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
	// set, the node reserves a slot on them if it finds itself behind NAT.
	Relays []string
}

// DefaultConfig returns the defaults noted on Config's fields.
func DefaultConfig() Config {
	return Config{Listen: []string{"/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/udp/4001/quic-v1"}}
}

// NewHost builds the libp2p host with the node's persisted identity.
func NewHost(key crypto.PrivKey, cfg Config) (host.Host, error) {
	if len(cfg.Listen) == 0 {
		cfg.Listen = DefaultConfig().Listen
	}
	for _, a := range cfg.Listen {
		if _, err := ma.NewMultiaddr(a); err != nil {
			return nil, fmt.Errorf("listen address %q: %w", a, err)
		}
	}
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
	if !cfg.DisableNAT {
		opts = append(opts,
			libp2p.NATPortMap(),
			libp2p.EnableNATService(),
			libp2p.EnableHolePunching(),
		)
	}
	if len(cfg.Relays) > 0 {
		relays, err := ParseAddrInfos(cfg.Relays)
		if err != nil {
			return nil, fmt.Errorf("relay: %w", err)
		}
		opts = append(opts, libp2p.EnableAutoRelayWithStaticRelays(relays))
	}
	h, err := libp2p.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("new host: %w", err)
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
