package route

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

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

// positionsSigned answers every batch "accepted" as a node whose
// positions share one owner does: each task's records are vouched for by
// the first successor of the position owning its key (on members), over
// that position's part of the batch; withhold names a position whose
// part gets no receipt.
type positionsSigned struct {
	members  []ring.Peer
	withhold string
	sends    [][]Task
}

func (s *positionsSigned) Send(_ context.Context, to ring.Peer, ts []Task) (Result, error) {
	s.sends = append(s.sends, ts)
	parts := map[ring.Peer][]shard.RecordID{}
	var order []ring.Peer
	for _, t := range ts {
		u, _ := testURLs{}.Normalize(t.URL)
		key, _ := testURLs{}.Key(u)
		p := ring.OwnerOf(s.members, ring.ID(key))
		if p.Machine() != to.Machine() {
			return Result{}, fmt.Errorf("task %s owned by %s sent to %s", t.URL, p.Addr, to.Addr)
		}
		if _, ok := parts[p]; !ok {
			order = append(order, p)
		}
		parts[p] = append(parts[p], shard.RecordID{Key: key, Hash: testURLs{}.Hash(u)})
	}
	res := Result{Accepted: len(ts)}
	for _, p := range order {
		if p.Addr == s.withhold {
			continue
		}
		signer := ring.OwnerOf(s.members, p.ID+1) // its first successor, on another machine here
		sig, _ := testSigner{signer.Addr}.Sign(shard.ReceiptMessage(p.Addr, parts[p]))
		res.Receipts = append(res.Receipts, shard.Receipt{Signer: signer, Sig: sig})
	}
	return res, nil
}

// TestBatchPerMachine: the links a pass finds for three positions of one
// machine go in one batch (one round trip, one synced accept at a node
// whose positions share an owner), and each position's part is checked
// against its own replicas' receipt: all accepted when every part is
// vouched for; when one position's part is not, only its tasks come back
// (and it alone is suspected). With a batch per position, as before, the
// pass made three sends.
func TestBatchPerMachine(t *testing.T) {
	var tasks []Task
	for _, h := range []string{"x0", "x1", "x2"} {
		for i := range 3 {
			tk, err := NewTask(testURLs{}, fmt.Sprintf("http://%s.test/p%d", h, i), 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			tasks = append(tasks, tk)
		}
	}
	peer := func(addr string, id uint64) ring.Peer { return ring.Peer{ID: ring.ID(id), Addr: addr} }
	var members []ring.Peer
	for i, pos := range []string{"a", "a/1", "a/2"} {
		k := tasks[3*i].Key
		members = append(members, peer(pos, k), peer(strings.Replace(pos, "a", "b", 1), k+10), peer(strings.Replace(pos, "a", "c", 1), k+20))
	}
	self := peer("sender", tasks[0].Key+30)
	for _, tc := range []struct {
		withhold string
		back     int
	}{{"", 0}, {"a/1", 3}} {
		tr := &positionsSigned{members: members, withhold: tc.withhold}
		rt := NewRouter(membersRing{self: self, members: append(slices.Clone(members), self)}, nil, tr,
			Config{Receipts: &ReceiptCheck{URLs: testURLs{}, Verifier: testSigner{}, Replicas: 2}})
		d := rt.Route(context.Background(), tasks, false)
		if len(tr.sends) != 1 || len(tr.sends[0]) != len(tasks) {
			t.Fatalf("withholding %q: %d sends, want one batch of all %d tasks for machine a", tc.withhold, len(tr.sends), len(tasks))
		}
		if d.Accepted != len(tasks)-tc.back || len(d.Undelivered) != tc.back {
			t.Errorf("withholding %q: delivery %+v, want %d accepted and %d back", tc.withhold, d, len(tasks)-tc.back, tc.back)
		}
		for _, u := range d.Undelivered {
			if !strings.HasPrefix(u.URL, "http://x1.test/") {
				t.Errorf("withholding %q: %s came back, want only a/1's tasks", tc.withhold, u.URL)
			}
		}
		if want := int64(min(tc.back, 1)); rt.Stats().Unvouched != want {
			t.Errorf("withholding %q: %d unvouched acknowledgements, want %d", tc.withhold, rt.Stats().Unvouched, want)
		}
	}
}

// countingVerifier is testSigner's check, counted.
type countingVerifier struct{ checks *int }

func (v countingVerifier) Verify(p ring.Peer, msg, sig []byte) bool {
	*v.checks++
	return testSigner{}.Verify(p, msg, sig)
}

// forgedReceipts answers "accepted" with n receipts naming signer, none of
// them a valid signature.
type forgedReceipts struct {
	signer ring.Peer
	n      int
}

func (f forgedReceipts) Send(_ context.Context, _ ring.Peer, ts []Task) (Result, error) {
	res := Result{Accepted: len(ts)}
	for i := range f.n {
		res.Receipts = append(res.Receipts, shard.Receipt{Signer: f.signer, Sig: []byte{byte(i), 1, 2, 3}})
	}
	return res, nil
}

// TestForgedReceiptsCostBoundedChecks: an answer may now hold the receipts
// of every position a batch touched (up to 256 read), so a hostile owner
// could name the expected signer in all of them: the sender checks at
// most maxChecks signatures for one position's part (twice, were the
// owner's successors looked up again), and the tasks come back. Without
// the bound: 256 checks for one batch (the test's limit being 32, the
// bound's own raised to 1<<20).
func TestForgedReceiptsCostBoundedChecks(t *testing.T) {
	tasks := testTasks(1, 5)
	k := tasks[0].Key
	owner, succ := ring.Peer{ID: ring.ID(k), Addr: "a"}, ring.Peer{ID: ring.ID(k + 10), Addr: "b"}
	self := ring.Peer{ID: ring.ID(k + 20), Addr: "sender"}
	clock := ring.NewFakeClock(time.Unix(1_700_000_000, 0))
	checks := 0
	rt := NewRouter(membersRing{self: self, members: []ring.Peer{owner, succ, self}}, nil, forgedReceipts{signer: succ, n: 256},
		Config{Clock: clock, Receipts: &ReceiptCheck{URLs: testURLs{}, Verifier: countingVerifier{&checks}, Replicas: 2}})
	clock.Advance(time.Minute) // the successors found are old enough to be looked up again
	d := rt.Route(context.Background(), tasks, false)
	if d.Accepted != 0 || len(d.Undelivered) != len(tasks) {
		t.Errorf("delivery %+v, want every task back", d)
	}
	if checks > 32 {
		t.Errorf("%d signature checks for one batch, want at most 32", checks)
	}
	t.Logf("%d signature checks for 256 forged receipts", checks)
}
