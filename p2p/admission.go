package p2p

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/pnet"
	ma "github.com/multiformats/go-multiaddr"
)

// Admission: who may connect to a node at all. A private swarm shares a
// pre-shared key (libp2p pnet): a peer without it cannot even complete a
// connection. An allowlist admits only the listed peer IDs, checked once
// the peer has proved its identity.

// NewSwarmKey returns a new pre-shared key as the text of a kubo
// swarm.key file: the header lines /key/swarm/psk/1.0.0/ and /base16/,
// then 64 hex digits (32 random bytes).
func NewSwarmKey() ([]byte, error) {
	var k [32]byte
	if _, err := rand.Read(k[:]); err != nil {
		return nil, fmt.Errorf("new swarm key: %w", err)
	}
	return []byte("/key/swarm/psk/1.0.0/\n/base16/\n" + hex.EncodeToString(k[:]) + "\n"), nil
}

// LoadSwarmKey reads a swarm.key file. It refuses a file that group or
// others may read: whoever reads the key can join the swarm.
func LoadSwarmKey(path string) (pnet.PSK, error) {
	if err := checkPrivate(path, "swarm key"); err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read swarm key: %w", err)
	}
	psk, err := pnet.DecodeV1PSK(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("swarm key %s: %w (want the /key/swarm/psk/1.0.0/ format that `swarmcrawl swarm-key` writes)", path, err)
	}
	return psk, nil
}

// checkPrivate refuses a secret file that group or others may read, or
// that is not a regular file.
func checkPrivate(path, what string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s %s is not a regular file", what, path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s %s is readable or writable by group or others (mode %04o): run chmod 600 %s", what, path, perm, path)
	}
	return nil
}

// ParsePeerList parses peer IDs given comma-separated, or one a line in a
// file named with a leading @ ("@peers.txt"); blank lines and lines
// starting with # are skipped.
func ParsePeerList(s string) ([]peer.ID, error) {
	var items []string
	if path, ok := strings.CutPrefix(strings.TrimSpace(s), "@"); ok {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("peer list: %w", err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
				items = append(items, line)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("peer list %s: %w", path, err)
		}
	} else {
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				items = append(items, part)
			}
		}
	}
	out := make([]peer.ID, 0, len(items))
	for _, it := range items {
		id, err := peer.Decode(it)
		if err != nil {
			return nil, fmt.Errorf("peer ID %q: %w", it, err)
		}
		out = append(out, id)
	}
	return out, nil
}

// allowlist is a connection gater that admits only its peers, once they
// have authenticated (both directions); everything before that is left to
// the handshake.
type allowlist struct {
	self    peer.ID
	allowed map[peer.ID]bool
}

var _ connmgr.ConnectionGater = (*allowlist)(nil)

func newAllowlist(self peer.ID, peers []peer.ID) *allowlist {
	a := &allowlist{self: self, allowed: make(map[peer.ID]bool, len(peers))}
	for _, p := range peers {
		a.allowed[p] = true
	}
	return a
}

func (a *allowlist) admits(p peer.ID) bool { return p == a.self || a.allowed[p] }

// InterceptPeerDial refuses to dial a peer that would be refused anyway.
func (a *allowlist) InterceptPeerDial(p peer.ID) bool { return a.admits(p) }

// InterceptAddrDial allows every address of an admitted peer.
func (a *allowlist) InterceptAddrDial(peer.ID, ma.Multiaddr) bool { return true }

// InterceptAccept lets the handshake run: the peer is not known yet.
func (a *allowlist) InterceptAccept(network.ConnMultiaddrs) bool { return true }

// InterceptSecured admits an authenticated peer only if it is listed.
func (a *allowlist) InterceptSecured(_ network.Direction, p peer.ID, _ network.ConnMultiaddrs) bool {
	return a.admits(p)
}

// InterceptUpgraded allows every connection that got this far.
func (a *allowlist) InterceptUpgraded(network.Conn) (bool, control.DisconnectReason) { return true, 0 }
