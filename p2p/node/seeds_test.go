package node

import (
	"context"
	"crypto/rand"
	"log/slog"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/swarmcrawl/swarmcrawl/p2p"
)

func newPeerID(t *testing.T) peer.ID {
	t.Helper()
	_, pub, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// Only the operator seeds by default: a client on the node's machine
// (over loopback), an allowed member or a listed seeder; a stranger from
// elsewhere is refused with a line that names the way to let it in, and
// nothing it sent is routed. SeedFromAnyone opens seeding to every peer.
func TestSeedPolicy(t *testing.T) {
	member, seeder, stranger := newPeerID(t), newPeerID(t), newPeerID(t)
	loopback := ma.StringCast("/ip4/127.0.0.1/tcp/4001")
	loopback6 := ma.StringCast("/ip6/::1/tcp/4001")
	remote := ma.StringCast("/ip4/203.0.113.7/tcp/4001")
	n := &Node{log: slog.New(slog.DiscardHandler), cfg: Config{
		SeedFrom: []peer.ID{seeder},
		Host:     p2p.Config{AllowPeers: []peer.ID{member}},
	}}
	for _, c := range []struct {
		name string
		in   p2p.Inbound
		want bool
	}{
		{"stranger over loopback", p2p.Inbound{From: stranger, RemoteAddr: loopback}, true},
		{"stranger over IPv6 loopback", p2p.Inbound{From: stranger, RemoteAddr: loopback6}, true},
		{"stranger from elsewhere", p2p.Inbound{From: stranger, RemoteAddr: remote}, false},
		{"stranger, address unknown", p2p.Inbound{From: stranger}, false},
		{"listed seeder from elsewhere", p2p.Inbound{From: seeder, RemoteAddr: remote}, true},
		{"allowed member from elsewhere", p2p.Inbound{From: member, RemoteAddr: remote}, true},
	} {
		if got := n.maySeed(c.in); got != c.want {
			t.Errorf("%s: may seed %v, want %v", c.name, got, c.want)
		}
	}
	resp := n.submitSeeds(context.Background(), p2p.Inbound{From: stranger, RemoteAddr: remote}, []string{"http://victim.example/"}, nil)
	if resp.Error == "" || !strings.Contains(resp.Error, "--seed-from "+stranger.String()) || resp.Accepted != 0 {
		t.Fatalf("a stranger's seeds: %+v, want a refusal naming --seed-from", resp)
	}
	n.cfg.SeedFromAnyone = true
	if !n.maySeed(p2p.Inbound{From: stranger, RemoteAddr: remote}) {
		t.Error("SeedFromAnyone: a stranger may not seed")
	}
}
