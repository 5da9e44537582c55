package p2p

import (
	"crypto/rand"
	"fmt"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// TestRingMessagesCannotFillPeerstore: a peer that names many made-up
// peers in ring messages fills only the bounded book of learned addresses,
// where the most recently named stay; libp2p's peerstore, shared with the
// rest of the host, gets a peer's addresses only when this node dials it,
// and once.
func TestRingMessagesCannotFillPeerstore(t *testing.T) {
	const bound = 100
	ps := &fuzzPeerstore{}
	self := fuzzPeers(t, 1)[0]
	h := &fuzzHost{id: self, ps: ps}
	book := newLearnedAddrs(bound)
	s := &Streams{host: h, learned: book, work: NoRingWork}
	tr := &RingTransport{host: h, streams: s}

	var named []peer.ID
	for i := 0; i < 3*bound; i++ {
		_, pub, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		id, err := peer.IDFromPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		named = append(named, id)
	}
	var wire []*pb.Peer
	for i, id := range named {
		wire = append(wire, wirePeer(id, fmt.Sprintf("/ip4/10.0.%d.%d/tcp/4001", i/256, i%256)))
	}
	if _, err := tr.decodePeers(wire); err != nil {
		t.Fatal(err)
	}
	if len(ps.added) > 0 {
		t.Fatalf("ring messages put addresses of %d peers in the peerstore, want none before a dial", len(ps.added))
	}
	if n := book.len(); n != bound {
		t.Fatalf("the book holds %d peers, want its bound %d", n, bound)
	}
	last := named[len(named)-1]
	if addrs, _ := book.lookup(last, time.Now()); len(addrs) != 1 {
		t.Fatalf("the most recently named peer has %d addresses in the book, want 1", len(addrs))
	}
	if addrs, _ := book.lookup(named[0], time.Now()); len(addrs) != 0 {
		t.Fatalf("the first named peer is still in a full book: %v", addrs)
	}
	if got := s.addrsOf(last); len(got) != 1 {
		t.Fatalf("addrsOf a learned peer = %v, want its address (ring messages pass it on)", got)
	}
	s.useLearned(last)
	s.useLearned(last)
	if len(ps.added) != 1 || ps.added[0].id != last || ps.added[0].ttl != learnedAddrTTL {
		t.Fatalf("dialing a learned peer twice added %+v to the peerstore, want its addresses once", ps.added)
	}
	if addrs, _ := book.lookup(last, time.Now().Add(learnedAddrTTL+time.Second)); len(addrs) != 0 {
		t.Fatalf("addresses outlived learnedAddrTTL: %v", addrs)
	}
}
