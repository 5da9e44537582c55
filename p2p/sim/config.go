package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// Config describes one simulation run. Zero fields take the defaults
// noted on each field (DefaultConfig).
type Config struct {
	// Seed drives every random choice of the run: the same seed and
	// configuration give the same report. Default 1.
	Seed uint64
	// Nodes is how many physical nodes the ring holds at a time. Default
	// 1000.
	Nodes int
	// VNodes is how many ring positions each physical node holds; each is
	// a ring.Node with its own shard.Manager. Default route.DefaultVNodes
	// (16), what a real node holds.
	VNodes int
	// Replicas is K, the shard layer's replica count. Default 2.
	Replicas int
	// Churn is the fraction of nodes replaced per simulated minute during
	// the crawl: departures (graceful leaves and crashes, session times
	// heavy-tailed) each followed by a join. 0 means none.
	Churn float64
	// CrashShare is the share of departures that are crashes rather than
	// graceful leaves. Default 0.5; negative means 0.
	CrashShare float64
	// SessionSigma is the σ of the lognormal session times; the median
	// follows from Churn (mean session = 1/Churn minutes). Default 1.5.
	SessionSigma float64
	// Burst is the fraction of nodes that crash at once at BurstAt. 0
	// means no burst.
	Burst float64
	// BurstAt is when the burst happens, from the start of the crawl.
	// Default a third of Duration.
	BurstAt time.Duration
	// Partition is the fraction of nodes cut off from the others at
	// PartitionAt for PartitionFor. 0 means no partition.
	Partition float64
	// PartitionAt is when the partition starts, from the start of the
	// crawl. Default half of Duration.
	PartitionAt time.Duration
	// PartitionFor is how long the partition lasts. Default 30s.
	PartitionFor time.Duration
	// Dishonest is the fraction of physical nodes (each chosen at random,
	// as it is created) that follow the ring and shard protocols but keep
	// what they own from the crawl: each acknowledges every URL routed to
	// it without storing it or writing it to its replicas, and drops it
	// (its crawler fetches nothing, it watches nothing for its
	// predecessors); it refuses its predecessors' replicate writes,
	// withholding their leases; and it squats its successor's range,
	// sending its successor and the next node writes that claim the
	// range at an epoch 30 minutes ahead, every heartbeat. 0 means none.
	Dishonest float64
	// NoDefences turns off issue 29's defences against dishonest owners
	// and replicas, to measure what they buy: senders believe every
	// acknowledgement (no receipts, route.Config.Receipts), replicas do
	// not watch their owners' progress (shard.Config.WatchTimeout), and
	// a lease is renewed by the first successor alone
	// (shard.Config.LeaseFromFirst).
	NoDefences bool
	// RandomPositions puts every position of a machine where its
	// identity alone puts it (one draw each), as before issue 28's
	// placement, to compare: by default a machine's positions after the
	// first are each chosen among route.PlaceChoices candidates through a
	// member (route.PlacePositions), as a peer's are.
	RandomPositions bool
	// Loss is the probability that a message (request or reply) is lost.
	// Default 0.
	Loss float64
	// Duration is the crawl phase, with churn, bursts and partitions.
	// Default 10m.
	Duration time.Duration
	// Settle bounds each phase that waits for the ring and the shard
	// claims to converge (after the ring is built, and after Duration).
	// Default 3m.
	Settle time.Duration
	// JoinRate is the most ring positions that join per simulated second
	// while the ring is built. Default 100.
	JoinRate float64
	// GrowthRate is how fast the ring grows while it is built, as a
	// fraction of its positions per simulated second (at least one node
	// a second). Default 0.05.
	GrowthRate float64
	// Probes is how many lookups of random keys from random nodes the
	// simulator makes per node and simulated minute, to measure routing
	// (the crawl's own lookups are counted too). Default 1.
	Probes float64
	// FinalProbes is how many lookups are checked after the final
	// stabilization. Default 10,000.
	FinalProbes int
	// Census is how many swarm census estimates (package census) to draw
	// at the end of the crawl phase, after one exact walk of the ring,
	// each compared with the truth (Report.Census); 0 means none.
	Census int
	// Graph is the link graph to crawl; nil means no crawl.
	Graph *Graph
	// Seeds is how many pages the crawl starts from (chosen at random
	// among pages with links). Default 10.
	Seeds int
	// Delay is the politeness gap between two fetches of one host. Default
	// 1s, a node's default.
	Delay time.Duration
	// FetchTime is the longest simulated fetch; each fetch takes a time
	// drawn uniformly from [FetchTime/10, FetchTime]. Default 500ms.
	FetchTime time.Duration
	// SampleKeys is how many uniformly drawn task keys measure keys per
	// node at the end. Default 100 per node.
	SampleKeys int
	// Sample is the interval of the time series (hops, coverage, nodes).
	// Default 10s.
	Sample time.Duration
	// Ring and Shard configure every node; their Clock and Sequential
	// fields are set by the simulator. Zero values are the packages'
	// defaults, as a peer runs them.
	Ring  ring.Config
	Shard shard.Config
	// Progress, if set, is called about once per simulated Sample with a
	// one-line summary of the run so far.
	Progress func(line string)
	// Stop, when closed, ends the run early: the event under way ends,
	// the phases left are skipped (the settling ones and the final
	// lookups included), and Run reports what was simulated until then
	// (Report.StoppedAtSeconds). A 10,000-machine run of 16 positions
	// takes hours to its end; stopped at the end of its crawl, it still
	// reports the crawl's figures.
	Stop <-chan struct{}
}

// DefaultConfig returns the defaults described on Config's fields.
func DefaultConfig() Config {
	return Config{
		Seed:         1,
		Nodes:        1000,
		VNodes:       route.DefaultVNodes,
		Replicas:     2,
		CrashShare:   0.5,
		SessionSigma: 1.5,
		PartitionFor: 30 * time.Second,
		Duration:     10 * time.Minute,
		Settle:       3 * time.Minute,
		JoinRate:     100,
		GrowthRate:   0.05,
		Probes:       1,
		FinalProbes:  10_000,
		Seeds:        10,
		Delay:        time.Second,
		FetchTime:    500 * time.Millisecond,
		Sample:       10 * time.Second,
	}
}

// effective fills zero fields from DefaultConfig and checks the rest.
func (c Config) effective() (Config, error) {
	d := DefaultConfig()
	if c.Seed == 0 {
		c.Seed = d.Seed
	}
	if c.Nodes <= 0 {
		c.Nodes = d.Nodes
	}
	if c.VNodes <= 0 {
		c.VNodes = d.VNodes
	}
	if c.Replicas <= 0 {
		c.Replicas = d.Replicas
	}
	if c.CrashShare == 0 {
		c.CrashShare = d.CrashShare
	} else if c.CrashShare < 0 {
		c.CrashShare = 0
	}
	if c.SessionSigma <= 0 {
		c.SessionSigma = d.SessionSigma
	}
	if c.Duration <= 0 {
		c.Duration = d.Duration
	}
	if c.BurstAt <= 0 {
		c.BurstAt = c.Duration / 3
	}
	if c.PartitionAt <= 0 {
		c.PartitionAt = c.Duration / 2
	}
	if c.PartitionFor <= 0 {
		c.PartitionFor = d.PartitionFor
	}
	if c.Settle <= 0 {
		c.Settle = d.Settle
	}
	if c.JoinRate <= 0 {
		c.JoinRate = d.JoinRate
	}
	if c.GrowthRate <= 0 {
		c.GrowthRate = d.GrowthRate
	}
	if c.Probes <= 0 {
		c.Probes = d.Probes
	}
	if c.FinalProbes <= 0 {
		c.FinalProbes = d.FinalProbes
	}
	if c.Seeds <= 0 {
		c.Seeds = d.Seeds
	}
	if c.Delay <= 0 {
		c.Delay = d.Delay
	}
	if c.FetchTime <= 0 {
		c.FetchTime = d.FetchTime
	}
	if c.SampleKeys <= 0 {
		c.SampleKeys = 100 * c.Nodes
	}
	if c.Sample <= 0 {
		c.Sample = d.Sample
	}
	var errs []error
	for _, f := range []struct {
		name string
		v    float64
	}{{"churn", c.Churn}, {"burst", c.Burst}, {"partition", c.Partition}, {"loss", c.Loss}, {"dishonest", c.Dishonest}} {
		if f.v < 0 || f.v >= 1 {
			errs = append(errs, fmt.Errorf("%s %v: want a fraction in [0, 1)", f.name, f.v))
		}
	}
	if c.CrashShare > 1 {
		errs = append(errs, fmt.Errorf("crash share %v: want a fraction in [0, 1]", c.CrashShare))
	}
	c.Shard.Replicas = c.Replicas
	// Positions before Effective: the default Lease depends on it, and
	// Effective fills it in once (a Lease set here stays set).
	c.Shard.Positions = c.VNodes
	if c.NoDefences {
		c.Shard.WatchTimeout, c.Shard.LeaseFromFirst = -1, true
	}
	sc, err := c.Shard.Effective()
	if err != nil {
		errs = append(errs, err)
	}
	c.Shard = sc
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("sim: config: %w", err)
	}
	return c, nil
}
