package p2p_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/p2p/protocol/holepunch"
	ma "github.com/multiformats/go-multiaddr"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

func TestParseReachability(t *testing.T) {
	for in, want := range map[string]p2p.Reachability{"": p2p.ReachabilityAuto, "auto": p2p.ReachabilityAuto, "private": p2p.ReachabilityPrivate, "public": p2p.ReachabilityPublic} {
		got, err := p2p.ParseReachability(in)
		if err != nil || got != want {
			t.Errorf("ParseReachability(%q) = %v, %v; want %v", in, got, err, want)
		}
		if in != "" && got.String() != in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), in)
		}
	}
	if _, err := p2p.ParseReachability("behind-nat"); err == nil {
		t.Error("ParseReachability took an unknown value")
	}
}

// A node is unreachable when it is private and holds no reservation; the
// reason names what to do.
func TestUnreachable(t *testing.T) {
	for _, c := range []struct {
		st   p2p.NATStats
		want string
	}{
		{p2p.NATStats{Reachability: "public"}, ""},
		{p2p.NATStats{Reachability: "unknown", Relays: []string{"R"}}, ""},
		{p2p.NATStats{Reachability: "private", Relays: []string{"R"}, Reservations: []string{"R"}}, ""},
		{p2p.NATStats{Reachability: "private", Forced: true}, "(--reachability private) and has no relay"},
		{p2p.NATStats{Reachability: "private", Relays: []string{"R1", "R2"}}, "(AutoNAT found it) and none of its relays (R1, R2) granted it a reservation"},
		{p2p.NATStats{Reachability: "private", Reservations: []string{"R"}, HolePunch: p2p.HolePunchStats{Attempts: 9, Failures: 5, Successes: 4, Unpunched: 2}}, "unreachable from other NATs: hole punching failed 3 times in a row with 2 peers"},
		{p2p.NATStats{Reachability: "private", Reservations: []string{"R"}, HolePunch: p2p.HolePunchStats{Attempts: 5, Failures: 5}}, ""},
	} {
		got := c.st.Unreachable()
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%+v: Unreachable() = %q, want %q", c.st, got, c.want)
		}
	}
}

// A peer that reaches a node through a relay has a relayed connection,
// which no swarmcrawl stream uses: the call waits for a direct connection
// (none comes: hole punching is off on loopback) and fails as not
// delivered, and the node's handler never runs. A relay must be public.
// (On loopback the relay grants reservations without addresses, as its
// own are not public: the node's relayed address is spelled out here.
// cmd TestNATTraversal shows reservations and relayed addresses in
// status, over public addresses in network namespaces.)
func TestRelayedConnectionCarriesNoStreams(t *testing.T) {
	if _, err := p2p.NewHost(nil, p2p.Config{RelayService: true, Reachability: p2p.ReachabilityPrivate, DisableNAT: true}); err == nil {
		t.Fatal("a private relay service was accepted")
	}
	relay := newTestHost(t, p2p.Config{RelayService: true})
	if st := relay.NAT.Stats(); !st.RelayService || st.Reachability != "public" || !st.Forced {
		t.Fatalf("relay: %+v, want a public relay service", st)
	}
	relayAddr := p2p.FullAddrs(relay)[0]
	private := newTestHost(t, p2p.Config{Reachability: p2p.ReachabilityPrivate, Relays: []string{relayAddr}})
	if st := private.NAT.Stats(); st.Reachability != "private" || !slices.Equal(st.Relays, []string{relay.ID().String()}) {
		t.Fatalf("behind the relay: %+v", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	var served atomic.Int64
	s := p2p.NewStreams(private, 0, p2p.NoRingWork)
	s.Handle(protocol.RingID, func() proto.Message { return &pb.RingRequest{} },
		func(context.Context, p2p.Inbound, proto.Message) proto.Message {
			served.Add(1)
			return &pb.RingResponse{}
		})
	t.Cleanup(s.Close)

	other := newTestHost(t, p2p.Config{})
	circuit, err := ma.NewMultiaddr(relayAddr + "/p2p-circuit")
	if err != nil {
		t.Fatal(err)
	}
	// Dialling the relayed address makes a limited connection, which a
	// plain dial would refuse to return; it works once the private node
	// holds its reservation.
	for {
		err := other.Connect(network.WithAllowLimitedConn(ctx, "test"), peer.AddrInfo{ID: private.ID(), Addrs: []ma.Multiaddr{circuit}})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("connect through the relay: %v", err)
		}
		other.Network().Peerstore().ClearAddrs(private.ID())
		time.Sleep(100 * time.Millisecond)
	}
	if k := p2p.ConnKind(other, private.ID()); k != p2p.ConnRelayed {
		t.Fatalf("connection kind %q, want %q", k, p2p.ConnRelayed)
	}
	if cs := p2p.Connections(other, 10); !slices.ContainsFunc(cs, func(c p2p.PeerConn) bool {
		return c.PeerID == private.ID().String() && c.Conn == p2p.ConnRelayed && strings.Contains(c.Addr, "/p2p-circuit")
	}) {
		t.Fatalf("connections %+v list no relayed connection to the private node", cs)
	}
	if k := p2p.ConnKind(other, relay.ID()); k != p2p.ConnDirect {
		t.Fatalf("connection kind to the relay %q, want %q", k, p2p.ConnDirect)
	}
	callCtx, callCancel := context.WithTimeout(ctx, time.Second)
	defer callCancel()
	err = p2p.NewStreams(other, 0, p2p.NoRingWork).Call(callCtx, private.ID(), protocol.RingID, &pb.RingRequest{Body: &pb.RingRequest_Ping{Ping: &pb.Ping{}}}, &pb.RingResponse{})
	if err == nil || !errors.Is(err, p2p.ErrNotDelivered) {
		t.Fatalf("a call over the relayed connection: %v, want not delivered", err)
	}
	if n := served.Load(); n != 0 {
		t.Fatalf("the handler ran %d times over a relayed connection", n)
	}
}

// Hole-punch events are counted, and a peer with which the last three
// hole punches failed counts as unpunched until one succeeds.
func TestHolePunchCounters(t *testing.T) {
	n := p2p.NewNATForTest()
	a, b := peer.ID("peer-a"), peer.ID("peer-b")
	trace := func(p peer.ID, evt any) { n.Trace(&holepunch.Event{Remote: p, Evt: evt}) }
	for range 3 {
		trace(a, &holepunch.StartHolePunchEvt{})
		trace(a, &holepunch.EndHolePunchEvt{Success: false})
	}
	trace(b, &holepunch.ProtocolErrorEvt{})
	trace(b, &holepunch.StartHolePunchEvt{})
	trace(b, &holepunch.EndHolePunchEvt{Success: false})
	trace(b, &holepunch.DirectDialEvt{Success: false})
	want := p2p.HolePunchStats{Attempts: 4, Failures: 4, ProtocolErrors: 1, DirectDials: 1, DirectDialFailures: 1, Unpunched: 1}
	if got := n.Stats().HolePunch; got != want {
		t.Fatalf("after 3 failures with a and 2 with b: %+v, want %+v", got, want)
	}
	trace(b, &holepunch.EndHolePunchEvt{Success: false})
	if got := n.Stats().HolePunch.Unpunched; got != 2 {
		t.Fatalf("after a third failure with b: %d unpunched, want 2", got)
	}
	trace(a, &holepunch.EndHolePunchEvt{Success: true})
	if got := n.Stats().HolePunch; got.Unpunched != 1 || got.Successes != 1 {
		t.Fatalf("after a success with a: %+v, want 1 unpunched, 1 success", got)
	}
}
