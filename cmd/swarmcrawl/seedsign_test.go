package main

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/swarmcrawl/swarmcrawl/p2p/seedsig"
)

// A client with an identity signs each seed over the normal form the
// member computes (so a URL as a user types it verifies there), and
// sends an empty statement for a URL that does not normalise.
func TestSeedsSignedOverNormalForm(t *testing.T) {
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := peer.IDFromPrivateKey(key)
	proofs, err := signSeeds(key, []string{" HTTP://Example.ORG ", "not a url"}, time.Now())
	if err != nil || len(proofs) != 2 {
		t.Fatalf("signSeeds: %d statements, %v", len(proofs), err)
	}
	b, err := seedsig.Encode(proofs[0])
	if err != nil {
		t.Fatal(err)
	}
	if got, err := seedsig.Verify(b, "http://example.org/"); err != nil || got != id {
		t.Errorf("the statement over the normal form: %s, %v; want %s", got, err, id)
	}
	if b, _ := seedsig.Encode(proofs[1]); b != nil {
		t.Errorf("a statement for a URL that does not normalise: %x", b)
	}
}
