package shard

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// placeForTest makes m hold p as placed by the ring now, as a lookup
// naming p would: for tests whose senders are peers made up for the test,
// to judge their claims by the other checks.
func (m *Manager) placeForTest(p ring.Peer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.placed[p.Addr] = placed{at: m.clock.Now(), ok: true}
}

// TestReplicaRefusesUnplacedSender is the squat of issue 29: a stranger
// whose ID lies just after a key, and that never joined, claims the
// one-key range ending at the key at the current epoch. Nobody this
// replica knows lies between the range and the stranger, so the view
// alone found the claim plausible and every write made the stranger
// "heard from", which kept the range from being promoted. The replica's
// lookup of the stranger's ID finds the owner instead: the write is
// refused, nothing is stored, and the stranger is not heard. A merge and
// a final handoff from it are refused as well. The owner's own write,
// whose sender the lookup finds, is taken and makes the owner heard.
// Without the placement check (member.go) the write is taken.
func TestReplicaRefusesUnplacedSender(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 29)
	c.build(4)
	owner := c.nodes[1]
	claim := ownerClaim(t, owner)
	rep := c.successor(owner)
	key := c.keyIn(claim.Range)
	squatter := ring.Peer{ID: ring.ID(key + 1), Addr: "squatter"}
	if !claim.Range.Contains(squatter.ID) || squatter.ID == claim.Range.To {
		t.Fatalf("squatter %v outside the owner's range %v", squatter, claim.Range)
	}
	sq := Claim{Range{ring.ID(key - 1), ring.ID(key)}, Epoch{claim.Epoch.N + 1, squatter.Addr}}
	rec := c.record(key)
	rec.Hash ^= 0x29
	reply := rep.m.HandleReplicate(ctx, squatter, &WriteRequest{Claims: []Claim{sq}, Records: []Record{rec}})
	if !strings.Contains(reply.Refused, "not in the ring") {
		t.Errorf("squat write: refused %q, want a refusal saying it is not in the ring", reply.Refused)
	}
	if _, ok := rep.st.Record(rec.Key, rec.Hash); ok {
		t.Error("the squat write's record was stored")
	}
	if got := rep.tableAt(key); got != claim.Epoch {
		t.Errorf("table at the key is %v, want the owner's %v", got, claim.Epoch)
	}
	for _, merge := range []bool{true, false} {
		req := &HandoffRequest{Range: sq.Range, Epoch: sq.Epoch, Records: []Record{rec}, Merge: merge, Final: true}
		if r := owner.m.HandleHandoff(ctx, squatter, req); !strings.Contains(r.Reason, "not in the ring") {
			t.Errorf("handoff (merge %v) to the owner: reason %q, want not in the ring", merge, r.Reason)
		}
	}
	if _, ok := owner.st.Record(rec.Key, rec.Hash); ok {
		t.Error("the squatter's handoff record was stored")
	}
	rep.m.mu.Lock()
	_, heard := rep.m.heard[squatter.Addr]
	rep.m.mu.Unlock()
	if heard {
		t.Error("the squatter counts as heard from")
	}
	if got := rep.stats().Unplaced; got == 0 {
		t.Error("Unplaced = 0, want the squatter counted")
	}
	// The owner's own write is taken, and the lookup makes it heard.
	if r := rep.m.HandleReplicate(ctx, owner.peer, &WriteRequest{Claims: []Claim{claim}}); r.Refused != "" || len(r.Rejected) > 0 {
		t.Fatalf("the owner's claim: refused %q, rejected %v", r.Refused, r.Rejected)
	}
	rep.m.mu.Lock()
	h := rep.m.heard[owner.peer.Addr]
	rep.m.mu.Unlock()
	if h.at.IsZero() {
		t.Error("the owner, placed by the replica's ring, is not heard from")
	}
}

// TestSquatterTakenBackByPromotion: a squatter whose claim over one key of
// an owner's range got in (here: the owner's ring placed it once, as if it
// had been a member and left) keeps writing that claim to the owner every
// round. Its writes do not make it heard from: the owner's lookups no
// longer find it, so the owner takes the key back by promotion within the
// failure timeout (and a round or two). Before issue 29 every write of the
// squatter counted as a sign of life and the key was never taken back.
func TestSquatterTakenBackByPromotion(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 31)
	c.build(4)
	owner := c.nodes[2]
	claim := ownerClaim(t, owner)
	key := c.keyIn(claim.Range)
	for key == uint64(claim.Range.To) || key-1 == uint64(claim.Range.From) {
		key = c.keyIn(claim.Range)
	}
	squatter := ring.Peer{ID: ring.ID(key + 1), Addr: "squatter"}
	sq := Claim{Range{ring.ID(key - 1), ring.ID(key)}, Epoch{clockEpoch(c.clock.Now()) + 1000, squatter.Addr}}
	owner.m.placeForTest(squatter)
	if r := owner.m.HandleReplicate(ctx, squatter, &WriteRequest{Claims: []Claim{sq}}); r.Refused != "" || len(r.Rejected) > 0 {
		t.Fatalf("squat claim not taken in: refused %q, rejected %v", r.Refused, r.Rejected)
	}
	owns := func() error {
		if !owner.m.Owns(key) {
			return fmt.Errorf("owner does not own %d", key)
		}
		return nil
	}
	c.round()
	if owns() == nil {
		t.Fatal("the owner still owns the squatted key: the squat did not take")
	}
	start := c.clock.Now()
	c.until(200, "the squatted key taken back", func() error {
		owner.m.HandleReplicate(ctx, squatter, &WriteRequest{Claims: []Claim{sq}})
		return owns()
	})
	if waited := c.clock.Now().Sub(start); waited > c.cfg.FailureTimeout+c.cfg.Lease {
		t.Errorf("taken back after %v, want within the failure timeout (%v) and half a lease", waited, c.cfg.FailureTimeout)
	}
}
