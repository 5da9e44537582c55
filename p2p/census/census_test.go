package census

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// fakeSwarm is a ring of machines with vnodes positions each, whose
// counters are given per machine.
type fakeSwarm struct {
	ids     []ring.ID // sorted
	peer    map[ring.ID]ring.Peer
	reports map[string]Report
	asks    int
}

func newFakeSwarm(rng *rand.Rand, machines, vnodes int, counters func(m int, share float64) map[string]float64) *fakeSwarm {
	f := &fakeSwarm{peer: map[ring.ID]ring.Peer{}, reports: map[string]Report{}}
	for m := range machines {
		for v := range vnodes {
			addr := fmt.Sprintf("m%d", m)
			if v > 0 {
				addr += fmt.Sprintf("/%d", v)
			}
			id := ring.ID(rng.Uint64())
			f.ids = append(f.ids, id)
			f.peer[id] = ring.Peer{ID: id, Addr: addr}
		}
	}
	slices.Sort(f.ids)
	for i, id := range f.ids {
		p := f.peer[id]
		pos := Position{ID: id, Pred: f.ids[(i+len(f.ids)-1)%len(f.ids)], Succ: f.peer[f.ids[(i+1)%len(f.ids)]]}
		r := f.reports[p.Machine()]
		r.Machine = p.Machine()
		r.Positions = append(r.Positions, pos)
		f.reports[p.Machine()] = r
	}
	for m := range machines {
		name := fmt.Sprintf("m%d", m)
		r := f.reports[name]
		r.Counters = counters(m, r.Share())
		f.reports[name] = r
	}
	return f
}

func (f *fakeSwarm) Status(_ context.Context, p ring.Peer) (Report, error) {
	f.asks++
	r, ok := f.reports[p.Machine()]
	if !ok {
		return Report{}, errors.New("no such machine")
	}
	return r, nil
}

func (f *fakeSwarm) Lookup(_ context.Context, key ring.ID) (ring.Peer, error) {
	i, _ := slices.BinarySearch(f.ids, key)
	return f.peer[f.ids[i%len(f.ids)]], nil
}

func (f *fakeSwarm) truth(name string) float64 {
	s := 0.0
	for _, r := range f.reports {
		s += r.Counters[name]
	}
	return s
}

func TestWalkSumsEveryMember(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	f := newFakeSwarm(rng, 9, 3, func(m int, _ float64) map[string]float64 {
		return map[string]float64{"fetched": float64(10 * m), "queued": float64(m % 2)}
	})
	start := f.peer[f.ids[4]]
	res, err := Walk(context.Background(), f, start, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Method != Exact || res.Members.Value != 9 || res.Asked != 9 {
		t.Fatalf("walk: %+v", res)
	}
	for _, k := range []string{"fetched", "queued"} {
		if got, want := res.Totals[k].Value, f.truth(k); got != want {
			t.Errorf("%s: walk says %v, the members hold %v", k, got, want)
		}
	}
	// A swarm over the bound is sampled instead.
	if _, err := Walk(context.Background(), f, start, Config{MaxMembers: 5}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("walk over the bound: %v", err)
	}
	res, err = Count(context.Background(), f, start, rand.New(rand.NewPCG(3, 4)), Config{MaxMembers: 5})
	if err != nil || res.Method != Estimate {
		t.Fatalf("count over the bound: %+v, %v", res, err)
	}
}

func TestWalkRefusesABrokenRing(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	f := newFakeSwarm(rng, 6, 1, func(int, float64) map[string]float64 { return nil })
	// One position's successor skips the next machine: the walk never
	// meets it and must say the ring is not covered.
	r := f.reports["m0"]
	i, _ := slices.BinarySearch(f.ids, r.Positions[0].ID)
	r.Positions[0].Succ = f.peer[f.ids[(i+2)%len(f.ids)]]
	f.reports["m0"] = r
	skipped := f.peer[f.ids[(i+1)%len(f.ids)]].Machine()
	// Every other machine's successor still leads on, so make the skipped
	// machine unreachable from its own predecessor alone: start from m0.
	if _, err := Walk(context.Background(), f, f.peer[f.ids[i]], Config{}); err == nil {
		t.Fatalf("walk skipping %s succeeded", skipped)
	}
}

// TestSampleWithinItsError draws many estimates of a 1,000-machine swarm
// and checks that the stated 95% intervals hold the truth about 95% of
// the time and that the estimates are not biased.
func TestSampleWithinItsError(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	f := newFakeSwarm(rng, 1000, 1, func(m int, share float64) map[string]float64 {
		// Queued work is spread by the ring (so follows the share); a
		// counter like errors is not.
		return map[string]float64{"queued": float64(int(share * 1e6)), "errors": float64(m % 7)}
	})
	checkCoverage(t, f, 400, 0)
}

func checkCoverage(t *testing.T, f *fakeSwarm, trials, samples int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(9, 10))
	for _, k := range []string{"queued", "errors", "members"} {
		truth := float64(len(f.reports))
		if k != "members" {
			truth = f.truth(k)
		}
		covered, sum := 0, 0.0
		for range trials {
			res, err := Sample(context.Background(), f, rng, Config{Samples: samples})
			if err != nil {
				t.Fatal(err)
			}
			tot := res.Members
			if k != "members" {
				tot = res.Totals[k]
			}
			if tot.Low <= truth && truth <= tot.High {
				covered++
			}
			sum += tot.Value
		}
		cov := float64(covered) / float64(trials)
		bias := sum/float64(trials)/truth - 1
		t.Logf("%s: truth %.0f, mean estimate %+.2f%%, 95%% interval held it %.1f%%", k, truth, 100*bias, 100*cov)
		if cov < 0.90 {
			t.Errorf("%s: the 95%% interval held the truth in %.1f%% of %d estimates", k, 100*cov, trials)
		}
		if bias > 0.03 || bias < -0.03 {
			t.Errorf("%s: estimates biased by %+.1f%%", k, 100*bias)
		}
	}
}

// TestSampleUnbiasedWhateverTheNeighbours: a counter that follows the
// arcs of a machine's predecessors (mid-crawl, queued work did) is
// estimated without bias. Runs of positions after random keys' owners
// took each position with a probability set by its predecessors' arcs,
// and estimated this counter 10% low, its interval holding the truth
// less than 80% of the time.
func TestSampleUnbiasedWhateverTheNeighbours(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	f := newFakeSwarm(rng, 1000, 1, func(int, float64) map[string]float64 { return nil })
	for i, id := range f.ids {
		p := f.peer[id]
		r := f.reports[p.Machine()]
		// Work waits on machines whose predecessors' arcs are short.
		before := 0.0
		for j := 1; j <= 8; j++ {
			q := f.ids[(i+len(f.ids)-j)%len(f.ids)]
			before += f.reports[f.peer[q].Machine()].Positions[0].Arc()
		}
		r.Counters = map[string]float64{"queued": math.Round(1e6 / (1 + 1000*before) / 1000), "errors": float64(i % 7)}
		f.reports[p.Machine()] = r
	}
	checkCoverage(t, f, 400, 0)
}
