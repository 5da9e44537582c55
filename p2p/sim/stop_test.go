package sim

import (
	"strings"
	"testing"
	"time"
)

// TestStopReportsTheRunSoFar: a run stopped during its crawl (the user's
// interrupt to `swarmcrawl simulate`) reports the crawl until then, the
// pages fetched and the work per machine, with the time it stopped, and
// runs neither the settling phase nor the final lookups: a 10,000-machine
// run of 16 positions takes hours past its crawl, and lost everything it
// had measured when stopped before.
func TestStopReportsTheRunSoFar(t *testing.T) {
	cfg := small(5)
	cfg.Nodes = 40
	stop := make(chan struct{})
	cfg.Stop = stop
	closed := false
	cfg.Progress = func(line string) {
		if !closed && strings.Contains(line, " crawl ") && !strings.Contains(line, "coverage=0.00%") {
			close(stop)
			closed = true
		}
	}
	rep := run(t, cfg)
	if rep.StoppedAtSeconds == 0 || rep.StoppedAtSeconds >= rep.BuildSeconds+rep.BuildSettleSeconds+cfg.Duration.Seconds() {
		t.Fatalf("stopped at %.0f s, want during the crawl (built at %.0f s, settled %.0f s after, crawl %v)",
			rep.StoppedAtSeconds, rep.BuildSeconds, rep.BuildSettleSeconds, cfg.Duration)
	}
	if rep.Crawl == nil || rep.Crawl.Fetches == 0 || rep.Crawl.Coverage >= 1 {
		t.Fatalf("crawl report %+v, want the pages fetched until the stop", rep.Crawl)
	}
	if rep.Balance.WorkMaxMean == 0 {
		t.Error("no work balance reported")
	}
	if rep.FinalLookups.N != 0 || rep.FinalSettleSeconds != 0 {
		t.Errorf("final lookups %d, final settle %.0f s: the phases after the stop ran", rep.FinalLookups.N, rep.FinalSettleSeconds)
	}
}

// TestStopWhileSettlingReportsIt: a run stopped while it settles after
// its crawl (where a 10,000-machine run spends its last hour) says so and
// runs no final lookups: before, the lookups ran at once on the ring as
// the stop left it and the report read as a run that ended.
func TestStopWhileSettlingReportsIt(t *testing.T) {
	cfg := small(5)
	cfg.Nodes = 40
	cfg.Duration = 20 * time.Second // the crawl goes on into the settling phase
	stop := make(chan struct{})
	cfg.Stop = stop
	closed := false
	cfg.Progress = func(line string) {
		if !closed && strings.Contains(line, " drain ") {
			close(stop)
			closed = true
		}
	}
	rep := run(t, cfg)
	if !closed {
		t.Fatal("no progress line while settling: the run was not stopped there")
	}
	if end := rep.BuildSeconds + rep.BuildSettleSeconds + cfg.Duration.Seconds(); rep.StoppedAtSeconds < end {
		t.Fatalf("stopped at %.0f s, want while settling, after %.0f s", rep.StoppedAtSeconds, end)
	}
	if rep.FinalLookups.N != 0 {
		t.Errorf("%d final lookups ran after the stop", rep.FinalLookups.N)
	}
}
