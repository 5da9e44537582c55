package sim

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// Report is the outcome of a run. Times are simulated unless named wall.
type Report struct {
	Config ReportConfig `json:"config"`

	BuildSeconds       float64 `json:"build_s"`
	BuildSettleSeconds float64 `json:"build_settle_s"`
	BuildSettled       bool    `json:"build_settled"`
	FinalSettleSeconds float64 `json:"final_settle_s"`
	FinalSettled       bool    `json:"final_settled"`
	// Unsettled says, when a settle phase ran out of time, what was still
	// wrong (the first problem found).
	BuildUnsettled string `json:"build_unsettled,omitempty"`
	FinalUnsettled string `json:"final_unsettled,omitempty"`

	// Lookups during the crawl phase (the crawl's own and the probes),
	// and those checked after the final stabilization.
	Lookups LookupReport `json:"lookups"`
	// ProbeLookups are the crawl phase's probes alone: random keys from
	// random positions. The crawl's own lookups include keys the asking
	// node owns itself, which ring.Node.Lookup resolves by walking round
	// to its predecessor.
	ProbeLookups LookupReport `json:"probe_lookups"`
	FinalLookups LookupReport `json:"final_lookups"`
	// HopBound is ½·log₂N + 1 for the number of live machines N (issue
	// 28's bound: with V positions a machine, N·V positions).
	HopBound float64 `json:"hop_bound"`

	// Per physical node and simulated second of the crawl phase.
	MaintMsgsPerNodeSec  float64 `json:"maint_msgs_per_node_s"`
	MaintBytesPerNodeSec float64 `json:"maint_bytes_per_node_s"`
	CrawlMsgsPerNodeSec  float64 `json:"crawl_msgs_per_node_s"`
	CrawlBytesPerNodeSec float64 `json:"crawl_bytes_per_node_s"`
	// Maint breaks the maintenance traffic down by message kind, per
	// physical node and simulated second of the crawl phase: neighbours
	// (stabilize), notify, ping (check-predecessor, suspect probes),
	// lookup (fix-fingers, position checks, joins), shard-lookup (the
	// lookups of shard Ticks: placing a sender, handoff targets,
	// witnesses), leave,
	// heartbeat (shard writes of claims alone), progress (shard writes
	// with records or host states), digest
	// (anti-entropy), handoff, pull. Kinds with no traffic are left out.
	Maint map[string]KindTraffic `json:"maint_by_kind,omitempty"`

	Balance Balance `json:"balance"`
	// StuckReleases counts the parts live positions still held as
	// releasing at the end although the ring had settled: handoffs that
	// never completed.
	StuckReleases int `json:"stuck_releases"`
	// WitnessedGivers counts the handoff givers the live positions could
	// not judge by their own view of the ring and took on a witness's word
	// (shard Stats.Witnessed); ReroutedParts the parts they gave up
	// without a handoff because the owner had taken them over (shard
	// Stats.Rerouted), and ReroutedRecords the pending records all
	// positions sent as tasks instead.
	WitnessedGivers int64 `json:"witnessed_givers"`
	ReroutedParts   int64 `json:"rerouted_parts"`
	ReroutedRecords int64 `json:"rerouted_records"`

	Crawl *CrawlReport `json:"crawl,omitempty"`
	// Census is the swarm census's figures (Config.Census).
	Census *CensusReport `json:"census,omitempty"`
	Churn  ChurnReport   `json:"churn"`
	Burst  *BurstReport  `json:"burst,omitempty"`

	// StoppedAtSeconds is the simulated time at which Config.Stop halted
	// the run (0: it ran to its end). The phases after it did not run:
	// the figures are those of the run until then.
	StoppedAtSeconds float64 `json:"stopped_at_s,omitempty"`

	Events       int64   `json:"events"`
	WallSeconds  float64 `json:"wall_s"`
	PeakRSSBytes uint64  `json:"peak_rss_bytes"`

	Series []Sample `json:"series"`

	seeds              int
	coverageAtDuration float64
}

// ReportConfig is the part of Config a report repeats.
type ReportConfig struct {
	Seed            uint64  `json:"seed"`
	Nodes           int     `json:"nodes"`
	VNodes          int     `json:"vnodes"`
	RandomPositions bool    `json:"random_positions,omitempty"`
	Replicas        int     `json:"replicas"`
	Churn           float64 `json:"churn_per_min"`
	MedianSessionS  float64 `json:"median_session_s,omitempty"`
	Burst           float64 `json:"burst"`
	Partition       float64 `json:"partition"`
	Loss            float64 `json:"loss"`
	DurationSeconds float64 `json:"duration_s"`
	Pages           int     `json:"pages,omitempty"`
	Hosts           int     `json:"hosts,omitempty"`
	Links           int     `json:"links,omitempty"`
	DelaySeconds    float64 `json:"delay_s"`
}

func reportConfig(c Config) ReportConfig {
	rc := ReportConfig{
		Seed: c.Seed, Nodes: c.Nodes, VNodes: c.VNodes, RandomPositions: c.RandomPositions, Replicas: c.Replicas,
		Churn: c.Churn, Burst: c.Burst, Partition: c.Partition, Loss: c.Loss,
		DurationSeconds: c.Duration.Seconds(), DelaySeconds: c.Delay.Seconds(),
	}
	if c.Churn > 0 {
		rc.MedianSessionS = (&Sim{cfg: c}).medianSession().Seconds()
	}
	if c.Graph != nil {
		rc.Pages, rc.Hosts, rc.Links = c.Graph.Pages(), c.Graph.Hosts(), c.Graph.Links()
	}
	return rc
}

// LookupReport sums lookups up. Wrong counts answers other than the
// live member at or after the key at the time of the answer.
type LookupReport struct {
	N           int64   `json:"n"`
	MeanHops    float64 `json:"mean_hops"`
	P99Hops     int     `json:"p99_hops"`
	Failed      int64   `json:"failed"`
	FailedShare float64 `json:"failed_share"`
	Wrong       int64   `json:"wrong"`
	MeanLatMs   float64 `json:"mean_latency_ms"`
}

func lookupReport(l *lookStats) LookupReport {
	r := LookupReport{N: l.n, MeanHops: l.meanHops(), P99Hops: l.quantileHops(0.99), Failed: l.failed, Wrong: l.wrong}
	if l.n > 0 {
		r.FailedShare = float64(l.failed) / float64(l.n)
		r.MeanLatMs = float64(l.latency.Milliseconds()) / float64(l.n)
	}
	return r
}

// Balance is load per physical node at the end: max and mean over the
// live nodes.
type Balance struct {
	// Keys: owners of SampleKeys uniformly drawn task keys (a large key
	// population, as a crawl of billions of URLs has).
	SampleKeys   int     `json:"sample_keys"`
	KeysMax      int     `json:"keys_max"`
	KeysMean     float64 `json:"keys_mean"`
	KeysMaxMean  float64 `json:"keys_max_over_mean"`
	KeysUnowned  int     `json:"keys_unowned"`
	ShareMaxMean float64 `json:"ring_share_max_over_mean"`
	// Hosts: the crawl graph's hosts (its task keys) per node.
	HostsMax     int     `json:"hosts_max,omitempty"`
	HostsMean    float64 `json:"hosts_mean,omitempty"`
	HostsMaxMean float64 `json:"hosts_max_over_mean,omitempty"`
	// Work: pages fetched per node over its life.
	WorkMax     int64   `json:"work_max,omitempty"`
	WorkMean    float64 `json:"work_mean,omitempty"`
	WorkMaxMean float64 `json:"work_max_over_mean,omitempty"`
}

// CrawlReport is the crawl's outcome.
type CrawlReport struct {
	Seeds              int     `json:"seeds"`
	Reachable          int     `json:"reachable"`
	Fetched            int     `json:"fetched_reachable"`
	Coverage           float64 `json:"coverage"`
	CoverageAtDuration float64 `json:"coverage_at_duration"`
	Fetches            int64   `json:"fetches"`
	DupFetches         int64   `json:"duplicate_fetches"`
	DupShare           float64 `json:"duplicate_share"`
	Accepted           int     `json:"accepted"`
	PendingHeld        int     `json:"pending_held"`
	Lost               int     `json:"lost"`
	LostExplained      int     `json:"lost_in_k_plus_1_runs"`
	DupTasks           int64   `json:"duplicate_tasks"`
	// Tasks the node the router found handed back as not owned (no
	// claim or no lease, or a replica fenced its claim off), the accepts
	// a replica fenced off (shard.ErrStale), the task batches that did
	// not reach their owner or that it failed to accept; and the tasks
	// still in outboxes at the end.
	RefusedNotOwned int64 `json:"refused_not_owned"`
	RefusedStale    int64 `json:"refused_stale"`
	RefusedOther    int64 `json:"refused_other"`
	Undelivered     int   `json:"undelivered_tasks"`
	// Dishonest is how many physical nodes were dishonest
	// (Config.Dishonest), and DroppedByDishonest how many URLs they
	// acknowledged and dropped (a URL may be dropped more than once).
	Dishonest          int   `json:"dishonest_nodes,omitempty"`
	DroppedByDishonest int64 `json:"dropped_by_dishonest,omitempty"`
	// SquatWrites counts the dishonest nodes' writes claiming their
	// successors' ranges, and SquatTaken those a node took without
	// refusing or rejecting them.
	SquatWrites int64 `json:"squat_writes,omitempty"`
	SquatTaken  int64 `json:"squat_taken,omitempty"`
	// Issue 29's defences at work (Config.NoDefences turns them off):
	// Unvouched counts acknowledgements without enough receipts and
	// HeldForOwner the tasks an owner's successor held instead (live
	// positions' routers); WatchFetches the pages replicas fetched for
	// owners that neither fetched nor explained them.
	Defences     bool  `json:"defences"`
	Unvouched    int64 `json:"unvouched_acks,omitempty"`
	HeldForOwner int64 `json:"held_for_owner,omitempty"`
	WatchFetches int64 `json:"watch_fetches,omitempty"`
	// Hot-host delegation (delegate.go): batches handed to helpers, those
	// refused, declined (not one page worth it), taken in part (trimmed),
	// lost (no reply by the owner's deadline) and cut short (the owner
	// lost the host), pages the helpers fetched, and the batches' and
	// replies' messages per machine.
	DelegBatches     int64   `json:"deleg_batches"`
	DelegRefused     int64   `json:"deleg_refused"`
	DelegBusy        int64   `json:"deleg_busy"`
	DelegTrimmed     int64   `json:"deleg_trimmed"`
	DelegLost        int64   `json:"deleg_lost"`
	DelegCut         int64   `json:"deleg_cut"`
	DelegPages       int64   `json:"deleg_pages"`
	DelegMsgsPerNode float64 `json:"deleg_msgs_per_node"`
	// DelegLeaseCut counts batches cut short because the owner's lease
	// would run out (route.HelperLease), DelegNoLease those refused
	// because the owner confirmed none; DelegLeaseMsgsPerNode is the
	// lease questions' and answers' messages per machine (part of
	// DelegMsgsPerNode).
	DelegLeaseCut         int64   `json:"deleg_lease_cut"`
	DelegNoLease          int64   `json:"deleg_no_lease"`
	DelegLeaseMsgsPerNode float64 `json:"deleg_lease_msgs_per_node"`
	// MinHostGapMs is the least time between the end of one fetch of a
	// host and the start of the next, by whichever machines (politeness:
	// at least the delay); UnderGap counts the pairs closer than the
	// delay, of HostGaps pairs.
	MinHostGapMs float64 `json:"min_host_gap_ms"`
	UnderGap     int64   `json:"under_gap"`
	HostGaps     int64   `json:"host_gaps"`
}

// ChurnReport counts membership events.
type ChurnReport struct {
	Joins       int64 `json:"joins"`
	Leaves      int64 `json:"leaves"`
	Crashes     int64 `json:"crashes"`
	Partitions  int64 `json:"partitions"`
	JoinRetries int64 `json:"join_retries"`
	// PlaceFailures counts machines whose positions could not all be
	// placed (route.PlacePositions): those went where their identity put
	// them.
	PlaceFailures int64 `json:"place_failures"`
	LeaveErrors   int64 `json:"leave_errors"`
	FinalMembers  int   `json:"final_positions"`
	// MaxAlone is the most joined positions that took themselves for the
	// whole ring (ring.Node.Alone) at any second of the crawl phase, and
	// MaxIsolated the most that knew themselves cut off
	// (ring.Node.Isolated).
	MaxAlone    int `json:"max_alone"`
	MaxIsolated int `json:"max_isolated"`
}

// BurstReport is the repair after a burst of crashes.
type BurstReport struct {
	AtSeconds float64 `json:"at_s"`
	Crashed   int     `json:"crashed"`
	// RunsOverK counts runs of more than K consecutive crashed positions;
	// DoomedArcs the arcs whose owner and K successors all crashed.
	RunsOverK  int `json:"runs_over_k"`
	LongestRun int `json:"longest_run"`
	DoomedArcs int `json:"doomed_arcs"`
	// Seconds until every crashed position's arc was owned by its new
	// owner, and until the ring's pointers around them were right; -1
	// if never.
	OwnersRepairedS float64 `json:"owners_repaired_s"`
	RingRepairedS   float64 `json:"ring_repaired_s"`
}

// Sample is one point of the time series.
type Sample struct {
	T        float64 `json:"t_s"`
	Phase    string  `json:"phase"`
	Nodes    int     `json:"nodes"`
	Lookups  int64   `json:"lookups"`
	MeanHops float64 `json:"mean_hops"`
	P99Hops  int     `json:"p99_hops"`
	Failed   int64   `json:"failed"`
	Wrong    int64   `json:"wrong"`
	Coverage float64 `json:"coverage"`
	Fetches  int64   `json:"fetches"`
}

// KindTraffic is the traffic of one kind of message, per physical node
// and simulated second.
type KindTraffic struct {
	MsgsPerNodeSec  float64 `json:"msgs_per_node_s"`
	BytesPerNodeSec float64 `json:"bytes_per_node_s"`
}

// maintKind records the crawl phase's maintenance traffic of one kind.
func (r *Report) maintKind(k rpcKind, t traffic, nodeSeconds float64) {
	if nodeSeconds == 0 || t.msgs == 0 {
		return
	}
	if r.Maint == nil {
		r.Maint = map[string]KindTraffic{}
	}
	r.Maint[kindNames[k]] = KindTraffic{float64(t.msgs) / nodeSeconds, float64(t.bytes) / nodeSeconds}
}

// traffic records the crawl phase's traffic of one activity.
func (r *Report) traffic(a activity, t traffic, nodeSeconds float64) {
	if nodeSeconds == 0 {
		return
	}
	msgs, bytes := float64(t.msgs)/nodeSeconds, float64(t.bytes)/nodeSeconds
	switch a {
	case actMaint:
		r.MaintMsgsPerNodeSec, r.MaintBytesPerNodeSec = msgs, bytes
	case actCrawl:
		r.CrawlMsgsPerNodeSec, r.CrawlBytesPerNodeSec = msgs, bytes
	}
}

// finish fills in the end-of-run figures.
func (s *Sim) finish(r *Report) {
	r.Lookups = lookupReport(&s.look[phaseCrawl])
	r.ProbeLookups = lookupReport(&s.probes)
	r.FinalLookups = lookupReport(&s.look[phaseFinal])
	r.HopBound = 0.5*math.Log2(float64(max(len(s.live), 1))) + 1
	r.Churn = ChurnReport{
		Joins: s.joins, Leaves: s.leaves, Crashes: s.crashes, Partitions: s.partitions,
		JoinRetries: s.joinFailures, PlaceFailures: s.placeFailures, LeaveErrors: s.leaveErrors, FinalMembers: len(s.members),
		MaxAlone: s.maxAlone, MaxIsolated: s.maxIsolated,
	}
	if b := s.burst; b != nil {
		br := &BurstReport{
			AtSeconds: b.at.Seconds(), Crashed: b.crashed, RunsOverK: b.runs, LongestRun: b.longestRun,
			DoomedArcs: len(b.doomed), OwnersRepairedS: -1, RingRepairedS: -1,
		}
		if b.ownersDone {
			br.OwnersRepairedS = b.ownersAfter.Seconds()
		}
		if b.ringDone {
			br.RingRepairedS = b.ringsAfter.Seconds()
		}
		r.Burst = br
	}
	s.balance(r)
	for _, v := range s.members {
		st := v.m.Stats()
		r.StuckReleases += len(st.Releasing)
		r.WitnessedGivers += st.Witnessed
		r.ReroutedParts += st.Rerouted
	}
	r.ReroutedRecords = s.rerouted
	if s.g != nil {
		s.crawlReport(r)
	}
	r.Events = s.w.events
	r.Series = s.series
}

// balance measures keys, ring share, hosts and work per live physical
// node.
func (s *Sim) balance(r *Report) {
	if len(s.members) == 0 {
		return
	}
	idx := map[*physNode]int{}
	for i, p := range s.live {
		idx[p] = i
	}
	n := len(s.live)
	keys := make([]float64, n)
	unowned := 0
	for range s.cfg.SampleKeys {
		k := ring.ID(s.rng.Uint64())
		o := s.trueOwner(k)
		if !o.own.Owns(uint64(k)) {
			unowned++
		}
		keys[idx[o.phys]]++
	}
	share := make([]float64, n)
	for i, v := range s.members {
		prev := s.members[(i+len(s.members)-1)%len(s.members)]
		arc := float64(uint64(v.peer.ID - prev.peer.ID))
		if len(s.members) == 1 {
			arc = math.Exp2(64)
		}
		share[idx[v.phys]] += arc
	}
	b := Balance{SampleKeys: s.cfg.SampleKeys, KeysUnowned: unowned}
	km, kmean := maxMean(keys)
	b.KeysMax, b.KeysMean, b.KeysMaxMean = int(km), kmean, km/kmean
	sm, smean := maxMean(share)
	b.ShareMaxMean = sm / smean
	if s.g != nil {
		hosts := make([]float64, n)
		for h := range s.g.Hosts() {
			hosts[idx[s.trueOwner(s.g.hostKey(int32(h))).phys]]++
		}
		hm, hmean := maxMean(hosts)
		b.HostsMax, b.HostsMean, b.HostsMaxMean = int(hm), hmean, hm/hmean
		work := make([]float64, n)
		for i, p := range s.live {
			work[i] = float64(p.work)
		}
		wm, wmean := maxMean(work)
		b.WorkMax, b.WorkMean = int64(wm), wmean
		if wmean > 0 {
			b.WorkMaxMean = wm / wmean
		}
	}
	r.Balance = b
}

func maxMean(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return slices.Max(xs), sum / float64(len(xs))
}

// crawlReport counts coverage, duplicates and lost URLs: an accepted URL
// never fetched is lost when no live position holds its shard record.
func (s *Sim) crawlReport(r *Report) {
	c := &CrawlReport{
		Seeds: r.seeds, Reachable: s.reachN, Fetched: s.fetchedReach, Coverage: s.coverage(),
		CoverageAtDuration: r.coverageAtDuration, Fetches: s.fetches, DupFetches: s.dupFetches, DupTasks: s.dupTasks,
		RefusedNotOwned: s.refusedNotOwned, RefusedStale: s.refusedStale, RefusedOther: s.refusedOther,
		Dishonest: s.dishonest, DroppedByDishonest: s.droppedByDishonest,
		SquatWrites: s.squatWrites, SquatTaken: s.squatTaken, Defences: !s.cfg.NoDefences,
		WatchFetches: s.watchFetches,
	}
	if d := s.deleg; d != nil {
		c.DelegBusy, c.DelegTrimmed = d.busy, d.trimmed
		c.DelegBatches, c.DelegRefused, c.DelegLost, c.DelegCut, c.DelegPages = d.batches, d.refused, d.lost, d.cut, d.pages
		c.DelegMsgsPerNode = float64(d.msgs) / float64(max(len(s.phys), 1))
		c.DelegLeaseCut, c.DelegNoLease = d.leaseCut, d.noLease
		c.DelegLeaseMsgsPerNode = float64(d.leaseMsgs) / float64(max(len(s.phys), 1))
		c.MinHostGapMs = d.minGap.Seconds() * 1000
		c.UnderGap, c.HostGaps = d.underGap, d.gaps
	}
	for _, v := range s.members {
		rs := v.router.Stats()
		c.Unvouched += rs.Unvouched
		c.HeldForOwner += rs.Fallbacks
	}
	for _, v := range s.members {
		c.Undelivered += len(v.outbox)
	}
	if s.fetches > 0 {
		c.DupShare = float64(s.dupFetches) / float64(s.fetches)
	}
	for p, ok := range s.accepted {
		if !ok {
			continue
		}
		c.Accepted++
		if s.fetchCount[p] > 0 {
			continue
		}
		key := s.g.hostKey(s.g.host[p])
		if s.holds(key, uint64(p)) {
			c.PendingHeld++
			continue
		}
		c.Lost++
		if s.burst != nil && s.burst.inDoomed(key) {
			c.LostExplained++
		}
	}
	r.Crawl = c
}

// holds reports whether a live position stores the record (key, hash):
// its owner and successors first, then everyone.
func (s *Sim) holds(key ring.ID, hash uint64) bool {
	if len(s.members) == 0 {
		return false
	}
	i := s.memberIndex(s.trueOwner(key))
	for j := range s.cfg.Replicas + 3 {
		if _, ok := s.members[(i+j)%len(s.members)].st.Record(uint64(key), hash); ok {
			return true
		}
	}
	for _, v := range s.members {
		if _, ok := v.st.Record(uint64(key), hash); ok {
			return true
		}
	}
	return false
}

// rangeSpans returns r as sorted linear intervals [lo, hi].
func rangeSpans(r shard.Range) [][2]uint64 {
	from, to := uint64(r.From), uint64(r.To)
	switch {
	case from == to:
		return [][2]uint64{{0, math.MaxUint64}}
	case from < to:
		return [][2]uint64{{from + 1, to}}
	case from == math.MaxUint64:
		return [][2]uint64{{0, to}}
	}
	return [][2]uint64{{0, to}, {from + 1, math.MaxUint64}}
}

// claimSpans returns the union of the claims' ranges as sorted, merged
// linear intervals.
func claimSpans(cs []shard.Claim) [][2]uint64 {
	var all [][2]uint64
	for _, c := range cs {
		all = append(all, rangeSpans(c.Range)...)
	}
	return mergeSpans(all)
}

func mergeSpans(in [][2]uint64) [][2]uint64 {
	slices.SortFunc(in, func(a, b [2]uint64) int { return cmpU64(a[0], b[0]) })
	var out [][2]uint64
	for _, sp := range in {
		if n := len(out); n > 0 && (out[n-1][1] == math.MaxUint64 || sp[0] <= out[n-1][1]+1) {
			out[n-1][1] = max(out[n-1][1], sp[1])
			continue
		}
		out = append(out, sp)
	}
	return out
}

func sameSpans(a, b [][2]uint64) bool { return slices.Equal(mergeSpans(a), mergeSpans(b)) }

// WriteText prints the report for people.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "simulation: %d nodes × %d vnodes, K=%d, churn %.2f%%/min", c.Nodes, c.VNodes, c.Replicas, 100*c.Churn)
	if c.MedianSessionS > 0 {
		fmt.Fprintf(&b, " (median session %.0fs)", c.MedianSessionS)
	}
	fmt.Fprintf(&b, ", burst %.0f%%, partition %.0f%%, loss %.2f%%, %v simulated, seed %d\n",
		100*c.Burst, 100*c.Partition, 100*c.Loss, seconds(c.DurationSeconds), c.Seed)
	if r.StoppedAtSeconds > 0 {
		fmt.Fprintf(&b, "STOPPED at %v of simulated time: the figures are those of the run until then; the phases after it (settling, final lookups) did not run\n", seconds(r.StoppedAtSeconds))
	}
	fmt.Fprintf(&b, "build: %v of joins, settled %v after (%v)\n", seconds(r.BuildSeconds), r.BuildSettled, seconds(r.BuildSettleSeconds))
	if r.BuildUnsettled != "" {
		fmt.Fprintf(&b, "  not settled after the build: %s\n", r.BuildUnsettled)
	}
	if r.FinalUnsettled != "" {
		fmt.Fprintf(&b, "  not settled at the end: %s\n", r.FinalUnsettled)
	}
	l := r.Lookups
	fmt.Fprintf(&b, "lookups (crawl phase): %d, mean hops %.2f (bound ½·log₂N+1 = %.2f), p99 %d, failed %d (%.3f%%), wrong owner %d, mean latency %.0f ms\n",
		l.N, l.MeanHops, r.HopBound, l.P99Hops, l.Failed, 100*l.FailedShare, l.Wrong, l.MeanLatMs)
	pl := r.ProbeLookups
	fmt.Fprintf(&b, "  of which probes (random keys from random nodes): %d, mean hops %.2f, p99 %d, failed %d, wrong owner %d\n",
		pl.N, pl.MeanHops, pl.P99Hops, pl.Failed, pl.Wrong)
	f := r.FinalLookups
	fmt.Fprintf(&b, "lookups after stabilization (settled %v after %v): %d, mean hops %.2f, p99 %d, failed %d, wrong owner %d\n",
		r.FinalSettled, seconds(r.FinalSettleSeconds), f.N, f.MeanHops, f.P99Hops, f.Failed, f.Wrong)
	fmt.Fprintf(&b, "stuck releases: %d parts still being handed off at the end; %d handoff givers witnessed, %d parts rerouted (%d pending records sent as tasks)\n",
		r.StuckReleases, r.WitnessedGivers, r.ReroutedParts, r.ReroutedRecords)
	fmt.Fprintf(&b, "maintenance per node: %.1f msgs/s, %.0f B/s (estimated sizes); crawl traffic per node: %.1f msgs/s, %.0f B/s\n",
		r.MaintMsgsPerNodeSec, r.MaintBytesPerNodeSec, r.CrawlMsgsPerNodeSec, r.CrawlBytesPerNodeSec)
	if len(r.Maint) > 0 {
		b.WriteString("  maintenance by kind (msgs/s, B/s):")
		for _, k := range kindNames {
			if t, ok := r.Maint[k]; ok {
				fmt.Fprintf(&b, " %s %.1f, %.0f;", k, t.MsgsPerNodeSec, t.BytesPerNodeSec)
			}
		}
		b.WriteString("\n")
	}
	bl := r.Balance
	fmt.Fprintf(&b, "keys per node (%d sampled keys): max %d, mean %.1f, max/mean %.2f (%d unowned); ring share max/mean %.2f\n",
		bl.SampleKeys, bl.KeysMax, bl.KeysMean, bl.KeysMaxMean, bl.KeysUnowned, bl.ShareMaxMean)
	if r.Crawl != nil {
		fmt.Fprintf(&b, "hosts per node: max %d, mean %.1f, max/mean %.2f; work (fetches) per node: max %d, mean %.1f, max/mean %.2f\n",
			bl.HostsMax, bl.HostsMean, bl.HostsMaxMean, bl.WorkMax, bl.WorkMean, bl.WorkMaxMean)
		cr := r.Crawl
		fmt.Fprintf(&b, "crawl: %d pages, %d hosts, %d links, %d seeds; coverage %.4f%% of %d reachable (%.4f%% at the end of the churn phase)\n",
			c.Pages, c.Hosts, c.Links, cr.Seeds, 100*cr.Coverage, cr.Reachable, 100*cr.CoverageAtDuration)
		fmt.Fprintf(&b, "fetches %d, duplicate fetches %d (%.3f%%); accepted %d, never fetched but held %d, lost %d (%d in arcs whose owner and K successors crashed)\n",
			cr.Fetches, cr.DupFetches, 100*cr.DupShare, cr.Accepted, cr.PendingHeld, cr.Lost, cr.LostExplained)
		if cr.Dishonest > 0 {
			fmt.Fprintf(&b, "dishonest: %d nodes acknowledged and dropped %d URLs, withheld their predecessors' leases and squatted their successors' ranges (%d of %d writes taken)\n",
				cr.Dishonest, cr.DroppedByDishonest, cr.SquatTaken, cr.SquatWrites)
		}
		if cr.Defences {
			fmt.Fprintf(&b, "defences: %d acknowledgements without receipts, %d tasks held by the owner's successor instead, %d pages fetched by watching replicas\n",
				cr.Unvouched, cr.HeldForOwner, cr.WatchFetches)
		} else {
			b.WriteString("defences: off (no receipts, no watching replicas, lease from the first successor)\n")
		}
		fmt.Fprintf(&b, "delegation: %d batches (%d refused, %d declined by a busier helper, %d taken in part, %d lost, %d cut short, %d of them by the owner's lease, %d refused without one), %d pages fetched by helpers, %.1f batch messages per machine (%.1f lease questions and answers); politeness: least gap between two fetches of a host %.0f ms, %d of %d gaps under the delay\n",
			cr.DelegBatches, cr.DelegRefused, cr.DelegBusy, cr.DelegTrimmed, cr.DelegLost, cr.DelegCut, cr.DelegLeaseCut, cr.DelegNoLease, cr.DelegPages, cr.DelegMsgsPerNode, cr.DelegLeaseMsgsPerNode, cr.MinHostGapMs, cr.UnderGap, cr.HostGaps)
		fmt.Fprintf(&b, "routing: %d tasks handed back as not owned, %d accepts fenced off as stale, %d batches failed; %d tasks still undelivered at the end\n",
			cr.RefusedNotOwned, cr.RefusedStale, cr.RefusedOther, cr.Undelivered)
	}
	if cs := r.Census; cs != nil {
		fmt.Fprintf(&b, "census: exact walk right %v%s; %d estimates (%d windows of %d positions, %.0f machines asked), %d failed:", cs.WalkExact, cs.WalkError, cs.Estimates, cs.Samples, cs.Run, cs.MeanAsked, cs.Failed)
		for _, k := range []string{"members", "fetched", "queued"} {
			c := cs.Counters[k]
			fmt.Fprintf(&b, " %s %.0f (bias %+.2f%%, %.0f%% interval held it %.1f%%)", k, c.Truth, 100*c.MeanBias, 100*cs.Confidence, 100*c.Covered)
		}
		b.WriteString("\n")
	}
	ch := r.Churn
	fmt.Fprintf(&b, "churn: %d joins, %d leaves, %d crashes, %d partitions, %d join retries, %d machines placed blind, %d incomplete leaves; %d positions at the end; at most %d positions alone (owning the whole ring) and %d isolated at once\n",
		ch.Joins, ch.Leaves, ch.Crashes, ch.Partitions, ch.JoinRetries, ch.PlaceFailures, ch.LeaveErrors, ch.FinalMembers, ch.MaxAlone, ch.MaxIsolated)
	if br := r.Burst; br != nil {
		fmt.Fprintf(&b, "burst at %v: %d nodes crashed; %d runs of more than K consecutive positions (longest %d), %d arcs lost every copy; owners repaired after %s, ring after %s\n",
			seconds(br.AtSeconds), br.Crashed, br.RunsOverK, br.LongestRun, br.DoomedArcs, repairTime(br.OwnersRepairedS), repairTime(br.RingRepairedS))
	}
	fmt.Fprintf(&b, "simulation: %d events, wall time %v, peak memory %.0f MiB\n",
		r.Events, seconds(r.WallSeconds).Round(1e8), float64(r.PeakRSSBytes)/(1<<20))
	_, err := io.WriteString(w, b.String())
	return err
}

func repairTime(s float64) string {
	if s < 0 {
		return "never"
	}
	return seconds(s).String()
}
