package p2p

import (
	"bytes"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/swarmcrawl/swarmcrawl/p2p/seedsig"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// A seed mark's signed statement crosses the wire with its record both
// ways, unchanged, so that the receiver can verify it; a statement on a
// record without the mark is dropped, and an oversized one makes the
// message malformed.
func TestShardRecordCarriesSeedProof(t *testing.T) {
	key, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	proof, err := seedsig.Sign(key, "http://a.test/", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	wire, err := seedsig.Decode(proof)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := decodeRecords([]*pb.ShardRecord{
		{Key: 1, Hash: 2, Url: "http://a.test/", Seed: true, SeedProof: wire},
		{Key: 1, Hash: 3, Url: "http://a.test/x", Depth: 1, SeedProof: wire},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(recs[0].SeedProof, proof) || recs[1].SeedProof != nil {
		t.Fatalf("decoded statements %x and %x; want the seed's, and none on the link", recs[0].SeedProof, recs[1].SeedProof)
	}
	back := encodeRecords(recs)
	again, err := seedsig.Encode(back[0].SeedProof)
	if err != nil || !bytes.Equal(again, proof) {
		t.Fatalf("re-encoded statement %x, %v; want it unchanged", again, err)
	}
	if _, err := seedsig.Verify(again, "http://a.test/"); err != nil {
		t.Fatalf("the statement after a round trip: %v", err)
	}
	huge := &pb.SeedProof{PublicKey: wire.PublicKey, Signature: make([]byte, seedsig.MaxProofBytes)}
	if _, err := decodeRecords([]*pb.ShardRecord{{Key: 1, Hash: 2, Url: "http://a.test/", Seed: true, SeedProof: huge}}); err == nil {
		t.Fatal("a record with an oversized statement decoded")
	}
}
