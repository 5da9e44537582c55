package p2p

import (
	"context"
	"time"

	"github.com/libp2p/go-libp2p/core/discovery"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	drouting "github.com/libp2p/go-libp2p/p2p/discovery/routing"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol"
)

// discoveryInterval is how often a node re-advertises itself and looks for
// other members under the rendezvous namespace.
const discoveryInterval = 30 * time.Second

// discover advertises the node under the rendezvous namespace and looks
// for other members. A node that is alone on its ring (it started without
// bootstrap peers, or lost every neighbour) joins through the first member
// it finds, so swarms started apart grow together. The DHT only ever
// carries "who is a member": no crawl state.
func (n *Node) discover(ctx context.Context) {
	rd := drouting.NewRoutingDiscovery(n.dht)
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
			n.log.Debug("advertise", "err", err)
			wait = min(2*wait, discoveryInterval)
		} else {
			wait = discoveryInterval
		}
		findCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		peers, err := rd.FindPeers(findCtx, protocol.Rendezvous, discovery.Limit(32))
		if err != nil {
			cancel()
			n.log.Debug("find peers", "err", err)
			continue
		}
		for p := range peers {
			n.found(findCtx, p)
		}
		cancel()
	}
}

func (n *Node) found(ctx context.Context, p peer.AddrInfo) {
	if p.ID == n.host.ID() || len(p.Addrs) == 0 {
		return
	}
	n.host.Peerstore().AddAddrs(p.ID, p.Addrs, peerstore.RecentlyConnectedAddrTTL)
	if !alone(n.ring) {
		return
	}
	if err := n.ring.Join(ctx, RingPeer(p.ID)); err != nil {
		n.log.Debug("join discovered member", "peer", shortID(p.ID), "err", err)
		return
	}
	n.log.Info("joined discovered member", "peer", shortID(p.ID))
}

// alone reports whether r is the only member of its ring.
func alone(r *ring.Node) bool {
	self := r.Self()
	for _, s := range r.Successors() {
		if s != self {
			return false
		}
	}
	return true
}
