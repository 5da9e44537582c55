// Package seedsig signs and verifies seed statements: a seeder's signed
// word that a URL is a seed of the crawl (pb.SeedProof). A scoped crawl
// (--scope seed-hosts or seed-domains) takes its scope from the URLs
// marked seed, so a mark is worth only as much as the seeder behind it:
// the statement travels with the URL from the member that took it to
// its owner and then with its shard record wherever the record goes, and
// every node that honours the mark verifies it here and judges the
// signer by its own policy.
//
// A statement covers one normalised URL: it cannot mark another URL, or
// another host. It is signed by the seeder's libp2p key, whose public
// half it carries (its peer ID is the seeder), over
//
//	"swarmcrawl seed v1" | 0x00 | time (Unix seconds, 8 bytes BE) | URL
//
// Encoded (a serialised pb.SeedProof) it is at most MaxProofBytes; with
// an Ed25519 key 111 bytes.
package seedsig

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// domain separates seed statements from anything else a key signs.
const domain = "swarmcrawl seed v1"

// MaxProofBytes bounds an encoded statement: an RSA-4096 key (550 bytes
// marshalled) and its signature (512) fit; an Ed25519 one takes 111.
const MaxProofBytes = 1200

// maxKeyBytes bounds the marshalled public key a statement carries.
const maxKeyBytes = 600

// ErrNoProof is Verify's error for a mark without a statement.
var ErrNoProof = errors.New("no seed signature")

// message returns the bytes a statement signs.
func message(url string, unix int64) []byte {
	b := make([]byte, 0, len(domain)+1+8+len(url))
	b = append(b, domain...)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint64(b, uint64(unix))
	return append(b, url...)
}

// Sign returns the encoded statement, by key at time at, that the
// normalised url is a seed.
func Sign(key crypto.PrivKey, url string, at time.Time) ([]byte, error) {
	if len(url) == 0 || len(url) > protocol.MaxURLBytes {
		return nil, fmt.Errorf("sign seed: URL of %d bytes", len(url))
	}
	pub, err := crypto.MarshalPublicKey(key.GetPublic())
	if err != nil {
		return nil, fmt.Errorf("sign seed: %w", err)
	}
	unix := at.Unix()
	sig, err := key.Sign(message(url, unix))
	if err != nil {
		return nil, fmt.Errorf("sign seed %s: %w", url, err)
	}
	return Encode(&pb.SeedProof{PublicKey: pub, Signature: sig, Time: unix})
}

// Encode returns the stored form of a statement from the wire: the
// serialised message, refused when it exceeds MaxProofBytes. A nil or
// empty statement encodes to nil.
func Encode(p *pb.SeedProof) ([]byte, error) {
	if p == nil || len(p.PublicKey) == 0 && len(p.Signature) == 0 && p.Time == 0 {
		return nil, nil
	}
	if len(p.PublicKey) > maxKeyBytes {
		return nil, fmt.Errorf("seed signature: public key of %d bytes exceeds %d", len(p.PublicKey), maxKeyBytes)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("seed signature: %w", err)
	}
	if len(b) > MaxProofBytes {
		return nil, fmt.Errorf("seed signature of %d bytes exceeds %d", len(b), MaxProofBytes)
	}
	return b, nil
}

// Decode returns the wire form of a stored statement; nil for none.
func Decode(b []byte) (*pb.SeedProof, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if len(b) > MaxProofBytes {
		return nil, fmt.Errorf("seed signature of %d bytes exceeds %d", len(b), MaxProofBytes)
	}
	p := &pb.SeedProof{}
	if err := proto.Unmarshal(b, p); err != nil {
		return nil, fmt.Errorf("seed signature: %w", err)
	}
	if len(p.PublicKey) > maxKeyBytes {
		return nil, fmt.Errorf("seed signature: public key of %d bytes exceeds %d", len(p.PublicKey), maxKeyBytes)
	}
	return p, nil
}

// Signer returns whom the encoded statement proof names as its signer,
// without checking the signature: a verifier that would refuse the signer
// anyway spares itself the check.
func Signer(proof []byte) (peer.ID, error) {
	p, err := Decode(proof)
	if err != nil {
		return "", err
	}
	if p == nil {
		return "", ErrNoProof
	}
	pub, err := crypto.UnmarshalPublicKey(p.PublicKey)
	if err != nil {
		return "", fmt.Errorf("seed signature: public key: %w", err)
	}
	return peer.IDFromPublicKey(pub)
}

// Verify checks the encoded statement proof over the normalised url and
// returns its signer.
func Verify(proof []byte, url string) (peer.ID, error) {
	p, err := Decode(proof)
	if err != nil {
		return "", err
	}
	if p == nil {
		return "", ErrNoProof
	}
	pub, err := crypto.UnmarshalPublicKey(p.PublicKey)
	if err != nil {
		return "", fmt.Errorf("seed signature: public key: %w", err)
	}
	ok, err := pub.Verify(message(url, p.Time), p.Signature)
	if err != nil || !ok {
		return "", fmt.Errorf("seed signature does not verify over %s", truncate(url))
	}
	id, err := peer.IDFromPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("seed signature: %w", err)
	}
	return id, nil
}

func truncate(u string) string {
	if len(u) > 80 {
		return u[:80] + "..."
	}
	return u
}

// Verifier is Verify with a memory of the statements that verified, so
// that a record replicated, handed off and merged again costs one
// signature check per node, not one per message. It is safe for
// concurrent use.
type Verifier struct {
	max  int
	mu   sync.Mutex
	good map[[sha256.Size]byte]peer.ID
}

// NewVerifier returns a Verifier that remembers up to max statements
// (forgetting them all when full).
func NewVerifier(max int) *Verifier {
	return &Verifier{max: max, good: make(map[[sha256.Size]byte]peer.ID)}
}

// Verify is Verify, remembered.
func (v *Verifier) Verify(proof []byte, url string) (peer.ID, error) {
	if len(proof) == 0 {
		return "", ErrNoProof
	}
	h := sha256.New()
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(proof)))
	h.Write(n[:])
	h.Write(proof)
	h.Write([]byte(url))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	v.mu.Lock()
	id, ok := v.good[sum]
	v.mu.Unlock()
	if ok {
		return id, nil
	}
	id, err := Verify(proof, url)
	if err != nil {
		return "", err
	}
	v.mu.Lock()
	if len(v.good) >= v.max {
		clear(v.good)
	}
	v.good[sum] = id
	v.mu.Unlock()
	return id, nil
}
