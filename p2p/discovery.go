package p2p

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/discovery"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	drouting "github.com/libp2p/go-libp2p/p2p/discovery/routing"

	"github.com/swarmcrawl/swarmcrawl/protocol"
)

// discoveryInterval is how often a node re-advertises itself and looks for
// other members under the rendezvous namespace.
const discoveryInterval = 30 * time.Second

// Discovery finds other swarm members through the Kademlia DHT, which is
// used for nothing else: it runs under the swarmcrawl protocol prefix, so
// it never joins the public IPFS DHT, and it stores no values. Crawl state
// lives on the ring, never in the DHT.
type Discovery struct {
	host host.Host
	dht  *dht.IpfsDHT
	log  *slog.Logger
}

// NewDiscovery starts the discovery DHT on h, bootstrapping from the given
// peers. Every member is a DHT server, because swarms are small enough
// that routing tables stay tiny and clients-only members would leave no
// one to answer. Close stops it.
func NewDiscovery(ctx context.Context, h host.Host, bootstrap []peer.AddrInfo, log *slog.Logger) (*Discovery, error) {
	d, err := dht.New(h,
		dht.ProtocolPrefix(protocol.DHTPrefix),
		dht.Mode(dht.ModeServer),
		dht.DisableValues(),
		dht.BootstrapPeers(bootstrap...),
	)
	if err != nil {
		return nil, fmt.Errorf("discovery dht: %w", err)
	}
	if err := d.Bootstrap(ctx); err != nil {
		_ = d.Close()
		return nil, fmt.Errorf("discovery dht bootstrap: %w", err)
	}
	return &Discovery{host: h, dht: d, log: log}, nil
}

// Run advertises the node under the rendezvous namespace and looks for
// other members until ctx ends, calling found (with its addresses already
// in the peerstore) for every member other than this one.
func (d *Discovery) Run(ctx context.Context, found func(ctx context.Context, p peer.AddrInfo)) {
	rd := drouting.NewRoutingDiscovery(d.dht)
	wait := time.Second
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		// Advertising fails while the routing table is empty (a first
		// node waiting for company): retry soon, backing off to the
		// normal interval, so a newcomer is found in seconds.
		if _, err := rd.Advertise(ctx, protocol.Rendezvous); err != nil {
			d.log.Debug("advertise", "err", err)
			wait = min(2*wait, discoveryInterval)
		} else {
			wait = discoveryInterval
		}
		findCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		peers, err := rd.FindPeers(findCtx, protocol.Rendezvous, discovery.Limit(32))
		if err != nil {
			cancel()
			d.log.Debug("find peers", "err", err)
			continue
		}
		for p := range peers {
			if p.ID == d.host.ID() || len(p.Addrs) == 0 {
				continue
			}
			d.host.Peerstore().AddAddrs(p.ID, p.Addrs, peerstore.RecentlyConnectedAddrTTL)
			found(findCtx, p)
		}
		cancel()
	}
}

// Close stops the DHT.
func (d *Discovery) Close() error {
	if err := d.dht.Close(); err != nil {
		return fmt.Errorf("close discovery dht: %w", err)
	}
	return nil
}
