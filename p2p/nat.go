package p2p

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	ma "github.com/multiformats/go-multiaddr"
)

// NAT traversal: how a node learns whether it can be reached, the relay
// reservations it holds, and what hole punching achieved.

// Reachability is what a node assumes about being reachable from the
// internet (Config.Reachability).
type Reachability int

const (
	// ReachabilityAuto leaves it to AutoNAT, which needs several public
	// peers running the AutoNAT service and minutes to decide.
	ReachabilityAuto Reachability = iota
	// ReachabilityPrivate declares the node behind NAT: it reserves a slot
	// on its relays at once and advertises the relayed addresses.
	ReachabilityPrivate
	// ReachabilityPublic declares the node publicly reachable: it
	// advertises its own addresses and may serve as a relay.
	ReachabilityPublic
)

// String returns the name ParseReachability takes.
func (r Reachability) String() string {
	switch r {
	case ReachabilityPrivate:
		return "private"
	case ReachabilityPublic:
		return "public"
	default:
		return "auto"
	}
}

// ParseReachability parses "auto", "private" or "public".
func ParseReachability(s string) (Reachability, error) {
	switch s {
	case "auto", "":
		return ReachabilityAuto, nil
	case "private":
		return ReachabilityPrivate, nil
	case "public":
		return ReachabilityPublic, nil
	}
	return 0, fmt.Errorf("reachability %q: want auto, private or public", s)
}

// Connection kinds, as ConnKind reports them.
const (
	// ConnDirect is a connection between the two peers' own addresses.
	ConnDirect = "direct"
	// ConnRelayed is a circuit through a relay: limited in time and bytes,
	// and never used for swarmcrawl's own protocols, which wait for a
	// direct connection instead (hole punching or a dial back).
	ConnRelayed = "relayed"
	// ConnNone means no open connection.
	ConnNone = "none"
)

// ConnKind reports how h is connected to p now: ConnDirect when one of
// the connections is direct, ConnRelayed when all go through a relay,
// ConnNone when there is none.
func ConnKind(h host.Host, p peer.ID) string {
	kind := ConnNone
	for _, c := range h.Network().ConnsToPeer(p) {
		if c.Stat().Limited || isCircuit(c.RemoteMultiaddr()) {
			kind = ConnRelayed
			continue
		}
		return ConnDirect
	}
	return kind
}

// isCircuit reports whether m goes through a relay (/p2p-circuit).
func isCircuit(m ma.Multiaddr) bool {
	for _, c := range m {
		if c.Protocol().Code == ma.P_CIRCUIT {
			return true
		}
	}
	return false
}

// HolePunchStats counts DCUtR hole punching, in both roles (the peer that
// received the relayed connection starts it, the other answers).
type HolePunchStats struct {
	// Attempts counts simultaneous dials started, Successes those that
	// ended in a direct connection, Failures the others.
	Attempts  int64 `json:"attempts"`
	Successes int64 `json:"successes"`
	Failures  int64 `json:"failures"`
	// DirectDials counts dials to a relayed peer's public address tried
	// before hole punching (a peer that is reachable after all), and
	// DirectDialFailures those that failed.
	DirectDials        int64 `json:"direct_dials"`
	DirectDialFailures int64 `json:"direct_dial_failures"`
	// ProtocolErrors counts hole punches that failed before any dial
	// (the peers could not agree on addresses).
	ProtocolErrors int64 `json:"protocol_errors"`
	// Unpunched counts the peers with which the last
	// FailedPunchesUnreachable hole punches (or more) all failed, and to
	// which there is no direct connection.
	Unpunched int `json:"unpunched"`
}

// NATStats is a node's reachability as its host sees it.
type NATStats struct {
	// Reachability is public, private or unknown: AutoNAT's verdict, or
	// the one Config.Reachability forces (Forced).
	Reachability string `json:"reachability"`
	Forced       bool   `json:"forced"`
	// Relays are the configured static relays' peer IDs; Reservations
	// those holding a reservation for this node, whose circuit addresses
	// are RelayAddrs.
	Relays       []string `json:"relays,omitempty"`
	Reservations []string `json:"reservations,omitempty"`
	RelayAddrs   []string `json:"relay_addrs,omitempty"`
	// RelayService is set when this node serves circuit reservations.
	RelayService bool           `json:"relay_service"`
	HolePunch    HolePunchStats `json:"hole_punch"`
}

// FailedPunchesUnreachable is how many hole punches with one peer must
// fail in a row, with no direct connection to it since, before the peer
// counts as one that cannot reach this node (HolePunchStats.Unpunched).
const FailedPunchesUnreachable = 3

// maxPunchPeers bounds the peers whose hole-punch outcomes a NAT keeps.
const maxPunchPeers = 1024

// Unreachable returns why peers cannot open a connection to a node with
// these stats, or "" when they can (or it cannot be known yet): it is
// private and holds no relay reservation, so nobody can; or hole punching
// failed again and again with some peers (Unpunched), which then reach it
// only through its relay, which carries no swarmcrawl traffic.
func (s NATStats) Unreachable() string {
	if s.Reachability != "private" {
		return ""
	}
	if len(s.Reservations) > 0 {
		if n := s.HolePunch.Unpunched; n > 0 {
			peers := fmt.Sprintf("%d peers, which reach", n)
			if n == 1 {
				peers = "1 peer, which reaches"
			}
			return fmt.Sprintf("unreachable from other NATs: hole punching failed %d times in a row with %s this node only through its relay, which carries no swarmcrawl traffic (is its NAT symmetric?); give it a port forward, or run it where it is reachable", FailedPunchesUnreachable, peers)
		}
		return ""
	}
	how := "AutoNAT found it"
	if s.Forced {
		how = "--reachability private"
	}
	if len(s.Relays) == 0 {
		return fmt.Sprintf("unreachable: this node is behind NAT (%s) and has no relay, so no peer can connect to it; give --relay the address of a reachable relay (a public node run with --relay-service)", how)
	}
	return fmt.Sprintf("unreachable: this node is behind NAT (%s) and none of its relays (%s) granted it a reservation, so no peer can connect to it; check that each --relay is reachable, in the swarm and run with --relay-service", how, strings.Join(s.Relays, ", "))
}

// NAT follows a host's reachability, relay reservations and hole punching
// (a Host's NAT field). It owns one goroutine, reading the host's event
// bus, which Close stops and waits for.
type NAT struct {
	relays       []string
	forced       bool
	relayService bool

	mu         sync.Mutex
	reach      network.Reachability
	relayAddrs []ma.Multiaddr

	attempts, successes, failures        atomic.Int64
	directDials, directFails, protoFails atomic.Int64
	// failedInRow counts, per peer, the hole punches that failed since
	// the last that succeeded (guarded by mu; at most maxPunchPeers).
	failedInRow map[peer.ID]int

	host      atomic.Pointer[host.Host] // set by start
	sub       event.Subscription
	done      chan struct{}
	closeOnce sync.Once
}

var _ holepunch.EventTracer = (*NAT)(nil)

// newNAT makes the monitor of a host built with cfg; start connects it to
// the host once there is one.
func newNAT(cfg Config, relays []peer.AddrInfo) *NAT {
	n := &NAT{relayService: cfg.RelayService, done: make(chan struct{}), failedInRow: map[peer.ID]int{}}
	for _, r := range relays {
		n.relays = append(n.relays, r.ID.String())
	}
	switch cfg.Reachability {
	case ReachabilityPrivate:
		n.forced, n.reach = true, network.ReachabilityPrivate
	case ReachabilityPublic:
		n.forced, n.reach = true, network.ReachabilityPublic
	}
	return n
}

// start subscribes to h's reachability and relay address events.
func (n *NAT) start(h host.Host) error {
	sub, err := h.EventBus().Subscribe([]any{new(event.EvtLocalReachabilityChanged), new(event.EvtAutoRelayAddrsUpdated)})
	if err != nil {
		return fmt.Errorf("nat: subscribe: %w", err)
	}
	n.host.Store(&h)
	n.sub = sub
	go n.run()
	return nil
}

func (n *NAT) run() {
	defer close(n.done)
	for e := range n.sub.Out() {
		n.mu.Lock()
		switch e := e.(type) {
		case event.EvtLocalReachabilityChanged:
			n.reach = e.Reachability
		case event.EvtAutoRelayAddrsUpdated:
			n.relayAddrs = slices.Clone(e.RelayAddrs)
		}
		n.mu.Unlock()
	}
}

// Close stops following the host's events. It is safe to call more than
// once, and on a NAT that never started.
func (n *NAT) Close() {
	n.closeOnce.Do(func() {
		if n.sub == nil {
			return
		}
		_ = n.sub.Close()
		<-n.done
	})
}

// Trace counts the hole-punch service's events (holepunch.EventTracer).
func (n *NAT) Trace(evt *holepunch.Event) {
	switch e := evt.Evt.(type) {
	case *holepunch.StartHolePunchEvt:
		n.attempts.Add(1)
	case *holepunch.EndHolePunchEvt:
		if e.Success {
			n.successes.Add(1)
			n.mu.Lock()
			delete(n.failedInRow, evt.Remote)
			n.mu.Unlock()
		} else {
			n.failures.Add(1)
			n.punchFailed(evt.Remote)
		}
	case *holepunch.DirectDialEvt:
		n.directDials.Add(1)
		if !e.Success {
			n.directFails.Add(1)
		}
	case *holepunch.ProtocolErrorEvt:
		n.protoFails.Add(1)
		n.punchFailed(evt.Remote)
		// No hole punch will happen over this relayed connection (the
		// peer could not take part yet, or had no public address): it is
		// closed, so that the next dial through the relay starts another.
		if h := n.host.Load(); h != nil {
			closeRelayed(*h, evt.Remote, 0)
		}
	}
}

// punchFailed counts a failed hole punch with p.
func (n *NAT) punchFailed(p peer.ID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.failedInRow[p]; !ok && len(n.failedInRow) >= maxPunchPeers {
		for q := range n.failedInRow { // forget one: the map stays bounded
			delete(n.failedInRow, q)
			break
		}
	}
	n.failedInRow[p]++
}

// unpunched returns how many peers hole punching failed with
// FailedPunchesUnreachable times in a row, and which h has no direct
// connection to; it forgets the peers h is directly connected to.
func (n *NAT) unpunched() int {
	h := n.host.Load()
	n.mu.Lock()
	defer n.mu.Unlock()
	count := 0
	for p, fails := range n.failedInRow {
		if h != nil && ConnKind(*h, p) == ConnDirect {
			delete(n.failedInRow, p)
			continue
		}
		if fails >= FailedPunchesUnreachable {
			count++
		}
	}
	return count
}

// Stats returns the host's reachability, reservations and hole-punch
// counters now.
func (n *NAT) Stats() NATStats {
	unpunched := n.unpunched()
	n.mu.Lock()
	reach, relayAddrs := n.reach, slices.Clone(n.relayAddrs)
	n.mu.Unlock()
	s := NATStats{
		Reachability: strings.ToLower(reach.String()),
		Forced:       n.forced,
		Relays:       n.relays,
		RelayService: n.relayService,
		HolePunch: HolePunchStats{
			Attempts:           n.attempts.Load(),
			Successes:          n.successes.Load(),
			Failures:           n.failures.Load(),
			DirectDials:        n.directDials.Load(),
			DirectDialFailures: n.directFails.Load(),
			ProtocolErrors:     n.protoFails.Load(),
			Unpunched:          unpunched,
		},
	}
	for _, a := range relayAddrs {
		s.RelayAddrs = append(s.RelayAddrs, a.String())
		if id := relayOf(a); id != "" && !slices.Contains(s.Reservations, id) {
			s.Reservations = append(s.Reservations, id)
		}
	}
	slices.Sort(s.Reservations)
	return s
}

// answersHolePunches reports whether the host serves DCUtR.
func (n *NAT) answersHolePunches() bool {
	h := n.host.Load()
	return h != nil && slices.Contains((*h).Mux().Protocols(), holepunch.Protocol)
}

// relayOf returns the relay's peer ID in a circuit address
// (.../p2p/RELAY/p2p-circuit...), "" if there is none.
func relayOf(a ma.Multiaddr) string {
	last := ""
	for _, c := range a {
		switch c.Protocol().Code {
		case ma.P_P2P:
			last = c.Value()
		case ma.P_CIRCUIT:
			return last
		}
	}
	return ""
}

// WaitReservation waits until the host holds a relay reservation and,
// when holePunch is set, answers hole punches (libp2p starts to once the
// host knows a public address of its own, which the relay tells it), or
// until ctx ends, checking every interval (0: 100ms); it reports whether
// it got there. Peers that reach a node through its relay before it
// answers hole punches stay on the relayed connection until it is closed.
func (n *NAT) WaitReservation(ctx context.Context, holePunch bool, interval time.Duration) bool {
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if len(n.Stats().Reservations) > 0 && (!holePunch || n.answersHolePunches()) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
}

// PeerConn is how a host is connected to one peer: Conn is ConnDirect or
// ConnRelayed (see ConnKind), Addr the remote address of the connection
// that decided it.
type PeerConn struct {
	PeerID string `json:"peer_id"`
	Conn   string `json:"conn"`
	Addr   string `json:"addr"`
}

// Connections returns how h is connected to each peer it has a connection
// to, at most limit of them, in the order of their peer IDs.
func Connections(h host.Host, limit int) []PeerConn {
	peers := h.Network().Peers()
	slices.Sort(peers)
	var out []PeerConn
	for _, p := range peers {
		if len(out) == limit {
			break
		}
		pc := PeerConn{PeerID: p.String(), Conn: ConnNone}
		for _, c := range h.Network().ConnsToPeer(p) {
			if c.Stat().Limited || isCircuit(c.RemoteMultiaddr()) {
				pc.Conn, pc.Addr = ConnRelayed, c.RemoteMultiaddr().String()
				continue
			}
			pc.Conn, pc.Addr = ConnDirect, c.RemoteMultiaddr().String()
			break
		}
		if pc.Conn != ConnNone {
			out = append(out, pc)
		}
	}
	return out
}

// StaleRelayedAge is the age from which a relayed connection to a peer
// that has no direct one is closed when a stream to the peer could not
// open. Hole punching starts when a relayed connection opens and takes
// seconds; a relayed connection this old carried a hole punch that
// failed, and the next dial through the relay starts another.
const StaleRelayedAge = 20 * time.Second

// closeStaleRelayed closes h's relayed connections to p older than
// StaleRelayedAge, unless h has a direct connection to p.
func closeStaleRelayed(h host.Host, p peer.ID) { closeRelayed(h, p, StaleRelayedAge) }

// closeRelayed closes h's relayed connections to p older than age, unless
// h has a direct connection to p.
func closeRelayed(h host.Host, p peer.ID, age time.Duration) {
	var stale []network.Conn
	for _, c := range h.Network().ConnsToPeer(p) {
		if !c.Stat().Limited && !isCircuit(c.RemoteMultiaddr()) {
			return
		}
		if time.Since(c.Stat().Opened) >= age {
			stale = append(stale, c)
		}
	}
	for _, c := range stale {
		_ = c.Close()
	}
}
