package p2p

import (
	"crypto/rand"
	"errors"
	"testing"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// Ring messages name no peer without the swarm's ring work: a list leaves
// such peers out (a successor list or a finger from a careless or hostile
// member), and a single peer (a notify's candidate, a lookup's next hop)
// is refused. Without the check, a stranger with a fresh key could be
// taken as a predecessor and claim its arc.
func TestRingMessagesNameOnlyMembersWithWork(t *testing.T) {
	const work RingWork = 8
	h, err := libp2p.New(libp2p.NoListenAddrs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	tr := NewRingTransport(h, NewStreams(h, 0, work))
	var member, stranger peer.ID
	for member == "" || stranger == "" {
		key, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		id, _ := peer.IDFromPrivateKey(key)
		if WorkOf(id) >= int(work) {
			member = id
		} else {
			stranger = id
		}
	}
	wire := func(id peer.ID) *pb.Peer { return &pb.Peer{RingId: uint64(RingID(id)), PeerId: []byte(id)} }
	if _, err := tr.decodePeer(wire(stranger)); !errors.Is(err, ErrNoRingWork) {
		t.Fatalf("a peer without work decoded: %v", err)
	}
	if p, err := tr.decodePeer(wire(member)); err != nil || p.Addr != member.String() {
		t.Fatalf("a member: %v, %v", p, err)
	}
	list, err := tr.decodePeers([]*pb.Peer{wire(stranger), wire(member), wire(stranger)})
	if err != nil || len(list) != 1 || list[0].Addr != member.String() {
		t.Fatalf("list of a member between strangers decoded to %v, %v", list, err)
	}
}
