package ring

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
)

// idBits is the width of the identifier space, and so the finger table size.
const idBits = 64

// ID is a position on the 2^64 ring.
type ID uint64

// Between reports whether id lies in the half-open arc (lo, hi] going
// clockwise; if lo == hi the arc is the whole ring.
func (id ID) Between(lo, hi ID) bool {
	if lo == hi {
		return true
	}
	// Unsigned wraparound turns the arc test into one comparison:
	// id ∈ (lo, hi] ⇔ 1 ≤ id-lo ≤ hi-lo.
	return id-lo-1 < hi-lo
}

// inOpen reports whether id lies in the open arc (lo, hi); when lo == hi that
// is the whole ring except lo. Chord's "closest preceding node" needs the
// open arc so that a hop never lands on the key's owner or on the asker.
func (id ID) inOpen(lo, hi ID) bool {
	return id != hi && id.Between(lo, hi)
}

// dist is the clockwise distance from id to to.
func (id ID) dist(to ID) uint64 { return uint64(to - id) }

// String formats the ID as 16 hex digits.
func (id ID) String() string { return fmt.Sprintf("%016x", uint64(id)) }

// HashID places arbitrary bytes (a URL, a host name, a peer ID) on the ring:
// the first 8 bytes of their SHA-256, big-endian.
func HashID(b []byte) ID {
	sum := sha256.Sum256(b)
	return ID(binary.BigEndian.Uint64(sum[:8]))
}

// Peer is a ring member: its position and an opaque transport address (a
// libp2p peer ID string, or a name in memory).
type Peer struct {
	ID   ID
	Addr string
}

// Machine returns the physical peer p runs on. A peer may hold several
// ring positions (virtual nodes): a position's address is its machine's
// address, followed, for every position but the first, by '/' and the
// position's index. A peer with one position has its machine's address
// (a libp2p peer ID has no '/'). Replicas go to other machines than the
// owner's: a machine that fails takes all its positions with it.
func (p Peer) Machine() string {
	if i := strings.IndexByte(p.Addr, '/'); i >= 0 {
		return p.Addr[:i]
	}
	return p.Addr
}

// IsZero reports whether p is the zero Peer, which stands for "unknown".
func (p Peer) IsZero() bool { return p == Peer{} }

// String formats p as addr@id for logs and errors.
func (p Peer) String() string {
	if p.IsZero() {
		return "<none>"
	}
	return p.Addr + "@" + p.ID.String()
}
