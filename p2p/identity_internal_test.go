package p2p

import (
	"testing"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/test"
)

// TestIDCacheBoundedAndTrue: the remembered peer ID conversions give what
// the conversions give, a text that does not decode is refused every
// time, and however many IDs pass through, each map holds at most
// idCacheMax of them.
func TestIDCacheBoundedAndTrue(t *testing.T) {
	c := &idCache{}
	ids := make([]peer.ID, 0, idCacheMax+10)
	for range idCacheMax + 10 {
		id, err := test.RandPeerID()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for round := range 2 {
		for _, id := range ids {
			s := c.encode(id)
			if s != id.String() {
				t.Fatalf("round %d: encode %q, want %q", round, s, id.String())
			}
			got, err := c.decode(s)
			if err != nil || got != id {
				t.Fatalf("round %d: decode %q: %v, %v; want %v", round, s, got, err, id)
			}
		}
	}
	if len(c.text) > idCacheMax || len(c.ids) > idCacheMax {
		t.Fatalf("cache holds %d encodings and %d decodings, bound %d", len(c.text), len(c.ids), idCacheMax)
	}
	bad := ids[0].String() + "x"
	for range 2 {
		if id, err := c.decode(bad); err == nil {
			t.Fatalf("decode %q gave %v, want an error", bad, id)
		}
	}
	if _, ok := c.ids[bad]; ok {
		t.Fatalf("a text that does not decode is remembered")
	}
}
