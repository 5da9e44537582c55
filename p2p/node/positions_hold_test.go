package node

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// idleApp is a shard.App with no crawler behind it.
type idleApp struct{}

func (idleApp) Activate(context.Context, shard.Range) error   { return nil }
func (idleApp) Deactivate(context.Context, shard.Range) error { return nil }
func (idleApp) Merged(context.Context, []shard.Record)        {}
func (idleApp) Reroute(context.Context, []shard.Record) error { return nil }

// addrSigner signs with a hash of the signer's address: a stand-in for an
// identity key.
type addrSigner struct{ addr string }

func (s addrSigner) Sign(msg []byte) ([]byte, error) {
	h := sha256.Sum256(append([]byte(s.addr+"\x00"), msg...))
	return h[:], nil
}

func (addrSigner) Verify(p ring.Peer, msg, sig []byte) bool {
	want, _ := addrSigner{p.Addr}.Sign(msg)
	return string(want) == string(sig)
}

// memMember is one ring position on the in-memory networks.
type memMember struct {
	peer ring.Peer
	pos  *position
	st   *shard.MemStorage
}

// twoPositionRing builds a settled ring on the in-memory transports: the
// machine under test, m, holds two positions (m at 0xd…, m/1 at 0x5…),
// and two other machines one each (x at 0x1…, y at 0x9…). x's replicas
// are m/1 and y; y's are m and x. It returns the members by address.
func twoPositionRing(t *testing.T) map[string]*memMember {
	t.Helper()
	ctx := context.Background()
	clock := ring.NewFakeClock(time.Unix(1_700_000_000, 0))
	rnet := ring.NewMemNet(7)
	snet := shard.NewMemNet(rnet)
	rcfg := ring.DefaultConfig()
	rcfg.Clock = clock
	scfg := shard.Config{Replicas: 2, FailureTimeout: 2 * time.Second, Lease: time.Second,
		HeartbeatInterval: 200 * time.Millisecond, AckTimeout: time.Second, SyncInterval: 2 * time.Second}
	members := map[string]*memMember{}
	var order []*memMember
	for i, p := range []ring.Peer{{ID: 0x1 << 60, Addr: "x"}, {ID: 0x5 << 60, Addr: "m/1"}, {ID: 0x9 << 60, Addr: "y"}, {ID: 0xd << 60, Addr: "m"}} {
		rn := ring.NewNode(p, rnet.Transport(p), rcfg)
		rnet.Register(p, rn)
		own := shard.NewOwnership(rn)
		st := shard.NewMemStorage()
		cfg := scfg
		cfg.Signer = addrSigner{p.Addr}
		mgr, err := shard.New(own, snet.Transport(p), st, idleApp{}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		snet.Register(p, mgr)
		if i == 0 {
			rn.Create()
		} else if err := rn.Join(ctx, order[0].peer); err != nil {
			t.Fatalf("join %s: %v", p.Addr, err)
		}
		mm := &memMember{peer: p, pos: &position{ring: rn, own: own, shard: mgr}, st: st}
		members[p.Addr], order = mm, append(order, mm)
	}
	members["m/1"].pos.index = 1
	for round := 0; ; round++ {
		settled := true
		for _, mm := range order {
			mm.pos.ring.Stabilize(ctx)
			mm.pos.ring.CheckPredecessor(ctx)
			mm.pos.ring.FixFingers(ctx)
			mm.pos.shard.Tick(ctx)
			pred := mm.pos.ring.Predecessor()
			cs := mm.pos.shard.Stats().Claims
			if len(cs) != 1 || cs[0].Range != (shard.Range{From: pred.ID, To: mm.peer.ID}) {
				settled = false
			}
		}
		clock.Advance(200 * time.Millisecond)
		if settled && round > 20 {
			return members
		}
		if round > 300 {
			t.Fatal("the ring did not settle")
		}
	}
}

// recordAt is a pending record at key.
func recordAt(key uint64, n int) shard.Record {
	return shard.Record{Key: key, Hash: uint64(n) + 1, URL: fmt.Sprintf("http://k%x.test/%d", key, n), Depth: 1}
}

// TestPositionsHoldForTheRightPosition: records a sender could not get an
// owner to vouch for are held by the position that replicates that owner,
// whichever of the node's positions it is: x's by position 1, y's by
// position 0; a record of another owner's range is not held by either.
func TestPositionsHoldForTheRightPosition(t *testing.T) {
	ms := twoPositionRing(t)
	ps := positions{ms["m"].pos, ms["m/1"].pos}
	ofX := recordAt(uint64(ms["x"].peer.ID)-5, 1)
	ofY := recordAt(uint64(ms["y"].peer.ID)-5, 2)
	for _, tc := range []struct {
		owner string
		recs  []shard.Record
		held  []bool
		by    string // the position that stores what is held
	}{
		{"x", []shard.Record{ofX, ofY}, []bool{true, false}, "m/1"},
		{"y", []shard.Record{ofY}, []bool{true}, "m"},
	} {
		held, took, _, err := ps.HoldFor(tc.owner, tc.recs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range tc.recs {
			if held[i] != tc.held[i] {
				t.Errorf("held for %s: record at %x held %v, want %v", tc.owner, r.Key, held[i], tc.held[i])
			}
			if !tc.held[i] {
				continue
			}
			for _, addr := range []string{"m", "m/1"} {
				_, ok := ms[addr].st.Record(r.Key, r.Hash)
				if want := addr == tc.by; ok != want {
					t.Errorf("held for %s: position %s stores the record: %v, want %v", tc.owner, addr, ok, want)
				}
			}
		}
		if took != 1 {
			t.Errorf("held for %s: took %d, want 1", tc.owner, took)
		}
	}
	if got := ms["m/1"].pos.shard.Stats().HeldFor; got != 1 {
		t.Errorf("position 1 held %d records, want x's one", got)
	}
	if got := ms["m"].pos.shard.Stats().HeldFor; got != 1 {
		t.Errorf("position 0 held %d records, want y's one", got)
	}
}

// TestPositionsAcceptWithReceiptsPerPosition: a batch spread over the
// node's two positions is stored by the position that owns each key, and
// comes back with receipts from each position's replicas over exactly
// that position's records for that position: each verifies for its own
// position and not for the sibling. A key neither position owns is
// refused.
func TestPositionsAcceptWithReceiptsPerPosition(t *testing.T) {
	ctx := context.Background()
	ms := twoPositionRing(t)
	ps := positions{ms["m"].pos, ms["m/1"].pos}
	var at0, at1 []shard.Record
	for i := range 3 {
		at0 = append(at0, recordAt(uint64(ms["m"].peer.ID)-uint64(10+i), 10+i))
		at1 = append(at1, recordAt(uint64(ms["m/1"].peer.ID)-uint64(10+i), 20+i))
	}
	receipts, err := ps.AcceptWithReceipts(ctx, append(append([]shard.Record{}, at0...), at1...), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(recs []shard.Record) []shard.RecordID {
		out := make([]shard.RecordID, len(recs))
		for i, r := range recs {
			out[i] = shard.IDOf(r)
		}
		return out
	}
	for _, tc := range []struct {
		pos, sibling string
		recs         []shard.Record
	}{{"m", "m/1", at0}, {"m/1", "m", at1}} {
		for _, r := range tc.recs {
			if _, ok := ms[tc.pos].st.Record(r.Key, r.Hash); !ok {
				t.Errorf("record at %x not stored by its position %s", r.Key, tc.pos)
			}
			if _, ok := ms[tc.sibling].st.Record(r.Key, r.Hash); ok {
				t.Errorf("record at %x stored by the sibling position %s", r.Key, tc.sibling)
			}
		}
		mine := shard.ReceiptMessage(tc.pos, ids(tc.recs))
		wrong := shard.ReceiptMessage(tc.sibling, ids(tc.recs))
		valid := 0
		for _, rc := range receipts {
			if (addrSigner{}).Verify(rc.Signer, mine, rc.Sig) {
				valid++
			}
			if (addrSigner{}).Verify(rc.Signer, wrong, rc.Sig) {
				t.Errorf("a receipt by %s over %s's records verifies for the sibling %s", rc.Signer.Addr, tc.pos, tc.sibling)
			}
		}
		if valid != 2 {
			t.Errorf("%d receipts vouch for position %s's records, want its 2 replicas'", valid, tc.pos)
		}
	}
	stray := recordAt(uint64(ms["x"].peer.ID)-5, 99)
	if _, err := ps.AcceptWithReceipts(ctx, []shard.Record{stray}, nil, false); !errors.Is(err, shard.ErrNotOwned) {
		t.Errorf("a key of x's range: %v, want ErrNotOwned", err)
	}
}
