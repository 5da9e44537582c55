// Package census counts a swarm's crawl as a whole from the members'
// own reports: exactly, by walking the ring successor by successor and
// asking every machine met, when the swarm is small; by following runs
// of positions from random points of the ring and dividing their
// counters by the arc they cover (a ratio estimator, with a confidence
// interval) when it is large. It is a pure algorithm (standard library
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
	// Samples is the number of random keys an estimate looks up.
	Samples int
	// Run is the number of positions an estimate follows after each
	// sampled key's owner.
	Run int
	// Z is the normal quantile of the confidence interval (1.96: 95%).
	Z float64
}

// DefaultConfig returns the defaults: walk up to 64 machines; past that,
// sample 32 keys and follow 8 positions after each (256 machines asked at
// most); 95% intervals.
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
	// Samples is the number of keys sampled (estimates only).
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

// Sample estimates the swarm's totals from runs of positions that start
// at uniformly random points of the ring: for each of cfg.Samples random
// keys it skips the key's owner (whose arc is size-biased: a long arc is
// more likely to hold a random key) and follows the next cfg.Run
// positions successor by successor. The positions after a random point
// are a fair sample of the ring's positions, so the counters of a run
// over the arc it covers estimate the counters per unit of ring, and the
// ratio of their sums over all runs estimates the total (a ratio
// estimator; its standard error is the spread of the runs' residuals).
// A machine holding several positions has its counters split among them
// in proportion to their arcs. The interval is the estimate ± Z standard
// errors.
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
	type run struct {
		arc float64
		y   map[string]float64
	}
	runs := make([]run, 0, cfg.Samples)
	res := Result{Method: Estimate, Totals: map[string]Total{}, Samples: cfg.Samples, Confidence: confidence(cfg.Z)}
	names := map[string]bool{}
	for range cfg.Samples {
		key := ring.ID(rng.Uint64())
		owner, err := src.Lookup(ctx, key)
		if err != nil {
			return Result{}, fmt.Errorf("census: sample: lookup %s: %w", key, err)
		}
		_, pos, err := status(owner)
		if err != nil {
			return Result{}, err
		}
		rn := run{y: map[string]float64{}}
		cur := pos.Succ
		for range cfg.Run {
			if cur.IsZero() {
				return Result{}, fmt.Errorf("census: sample: position %s has no successor", pos.ID)
			}
			r, p, err := status(cur)
			if err != nil {
				return Result{}, err
			}
			w := p.Arc() / r.Share()
			rn.arc += p.Arc()
			rn.y[members] += w
			for k, v := range r.Counters {
				rn.y[k] += w * v
				names[k] = true
			}
			res.Work = res.Work || r.Work
			pos, cur = p, p.Succ
		}
		runs = append(runs, rn)
	}
	res.Asked = len(cache)
	ratio := func(k string) Total {
		n := float64(len(runs))
		sy, sa := 0.0, 0.0
		for _, r := range runs {
			sy += r.y[k]
			sa += r.arc
		}
		est := sy / sa
		ss := 0.0
		for _, r := range runs {
			e := r.y[k] - est*r.arc
			ss += e * e
		}
		se := 0.0
		if n > 1 {
			se = math.Sqrt(ss/(n-1)/n) / (sa / n)
		}
		return Total{Value: est, Low: max(est-cfg.Z*se, 0), High: est + cfg.Z*se}
	}
	res.Members = ratio(members)
	for k := range names {
		res.Totals[k] = ratio(k)
	}
	return res, nil
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
