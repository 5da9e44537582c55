package sim

import (
	"math"
	"slices"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// Churn: every physical node has a lognormal session time whose mean is
// 1/Churn minutes (so Churn of the nodes depart per minute in the steady
// state) and whose σ is SessionSigma, a heavy tail: most sessions are
// short, a few very long. A departure is a crash (CrashShare) or a
// graceful leave, and a new node joins in its place within 10 s.

// medianSession is the median session time for the configured churn.
func (s *Sim) medianSession() time.Duration {
	mean := time.Minute.Seconds() / s.cfg.Churn
	return time.Duration(mean / math.Exp(s.cfg.SessionSigma*s.cfg.SessionSigma/2) * float64(time.Second))
}

// session draws a session time.
func (s *Sim) session() time.Duration {
	return time.Duration(float64(s.medianSession()) * math.Exp(s.cfg.SessionSigma*s.rng.NormFloat64()))
}

// startChurn gives every live node the rest of a session in progress: a
// length-biased draw (the lognormal with μ raised by σ²) cut at a uniform
// point, as a node observed at a random instant has.
func (s *Sim) startChurn() {
	sig := s.cfg.SessionSigma
	for _, p := range slices.Clone(s.live) {
		biased := float64(s.medianSession()) * math.Exp(sig*sig+sig*s.rng.NormFloat64())
		s.scheduleDeparture(p, time.Duration(s.rng.Float64()*biased))
	}
}

// scheduleDeparture makes p depart after d, and a replacement join.
func (s *Sim) scheduleDeparture(p *physNode, d time.Duration) {
	s.w.after(d, func() {
		if !p.alive || !s.churnOn {
			return
		}
		if s.rng.Float64() < s.cfg.CrashShare {
			s.crash(p)
		} else {
			s.leave(p)
		}
		s.w.after(time.Duration(s.rng.Int64N(int64(10*time.Second))), func() {
			np := s.newPhys()
			s.joinMachine(np)
			s.joins++
			if s.churnOn {
				s.scheduleDeparture(np, s.session())
			}
		})
	})
}

// startPartition cuts a random fraction of the live nodes off from the
// rest; nodes that join meanwhile are on the larger side.
func (s *Sim) startPartition(frac float64) {
	order := s.rng.Perm(len(s.live))
	cut := int(math.Round(frac * float64(len(s.live))))
	for i, j := range order {
		s.live[j].group = 1
		if i < cut {
			s.live[j].group = 2
		}
	}
	s.partitioned = true
	s.applyPartition()
	s.partitions++
}

// applyPartition tells the network the current sides.
func (s *Sim) applyPartition() {
	var a, b []string
	for _, p := range s.live {
		for _, v := range p.vnodes {
			if p.group == 2 {
				b = append(b, v.peer.Addr)
			} else {
				a = append(a, v.peer.Addr)
			}
		}
	}
	s.rnet.Partition(a, b)
}

// heal ends a partition.
func (s *Sim) heal() {
	if !s.partitioned {
		return
	}
	s.partitioned = false
	for _, p := range s.live {
		p.group = 0
	}
	s.rnet.Heal()
}

// burstState follows the repair after a burst of crashes.
type burstState struct {
	at      time.Duration
	crashed int
	// runs counts maximal runs of consecutive ring positions that all
	// crashed and were longer than K: only those can lose what they held.
	runs, longestRun int
	// doomed are the arcs whose owner and K successors all crashed.
	doomed []shard.Range
	// keys are the crashed positions' IDs: their arcs need new owners.
	keys                    []ring.ID
	ownersDone, ringDone    bool
	ownersAfter, ringsAfter time.Duration
}

// doBurst crashes frac of the live nodes at once.
func (s *Sim) doBurst(frac float64) {
	n := int(math.Round(frac * float64(len(s.live))))
	order := s.rng.Perm(len(s.live))
	var victims []*physNode
	for _, j := range order[:n] {
		victims = append(victims, s.live[j])
	}
	b := &burstState{at: s.w.now, crashed: n}
	dead := map[*physNode]bool{}
	for _, p := range victims {
		dead[p] = true
	}
	m := s.members
	k := s.cfg.Replicas
	isDead := func(i int) bool { return dead[m[(i+len(m))%len(m)].phys] }
	for i := range m {
		if !isDead(i) {
			continue
		}
		b.keys = append(b.keys, m[i].peer.ID)
		if !isDead(i - 1) {
			run := 0
			for run < len(m) && isDead(i+run) {
				run++
			}
			b.longestRun = max(b.longestRun, run)
			if run > k {
				b.runs++
			}
		}
		all := true
		for j := 1; j <= k; j++ {
			all = all && isDead(i+j)
		}
		if all {
			prev := m[(i-1+len(m))%len(m)].peer.ID
			b.doomed = append(b.doomed, shard.Range{From: prev, To: m[i].peer.ID})
		}
	}
	for _, p := range victims {
		s.crash(p)
	}
	s.burst = b
}

// check notes when the burst is repaired: every crashed position's arc
// owned (shard.Ownership.Owns) by its new rightful owner, and the ring's
// pointers around it right.
func (b *burstState) check(s *Sim) {
	if b.ownersDone && b.ringDone {
		return
	}
	owners, pointers := true, true
	for _, k := range b.keys {
		o := s.trueOwner(k)
		if !o.own.Owns(uint64(k)) {
			owners = false
		}
		i := s.memberIndex(o)
		pred := s.members[(i-1+len(s.members))%len(s.members)]
		if o.rn.Predecessor() != pred.peer || pred.rn.Successors()[0] != o.peer {
			pointers = false
		}
	}
	now := s.w.elapsed()
	if owners && !b.ownersDone {
		b.ownersDone, b.ownersAfter = true, now-b.at
	}
	if pointers && !b.ringDone {
		b.ringDone, b.ringsAfter = true, now-b.at
	}
}

// inDoomed reports whether key lies in an arc whose owner and K
// successors all crashed in the burst.
func (b *burstState) inDoomed(key ring.ID) bool {
	for _, r := range b.doomed {
		if r.Contains(key) {
			return true
		}
	}
	return false
}
