package route

import (
	"context"
	"slices"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// Work balance: a hot host's batches go to machines with less work than
// the owner (seed 000 §5, issue 28). A host has Config.HelperSlots helper
// slots, ring keys derived from its own (SlotKey); the machine holding a
// slot may fetch the host's batches for the host's owner, and checks both
// facts from its own ring state (HelperAdmission.Slots): that one of its
// positions holds the slot, and, by its own lookup, that the sender holds
// the host. Slots scatter a host's helpers over the ring, so the hot hosts
// of one owner land on different machines, and they bound what a hostile
// owner can set on one host: at most HelperSlots helpers, each one batch
// of the host at a time under the gap, whatever the owner asks.
//
// Which slot takes a batch is the owner's choice by load (Delegator.Choose):
// two slots drawn in turn, the one with less reported work first (the
// power of two choices), and only while the owner's own work is above the
// mean of the loads it heard and above the helper's by two batches. A load
// is the helper's word, a number it reports in its replies (Report): a
// helper that lies low is sent more work, one that lies high less, and a
// load is clamped to MaxLoad.

// MaxLoad bounds a reported load: a larger report counts as MaxLoad.
const MaxLoad = 1 << 30

// maxLoads bounds the machines whose loads a delegator keeps.
const maxLoads = 4096

// SlotKey returns the ring key of helper slot i of the host with ring key
// key: a fixed mix of both (splitmix64), so any member computes the same
// slots and no one chooses them.
func SlotKey(key uint64, i int) uint64 {
	z := key + uint64(i+1)*0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Worth reports whether a machine with work helper should take a batch of
// size pages from an owner with work owner (negative: unknown): the rule
// the owner's Choose applies to the load it last heard, applied by the
// helper to its own load now. Many owners may have heard the same low load
// from one helper; the helper's check keeps them from piling on it.
func Worth(owner, helper, size int) bool {
	return owner < 0 || helper+2*size <= owner
}

// WorthSize returns how many of a batch's first size pages a machine with
// work helper should take from an owner with work owner (negative:
// unknown, all of them): the most that Worth allows, 0 when not even one.
// A helper takes that part and leaves the rest unstarted, for the owner to
// fetch or hand on, instead of declining the whole batch: a decline costs
// the host a round trip with nothing fetched, and owners hear a helper's
// load only in its replies, after it grew.
func WorthSize(owner, helper, size int) int {
	if owner < 0 {
		return size
	}
	return min(max((owner-helper)/2, 0), size)
}

// UseSlots makes the delegator spread a host's batches over the holders of
// its n helper slots (SlotKey), which holder finds (Router.Owner), instead
// of the owning position's successors. Call it before the first Send.
func (d *Delegator[Req, Rep]) UseSlots(n int, holder func(ctx context.Context, key uint64) (ring.Peer, error)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.slots, d.slotCount = holder, max(n, 1)
	if d.loads == nil {
		d.loads = make(map[string]int)
	}
}

// UseLoad makes Send apply Choose's load rule: own returns this machine's
// work now (pages queued and in flight, not counting the batch Send is
// given, which Send adds), size a batch's pages, and trim cuts a batch to
// its first n pages: Send moves the largest batch the rule allows
// (ChooseSize), the rest staying with the owner. Without
// it, Send draws among the candidates by the loads heard alone and never
// declines to delegate. Call it before the first Send.
func (d *Delegator[Req, Rep]) UseLoad(own func() int, size func(Req) int, trim func(Req, int) Req) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.own, d.size, d.trim = own, size, trim
	if d.loads == nil {
		d.loads = make(map[string]int)
	}
}

// OwnLoad returns this machine's work now as UseLoad's own gives it, or -1
// without UseLoad: with a batch's pages added, the load an owner tells a
// helper with the batch, for the helper's own check (Worth).
func (d *Delegator[Req, Rep]) OwnLoad() int {
	d.mu.Lock()
	own := d.own
	d.mu.Unlock()
	if own == nil {
		return -1
	}
	return min(max(own(), 0), MaxLoad)
}

// Report records load, the work machine p reported in a reply.
func (d *Delegator[Req, Rep]) Report(p ring.Peer, load int) {
	load = min(max(load, 0), MaxLoad)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.loads == nil {
		d.loads = make(map[string]int)
	}
	if _, ok := d.loads[p.Machine()]; !ok && len(d.loads) >= maxLoads {
		clear(d.loads)
	}
	d.loads[p.Machine()] = load
}

// heard returns the load last heard from p's machine, with the batches
// sent it since (0: never heard).
func (d *Delegator[Req, Rep]) heard(p ring.Peer) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.loads[p.Machine()]
}

// sentTo counts a batch of size pages towards p's load until it reports
// again, as Choose does for the helper it puts first.
func (d *Delegator[Req, Rep]) sentTo(p ring.Peer, size int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sentToLocked(p, size)
}

// sentToLocked is sentTo with d.mu held.
func (d *Delegator[Req, Rep]) sentToLocked(p ring.Peer, size int) {
	if d.loads == nil || size <= 0 {
		return
	}
	if _, ok := d.loads[p.Machine()]; ok || len(d.loads) < maxLoads {
		d.loads[p.Machine()] = min(d.loads[p.Machine()]+size, MaxLoad)
	}
}

// Begin marks a batch of key out; it fails with ErrHostBusy while another
// is. Every Begin that succeeds is followed by one End(key).
func (d *Delegator[Req, Rep]) Begin(key uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, busy := d.out[key]; busy {
		return ErrHostBusy
	}
	d.out[key] = struct{}{}
	return nil
}

// End marks key's batch back.
func (d *Delegator[Req, Rep]) End(key uint64) {
	d.mu.Lock()
	delete(d.out, key)
	d.mu.Unlock()
}

// Candidates returns the machines that may take a batch of key, one
// position each, other than the owner's machine: the holders of the
// host's helper slots (UseSlots), or else the first helpers of the owning
// position's successor list (HelperOf).
func (d *Delegator[Req, Rep]) Candidates(ctx context.Context, key uint64) []ring.Peer {
	self, succs := d.successors(key)
	d.mu.Lock()
	holder, n := d.slots, d.slotCount
	d.mu.Unlock()
	if holder == nil {
		return helpers(self, succs, d.h)
	}
	var out []ring.Peer
	for i := range n {
		p, err := holder(ctx, SlotKey(key, i))
		if err != nil || p.IsZero() || p.Machine() == self.Machine() {
			continue
		}
		if !slices.ContainsFunc(out, func(q ring.Peer) bool { return q.Machine() == p.Machine() }) {
			out = append(out, p)
		}
	}
	return out
}

// MinBatch is the fewest pages worth a batch: one page moved saves the
// owner nothing.
const MinBatch = 2

// ChooseSize is Choose for the largest batch of at most most pages, halved
// down to least, that the load rule lets move: the order, the size, and
// false when not even least pages may.
func (d *Delegator[Req, Rep]) ChooseSize(cands []ring.Peer, own, most, least int) ([]ring.Peer, int, bool) {
	least = max(least, 1)
	for try := most; try >= least; try /= 2 {
		if order, ok := d.Choose(cands, own, try); ok {
			return order, try, true
		}
		if len(cands) == 0 {
			break
		}
	}
	return nil, 0, false
}

// Choose orders cands (Candidates) for a batch of size pages whose owner
// has own work (as the caller measures it: a node its backlog, the
// simulator its pages fetched and held; negative: unknown): two
// candidates drawn in turn, the one with less reported work first, then
// the others by reported work. It reports false, and the owner fetches the
// batch itself, when its own work is known and not above both the mean of
// the loads it heard (each counted at most twice its own) and the chosen
// helper's by two batches: moving the
// batch would not bring the busiest machine closer to the mean. A machine
// that never reported counts as idle, so it is tried. The batch counts
// towards the chosen helper's load until it reports again.
func (d *Delegator[Req, Rep]) Choose(cands []ring.Peer, own, size int) ([]ring.Peer, bool) {
	n := len(cands)
	if n == 0 {
		return nil, false
	}
	turn := d.turn.Add(1) - 1
	d.mu.Lock()
	defer d.mu.Unlock()
	load := func(p ring.Peer) int { return d.loads[p.Machine()] }
	i := int(turn % uint64(n))
	j := int(SlotKey(turn, 0) % uint64(n))
	if j == i {
		j = (i + 1) % n
	}
	first := cands[i]
	if load(cands[j]) < load(first) {
		first = cands[j]
	}
	if own >= 0 {
		if !Worth(own, load(first), size) {
			return nil, false
		}
		if len(d.loads) > 0 {
			// Each load counts at most twice the owner's own: one
			// helper that reports a huge load must not raise the mean
			// above every owner and so stop all delegation.
			sum := 0
			for _, l := range d.loads {
				sum += min(l, 2*own)
			}
			if own*len(d.loads) <= sum {
				return nil, false
			}
		}
	}
	out := make([]ring.Peer, 0, n)
	out = append(out, first)
	rest := slices.DeleteFunc(slices.Clone(cands), func(p ring.Peer) bool { return p == first })
	slices.SortStableFunc(rest, func(a, b ring.Peer) int { return load(a) - load(b) })
	out = append(out, rest...)
	d.sentToLocked(first, size)
	return out, true
}
