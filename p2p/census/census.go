// Package census counts a swarm's crawl as a whole from the members'
// own reports: exactly, by walking the ring successor by successor and
// asking every machine met, when the swarm is small; from windows of the
// ring of a fixed length at random points (an unbiased estimate, with a
// confidence interval) when it is large. It is a pure algorithm (standard library
// and the ring only) so that the simulator runs it unchanged on
// thousands of nodes.
package census

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// Position is one ring position a machine holds, with its neighbours as
// that position sees them.
type Position struct {
	ID   ring.ID
	Pred ring.ID   // its predecessor's position; equal to ID when alone
	Succ ring.Peer // its successor
}

// Arc is the fraction of the ring the position owns: (Pred, ID].
func (p Position) Arc() float64 {
	if p.Pred == p.ID {
		return 1
	}
	return float64(uint64(p.ID-p.Pred)) / math.Exp2(64)
}

// Report is what one machine says about itself.
type Report struct {
	// Machine is the physical peer (ring.Peer.Machine of its positions).
	Machine string
	// Positions are the ring positions it holds.
	Positions []Position
	// Counters are its named totals (pages fetched, queued, ...).
	Counters map[string]float64
	// Work reports whether it still has work for the crawl.
	Work bool
}

// Share is the fraction of the ring the machine owns, so the chance that
// a uniformly random key lands on it.
func (r Report) Share() float64 {
	s := 0.0
	for _, p := range r.Positions {
		s += p.Arc()
	}
	return min(s, 1)
}

// Source is how the census reaches the swarm.
type Source interface {
	// Status asks the machine that holds position p for its report.
	Status(ctx context.Context, p ring.Peer) (Report, error)
	// Lookup finds the owner of key on the ring.
	Lookup(ctx context.Context, key ring.ID) (ring.Peer, error)
}

// Config bounds a census. The zero value of a field means its default.
type Config struct {
	// MaxMembers is the most machines an exact walk asks before it gives
	// up and the census samples instead.
	MaxMembers int
	// Samples is the number of random windows of the ring an estimate
	// walks.
	Samples int
	// Run is the number of positions a window holds on average.
	Run int
	// Z is the normal quantile of the confidence interval (1.96: 95%).
	Z float64
}

// DefaultConfig returns the defaults: walk up to 64 machines; past that,
// sample 32 windows of 8 positions each on average (about 280 positions
// asked with the pilot's); 95% intervals.
func DefaultConfig() Config { return Config{MaxMembers: 64, Samples: 32, Run: 8, Z: 1.96} }

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.MaxMembers <= 0 {
		c.MaxMembers = d.MaxMembers
	}
	if c.Samples <= 0 {
		c.Samples = d.Samples
	}
	if c.Run <= 0 {
		c.Run = d.Run
	}
	if c.Z <= 0 {
		c.Z = d.Z
	}
	return c
}

// Method names how a Result was reached.
const (
	Exact    = "exact"
	Estimate = "estimate"
)

// Total is a swarm-wide total: exact (Low == High == Value) or an
// estimate with its confidence interval.
type Total struct {
	Value float64 `json:"value"`
	Low   float64 `json:"low"`
	High  float64 `json:"high"`
}

// Result is a census of the swarm.
type Result struct {
	// Method is Exact or Estimate.
	Method string `json:"method"`
	// Members is the number of machines (estimated for an estimate).
	Members Total `json:"members"`
	// Totals are the sums of the members' counters.
	Totals map[string]Total `json:"totals"`
	// Work reports whether any member still has work: for an exact
	// census, any member at all; for an estimate, any sampled member.
	Work bool `json:"work"`
	// Asked is the number of distinct machines asked.
	Asked int `json:"asked"`
	// Samples is the number of windows sampled (estimates only).
	Samples int `json:"samples,omitempty"`
	// Confidence is the interval's coverage (estimates only).
	Confidence float64 `json:"confidence,omitempty"`
	// Reports are every member's reports (exact census only), by machine.
	Reports []Report `json:"-"`
}

// ErrTooLarge reports that the walk met more than MaxMembers machines.
var ErrTooLarge = errors.New("census: swarm larger than the walk's bound")

// Walk counts the swarm exactly: starting from the machine holding
// start, it asks each machine for its report and follows every position's
// successor to a machine not asked yet, until the successors lead only
// back to machines already asked. It checks that the positions met cover
// the ring (their arcs sum to one), so that a walk cut short by a ring
// still converging is an error, not a wrong total.
func Walk(ctx context.Context, src Source, start ring.Peer, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	asked := map[string]bool{}
	var reports []Report
	next := []ring.Peer{start}
	for len(next) > 0 {
		p := next[0]
		next = next[1:]
		if asked[p.Machine()] {
			continue
		}
		if len(asked) >= cfg.MaxMembers {
			return Result{}, fmt.Errorf("%w (%d)", ErrTooLarge, cfg.MaxMembers)
		}
		asked[p.Machine()] = true
		r, err := src.Status(ctx, p)
		if err != nil {
			return Result{}, fmt.Errorf("census: walk: %s: %w", p.Machine(), err)
		}
		if r.Machine != p.Machine() {
			return Result{}, fmt.Errorf("census: walk: %s answered as %q", p.Machine(), r.Machine)
		}
		reports = append(reports, r)
		for _, pos := range r.Positions {
			if !pos.Succ.IsZero() && !asked[pos.Succ.Machine()] {
				next = append(next, pos.Succ)
			}
		}
	}
	seen := map[ring.ID]bool{}
	cover := 0.0
	for _, r := range reports {
		for _, p := range r.Positions {
			if seen[p.ID] {
				return Result{}, fmt.Errorf("census: walk: position %s held twice", p.ID)
			}
			seen[p.ID] = true
			cover += p.Arc()
		}
	}
	if math.Abs(cover-1) > 1e-9 {
		return Result{}, fmt.Errorf("census: walk: the positions met cover %.6f of the ring, not all of it (the ring is still converging)", cover)
	}
	slices.SortFunc(reports, func(a, b Report) int {
		switch {
		case a.Machine < b.Machine:
			return -1
		case a.Machine > b.Machine:
			return 1
		}
		return 0
	})
	res := Result{Method: Exact, Totals: map[string]Total{}, Asked: len(reports), Reports: reports}
	n := float64(len(reports))
	res.Members = Total{n, n, n}
	for _, r := range reports {
		res.Work = res.Work || r.Work
		for k, v := range r.Counters {
			t := res.Totals[k]
			t.Value += v
			t.Low, t.High = t.Value, t.Value
			res.Totals[k] = t
		}
	}
	return res, nil
}

// Sample estimates the swarm's totals from windows of the ring that start
// at uniformly random points. A window (k, k+L] of fixed length L holds
// each position's ID with probability L, whatever the arcs around it, so
// the counters of the positions whose IDs it holds, divided by L, are an
// unbiased estimate of the totals (a machine holding several positions
// has its counters split among them in proportion to their arcs). Each
// window is walked from the owner of its start k (the first position at
// or after k) successor by successor until a position lies past k+L.
// L is cfg.Run positions' worth of ring: a pilot of a few runs of
// cfg.Run positions after random keys' owners gives the mean arc. The
// estimate is the mean of the cfg.Samples windows' estimates, and its
// interval ± Z standard errors, with Z widened to Student's t for the
// number of windows.
//
// (An earlier design followed cfg.Run positions after each key's owner
// and divided the counters by the arcs they covered. A position then
// enters a run with a probability set by its predecessors' arcs; where a
// counter follows that (queued work mid-crawl does), its estimates were
// 7% low on 1,000 simulated nodes and their 95% intervals held the truth
// 85% of the time.)
func Sample(ctx context.Context, src Source, rng *rand.Rand, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	cache := map[string]Report{}
	status := func(p ring.Peer) (Report, Position, error) {
		r, ok := cache[p.Machine()]
		if !ok {
			var err error
			r, err = src.Status(ctx, p)
			if err != nil {
				return Report{}, Position{}, fmt.Errorf("census: sample: %s: %w", p.Machine(), err)
			}
			if r.Machine != p.Machine() {
				return Report{}, Position{}, fmt.Errorf("census: sample: %s answered as %q", p.Machine(), r.Machine)
			}
			if r.Share() <= 0 {
				return Report{}, Position{}, fmt.Errorf("census: sample: %s owns no arc", p.Machine())
			}
			cache[p.Machine()] = r
		}
		i := slices.IndexFunc(r.Positions, func(q Position) bool { return q.ID == p.ID })
		if i < 0 {
			return Report{}, Position{}, fmt.Errorf("census: sample: %s does not hold position %s", p.Machine(), p.ID)
		}
		return r, r.Positions[i], nil
	}
	owner := func(key ring.ID) (ring.Peer, error) {
		p, err := src.Lookup(ctx, key)
		if err != nil {
			return ring.Peer{}, fmt.Errorf("census: sample: lookup %s: %w", key, err)
		}
		return p, nil
	}
	next := func(pos Position) (ring.Peer, error) {
		if pos.Succ.IsZero() {
			return ring.Peer{}, fmt.Errorf("census: sample: position %s has no successor", pos.ID)
		}
		return pos.Succ, nil
	}

	// The pilot: the mean arc of the positions after a few keys' owners
	// (the owners themselves are size-biased and left out).
	arcs, count := 0.0, 0
	for range pilotRuns {
		p, err := owner(ring.ID(rng.Uint64()))
		if err != nil {
			return Result{}, err
		}
		_, pos, err := status(p)
		if err != nil {
			return Result{}, err
		}
		for range cfg.Run {
			if p, err = next(pos); err != nil {
				return Result{}, err
			}
			if _, pos, err = status(p); err != nil {
				return Result{}, err
			}
			arcs += pos.Arc()
			count++
		}
	}
	width := min(float64(cfg.Run)*arcs/float64(count), 1)
	span := uint64(math.MaxUint64)
	if width < 1 {
		span = uint64(width * math.Exp2(64))
	}

	res := Result{Method: Estimate, Totals: map[string]Total{}, Samples: cfg.Samples, Confidence: confidence(cfg.Z)}
	windows := make([]map[string]float64, 0, cfg.Samples)
	names := map[string]bool{}
	for range cfg.Samples {
		start := ring.ID(rng.Uint64())
		p, err := owner(start)
		if err != nil {
			return Result{}, err
		}
		y := map[string]float64{}
		first := p.ID
		for i := 0; ; i++ {
			// p's ID is in the window when its distance from the
			// window's start is at most the window's length; the walk
			// ends there, back at its first position, or at its bound.
			if uint64(p.ID-start) > span || (i > 0 && p.ID == first) || i >= maxWindow*cfg.Run {
				break
			}
			r, pos, err := status(p)
			if err != nil {
				return Result{}, err
			}
			w := pos.Arc() / r.Share()
			y[members] += w / width
			for k, v := range r.Counters {
				y[k] += w * v / width
				names[k] = true
			}
			res.Work = res.Work || r.Work
			if p, err = next(pos); err != nil {
				return Result{}, err
			}
		}
		windows = append(windows, y)
	}
	res.Asked = len(cache)
	z := studentT(cfg.Z, len(windows)-1)
	mean := func(k string) Total {
		n := float64(len(windows))
		est := 0.0
		for _, w := range windows {
			est += w[k]
		}
		est /= n
		ss := 0.0
		for _, w := range windows {
			ss += (w[k] - est) * (w[k] - est)
		}
		se := 0.0
		if n > 1 {
			se = math.Sqrt(ss / (n - 1) / n)
		}
		return Total{Value: est, Low: max(est-z*se, 0), High: est + z*se}
	}
	res.Members = mean(members)
	for k := range names {
		res.Totals[k] = mean(k)
	}
	return res, nil
}

// pilotRuns is the number of runs of Config.Run positions whose mean arc
// sets the window's length; maxWindow bounds a window's walk at that many
// times Config.Run positions (a window holds Run on average).
const (
	pilotRuns = 4
	maxWindow = 4
)

// studentT widens the normal quantile z to Student's t with df degrees of
// freedom (a Cornish-Fisher expansion: within 0.1% for df >= 5), since
// the standard error comes from the windows themselves.
func studentT(z float64, df int) float64 {
	if df < 1 {
		return z
	}
	n := float64(df)
	z3, z5 := z*z*z, z*z*z*z*z
	return z + (z3+z)/(4*n) + (5*z5+16*z3+3*z)/(96*n*n)
}

// members is the key of a run's member count among its counters.
const members = "\x00members"

// confidence is the two-sided coverage of ±z for a normal distribution.
func confidence(z float64) float64 { return math.Erf(z / math.Sqrt2) }

// Count walks the ring exactly when the swarm is at most cfg.MaxMembers
// machines and samples it otherwise.
func Count(ctx context.Context, src Source, start ring.Peer, rng *rand.Rand, cfg Config) (Result, error) {
	res, err := Walk(ctx, src, start, cfg)
	if errors.Is(err, ErrTooLarge) {
		return Sample(ctx, src, rng, cfg)
	}
	return res, err
}
