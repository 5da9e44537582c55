package p2p_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// pair returns two connected loopback hosts, closed at cleanup.
func pair(t *testing.T) (client, server host.Host) {
	t.Helper()
	var hs [2]host.Host
	for i := range hs {
		hs[i] = loopbackHost(t)
	}
	if err := hs[0].Connect(context.Background(), hs[1].Peerstore().PeerInfo(hs[1].ID())); err != nil {
		t.Fatal(err)
	}
	return hs[0], hs[1]
}

// Every swarmcrawl stream protocol has its size cap and deadline in the
// one table Streams uses: a protocol added without them could not be
// served or called.
func TestEveryProtocolHasLimits(t *testing.T) {
	for _, pid := range []string{protocol.RingID, protocol.TasksID, protocol.SeedID, protocol.ReplicateID,
		protocol.HandoffID, protocol.DigestID, protocol.PullID, protocol.FetchID, protocol.ArchiveID, protocol.GetID, protocol.CaptureID, protocol.StatusID} {
		l, ok := p2p.LimitsOf(pid)
		if !ok || l.MaxBytes <= 0 {
			t.Errorf("%s: limits %+v, %v", pid, l, ok)
		}
	}
	if _, ok := p2p.LimitsOf("/other/1.0.0"); ok {
		t.Error("a foreign protocol has limits")
	}
	// A fetch handler may work for minutes, but reading its request and
	// writing its reply are bounded on their own.
	if l, _ := p2p.LimitsOf(protocol.FetchID); l.ReadTimeout <= 0 || l.WriteTimeout <= 0 || l.Timeout < time.Minute {
		t.Errorf("fetch limits %+v", l)
	}
}

// Unhandle cancels the handlers running, waits until they have answered
// and returned, and refuses streams that arrive afterwards: a component
// that stops serving can then release what its handlers use.
func TestUnhandleWaitsForHandlers(t *testing.T) {
	client, server := pair(t)
	s := p2p.NewStreams(server, 0, p2p.NoRingWork)
	started := make(chan struct{})
	var returned atomic.Bool
	s.Handle(protocol.RingID, func() proto.Message { return &pb.RingRequest{} },
		func(ctx context.Context, _ p2p.Inbound, _ proto.Message) proto.Message {
			close(started)
			<-ctx.Done()
			time.Sleep(50 * time.Millisecond) // still finishing when Unhandle is called
			returned.Store(true)
			return &pb.RingResponse{Error: "stopped"}
		})
	c := p2p.NewStreams(client, 0, p2p.NoRingWork)
	ping := &pb.RingRequest{Body: &pb.RingRequest_Ping{Ping: &pb.Ping{}}}
	answered := make(chan error, 1)
	go func() {
		resp := &pb.RingResponse{}
		err := c.Call(context.Background(), server.ID(), protocol.RingID, ping, resp)
		if err == nil && resp.Error != "stopped" {
			err = errors.New("unexpected response " + resp.String())
		}
		answered <- err
	}()
	<-started
	s.Unhandle(protocol.RingID)
	if !returned.Load() {
		t.Fatal("Unhandle returned while a handler was still running")
	}
	if err := <-answered; err != nil {
		t.Fatalf("the running handler's answer was lost: %v", err)
	}
	resp := &pb.RingResponse{}
	err := c.Call(context.Background(), server.ID(), protocol.RingID, ping, resp)
	if err == nil {
		t.Fatal("a stream after Unhandle was served")
	}
}

// A request above its protocol's cap is refused before a byte is sent,
// and the error says the peer never saw it.
func TestOversizedRequestNotDelivered(t *testing.T) {
	client, server := pair(t)
	var served atomic.Int64
	s := p2p.NewStreams(server, 0, p2p.NoRingWork)
	s.Handle(protocol.SeedID, func() proto.Message { return &pb.SeedRequest{} },
		func(context.Context, p2p.Inbound, proto.Message) proto.Message {
			served.Add(1)
			return &pb.SeedResponse{}
		})
	t.Cleanup(s.Close)
	huge := &pb.SeedRequest{Urls: []string{"http://a.test/" + strings.Repeat("x", protocol.MaxSeedMsgBytes)}}
	err := p2p.NewStreams(client, 0, p2p.NoRingWork).Call(context.Background(), server.ID(), protocol.SeedID, huge, &pb.SeedResponse{})
	if !errors.Is(err, protocol.ErrTooLarge) || !errors.Is(err, p2p.ErrNotDelivered) {
		t.Fatalf("oversized request: %v, want ErrTooLarge and ErrNotDelivered", err)
	}
	if err := p2p.NewStreams(client, 0, p2p.NoRingWork).Call(context.Background(), server.ID(), protocol.SeedID, &pb.SeedRequest{Urls: []string{"http://a.test/"}}, &pb.SeedResponse{}); err != nil {
		t.Fatal(err)
	}
	if n := served.Load(); n != 1 {
		t.Fatalf("handler ran %d times, want 1 (the small request only)", n)
	}
}
