package node

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/seedsig"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
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

// A seed mark counts only with a signed statement over its URL by a
// seeder the node accepts: itself, a listed seeder or allowed member, or
// anyone with SeedFromAnyone. A stranger's statement, a listed seeder's
// statement for another URL (replayed) and a mark without a statement do
// not count; unmark strips such marks from records (keeping the records,
// and the caller's slice as it was) and keeps the good ones.
func TestSeedMarksHonoured(t *testing.T) {
	key := func() (crypto.PrivKey, peer.ID) {
		priv, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := peer.IDFromPrivateKey(priv)
		return priv, id
	}
	selfKey, self := key()
	seederKey, seeder := key()
	memberKey, member := key()
	strangerKey, _ := key()
	p := newSeedPolicy(Config{SeedFrom: []peer.ID{seeder}, Host: p2p.Config{AllowPeers: []peer.ID{member}}}, nil, selfKey)
	p.self = self
	const u = "http://a.test/"
	sign := func(k crypto.PrivKey, url string) string {
		b, err := seedsig.Sign(k, url, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, c := range []struct {
		name  string
		proof string
		want  bool
	}{
		{"the node's own", sign(selfKey, u), true},
		{"a listed seeder's", sign(seederKey, u), true},
		{"an allowed member's", sign(memberKey, u), true},
		{"a stranger's", sign(strangerKey, u), false},
		{"a listed seeder's for another URL", sign(seederKey, "http://b.test/"), false},
		{"none", "", false},
		{"garbage", "\x0a\x03abc", false},
	} {
		if got := p.Honours(u, c.proof); got != c.want {
			t.Errorf("%s statement: honoured %v, want %v", c.name, got, c.want)
		}
	}
	if p.refused.Load() != 4 {
		t.Errorf("%d marks counted refused, want 4", p.refused.Load())
	}
	anyone := newSeedPolicy(Config{SeedFromAnyone: true}, nil, selfKey)
	if !anyone.Honours(u, sign(strangerKey, u)) || anyone.Honours(u, sign(strangerKey, "http://b.test/")) {
		t.Error("SeedFromAnyone: want any valid statement honoured, and only over its URL")
	}

	recs := []shard.Record{
		{URL: u, Seed: true, SeedProof: []byte(sign(seederKey, u))},
		{URL: "http://b.test/", Seed: true, SeedProof: []byte(sign(strangerKey, "http://b.test/"))},
		{URL: "http://c.test/", Seed: true},
		{URL: "http://d.test/x", Depth: 1},
	}
	out, n := p.unmark(recs)
	if n != 2 || len(out) != 4 || !out[0].Seed || out[0].SeedProof == nil || out[1].Seed || out[1].SeedProof != nil || out[2].Seed || out[3].Seed {
		t.Errorf("unmark: %d stripped, %+v; want the stranger's and the bare mark stripped, the seeder's kept", n, out)
	}
	if !recs[1].Seed || !recs[2].Seed {
		t.Error("unmark changed the caller's records")
	}
}

// The statements held for seeds on their way are bounded in number and
// bytes, and a settled seed's frees its room.
func TestSeedProofsBounded(t *testing.T) {
	var s seedProofs
	big := strings.Repeat("p", maxPendingSeedBytes/4)
	for i := range 3 {
		if !s.put(fmt.Sprintf("http://%d.test/", i), big) {
			t.Fatalf("statement %d refused within the bound", i)
		}
	}
	if s.put("http://4.test/", big) {
		t.Fatal("a statement beyond the byte bound was held")
	}
	if !s.put("http://0.test/", "small") {
		t.Fatal("replacing a held statement by a smaller one was refused")
	}
	s.drop([]string{"http://1.test/", "http://2.test/"})
	if !s.put("http://4.test/", big) || s.get("http://4.test/") != big {
		t.Fatal("room freed by settled seeds was not reused")
	}
	var n seedProofs
	for i := range maxPendingSeeds {
		n.put(fmt.Sprintf("http://%d.test/", i), "p")
	}
	if n.put("http://one-more.test/", "p") || len(n.m) != maxPendingSeeds {
		t.Fatalf("%d statements held, bound %d", len(n.m), maxPendingSeeds)
	}
}
