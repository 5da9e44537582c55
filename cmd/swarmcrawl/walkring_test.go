package main

import (
	"context"
	"errors"
	"fmt"
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
}

func (f *fakeRing) Neighbours(_ context.Context, to ring.Peer) (ring.Neighbours, error) {
	f.calls++
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
