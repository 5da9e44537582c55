package sim

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

// TestSimulationStartsNoGoroutine: the simulator runs every node of a
// swarm, the ring, shard, routing and delegation code users run, in one
// goroutine on a virtual clock (Config.Shard.Sequential and the
// simulator's transports), which is what makes a seed reproducible. So
// `make test` runs this package without the race detector, which would
// find nothing here and made it take five times as long; this test fails
// if a simulation ever starts a goroutine, that is, if the package needs
// the race detector again. The run has every feature the other tests of
// the package use: churn, a burst, a partition, message loss, positions
// sharing a machine, hot hosts delegated, dishonest members and a census.
func TestSimulationStartsNoGoroutine(t *testing.T) {
	cfg := small(9)
	cfg.Nodes = 40
	cfg.VNodes = 4
	cfg.Churn, cfg.Burst, cfg.Partition, cfg.Loss = 0.05, 0.05, 0.2, 0.001
	cfg.Dishonest = 0.1
	cfg.Census = 20
	cfg.Delay = 300 * time.Millisecond
	cfg.Graph = GenerateGraph(3000, 100, 9)
	// The garbage collector starts its workers with its first cycle.
	runtime.GC()
	before := goroutinesCreated(t)
	rep := run(t, cfg)
	created := goroutinesCreated(t) - before
	if rep.Crawl.DelegBatches == 0 || rep.Crawl.Dishonest == 0 {
		t.Fatalf("the run left features out: %d batches delegated, %d dishonest nodes", rep.Crawl.DelegBatches, rep.Crawl.Dishonest)
	}
	if created != 0 {
		t.Errorf("a simulation started %d goroutines: run p2p/sim with the race detector again (Makefile RACE_PKGS) or make them sequential", created)
	}
}

// goroutinesCreated is how many goroutines the process has started.
func goroutinesCreated(t *testing.T) uint64 {
	t.Helper()
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Fatalf("runtime/metrics has no %s", s[0].Name)
	}
	return s[0].Value.Uint64()
}
