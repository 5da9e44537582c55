package p2p_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/swarmcrawl/swarmcrawl/p2p"
)

// rcmgrState is the resource manager's metrics in reg as text: every
// series and value. Their collectors are the package's, shared by every
// host of the process, so a test compares states, not counts.
func rcmgrState(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "libp2p_rcmgr_") {
			b.WriteString(mf.String())
		}
	}
	return b.String()
}

// TestResourceMetricsOnlyWhenAsked: libp2p's resource-manager metrics,
// whose reporter costs 5 to 11% of a node's CPU with 16 ring positions,
// are fed only with ResourceMetrics (--resource-metrics): without it a
// connection between two hosts changes none of them, with it it does.
func TestResourceMetricsOnlyWhenAsked(t *testing.T) {
	for _, asked := range []bool{false, true} {
		reg := prometheus.NewRegistry()
		a := newTestHost(t, p2p.Config{Metrics: reg, ResourceMetrics: asked})
		b := newTestHost(t, p2p.Config{})
		before := rcmgrState(t, reg)
		if err := connect(a, b); err != nil {
			t.Fatal(err)
		}
		changed := rcmgrState(t, reg) != before
		if asked && !changed {
			t.Error("with ResourceMetrics a connection left the resource manager's metrics as they were")
		}
		if !asked && changed {
			t.Error("without ResourceMetrics a connection changed the resource manager's metrics")
		}
	}
}
