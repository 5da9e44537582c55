package p2p_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// testWork is the ring work of the tests: 256 key generations on average.
const testWork p2p.RingWork = 8

// keyWithWork returns a key whose identity carries at least bits of ring
// work (bits >= 0) or less than -bits (bits < 0).
func keyWithWork(t *testing.T, bits int) crypto.PrivKey {
	t.Helper()
	for range 1 << 16 {
		key, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		id, err := peer.IDFromPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		if w := p2p.WorkOf(id); bits >= 0 && w >= bits || bits < 0 && w < -bits {
			return key
		}
	}
	t.Fatalf("no key with work %d in 65,536 tries", bits)
	return nil
}

// hostWithKey is a loopback host with identity key.
func hostWithKey(t *testing.T, key crypto.PrivKey) host.Host {
	t.Helper()
	return loopbackHost(t, libp2p.Identity(key))
}

// loopbackHost is a libp2p host listening on loopback with opts, closed
// when the test ends.
func loopbackHost(t *testing.T, opts ...libp2p.Option) host.Host {
	t.Helper()
	h, err := libp2p.New(append(opts, libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

// A generated identity carries the work asked for, checked by one hash;
// an identity is stored once and read back, and a stored identity without
// the swarm's work is refused with a clear error rather than joined with.
func TestIdentityCarriesRingWork(t *testing.T) {
	ctx := context.Background()
	key, err := p2p.GenerateIdentity(ctx, 12)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(key)
	if p2p.WorkOf(id) < 12 || !p2p.RingWork(12).Admits(id) {
		t.Fatalf("generated identity carries %d bits, asked 12", p2p.WorkOf(id))
	}
	if p2p.RingWork(0).Bits() != int(p2p.DefaultRingWork) || p2p.NoRingWork.Bits() != 0 || p2p.RingWork(33).Validate() == nil {
		t.Fatal("ring work defaults or bounds wrong")
	}

	dir := t.TempDir()
	first, err := p2p.LoadOrCreateIdentity(ctx, dir, testWork)
	if err != nil {
		t.Fatal(err)
	}
	again, err := p2p.LoadOrCreateIdentity(ctx, dir, testWork)
	if err != nil || !first.Equals(again) {
		t.Fatalf("identity not kept: %v", err)
	}
	// A data dir whose identity was made without work, in a swarm that
	// asks for some.
	bare := t.TempDir()
	raw, _ := crypto.MarshalPrivateKey(keyWithWork(t, -4))
	if err := os.WriteFile(filepath.Join(bare, p2p.IdentityFile), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := p2p.LoadOrCreateIdentity(ctx, bare, testWork); !errors.Is(err, p2p.ErrNoRingWork) {
		t.Fatalf("identity without work loaded: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p2p.GenerateIdentity(cancelled, 32); err == nil {
		t.Fatal("generation did not stop with its context")
	}
}

// The members' protocols serve only peers whose identity carries the
// swarm's ring work: a stranger with a fresh key is refused before its
// request is read, and sees why; a peer with the work is served. Without
// Limits.MembersOnly the stranger's task batch was served.
func TestMembersOnlyProtocolsAskRingWork(t *testing.T) {
	server := hostWithKey(t, keyWithWork(t, int(testWork)))
	s := p2p.NewStreams(server, 0, testWork)
	var served atomic.Int64
	s.Handle(protocol.TasksID, func() proto.Message { return &pb.TaskBatch{} },
		func(context.Context, p2p.Inbound, proto.Message) proto.Message {
			served.Add(1)
			return &pb.TaskBatchResult{}
		})
	t.Cleanup(s.Close)

	call := func(client host.Host) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := client.Connect(ctx, server.Peerstore().PeerInfo(server.ID())); err != nil {
			t.Fatal(err)
		}
		return p2p.NewStreams(client, 0, p2p.NoRingWork).Call(ctx, server.ID(), protocol.TasksID, &pb.TaskBatch{}, &pb.TaskBatchResult{})
	}
	stranger := hostWithKey(t, keyWithWork(t, -int(testWork)))
	if err := call(stranger); !errors.Is(err, p2p.ErrNoRingWork) {
		t.Fatalf("a stranger without ring work: %v, want %v", err, p2p.ErrNoRingWork)
	}
	// The refusal can reach the stranger while it still writes a large
	// request or closes its side: it still says why.
	big := &pb.TaskBatch{}
	for i := range 20000 {
		big.Tasks = append(big.Tasks, &pb.Task{Url: fmt.Sprintf("http://a.test/%0100d", i)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := p2p.NewStreams(stranger, 0, p2p.NoRingWork)
	for i := range 10 {
		req := proto.Message(&pb.TaskBatch{})
		if i%2 == 0 {
			req = big
		}
		if err := c.Call(ctx, server.ID(), protocol.TasksID, req, &pb.TaskBatchResult{}); !errors.Is(err, p2p.ErrNoRingWork) {
			t.Fatalf("a stranger's request %d without ring work: %v, want %v", i, err, p2p.ErrNoRingWork)
		}
	}
	if served.Load() != 0 {
		t.Fatalf("a stranger without ring work was served")
	}
	member := hostWithKey(t, keyWithWork(t, int(testWork)))
	if err := call(member); err != nil || served.Load() != 1 {
		t.Fatalf("a member with the work: %v, served %d", err, served.Load())
	}
	// The protocols of clients (seeding, get, the archive) ask no work.
	for _, pid := range []string{protocol.SeedID, protocol.GetID, protocol.ArchiveID} {
		if l, _ := p2p.LimitsOf(pid); l.MembersOnly {
			t.Errorf("%s asks clients for ring work", pid)
		}
	}
	for _, pid := range []string{protocol.TasksID, protocol.ReplicateID, protocol.HandoffID, protocol.DigestID, protocol.PullID, protocol.FetchID, protocol.CaptureID} {
		if l, _ := p2p.LimitsOf(pid); !l.MembersOnly {
			t.Errorf("%s is served to anyone", pid)
		}
	}
}
