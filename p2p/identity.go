package p2p

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// IdentityFile is the private key of a node, inside its data dir. Keeping
// it makes a restarted node come back with the same peer ID and therefore
// the same ring position.
const IdentityFile = "identity.key"

// LoadOrCreateIdentity reads the node key from dir, creating an Ed25519
// key that carries the ring work w (file mode 0600) on first start. It
// refuses a key file that group or others may read (whoever holds the key
// can pose as the node), and a key without the work w asks for: its peers
// would refuse it as a ring member.
func LoadOrCreateIdentity(ctx context.Context, dir string, w RingWork) (crypto.PrivKey, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	path := filepath.Join(dir, IdentityFile)
	key, err := loadKey(path)
	if err != nil {
		return nil, err
	}
	if key == nil {
		if key, err = GenerateIdentity(ctx, w); err != nil {
			return nil, err
		}
		if err := writeKey(path, key); err != nil {
			return nil, err
		}
		return key, nil
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("read identity %s: %w", path, err)
	}
	if !w.Admits(id) {
		return nil, fmt.Errorf("identity %s (%s) carries %d bits of ring work, the swarm asks %d: %w (start with a new data directory, or the same --ring-work as the swarm)",
			path, ShortID(id), WorkOf(id), w.Bits(), ErrNoRingWork)
	}
	return key, nil
}

// LoadOrCreateKey reads a libp2p private key file, creating an Ed25519 key
// there (mode 0600) when it does not exist. It refuses a key file that
// group or others may read. A client's key needs no ring work.
func LoadOrCreateKey(path string) (crypto.PrivKey, error) {
	key, err := loadKey(path)
	if err != nil || key != nil {
		return key, err
	}
	key, _, err = crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate identity: %w", err)
	}
	if err := writeKey(path, key); err != nil {
		return nil, err
	}
	return key, nil
}

// loadKey reads the private key at path, or returns nil when there is no
// file there.
func loadKey(path string) (crypto.PrivKey, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read identity: %w", err)
	}
	if err := checkPrivate(path, "identity key"); err != nil {
		return nil, err
	}
	key, err := crypto.UnmarshalPrivateKey(raw)
	if err != nil {
		return nil, fmt.Errorf("read identity %s: %w", path, err)
	}
	return key, nil
}

// writeKey writes key to path (mode 0600), through a temporary file and a
// rename so that a crash never leaves a truncated key that would give the
// node a new identity.
func writeKey(path string, key crypto.PrivKey) error {
	raw, err := crypto.MarshalPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode identity: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return fmt.Errorf("write identity: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write identity: %w", err)
	}
	return nil
}

// RingID places a peer on the ring. It is derived from the peer ID, which is
// itself the hash of the peer's public key, so a node cannot choose its
// position (and so cannot choose which hosts it owns) without also
// grinding keys.
func RingID(id peer.ID) ring.ID {
	sum := sha256.Sum256([]byte(id))
	return ring.ID(binary.BigEndian.Uint64(sum[:8]))
}

// RingPeer is the ring member for a libp2p peer: its first position.
func RingPeer(id peer.ID) ring.Peer {
	return ring.Peer{ID: RingID(id), Addr: idText.encode(id)}
}

// MaxPositions bounds the ring positions (virtual nodes) of one peer.
const MaxPositions = 256

// PositionID places a peer's position i on the ring: RingID for the first
// (i = 0), and for the others the SHA-256 of the peer ID and i, so that
// every peer can check a position from the peer ID and its index, and no
// peer chooses one.
func PositionID(id peer.ID, i int) ring.ID {
	if i == 0 {
		return RingID(id)
	}
	h := sha256.New()
	h.Write([]byte(id))
	h.Write(binary.AppendUvarint([]byte{'/'}, uint64(i)))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return ring.ID(binary.BigEndian.Uint64(sum[:8]))
}

// RingPeerAt is position i of a peer as a ring member: its address is the
// peer ID, followed, for every position but the first, by '/' and i
// (ring.Peer.Machine gives the peer ID back).
func RingPeerAt(id peer.ID, i int) ring.Peer {
	if i == 0 {
		return RingPeer(id)
	}
	return ring.Peer{ID: PositionID(id, i), Addr: idText.encode(id) + "/" + strconv.Itoa(i)}
}

// PositionOf splits a ring member into its peer ID and position index,
// refusing an address RingPeerAt does not make.
func PositionOf(p ring.Peer) (peer.ID, int, error) {
	id, err := idText.decode(p.Machine())
	if err != nil {
		return "", 0, fmt.Errorf("ring peer %q: %w", p.Addr, err)
	}
	if len(p.Addr) == len(p.Machine()) {
		return id, 0, nil
	}
	// The index in the form RingPeerAt writes it (no sign, no leading
	// zero): compared as text, without hashing the position again.
	suffix := p.Addr[len(p.Machine())+1:]
	i, err := strconv.Atoi(suffix)
	if err != nil || i <= 0 || i >= MaxPositions || strconv.Itoa(i) != suffix {
		return "", 0, fmt.Errorf("ring peer %q: no position index below %d", p.Addr, MaxPositions)
	}
	return id, i, nil
}

// MachineOf returns the peer ID of the machine holding ring member p,
// whatever its position.
func MachineOf(p ring.Peer) (peer.ID, error) {
	id, err := idText.decode(p.Machine())
	if err != nil {
		return "", fmt.Errorf("ring peer %q: %w", p.Addr, err)
	}
	return id, nil
}

// idText converts peer IDs to and from their text form (base58), the
// form a ring member's address carries. Every ring message names its
// peers by address, and a node of V positions encodes and decodes the
// same few dozen neighbours' IDs over and over (p2p/node at V = 16 spent
// about 7% of its CPU in base58, issue 28), so the conversions are
// remembered. Both maps are bounded and emptied when full: a peer that
// sends many IDs costs the conversions it would have cost anyway, and a
// cached answer is the one the conversion gives, so nothing sent can
// change what another text decodes to.
var idText = &idCache{}

// idCacheMax bounds each map of idCache.
const idCacheMax = 4096

// idCache remembers peer ID conversions; see idText.
type idCache struct {
	mu   sync.Mutex
	text map[peer.ID]string
	ids  map[string]peer.ID
}

// encode returns id.String().
func (c *idCache) encode(id peer.ID) string {
	c.mu.Lock()
	s, ok := c.text[id]
	c.mu.Unlock()
	if ok {
		return s
	}
	s = id.String()
	c.mu.Lock()
	if c.text == nil || len(c.text) >= idCacheMax {
		c.text = make(map[peer.ID]string)
	}
	c.text[id] = s
	c.mu.Unlock()
	return s
}

// decode returns peer.Decode(s); failures are not remembered.
func (c *idCache) decode(s string) (peer.ID, error) {
	c.mu.Lock()
	id, ok := c.ids[s]
	c.mu.Unlock()
	if ok {
		return id, nil
	}
	id, err := peer.Decode(s)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	if c.ids == nil || len(c.ids) >= idCacheMax {
		c.ids = make(map[string]peer.ID)
	}
	c.ids[s] = id
	c.mu.Unlock()
	return id, nil
}
