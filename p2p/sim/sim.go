package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/swarmcrawl/swarmcrawl/internal/memstat"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// phase is the part of a run a measurement belongs to.
type phase int

const (
	phaseBuild phase = iota // nodes join, then the ring settles
	phaseCrawl              // the crawl, with churn, bursts and partitions
	phaseDrain              // churn over: the ring settles, the crawl drains
	phaseFinal              // lookups checked after the final stabilization
	numPhases
)

// lookStats counts lookups.
type lookStats struct {
	n, failed, wrong int64
	hops             [65]int64 // histogram; the last bin holds 64 and more
	latency          time.Duration
}

func (l *lookStats) add(hops int, lat time.Duration, failed, wrong bool) {
	l.n++
	l.hops[min(hops, len(l.hops)-1)]++
	l.latency += lat
	if failed {
		l.failed++
	}
	if wrong {
		l.wrong++
	}
}

func (l *lookStats) meanHops() float64 {
	if l.n == 0 {
		return 0
	}
	sum := int64(0)
	for h, c := range l.hops {
		sum += int64(h) * c
	}
	return float64(sum) / float64(l.n)
}

func (l *lookStats) quantileHops(q float64) int {
	if l.n == 0 {
		return 0
	}
	want := int64(math.Ceil(q * float64(l.n)))
	acc := int64(0)
	for h, c := range l.hops {
		acc += c
		if acc >= want {
			return h
		}
	}
	return len(l.hops) - 1
}

// Sim is one simulation run. It is used from one goroutine.
type Sim struct {
	cfg  Config
	rcfg ring.Config
	scfg shard.Config
	w    world
	rng  *rand.Rand
	ctx  context.Context
	rnet *ring.MemNet
	snet *shard.MemNet
	tnet *route.MemNet

	act activity
	// deleg is the hot-host delegation's state (delegate.go), delegCur
	// the position whose router finds helper slots' holders.
	deleg    *delegation
	delegCur *vnode
	traffic  [numActs]traffic
	// maintKinds breaks the maintenance traffic down by message kind.
	maintKinds [numKinds]traffic
	inTick     bool // a shard.Manager.Tick is running

	phys        []*physNode
	live        []*physNode
	members     []*vnode // joined live positions sorted by ID
	byAddr      map[string]*vnode
	ids         map[ring.ID]bool
	partitioned bool
	churnOn     bool
	phase       phase

	g            *Graph
	hostIndex    map[string]int32
	fetchCount   []uint16
	accepted     []bool
	reach        []bool
	reachN       int
	fetchedReach int
	fetches      int64
	dupFetches   int64
	dupTasks     int64
	// task batches an owner refused: not owned (no claim, no lease), a
	// replica fenced the claim off (shard.ErrStale), anything else.
	refusedNotOwned, refusedStale, refusedOther int64
	// dishonest counts the dishonest physical nodes created, and
	// droppedByDishonest the URLs they acknowledged and dropped.
	dishonest          int
	droppedByDishonest int64
	// squatWrites and squatTaken count the dishonest nodes' squat writes
	// and those taken; watchFetches the pages replicas fetched for their
	// owners (shard's "Replicas watch progress").
	squatWrites, squatTaken, watchFetches int64
	rejectedTasks                         int64
	// records sent as tasks by Managers that gave a range up without a
	// handoff (shard.App.Reroute)
	rerouted int64

	look     [numPhases]lookStats
	probes   lookStats // the crawl phase's probe lookups alone
	interval lookStats
	probeAcc float64

	joins, leaves, crashes, partitions        int64
	joinFailures, leaveErrors, progressErrors int64
	placeFailures                             int64 // machines that could not see the ring to place their positions
	retiredWork                               []int64
	maxAlone, maxIsolated                     int     // ChurnReport
	nodeSeconds                               float64 // physical node-seconds of the crawl phase

	burst  *burstState
	series []Sample
}

// Run simulates cfg and returns its report.
func Run(cfg Config) (*Report, error) {
	wallStart := time.Now()
	cfg, err := cfg.effective()
	if err != nil {
		return nil, err
	}
	s := newSim(cfg)
	rep := s.run()
	rep.WallSeconds = time.Since(wallStart).Seconds()
	rep.PeakRSSBytes = memstat.PeakResidentBytes()
	return rep, nil
}

func newSim(cfg Config) *Sim {
	s := &Sim{
		cfg:    cfg,
		rng:    rand.New(rand.NewPCG(cfg.Seed, 0x51a7)),
		ctx:    context.Background(),
		byAddr: map[string]*vnode{},
		ids:    map[ring.ID]bool{},
		g:      cfg.Graph,
	}
	s.w.stop = cfg.Stop
	s.rnet = ring.NewMemNet(int64(cfg.Seed))
	s.rnet.SetDropRate(cfg.Loss)
	s.snet = shard.NewMemNet(s.rnet)
	s.tnet = route.NewMemNet(s.rnet)
	s.rcfg = ringConfig(cfg.Ring)
	s.rcfg.Clock = clock{&s.w}
	s.scfg = cfg.Shard
	s.scfg.Sequential = true
	if s.g != nil {
		s.hostIndex = make(map[string]int32, s.g.Hosts())
		for i, n := range s.g.hostNames {
			s.hostIndex[n] = int32(i)
		}
		s.fetchCount = make([]uint16, s.g.Pages())
		s.accepted = make([]bool, s.g.Pages())
	}
	return s
}

// ringConfig fills the zero fields of c as ring.NewNode does
// (ring.Config.WithDefaults), so the simulator knows the intervals and
// timeout.
func ringConfig(c ring.Config) ring.Config {
	c = c.WithDefaults()
	c.OnChange = nil
	return c
}

// run drives the phases: build the ring and let it settle; crawl under
// churn for Duration; stop churn and let ring, shards and crawl settle;
// check lookups; account.
func (s *Sim) run() *Report {
	cfg := s.cfg
	rep := &Report{Config: reportConfig(cfg)}
	s.w.every(time.Second, time.Second, func() bool { return true }, s.housekeeping)
	s.w.every(cfg.Sample, cfg.Sample, func() bool { return true }, s.sample)
	built := false
	s.w.at(0, func() { s.grow(&built) })
	s.w.runUntil(time.Duration(math.MaxInt64), func() bool { return built })
	rep.BuildSeconds = s.w.now.Seconds()
	rep.BuildSettleSeconds, rep.BuildSettled, rep.BuildUnsettled = s.settle(false)
	if s.w.halted {
		return s.stopped(rep)
	}

	s.phase = phaseCrawl
	crawlStart := s.w.now
	if s.g != nil {
		s.startCrawl(rep)
	}
	if cfg.Churn > 0 {
		s.churnOn = true
		s.startChurn()
	}
	if cfg.Burst > 0 {
		s.w.at(crawlStart+cfg.BurstAt, func() { s.doBurst(cfg.Burst) })
	}
	if cfg.Partition > 0 {
		s.w.at(crawlStart+cfg.PartitionAt, func() { s.startPartition(cfg.Partition) })
		s.w.at(crawlStart+cfg.PartitionAt+cfg.PartitionFor, s.heal)
	}
	if cfg.Census > 0 {
		s.w.at(crawlStart+cfg.Duration, func() { s.runCensus(rep) })
	}
	before, beforeKinds := s.traffic, s.maintKinds
	s.w.runUntil(crawlStart+cfg.Duration, nil)
	for a := range numActs {
		d := traffic{s.traffic[a].msgs - before[a].msgs, s.traffic[a].bytes - before[a].bytes}
		rep.traffic(a, d, s.nodeSeconds)
	}
	for k := range numKinds {
		d := traffic{s.maintKinds[k].msgs - beforeKinds[k].msgs, s.maintKinds[k].bytes - beforeKinds[k].bytes}
		rep.maintKind(k, d, s.nodeSeconds)
	}
	rep.coverageAtDuration = s.coverage()
	if s.w.halted {
		return s.stopped(rep)
	}

	s.phase = phaseDrain
	s.churnOn = false
	if s.partitioned {
		s.heal()
	}
	rep.FinalSettleSeconds, rep.FinalSettled, rep.FinalUnsettled = s.settle(s.g != nil)
	if s.w.halted {
		return s.stopped(rep)
	}
	s.phase = phaseFinal
	s.finalProbes()
	s.finish(rep)
	return rep
}

// stopped ends a run that Config.Stop halted: what was simulated so far
// is reported, no settling phase (or the rest of it) and no final
// lookups.
func (s *Sim) stopped(rep *Report) *Report {
	rep.StoppedAtSeconds = s.w.now.Seconds()
	s.finish(rep)
	return rep
}

// grow adds one physical node and schedules the next, until Nodes are
// in: the ring grows by GrowthRate of its positions per second (at least
// one node a second, at most JoinRate positions a second), as a swarm
// grows, rather than all at once. A burst of joins (--growth, --join-rate)
// splits owners' ranges among more newcomers than a successor list holds
// before they can hand the pieces off, which the shard layer then hands
// over by witness or gives up and reroutes (see "Stuck releases" in
// docs/scale.md).
func (s *Sim) grow(built *bool) {
	s.joinMachine(s.newPhys())
	s.joins++
	if len(s.phys) >= s.cfg.Nodes {
		*built = true
		return
	}
	rate := min(max(s.cfg.GrowthRate*float64(len(s.members)), 1), s.cfg.JoinRate) / float64(s.cfg.VNodes)
	s.w.at(s.w.now+time.Duration(float64(time.Second)/rate), func() { s.grow(built) })
}

// settle runs until the ring has converged and every live position
// claims exactly its arc (and, with crawlIdle, no crawl work is left), or
// Settle has passed; it returns the time taken, whether it converged,
// and if not, the first problem left.
func (s *Sim) settle(crawlIdle bool) (float64, bool, string) {
	start := s.w.now
	for {
		err := s.converged()
		if err == nil && crawlIdle && !s.crawlIdle() {
			err = errors.New("crawl work left")
		}
		if err == nil {
			return (s.w.now - start).Seconds(), true, ""
		}
		if s.w.now-start >= s.cfg.Settle || s.w.halted {
			msg, _, _ := strings.Cut(err.Error(), "\n")
			return (s.w.now - start).Seconds(), false, msg
		}
		s.w.runUntil(s.w.now+5*time.Second, nil)
	}
}

// converged reports why the ring or the shard claims have not converged
// on the live membership, or nil: every position must claim exactly its
// arc, hold its lease and hand nothing off any more (the report counts
// the parts still releasing at the end as stuck releases).
func (s *Sim) converged() error {
	n := len(s.members)
	if n == 0 {
		return fmt.Errorf("no members")
	}
	for i, v := range s.members {
		pred, succ := s.members[(i+n-1)%n], s.members[(i+1)%n]
		if n == 1 {
			pred = nil
		}
		if got := v.rn.Predecessor(); (pred == nil && !got.IsZero()) || (pred != nil && got != pred.peer) {
			return fmt.Errorf("%s: predecessor %s, want %s", v.peer, got, pred.peer)
		}
		if got := v.rn.Successors()[0]; got != succ.peer {
			return fmt.Errorf("%s: successor %s, want %s", v.peer, got, succ.peer)
		}
	}
	rns := make([]*ring.Node, n)
	for i, v := range s.members {
		rns[i] = v.rn
	}
	// The first violation only: every settle step of a ring still
	// forming asked for all of them, described, and the report keeps
	// the first.
	if err := ring.FirstViolation(rns); err != nil {
		return err
	}
	for i, v := range s.members {
		st := v.m.Stats()
		arc := shard.Range{From: s.members[(i+n-1)%n].peer.ID, To: v.peer.ID}
		if n == 1 {
			arc.From = arc.To
		}
		if !sameSpans(claimSpans(st.Claims), rangeSpans(arc)) {
			return fmt.Errorf("%s claims %v, arc %v", v.peer, st.Claims, arc)
		}
		if !st.LeaseValid {
			return fmt.Errorf("%s has no lease", v.peer)
		}
		if len(st.Releasing) > 0 {
			return fmt.Errorf("%s still hands off %v", v.peer, st.Releasing)
		}
	}
	return nil
}

// crawlIdle reports whether no live position has pages queued, links in
// its outbox or fetched pages waiting on their links.
func (s *Sim) crawlIdle() bool {
	for _, v := range s.members {
		if len(v.app.queued) > 0 || len(v.outbox) > 0 || v.progress.Waiting() > 0 {
			return false
		}
	}
	// A pending record an honest position holds is work left too: its
	// owner's, or one a replica holds for an owner that does not crawl
	// it, and will fetch itself once the watch runs out.
	for _, v := range s.members {
		if v.phys.dishonest || s.cfg.NoDefences {
			continue
		}
		if v.st.AnyPending() {
			return false
		}
	}
	return true
}

// housekeeping runs every simulated second: node-seconds, probe lookups,
// repair tracking after a burst.
func (s *Sim) housekeeping() {
	if s.phase == phaseCrawl {
		s.nodeSeconds += float64(len(s.live))
		alone, isolated := 0, 0
		for _, v := range s.members {
			if v.rn.Alone() {
				alone++
			} else if v.rn.Isolated() {
				isolated++
			}
		}
		s.maxAlone, s.maxIsolated = max(s.maxAlone, alone), max(s.maxIsolated, isolated)
	}
	if len(s.members) > 0 && s.phase != phaseFinal {
		s.probeAcc += s.cfg.Probes * float64(len(s.live)) / 60
		for ; s.probeAcc >= 1; s.probeAcc-- {
			v := s.members[s.rng.IntN(len(s.members))]
			s.w.charge = 0
			s.act = actProbe
			s.lookup(v, ring.ID(s.rng.Uint64()))
		}
		s.w.charge = 0
	}
	if s.burst != nil {
		s.burst.check(s)
	}
}

// lookup runs one real lookup from v and checks it against the
// membership.
func (s *Sim) lookup(v *vnode, key ring.ID) (ring.Peer, bool) {
	owner, _, err := s.lookupErr(v, key)
	return owner, err == nil
}

// lookupErr is lookup with the lookup's hops and error.
func (s *Sim) lookupErr(v *vnode, key ring.ID) (ring.Peer, int, error) {
	before := s.w.charge
	owner, hops, err := v.rn.Lookup(s.ctx, key)
	lat := s.w.charge - before
	wrong := err == nil && owner != s.trueOwner(key).peer
	s.look[s.phase].add(hops, lat, err != nil, wrong)
	if s.phase == phaseCrawl && s.act == actProbe {
		s.probes.add(hops, lat, err != nil, wrong)
	}
	s.interval.add(hops, lat, err != nil, wrong)
	return owner, hops, err
}

// finalProbes checks FinalProbes lookups, from random positions for
// random keys, after the final stabilization.
func (s *Sim) finalProbes() {
	if len(s.members) == 0 {
		return
	}
	s.act = actProbe
	for range s.cfg.FinalProbes {
		s.w.charge = 0
		s.lookup(s.members[s.rng.IntN(len(s.members))], ring.ID(s.rng.Uint64()))
	}
	s.w.charge = 0
}

// coverage is the fraction of pages reachable from the seeds fetched at
// least once.
func (s *Sim) coverage() float64 {
	if s.reachN == 0 {
		return 0
	}
	return float64(s.fetchedReach) / float64(s.reachN)
}

// fetched counts a fetch of page p by v.
func (s *Sim) fetched(p int32, v *vnode) {
	s.fetches++
	v.phys.work++
	if s.fetchCount[p] > 0 {
		s.dupFetches++
	} else if s.reach[p] {
		s.fetchedReach++
	}
	if s.fetchCount[p] < math.MaxUint16 {
		s.fetchCount[p]++
	}
}

// startCrawl picks the seeds among pages with links and hands them to
// random positions' routers, as `swarmcrawl seed` hands them to a peer.
func (s *Sim) startCrawl(rep *Report) {
	g := s.g
	var seeds []int32
	for tries := 0; len(seeds) < s.cfg.Seeds && tries < 100*s.cfg.Seeds; tries++ {
		p := int32(s.rng.IntN(g.Pages()))
		if len(g.links(p)) > 0 {
			seeds = append(seeds, p)
		}
	}
	s.reach, s.reachN = g.reachable(seeds)
	rep.seeds = len(seeds)
	for _, p := range seeds {
		v := s.members[s.rng.IntN(len(s.members))]
		v.send(s.newTask(p, 0))
		s.scheduleRoute(v, 0)
	}
}

// sample appends one point of the time series and reports progress.
func (s *Sim) sample() {
	iv := s.interval
	s.interval = lookStats{}
	pt := Sample{
		T:        s.w.now.Seconds(),
		Phase:    phaseNames[s.phase],
		Nodes:    len(s.live),
		Lookups:  iv.n,
		MeanHops: iv.meanHops(),
		P99Hops:  iv.quantileHops(0.99),
		Failed:   iv.failed,
		Wrong:    iv.wrong,
		Coverage: s.coverage(),
		Fetches:  s.fetches,
	}
	s.series = append(s.series, pt)
	if s.cfg.Progress != nil {
		s.cfg.Progress(fmt.Sprintf("t=%v %s nodes=%d lookups=%d hops=%.2f p99=%d failed=%d wrong=%d fetched=%d coverage=%.2f%% events=%d",
			time.Duration(pt.T*float64(time.Second)).Round(time.Second), pt.Phase, pt.Nodes, pt.Lookups, pt.MeanHops, pt.P99Hops,
			pt.Failed, pt.Wrong, pt.Fetches, 100*pt.Coverage, s.w.events))
	}
}

var phaseNames = [numPhases]string{"build", "crawl", "drain", "final"}
