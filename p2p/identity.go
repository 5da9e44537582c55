package p2p

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// identityFile is the private key of a node, inside its data dir. Keeping
// it makes a restarted node come back with the same peer ID and therefore
// the same ring position.
const identityFile = "identity.key"

// LoadOrCreateIdentity reads the node key from dir, creating an Ed25519
// key (file mode 0600) on first start. It refuses a key file that group or
// others may read: whoever holds the key can pose as the node.
func LoadOrCreateIdentity(dir string) (crypto.PrivKey, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	return LoadOrCreateKey(filepath.Join(dir, identityFile))
}

// LoadOrCreateKey reads a libp2p private key file, creating an Ed25519 key
// there (mode 0600) when it does not exist. It refuses a key file that
// group or others may read.
func LoadOrCreateKey(path string) (crypto.PrivKey, error) {
	raw, err := os.ReadFile(path)
	if err == nil {
		if err := checkPrivate(path, "identity key"); err != nil {
			return nil, err
		}
		key, err := crypto.UnmarshalPrivateKey(raw)
		if err != nil {
			return nil, fmt.Errorf("read identity %s: %w", path, err)
		}
		return key, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read identity: %w", err)
	}
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate identity: %w", err)
	}
	raw, err = crypto.MarshalPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode identity: %w", err)
	}
	// Write to a temporary file and rename so a crash never leaves a
	// truncated key that would give the node a new identity.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return nil, fmt.Errorf("write identity: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("write identity: %w", err)
	}
	return key, nil
}

// RingID places a peer on the ring. It is derived from the peer ID, which is
// itself the hash of the peer's public key, so a node cannot choose its
// position (and so cannot choose which hosts it owns) without also
// grinding keys.
func RingID(id peer.ID) ring.ID {
	sum := sha256.Sum256([]byte(id))
	return ring.ID(binary.BigEndian.Uint64(sum[:8]))
}

// RingPeer is the ring member for a libp2p peer.
func RingPeer(id peer.ID) ring.Peer {
	return ring.Peer{ID: RingID(id), Addr: id.String()}
}
