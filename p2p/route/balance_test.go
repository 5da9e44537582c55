package route

import (
	"context"
	"errors"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// slotView is a helper's ring state for the slot rule: the keys its
// positions hold and who its lookup says holds each host key.
type slotView struct {
	holds  map[uint64]bool
	owners map[uint64]ring.Peer
}

func (v slotView) Holds(k uint64) bool { return v.holds[k] }
func (v slotView) Owner(_ context.Context, key uint64) (ring.Peer, error) {
	p, ok := v.owners[key]
	if !ok {
		return ring.Peer{}, ring.ErrUnreachable
	}
	return p, nil
}

// TestSlotAdmission: a helper that is no ring neighbour of the owner
// fetches for it when one of its positions holds one of the host's helper
// slots and its own lookup finds the sender holding the host. A stranger,
// a member asking for a key another holds, and any sender of a host whose
// slots this helper does not hold are refused before any fetch; a batch
// whose owner loses the key is cut short (Still).
func TestSlotAdmission(t *testing.T) {
	const host, other = 100, 200
	v := slotView{
		holds:  map[uint64]bool{SlotKey(host, 2): true},
		owners: map[uint64]ring.Peer{host: peer("o/3", 5), other: peer("m", 9)},
	}
	a := HelperAdmission{View: fakeView{machine: "h"}, Machines: 1, Slots: v, SlotCount: 4}
	ctx := context.Background()
	if owner, err := a.Admit(ctx, "o", host); err != nil || owner != "o/3" {
		t.Fatalf("owner of the host, helper holds slot 2: %q, %v", owner, err)
	}
	if !a.Still(ctx, host, "o/3") {
		t.Error("Still: the owner holds the host")
	}
	// A stranger, and a member that is not the host's holder.
	for _, from := range []string{"x", "m"} {
		if _, err := a.Admit(ctx, from, host); !errors.Is(err, ErrNotVouched) {
			t.Errorf("Admit(%s, host): %v, want ErrNotVouched", from, err)
		}
	}
	// A member asking for a key it does not hold, the helper holding no
	// slot of that key either; then holding one.
	if _, err := a.Admit(ctx, "o", other); !errors.Is(err, ErrNotHelped) {
		t.Errorf("Admit(o, other) without a slot: %v, want ErrNotHelped", err)
	}
	v.holds[SlotKey(other, 0)] = true
	if _, err := a.Admit(ctx, "o", other); !errors.Is(err, ErrNotVouched) {
		t.Errorf("Admit(o, other) with a slot: %v, want ErrNotVouched", err)
	}
	// The slots are the first SlotCount only.
	a.SlotCount = 2
	if _, err := a.Admit(ctx, "o", host); !errors.Is(err, ErrNotHelped) {
		t.Errorf("slot 2 of 2: %v, want ErrNotHelped", err)
	}
	a.SlotCount = 4
	// The owner loses the host mid-batch.
	v.owners[host] = peer("m", 9)
	if a.Still(ctx, host, "o/3") {
		t.Error("Still: the host moved to m")
	}
	// Its own machine never sends it a batch.
	v.owners[host] = peer("h/1", 5)
	if _, err := a.Admit(ctx, "h", host); !errors.Is(err, ErrNotHelped) {
		t.Errorf("own machine: %v, want ErrNotHelped", err)
	}
}

// TestSlotKeysScatter: a host's slots are distinct keys, spread over the
// ring (no two in the same 1/64 of it for these hosts), and the same for
// every member.
func TestSlotKeysScatter(t *testing.T) {
	for _, host := range []uint64{0, 1, 1 << 63, 12345678901234} {
		seen := map[uint64]bool{}
		for i := range 8 {
			k := SlotKey(host, i)
			if k != SlotKey(host, i) {
				t.Fatal("SlotKey is not a function of its arguments")
			}
			seen[k>>58] = true
		}
		if len(seen) < 6 {
			t.Errorf("host %d: 8 slots in %d of 64 arcs", host, len(seen))
		}
	}
}

// TestChooseByLoad: with loads reported, the owner hands a batch to the
// less loaded of the two slots drawn, never to one with more work than
// itself minus two batches, and keeps the batch when its work is not
// above the mean it heard; a batch sent counts towards the helper's load.
func TestChooseByLoad(t *testing.T) {
	owner := peer("o", 0)
	cands := []ring.Peer{peer("a", 1), peer("b", 2)}
	d := NewDelegator[int, int](nil, 1, func(uint64) (ring.Peer, []ring.Peer) { return owner, nil })
	d.Report(cands[0], 49)
	d.Report(cands[1], 10)
	for range 4 {
		got, ok := d.Choose(cands, 100, 8)
		if !ok || got[0] != cands[1] {
			t.Fatalf("Choose = %v, %v; want b (10) before a (49)", got, ok)
		}
		d.Report(cands[1], 10)
	}
	// b has 10 + 8 after a batch: the next goes to b until it passes a.
	for range 5 {
		d.Choose(cands, 1000, 8)
	}
	if got, ok := d.Choose(cands, 1000, 8); !ok || got[0] != cands[0] {
		t.Fatalf("after 5 batches to b: %v, %v; want a", got, ok)
	}
	// Balanced enough: the owner keeps the batch.
	d.Report(cands[0], 30)
	d.Report(cands[1], 30)
	if _, ok := d.Choose(cands, 40, 8); ok {
		t.Error("owner at 40 sent a batch of 8 to helpers at 30")
	}
	d.Report(cands[0], 0)
	d.Report(cands[1], 0)
	for i, n := range []string{"c", "d", "e"} {
		d.Report(peer(n, uint64(3+i)), 110) // the mean of what it heard is 66
	}
	if _, ok := d.Choose(cands, 60, 8); ok {
		t.Error("owner below the mean it heard sent a batch")
	}
	d.Report(cands[0], 0)
	d.Report(cands[1], 0)
	if _, ok := d.Choose(cands, 80, 8); !ok {
		t.Error("owner above the mean and two batches above a helper kept the batch")
	}
	// One helper reporting a huge load does not raise the mean above
	// every owner: it counts as twice the owner's work at most.
	d.Report(cands[0], 0)
	d.Report(cands[1], 0)
	d.Report(peer("c", 3), 1<<62)
	if _, ok := d.Choose(cands, 80, 8); !ok {
		t.Error("one helper's huge report stopped an owner above the others' mean from delegating")
	}
	// A hostile report is clamped: a helper that reports less than no
	// work does not draw an owner with little work into delegating.
	d.Report(cands[0], -1<<40)
	d.Report(cands[1], -1<<40)
	if _, ok := d.Choose(cands, 5, 8); ok {
		t.Error("owner with 5 pages sent a batch of 8 to helpers reporting negative loads")
	}
}

// TestCandidatesAreSlotHolders: with slots, a host's candidates are the
// machines holding its slots, each once, never the owner's own machine.
func TestCandidatesAreSlotHolders(t *testing.T) {
	owner := peer("o", 0)
	holders := map[uint64]ring.Peer{}
	names := []string{"a", "o/2", "a/1", "b", "c"}
	for i, n := range names {
		holders[SlotKey(7, i)] = peer(n, uint64(i))
	}
	d := NewDelegator[int, int](nil, 1, func(uint64) (ring.Peer, []ring.Peer) { return owner, []ring.Peer{peer("s", 9)} })
	d.UseSlots(len(names), func(_ context.Context, k uint64) (ring.Peer, error) { return holders[k], nil })
	got := d.Candidates(context.Background(), 7)
	var addrs []string
	for _, p := range got {
		addrs = append(addrs, p.Addr)
	}
	if want := []string{"a", "b", "c"}; !equalStrings(addrs, want) {
		t.Errorf("candidates %v, want %v", addrs, want)
	}
}

// TestWorthSize: the part of a batch a helper takes is the most pages that
// leave it no busier than the owner (Worth), all of them when the owner's
// load is unknown, none when not one page is worth it.
func TestWorthSize(t *testing.T) {
	for _, c := range []struct{ owner, helper, size, want int }{
		{-1, 1000, 8, 8}, {110, 100, 8, 5}, {116, 100, 8, 8}, {101, 100, 8, 0}, {50, 100, 8, 0}, {0, 0, 8, 0}, {1000, 0, 0, 0},
	} {
		got := WorthSize(c.owner, c.helper, c.size)
		if got != c.want {
			t.Errorf("WorthSize(%d, %d, %d) = %d, want %d", c.owner, c.helper, c.size, got, c.want)
		}
		if got > 0 && !Worth(c.owner, c.helper, got) || got < c.size && c.owner >= 0 && Worth(c.owner, c.helper, got+1) {
			t.Errorf("WorthSize(%d, %d, %d) = %d is not the most Worth allows", c.owner, c.helper, c.size, got)
		}
	}
}
