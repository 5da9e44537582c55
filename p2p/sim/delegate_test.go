package sim

import (
	"testing"
	"time"
)

// hot is a small run whose web has hosts of up to 100 pages: a few
// machines own most of the work unless it is spread.
func hot(seed uint64) Config {
	cfg := small(seed)
	cfg.Nodes = 40
	cfg.VNodes = 4
	cfg.Churn = 0.01
	cfg.Delay = 300 * time.Millisecond
	cfg.Graph = GenerateGraph(3000, 100, seed)
	return cfg
}

// TestDelegationSpreadsWork: the simulator drives the routing layer's
// delegation (route.Delegator, route.HelperAdmission with helper slots):
// owners of big hosts hand batches to less loaded machines, which brings
// the busiest machine's work closer to the mean than fetching every page
// at its owner does, without losing coverage and without two fetches of
// one host closer than the delay, whichever machines made them.
func TestDelegationSpreadsWork(t *testing.T) {
	on := run(t, hot(5))
	noDelegation = true
	defer func() { noDelegation = false }()
	off := run(t, hot(5))
	c := on.Crawl
	if c.DelegBatches == 0 || c.DelegPages == 0 {
		t.Fatalf("no batch delegated: %+v", c)
	}
	if c.DelegRefused*20 > c.DelegBatches {
		// Under churn a helper's view of a host's holder may lag the
		// owner's for a few seconds; honest owners are seldom refused.
		t.Errorf("%d of %d batches refused: honest owners send them to their hosts' slot holders", c.DelegRefused, c.DelegBatches)
	}
	if c.Coverage < 0.999 || c.DupShare > 0.01 {
		t.Errorf("coverage %.4f, duplicates %.4f with delegation", c.Coverage, c.DupShare)
	}
	if c.UnderGap != 0 || c.MinHostGapMs < float64(hot(5).Delay.Milliseconds()) {
		t.Errorf("%d of %d gaps between two fetches of a host under the delay, least %.0f ms", c.UnderGap, c.HostGaps, c.MinHostGapMs)
	}
	w, w0 := on.Balance.WorkMaxMean, off.Balance.WorkMaxMean
	if w > 0.5*w0 {
		t.Errorf("work max/mean %.2f with delegation, %.2f without: want at most half", w, w0)
	}
}
