package p2p_test

import (
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/swarmcrawl/swarmcrawl/p2p"
)

// writeKey writes a new swarm key file of the given mode.
func writeKey(t *testing.T, mode os.FileMode) string {
	t.Helper()
	key, err := p2p.NewSwarmKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "swarm.key")
	if err := os.WriteFile(path, key, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // whatever the umask
		t.Fatal(err)
	}
	return path
}

// newTestHost starts a loopback host with cfg's admission settings.
func newTestHost(t *testing.T, cfg p2p.Config) *p2p.Host {
	t.Helper()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = []string{"/ip4/127.0.0.1/tcp/0"}
	cfg.DisableNAT = true
	h, err := p2p.NewHost(key, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func connect(a, b host.Host) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return a.Connect(ctx, b.Peerstore().PeerInfo(b.ID()))
}

// A key file in the kubo swarm.key format loads; one that group or others
// may read is refused, as is garbage.
func TestSwarmKeyFile(t *testing.T) {
	path := writeKey(t, 0o600)
	raw, _ := os.ReadFile(path)
	if lines := strings.Split(strings.TrimSpace(string(raw)), "\n"); len(lines) != 3 ||
		lines[0] != "/key/swarm/psk/1.0.0/" || lines[1] != "/base16/" || len(lines[2]) != 64 {
		t.Fatalf("swarm key file %q is not in the kubo format", raw)
	}
	if psk, err := p2p.LoadSwarmKey(path); err != nil || len(psk) != 32 {
		t.Fatalf("load: %d bytes, %v", len(psk), err)
	}
	if _, err := p2p.LoadSwarmKey(writeKey(t, 0o640)); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a group-readable key: %v, want a refusal that says how to fix it", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.key")
	if err := os.WriteFile(bad, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := p2p.LoadSwarmKey(bad); err == nil {
		t.Fatal("garbage accepted as a swarm key")
	}
}

// Only peers with the same key connect to a private swarm's hosts; and a
// private swarm cannot listen on QUIC.
func TestPrivateSwarmAdmitsKeyHoldersOnly(t *testing.T) {
	psk, err := p2p.LoadSwarmKey(writeKey(t, 0o600))
	if err != nil {
		t.Fatal(err)
	}
	other, err := p2p.LoadSwarmKey(writeKey(t, 0o600))
	if err != nil {
		t.Fatal(err)
	}
	member := newTestHost(t, p2p.Config{SwarmKey: psk})
	if err := connect(newTestHost(t, p2p.Config{SwarmKey: psk}), member); err != nil {
		t.Fatalf("a peer with the key: %v", err)
	}
	if err := connect(newTestHost(t, p2p.Config{}), member); err == nil {
		t.Fatal("a peer without the key connected to a private swarm")
	}
	if err := connect(newTestHost(t, p2p.Config{SwarmKey: other}), member); err == nil {
		t.Fatal("a peer with another key connected")
	}
	client, err := p2p.NewClientHost(nil, psk)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := connect(client, member); err != nil {
		t.Fatalf("a client with the key: %v", err)
	}
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	if _, err := p2p.NewHost(key, p2p.Config{SwarmKey: psk, DisableNAT: true, Listen: []string{"/ip4/127.0.0.1/udp/0/quic-v1"}}); err == nil {
		t.Fatal("a private swarm host listening on QUIC")
	}
}

// With an allowlist, only the listed peers connect, whoever dials: a
// stranger's connection is closed once it has authenticated, before any
// stream, and the node does not dial strangers.
func TestAllowlistAdmitsListedPeersOnly(t *testing.T) {
	friend := newTestHost(t, p2p.Config{})
	stranger := newTestHost(t, p2p.Config{})
	node := newTestHost(t, p2p.Config{AllowPeers: []peer.ID{friend.ID()}})
	const pid = "/test/echo/1.0.0"
	node.SetStreamHandler(pid, func(s network.Stream) { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := connect(friend, node); err != nil {
		t.Fatalf("listed peer dialing in: %v", err)
	}
	if s, err := friend.NewStream(ctx, node.ID(), pid); err != nil {
		t.Fatalf("listed peer's stream: %v", err)
	} else {
		_ = s.Close()
	}
	_ = connect(stranger, node) // may look done on the stranger's side
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer scancel()
	if s, err := stranger.NewStream(sctx, node.ID(), pid); err == nil {
		_ = s.Close()
		t.Fatal("a stranger opened a stream to the node")
	}
	if node.Network().Connectedness(stranger.ID()) == network.Connected {
		t.Fatal("the node kept a stranger's connection")
	}
	if err := connect(node, stranger); err == nil {
		t.Fatal("the node dialed a stranger")
	}
	ids, err := p2p.ParsePeerList(" " + friend.ID().String() + ", " + stranger.ID().String())
	if err != nil || len(ids) != 2 || ids[0] != friend.ID() {
		t.Fatalf("ParsePeerList: %v, %v", ids, err)
	}
	list := filepath.Join(t.TempDir(), "peers")
	if err := os.WriteFile(list, []byte("# members\n"+friend.ID().String()+"\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ids, err := p2p.ParsePeerList("@" + list); err != nil || len(ids) != 1 || ids[0] != friend.ID() {
		t.Fatalf("ParsePeerList(@file): %v, %v", ids, err)
	}
	if _, err := p2p.ParsePeerList("not-a-peer-id"); err == nil {
		t.Fatal("a malformed peer ID accepted")
	}
}

// An identity key file that group or others may read is refused.
func TestIdentityKeyMustBePrivate(t *testing.T) {
	dir := t.TempDir()
	if _, err := p2p.LoadOrCreateIdentity(context.Background(), dir, p2p.NoRingWork); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "identity.key")
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := p2p.LoadOrCreateIdentity(context.Background(), dir, p2p.NoRingWork); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable identity key: %v, want a refusal", err)
	}
}
