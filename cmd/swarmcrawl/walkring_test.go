package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// fakeRing answers GetNeighbours from a table; a peer in down does not
// answer.
type fakeRing struct {
	succ  map[ring.Peer][]ring.Peer
	down  map[ring.Peer]bool
	calls int
	asked map[ring.Peer]bool
}

func (f *fakeRing) Neighbours(_ context.Context, to ring.Peer) (ring.Neighbours, error) {
	f.calls++
	if f.asked == nil {
		f.asked = map[ring.Peer]bool{}
	}
	f.asked[to] = true
	if f.down[to] {
		return ring.Neighbours{}, errors.New("no answer")
	}
	return ring.Neighbours{Successors: f.succ[to]}, nil
}

// ringOf returns n peers and a table of each one's next three successors.
func ringOf(n int) ([]ring.Peer, map[ring.Peer][]ring.Peer) {
	ps := make([]ring.Peer, n)
	for i := range ps {
		ps[i] = ring.Peer{ID: ring.ID(i + 1), Addr: fmt.Sprintf("p%d", i)}
	}
	succ := map[ring.Peer][]ring.Peer{}
	for i, p := range ps {
		for k := 1; k <= 3 && k < n; k++ {
			succ[p] = append(succ[p], ps[(i+k)%n])
		}
	}
	return ps, succ
}

// The ring walk visits every member once, passes over one that does not
// answer (reporting it) to the next in its predecessor's list, stops
// where it started, and visits no more than its bound.
func TestWalkRing(t *testing.T) {
	ps, succ := ringOf(7)
	f := &fakeRing{succ: succ, down: map[ring.Peer]bool{ps[3]: true}}
	members, unreachable, err := walkRing(context.Background(), f, ps[0], time.Second, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 6 || len(unreachable) != 1 || unreachable[0] != ps[3] {
		t.Fatalf("members %v, unreachable %v; want the 6 that answer and %v", members, unreachable, ps[3])
	}
	seen := map[ring.Peer]bool{}
	for _, m := range members {
		if seen[m] {
			t.Errorf("%v visited twice", m)
		}
		seen[m] = true
	}
	if f.calls != 7 {
		t.Errorf("%d calls for 7 members, want 7", f.calls)
	}

	// Two members down in a row: the walk goes on past both.
	f = &fakeRing{succ: succ, down: map[ring.Peer]bool{ps[3]: true, ps[4]: true}}
	members, unreachable, _ = walkRing(context.Background(), f, ps[0], time.Second, 100)
	if len(members) != 5 || len(unreachable) != 2 {
		t.Errorf("two down: members %v, unreachable %v", members, unreachable)
	}

	// The bound holds on a ring larger than it.
	big, bigSucc := ringOf(50)
	members, _, _ = walkRing(context.Background(), &fakeRing{succ: bigSucc}, big[0], time.Second, 10)
	if len(members) != 10 {
		t.Errorf("bounded to 10: visited %d", len(members))
	}

	// The entry member not answering is an error.
	if _, _, err := walkRing(context.Background(), &fakeRing{succ: succ, down: map[ring.Peer]bool{ps[0]: true}}, ps[0], time.Second, 100); err == nil {
		t.Error("walk through a silent entry member succeeded")
	}
}

// A ring walk over nodes with several positions (--vnodes) finds each
// node once per position; the export counts and fetches machines: each
// once, in walk order, and a machine as unreachable only when none of
// its positions answered. Before: "exported 5 WARC files ... from 80
// members" for 5 nodes of 16 positions.
func TestMachinesOfPositions(t *testing.T) {
	pos := func(m string, i int) ring.Peer {
		if i == 0 {
			return ring.Peer{ID: ring.ID(len(m)), Addr: m}
		}
		return ring.Peer{ID: ring.ID(100 + i), Addr: fmt.Sprintf("%s/%d", m, i)}
	}
	reached := []ring.Peer{pos("a", 0), pos("b", 3), pos("a", 2), pos("b", 0), pos("c", 1)}
	down := []ring.Peer{pos("c", 0), pos("d", 2), pos("d", 0)}
	members, unreachable := machinesOf(reached, down)
	var got []string
	for _, m := range members {
		got = append(got, m.Addr)
	}
	if fmt.Sprint(got) != "[a b c]" {
		t.Errorf("members %v, want [a b c]: each machine once, in walk order", got)
	}
	if len(unreachable) != 1 || unreachable[0].Addr != "d" {
		t.Errorf("unreachable %v, want [d] (c answered through position 1)", unreachable)
	}
}

// On a ring of nodes with 16 positions each, the walk finds every
// machine without asking every position: it asks a position only for a
// machine not heard yet, or to go on past a successor list of machines
// it has. Before, it asked all 16 positions of each machine, and its
// bound of 10,000 positions stopped at 625 machines. A machine down
// shows up as unreachable after one call, and the bound counts machines.
func TestWalkRingAsksFewPositionsPerMachine(t *testing.T) {
	const machines, vnodes, listLen = 40, 16, 32
	rng := rand.New(rand.NewPCG(7, 7))
	var ps []ring.Peer
	for m := range machines {
		for i := range vnodes {
			addr := fmt.Sprintf("m%d", m)
			if i > 0 {
				addr = fmt.Sprintf("m%d/%d", m, i)
			}
			ps = append(ps, ring.Peer{ID: ring.ID(rng.Uint64()), Addr: addr})
		}
	}
	slices.SortFunc(ps, func(a, b ring.Peer) int { return cmp.Compare(a.ID, b.ID) })
	succ := map[ring.Peer][]ring.Peer{}
	for i, p := range ps {
		for k := 1; k <= listLen; k++ {
			succ[p] = append(succ[p], ps[(i+k)%len(ps)])
		}
	}
	down := map[ring.Peer]bool{}
	for _, p := range ps {
		if p.Machine() == "m7" {
			down[p] = true
		}
	}
	entry := ps[0]
	if entry.Machine() == "m7" {
		entry = ps[1]
	}
	f := &fakeRing{succ: succ, down: down}
	reached, failed, err := walkRing(context.Background(), f, entry, time.Second, 1000)
	if err != nil {
		t.Fatal(err)
	}
	members, unreachable := machinesOf(reached, failed)
	if len(members) != machines-1 || len(unreachable) != 1 || unreachable[0].Addr != "m7" {
		t.Fatalf("%d members, unreachable %v; want %d and m7", len(members), unreachable, machines-1)
	}
	downCalls := 0
	for p := range down {
		if f.asked[p] {
			downCalls++
		}
	}
	if downCalls != 1 {
		t.Errorf("the machine down was asked through %d of its positions, want 1", downCalls)
	}
	if most := 2*machines + len(ps)/listLen*2; f.calls > most {
		t.Errorf("%d calls for %d machines of %d positions, want at most %d", f.calls, machines, vnodes, most)
	}
	t.Logf("%d calls for %d positions on %d machines", f.calls, len(ps), machines)

	reached, _, _ = walkRing(context.Background(), &fakeRing{succ: succ}, ps[0], time.Second, 10)
	if members, _ := machinesOf(reached, nil); len(members) != 10 {
		t.Errorf("bounded to 10 machines: reached %d", len(members))
	}
}
