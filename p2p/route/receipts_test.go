package route

import (
	"context"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// membersRing answers lookups from a fixed membership, as a settled ring
// does.
type membersRing struct {
	self    ring.Peer
	members []ring.Peer
}

func (r membersRing) Self() ring.Peer { return r.self }
func (r membersRing) Lookup(_ context.Context, key ring.ID) (ring.Peer, int, error) {
	return ring.OwnerOf(r.members, key), 1, nil
}

// signedBy answers every batch "accepted", with receipts over the batch
// for the owner it went to, signed by the given peers.
type signedBy struct {
	signers []ring.Peer
	sends   int
}

func (s *signedBy) Send(_ context.Context, to ring.Peer, ts []Task) (Result, error) {
	s.sends++
	ids := make([]shard.RecordID, len(ts))
	for i, t := range ts {
		u, _ := testURLs{}.Normalize(t.URL)
		key, _ := testURLs{}.Key(u)
		ids[i] = shard.RecordID{Key: key, Hash: testURLs{}.Hash(u)}
	}
	msg := shard.ReceiptMessage(to.Addr, ids)
	res := Result{Accepted: len(ts)}
	for _, p := range s.signers {
		sig, _ := testSigner{p.Addr}.Sign(msg)
		res.Receipts = append(res.Receipts, shard.Receipt{Signer: p, Sig: sig})
	}
	return res, nil
}

// TestReceiptsFromTheOwningPositionsReplicas: with virtual nodes a
// machine's positions have different successors, and an acknowledgement
// counts only with a receipt from a replica of the position that owns the
// key. Three machines hold two positions each; the tasks' host belongs to
// position 1 of machine a. A receipt from a successor of that position
// (b/1) is an acceptance; one from the successor of a's position 0 (b, the
// same machine as b/1 but another position), and one from a's own
// position 0, are not: the tasks come back undelivered and the owner is
// suspected.
func TestReceiptsFromTheOwningPositionsReplicas(t *testing.T) {
	tasks := testTasks(1, 5) // one host: h0.test
	k := ring.ID(tasks[0].Key)
	const half = ring.ID(1 << 63)
	peer := func(addr string, id ring.ID) ring.Peer { return ring.Peer{ID: id, Addr: addr} }
	a1, b1, c1 := peer("a/1", k), peer("b/1", k+10), peer("c/1", k+20)
	a0, b0, c0 := peer("a", k+half), peer("b", k+half+10), peer("c", k+half+20)
	members := []ring.Peer{a0, b0, c0, a1, b1, c1}
	self := peer("sender", k+half+30)
	if got := ring.OwnerOf(members, k); got != a1 {
		t.Fatalf("the tasks' key is owned by %s, want a/1: the test proves nothing", got)
	}
	for _, tc := range []struct {
		name    string
		signers []ring.Peer
		vouched bool
	}{
		{"the owning position's first successor", []ring.Peer{b1}, true},
		{"its second successor", []ring.Peer{c1}, true},
		{"the sibling position's successor", []ring.Peer{b0}, false},
		{"the owner's sibling position", []ring.Peer{a0}, false},
		{"the owner itself", []ring.Peer{a1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &signedBy{signers: tc.signers}
			rt := NewRouter(membersRing{self: self, members: append(members, self)}, nil, tr,
				Config{Receipts: &ReceiptCheck{URLs: testURLs{}, Verifier: testSigner{}, Replicas: 2}})
			d := rt.Route(context.Background(), tasks, false)
			if tc.vouched && (d.Accepted != len(tasks) || len(d.Undelivered) != 0) {
				t.Errorf("receipt by %v: delivery %+v, want all %d accepted", tc.signers, d, len(tasks))
			}
			if !tc.vouched && (d.Accepted != 0 || len(d.Undelivered) != len(tasks) || rt.Stats().Unvouched == 0) {
				t.Errorf("receipt by %v: delivery %+v (unvouched %d), want every task back undelivered", tc.signers, d, rt.Stats().Unvouched)
			}
		})
	}
}
