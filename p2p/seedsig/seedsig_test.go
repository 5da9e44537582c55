package seedsig

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

func newKey(t testing.TB, typ int) (crypto.PrivKey, peer.ID) {
	t.Helper()
	bits := -1
	if typ == crypto.RSA {
		bits = 2048
	}
	priv, _, err := crypto.GenerateKeyPair(typ, bits)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return priv, id
}

// A statement verifies over the URL it was signed for and names its
// signer; over any other URL (another path, another host), with its time
// or signature changed, or with another key in it, it does not.
func TestSignVerify(t *testing.T) {
	for _, typ := range []int{crypto.Ed25519, crypto.Secp256k1, crypto.ECDSA, crypto.RSA} {
		key, id := newKey(t, typ)
		other, _ := newKey(t, crypto.Ed25519)
		const u = "http://a.test/"
		b, err := Sign(key, u, time.Unix(1767225600, 0))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := Verify(b, u); err != nil || got != id {
			t.Fatalf("key type %d: verify = %s, %v; want %s", typ, got, err, id)
		}
		for _, v := range []string{"http://b.test/", "http://a.test/x", "http://a.test"} {
			if _, err := Verify(b, v); err == nil {
				t.Errorf("key type %d: the statement for %s verifies over %s", typ, u, v)
			}
		}
		p, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		later := proto.Clone(p).(*pb.SeedProof)
		later.Time++
		flipped := proto.Clone(p).(*pb.SeedProof)
		flipped.Signature[len(flipped.Signature)/2] ^= 1
		swapped := proto.Clone(p).(*pb.SeedProof)
		if swapped.PublicKey, err = crypto.MarshalPublicKey(other.GetPublic()); err != nil {
			t.Fatal(err)
		}
		for name, q := range map[string]*pb.SeedProof{"time changed": later, "signature changed": flipped, "another key": swapped} {
			enc, err := Encode(q)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Verify(enc, u); err == nil {
				t.Errorf("key type %d: a statement with its %s verifies", typ, name)
			}
		}
		if len(b) > MaxProofBytes {
			t.Errorf("key type %d: statement of %d bytes", typ, len(b))
		}
		t.Logf("key type %d: statement of %d bytes", typ, len(b))
	}
}

// Statements are bounded: an oversized one is refused before any
// signature check; none at all is ErrNoProof.
func TestBounds(t *testing.T) {
	if _, err := Verify(nil, "http://a.test/"); !errors.Is(err, ErrNoProof) {
		t.Errorf("no statement: %v, want ErrNoProof", err)
	}
	big := &pb.SeedProof{PublicKey: make([]byte, maxKeyBytes+1), Signature: []byte{1}}
	if _, err := Encode(big); err == nil {
		t.Error("a statement with an oversized key encoded")
	}
	raw, _ := proto.Marshal(&pb.SeedProof{PublicKey: []byte{1}, Signature: make([]byte, MaxProofBytes)})
	if _, err := Verify(raw, "http://a.test/"); err == nil {
		t.Error("an oversized statement verified")
	}
	if _, err := Verify([]byte{0xff, 0xff}, "http://a.test/"); err == nil {
		t.Error("garbage verified")
	}
	if _, err := Sign(newKeyOnly(t), "", time.Now()); err == nil {
		t.Error("signed an empty URL")
	}
}

func newKeyOnly(t *testing.T) crypto.PrivKey {
	k, _ := newKey(t, crypto.Ed25519)
	return k
}

// The Verifier remembers good statements only: a bad one is checked, and
// refused, every time.
func TestVerifierRemembersGoodOnly(t *testing.T) {
	key, id := newKey(t, crypto.Ed25519)
	b, err := Sign(key, "http://a.test/", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	v := NewVerifier(2)
	for range 3 {
		if got, err := v.Verify(b, "http://a.test/"); err != nil || got != id {
			t.Fatalf("verify = %s, %v", got, err)
		}
		if _, err := v.Verify(b, "http://b.test/"); err == nil {
			t.Fatal("the remembered statement verified over another URL")
		}
	}
	for i := range 5 { // past its bound
		u := "http://a.test/" + string(rune('a'+i))
		c, _ := Sign(key, u, time.Now())
		if _, err := v.Verify(c, u); err != nil {
			t.Fatal(err)
		}
	}
	if len(v.good) > 2 {
		t.Errorf("the verifier holds %d statements, bound 2", len(v.good))
	}
}

// BenchmarkVerify is the CPU one node spends on a seed mark it has not
// seen: one Ed25519 signature check (and, remembered, a hash). The
// baseline is the bare check of the standard library's Ed25519 in the
// same run: what a statement costs beyond it is decoding it and its key.
func BenchmarkVerify(b *testing.B) {
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	const u = "http://www.example.com/some/seed/page.html"
	proof, err := Sign(key, u, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("baseline-ed25519", func(b *testing.B) {
		pub, priv, _ := ed25519.GenerateKey(rand.Reader)
		msg := message(u, 1767225600)
		sig := ed25519.Sign(priv, msg)
		for b.Loop() {
			if !ed25519.Verify(pub, msg, sig) {
				b.Fatal("no")
			}
		}
	})
	b.Run("first", func(b *testing.B) {
		for b.Loop() {
			if _, err := Verify(proof, u); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("remembered", func(b *testing.B) {
		v := NewVerifier(16)
		for b.Loop() {
			if _, err := v.Verify(proof, u); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("sign", func(b *testing.B) {
		for b.Loop() {
			if _, err := Sign(key, u, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
