package shard

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// Receipts (issue 29, "no single node's word decides progress").
//
// An owner that acknowledges URLs to a sender must show that its replicas
// hold them: a replica asked for a receipt (WriteRequest.WantReceipt)
// signs, with its own identity (Config.Signer), ReceiptMessage over the
// owner and the records it stored or already held from that write, and
// the owner returns the receipts with its acknowledgement. The sender
// checks the signatures and that the signers are the owner's successors
// as its own lookups find them (package route); an acknowledgement
// without enough of them is not an acceptance. One receipt per replica
// per write, whatever the write's size: signing and checking cost per
// batch, hashing per URL.

// RecordID names one URL's shard record: its ring key and URL hash.
type RecordID struct{ Key, Hash uint64 }

// IDOf returns r's RecordID.
func IDOf(r Record) RecordID { return RecordID{r.Key, r.Hash} }

// Receipt is one replica's signature over the records of a write it
// holds (ReceiptMessage).
type Receipt struct {
	Signer ring.Peer
	Sig    []byte
}

// Signer signs receipts with this node's identity (its libp2p key in a
// node, a stand-in in the simulator).
type Signer interface {
	Sign(msg []byte) ([]byte, error)
}

// Verifier checks a receipt's signature against its signer's identity.
type Verifier interface {
	Verify(signer ring.Peer, msg, sig []byte) bool
}

// MaxReceiptSig bounds a receipt's signature as read from a peer.
const MaxReceiptSig = 256

// receiptDomain separates receipt signatures from any other use of the
// identity key.
const receiptDomain = "swarmcrawl/shard-receipt/v1\x00"

// ReceiptMessage is what a replica signs for owner over ids: a domain
// tag, the owner's address and the SHA-256 of the sorted, deduplicated
// ids, so that a receipt covers exactly one set of URLs held for one
// owner. ids is sorted in place.
func ReceiptMessage(owner string, ids []RecordID) []byte {
	slices.SortFunc(ids, func(a, b RecordID) int {
		if a.Key != b.Key {
			return cmpUint64(a.Key, b.Key)
		}
		return cmpUint64(a.Hash, b.Hash)
	})
	h := sha256.New()
	var b [16]byte
	var prev RecordID
	for i, id := range ids {
		if i > 0 && id == prev {
			continue
		}
		prev = id
		binary.BigEndian.PutUint64(b[:8], id.Key)
		binary.BigEndian.PutUint64(b[8:], id.Hash)
		h.Write(b[:])
	}
	msg := make([]byte, 0, len(receiptDomain)+len(owner)+1+sha256.Size)
	msg = append(msg, receiptDomain...)
	msg = append(msg, owner...)
	msg = append(msg, 0)
	return h.Sum(msg)
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// receiptLocked returns this replica's signature over what it holds of a
// write from owner: the records it stored (stored) and the held ids it
// finds in storage inside the claims it accepted (accepted). It returns
// nil (no receipt) when it lacks one of them: a receipt vouches for every
// URL the owner acknowledged, or for none.
func (m *Manager) receipt(owner string, stored []Record, asked int, held []RecordID, accepted spanSet) []byte {
	if m.cfg.Signer == nil {
		return nil
	}
	if len(stored) != asked {
		return nil // some record fell outside the claims taken
	}
	ids := make([]RecordID, 0, len(stored)+len(held))
	for _, r := range stored {
		ids = append(ids, IDOf(r))
	}
	for _, id := range held {
		if !accepted.contains(id.Key) {
			return nil
		}
		if _, ok, err := m.storedRecord(id.Key, id.Hash); err != nil || !ok {
			return nil
		}
		ids = append(ids, id)
	}
	sig, err := m.cfg.Signer.Sign(ReceiptMessage(owner, ids))
	if err != nil {
		m.log.Warn("sign receipt", "err", err)
		return nil
	}
	return sig
}

// AcceptWithReceipts is Accept (AcceptOwn with own) that also asks each
// replica for a receipt over recs and held, the records of URLs this
// owner already holds that the same acknowledgement covers
// (duplicates), and returns the receipts it got. With no records it
// stores nothing and only asks the replicas to vouch for held.
func (m *Manager) AcceptWithReceipts(ctx context.Context, recs []Record, held []RecordID, own bool) ([]Receipt, error) {
	put := m.st.PutRecords
	if own {
		put = m.st.PutRecordsNoSync
	}
	return m.acceptReceipts(ctx, recs, held, put)
}

// acceptReceipts checks the keys, stores recs and replicates them with
// held, asking for receipts.
func (m *Manager) acceptReceipts(ctx context.Context, recs []Record, held []RecordID, put func([]Record) error) ([]Receipt, error) {
	if len(recs) == 0 && len(held) == 0 {
		return nil, nil
	}
	var rs []Receipt
	err := m.acceptWith(ctx, recs, held, put, func(p ring.Peer, reply *WriteReply) {
		if len(reply.Receipt) > 0 {
			rs = append(rs, Receipt{Signer: p, Sig: reply.Receipt})
		}
	})
	return rs, err
}

// WatchDone records that this node, watching a predecessor's range,
// fetched recs (Done marks): stored here and told to this node's first
// successor, the owner's next replica, so that it does not fetch them
// again (see "Replicas watch progress" in watch.go).
func (m *Manager) WatchDone(ctx context.Context, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	if err := m.st.PutRecords(recs); err != nil {
		return fmt.Errorf("shard: watch done: %w", err)
	}
	m.mu.Lock()
	for _, r := range recs {
		if w := m.watch[r.Key]; w != nil {
			w.lastDone = m.clock.Now()
		}
	}
	var next ring.Peer
	if len(m.replicas) > 0 {
		next = m.replicas[0]
	}
	m.mu.Unlock()
	if next.IsZero() {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, m.cfg.AckTimeout)
	defer cancel()
	if _, err := m.tr.Replicate(cctx, next, &WriteRequest{Watched: recs}); err != nil {
		return fmt.Errorf("shard: watch done: tell %s: %w", next, err)
	}
	return nil
}
