package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/swarmcrawl/swarmcrawl/p2p/census"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// CensusReport is how the swarm census (package census) did at the end
// of the crawl phase, mid-crawl: an exact walk of the whole ring, then
// Config.Census independent estimates, each compared with the truth
// read off every node in the same instant.
type CensusReport struct {
	// Estimates is the number of estimates drawn; Samples and Run are
	// census.Config's.
	Estimates int `json:"estimates"`
	Samples   int `json:"samples"`
	Run       int `json:"run"`
	// Confidence is the estimates' stated interval coverage.
	Confidence float64 `json:"confidence"`
	// WalkExact reports whether the exact walk's totals equal the truth;
	// WalkError says why the walk failed, if it did.
	WalkExact bool   `json:"walk_exact"`
	WalkError string `json:"walk_error,omitempty"`
	// Counters are, for "members", "fetched" and "queued": the truth, the
	// mean relative error of the estimates, and the share of estimates
	// whose interval held the truth.
	Counters map[string]CensusCounter `json:"counters"`
	// MeanAsked is the mean number of machines an estimate asked.
	MeanAsked float64 `json:"mean_asked"`
	// Failed is the number of estimates that returned an error.
	Failed int `json:"failed"`
}

// CensusCounter is one counter's census figures.
type CensusCounter struct {
	Truth    float64 `json:"truth"`
	MeanBias float64 `json:"mean_bias"`
	Covered  float64 `json:"covered"`
}

// censusSource answers the census from the simulated nodes: a machine's
// report is its positions as its ring nodes see them and its crawl
// counters; lookups start from a random live position.
type censusSource struct {
	s   *Sim
	rng *rand.Rand
}

func (c censusSource) Status(_ context.Context, p ring.Peer) (census.Report, error) {
	v, ok := c.s.byAddr[p.Addr]
	if !ok || !v.alive || !v.phys.alive {
		return census.Report{}, fmt.Errorf("%s unreachable", p.Addr)
	}
	return c.s.censusReport(v.phys), nil
}

func (c censusSource) Lookup(ctx context.Context, key ring.ID) (ring.Peer, error) {
	if len(c.s.members) == 0 {
		return ring.Peer{}, errors.New("no members")
	}
	v := c.s.members[c.rng.IntN(len(c.s.members))]
	owner, _, err := v.rn.Lookup(ctx, key)
	return owner, err
}

// censusReport is what machine p would answer a status request with.
func (s *Sim) censusReport(p *physNode) census.Report {
	r := census.Report{Machine: p.vnodes[0].peer.Machine(), Counters: map[string]float64{"fetched": float64(p.work)}}
	queued := 0
	for _, v := range p.vnodes {
		if !v.joined || !v.alive {
			continue
		}
		succ := v.rn.Successors()
		pos := census.Position{ID: v.peer.ID, Pred: v.rn.Predecessor().ID}
		if len(succ) > 0 {
			pos.Succ = succ[0]
		}
		r.Positions = append(r.Positions, pos)
		queued += len(v.app.queued)
	}
	r.Counters["queued"] = float64(queued)
	r.Work = queued > 0
	return r
}

// runCensus fills rep.Census; it runs inside one event, so the counters
// do not move under it.
func (s *Sim) runCensus(rep *Report) {
	n := s.cfg.Census
	src := censusSource{s: s, rng: rand.New(rand.NewPCG(s.cfg.Seed, 0xce25))}
	cfg := census.DefaultConfig()
	cr := &CensusReport{Estimates: n, Samples: cfg.Samples, Run: cfg.Run, Counters: map[string]CensusCounter{}}
	truth := map[string]float64{}
	for _, p := range s.live {
		r := s.censusReport(p)
		truth["members"]++
		for k, v := range r.Counters {
			truth[k] += v
		}
	}
	if len(s.members) > 0 {
		walk := cfg
		walk.MaxMembers = len(s.live) + 1
		res, err := census.Walk(s.ctx, src, s.members[0].peer, walk)
		if err != nil {
			cr.WalkError = err.Error()
		} else {
			cr.WalkExact = res.Members.Value == truth["members"]
			for k, v := range truth {
				if k != "members" && res.Totals[k].Value != v {
					cr.WalkExact = false
				}
			}
		}
	}
	bias := map[string]float64{}
	covered := map[string]int{}
	asked, ok := 0, 0
	for range n {
		res, err := census.Sample(s.ctx, src, src.rng, cfg)
		if err != nil {
			cr.Failed++
			continue
		}
		ok++
		cr.Confidence = res.Confidence
		asked += res.Asked
		for k, want := range truth {
			got := res.Members
			if k != "members" {
				got = res.Totals[k]
			}
			if want > 0 {
				bias[k] += got.Value/want - 1
			}
			if got.Low <= want && want <= got.High {
				covered[k]++
			}
		}
	}
	for k, want := range truth {
		c := CensusCounter{Truth: want}
		if ok > 0 {
			c.MeanBias = bias[k] / float64(ok)
			c.Covered = float64(covered[k]) / float64(ok)
		}
		cr.Counters[k] = c
	}
	if ok > 0 {
		cr.MeanAsked = float64(asked) / float64(ok)
	}
	rep.Census = cr
}
