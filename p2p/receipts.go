package p2p

import (
	"errors"
	"fmt"

	"github.com/libp2p/go-libp2p/core/crypto"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// Receipts over libp2p (issue 29): a replica signs what it holds of a
// write with its identity key, and anyone checks the signature with the
// public key its peer ID carries (shard.Signer, shard.Verifier).

// IdentitySigner signs receipts with a node's libp2p identity key.
type IdentitySigner struct{ key crypto.PrivKey }

// NewIdentitySigner returns the signer for key.
func NewIdentitySigner(key crypto.PrivKey) (*IdentitySigner, error) {
	if key == nil {
		return nil, errors.New("receipt signer: no identity key")
	}
	return &IdentitySigner{key: key}, nil
}

// Sign implements shard.Signer.
func (s *IdentitySigner) Sign(msg []byte) ([]byte, error) {
	sig, err := s.key.Sign(msg)
	if err != nil {
		return nil, fmt.Errorf("sign receipt: %w", err)
	}
	return sig, nil
}

// IdentityVerifier checks receipts against the public key in the signer's
// peer ID (Ed25519 peer IDs inline it), for a signer whose ring position
// its peer ID and index make (RingPeerAt).
type IdentityVerifier struct{}

// Verify implements shard.Verifier.
func (IdentityVerifier) Verify(signer ring.Peer, msg, sig []byte) bool {
	id, i, err := PositionOf(signer)
	if err != nil || RingPeerAt(id, i) != signer {
		return false
	}
	pub, err := id.ExtractPublicKey()
	if err != nil {
		return false
	}
	ok, err := pub.Verify(msg, sig)
	return err == nil && ok
}

// EncodeReceipts returns the wire form of receipts.
func EncodeReceipts(rs []shard.Receipt) []*pb.Receipt {
	if len(rs) == 0 {
		return nil
	}
	out := make([]*pb.Receipt, len(rs))
	for i, r := range rs {
		out[i] = &pb.Receipt{Signer: r.Signer.Addr, Sig: r.Sig}
	}
	return out
}

// maxReceipts bounds the receipts read from one answer: one per replica
// of each ring position the batch touched (a batch goes to a machine and
// may carry tasks of all its positions), at most 4 replicas each.
const maxReceipts = 4 * protocol.MaxStatusPositions

// DecodeReceipts reads receipts from a peer, dropping those whose signer
// is no ring position or whose signature is out of bounds (the check that
// counts them would refuse them anyway).
func DecodeReceipts(rs []*pb.Receipt) []shard.Receipt {
	var out []shard.Receipt
	for _, r := range rs {
		if len(out) == maxReceipts {
			break
		}
		id, i, err := PositionOf(ring.Peer{Addr: r.GetSigner()})
		if err != nil || len(r.GetSig()) == 0 || len(r.GetSig()) > shard.MaxReceiptSig {
			continue
		}
		out = append(out, shard.Receipt{Signer: RingPeerAt(id, i), Sig: r.GetSig()})
	}
	return out
}
