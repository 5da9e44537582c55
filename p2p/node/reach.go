package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// Reachability: a node behind NAT must hold a relay reservation, or no
// peer can open a connection to it; the node says so rather than join a
// ring whose members cannot reach it.

// ErrUnreachable is Start's error when the node is behind NAT
// (Host.Reachability private) and got no relay reservation within
// Config.ReservationTimeout: no peer could connect to it.
var ErrUnreachable = errors.New("unreachable")

// waitReachable returns, for a node declared private, once it holds a
// relay reservation and (with NAT traversal on) answers hole punches, and
// ErrUnreachable, with the reason, if it gets none
// within the reservation timeout. A node not declared private returns at
// once: AutoNAT decides later, and reachLoop reports it.
func (n *Node) waitReachable(ctx context.Context) error {
	if n.cfg.Host.Reachability != p2p.ReachabilityPrivate {
		return nil
	}
	if len(n.cfg.Host.Relays) > 0 {
		ctx, cancel := context.WithTimeout(ctx, n.cfg.ReservationTimeout)
		defer cancel()
		if n.nat.WaitReservation(ctx, !n.cfg.Host.DisableNAT, 0) {
			st := n.nat.Stats()
			n.log.Info("relay reservation held", "relays", st.Reservations, "addrs", st.RelayAddrs)
			return nil
		}
		if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("waiting for a relay reservation: %w", err)
		}
	}
	why := n.nat.Stats().Unreachable()
	if why == "" {
		// A reservation, but no public address to punch holes with.
		why = "unreachable: this node holds a relay reservation but learned no public address of its own from its relays, so peers cannot reach it directly through hole punching"
	}
	if len(n.cfg.Host.Relays) > 0 {
		why = fmt.Sprintf("%s (waited %v)", why, n.cfg.ReservationTimeout)
	}
	return fmt.Errorf("%w: %s", ErrUnreachable, strings.TrimPrefix(why, "unreachable: "))
}

// reachInterval is how often reachLoop looks at the node's reachability.
const reachInterval = time.Second

// reachLoop logs one line when the node becomes unreachable (private,
// without a relay reservation) and one when it is reachable again.
func (n *Node) reachLoop(ctx context.Context) {
	t := time.NewTicker(reachInterval)
	defer t.Stop()
	was := ""
	for {
		why := n.nat.Stats().Unreachable()
		switch {
		case why != "" && was == "":
			n.log.Error(why)
		case why == "" && was != "":
			st := n.nat.Stats()
			n.log.Info("reachable again", "reachability", st.Reachability, "relays", st.Reservations)
		}
		was = why
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// NATStatus is the node's reachability in its status: the host's view
// (p2p.NATStats) and, when no peer can connect to the node, why.
type NATStatus struct {
	p2p.NATStats
	// Unreachable says why no peer can connect to the node (behind NAT
	// without a relay reservation); empty when some can or it is not
	// known yet.
	Unreachable string `json:"unreachable,omitempty"`
	// Connections lists the peers the node is connected to (at most
	// maxStatusConns) and whether each connection is direct or relayed.
	Connections []p2p.PeerConn `json:"connections"`
}

// maxStatusConns bounds the connections listed in the status.
const maxStatusConns = 256

func (n *Node) natStatus() NATStatus {
	st := n.nat.Stats()
	return NATStatus{NATStats: st, Unreachable: st.Unreachable(), Connections: p2p.Connections(n.host, maxStatusConns)}
}

// connKind reports how the node is connected to ring peer p: direct,
// relayed or none (see p2p.ConnKind); "" for itself or an unparsable ID.
func (n *Node) connKind(p ring.Peer) string {
	id, err := peer.Decode(p.Addr)
	if err != nil || id == n.host.ID() {
		return ""
	}
	return p2p.ConnKind(n.host, id)
}
