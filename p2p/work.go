package p2p

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Ring work: a ring position costs work. A node's position derives from
// its peer ID (RingID), so no one chooses it, but identities cost nothing:
// a stranger after one host's URLs generates keys until one lands just
// after the host's key (one try in a swarm of three, about N in a swarm
// of N). A swarm asks each member's identity to carry RingWork bits of
// proof of work: the SHA-256 of a domain tag and the peer ID starts with
// that many zero bits. The work is bound to the identity, so it cannot
// be reused for another position, costs one hash to check, and makes
// landing in a chosen arc cost 2^bits times what it cost before; an honest
// node pays it once, when it first creates its identity.

// RingWork is the proof of work, in bits, a swarm asks of its members'
// identities. All members of a swarm use the same value: a node refuses,
// as a ring member, every peer whose identity carries less.
type RingWork int

// DefaultRingWork is the ring work of a node that sets none: 65,536 key
// generations on average, about 1.5 s of one core (docs/security.md).
const DefaultRingWork RingWork = 16

// NoRingWork asks no work of members (a test swarm, or a private swarm
// whose members are all trusted).
const NoRingWork RingWork = -1

// maxRingWork bounds the work a swarm may ask: 32 bits is some 4 billion
// key generations, days of a core.
const maxRingWork = 32

// ringWorkTag separates the work's hash from the ring position's.
const ringWorkTag = "swarmcrawl/ring-work/1\x00"

// Bits is the number of leading zero bits w asks for (0 for none).
func (w RingWork) Bits() int {
	switch {
	case w == 0:
		return int(DefaultRingWork)
	case w < 0:
		return 0
	}
	return int(w)
}

// Validate refuses a work beyond what any node could pay.
func (w RingWork) Validate() error {
	if w.Bits() > maxRingWork {
		return fmt.Errorf("ring work of %d bits: at most %d", w.Bits(), maxRingWork)
	}
	return nil
}

// Admits reports whether id carries the work w asks for.
func (w RingWork) Admits(id peer.ID) bool { return WorkOf(id) >= w.Bits() }

// WorkOf is the work id carries: the leading zero bits of its work hash.
func WorkOf(id peer.ID) int {
	h := sha256.New()
	h.Write([]byte(ringWorkTag))
	h.Write([]byte(id))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	n := 0
	for _, b := range sum {
		if b != 0 {
			return n + bits.LeadingZeros8(b)
		}
		n += 8
	}
	return n
}

// ErrNoRingWork reports an identity without the work its swarm asks for.
var ErrNoRingWork = errors.New("identity lacks the swarm's ring work")

// NotMemberCode is the code of a stream reset because its peer's identity
// lacks the ring work the node asks of members (see Limits.MembersOnly).
const NotMemberCode network.StreamErrorCode = 0x5c01

// GenerateIdentity creates an Ed25519 identity that carries w's work,
// trying keys on every core until one does, or ctx ends.
func GenerateIdentity(ctx context.Context, w RingWork) (crypto.PrivKey, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	found := make(chan crypto.PrivKey, 1)
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for ctx.Err() == nil {
				key, _, err := crypto.GenerateEd25519Key(rand.Reader)
				if err == nil {
					var id peer.ID
					if id, err = peer.IDFromPrivateKey(key); err == nil && w.Admits(id) {
						select {
						case found <- key:
						default:
						}
						cancel()
						return
					}
				}
				if err != nil {
					select {
					case errc <- err:
					default:
					}
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case key := <-found:
		return key, nil
	case err := <-errc:
		return nil, fmt.Errorf("generate identity: %w", err)
	default:
		return nil, fmt.Errorf("generate identity with %d bits of ring work: %w", w.Bits(), ctx.Err())
	}
}
