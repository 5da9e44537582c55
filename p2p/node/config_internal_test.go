package node

import (
	"testing"
	"time"
)

// A node of many positions gets the longer default lease the shard
// package gives a machine of many positions, so that its positions may
// heartbeat further apart (shard.Config.Lease). It did not: the lease was
// defaulted before the positions were known, and 16 positions heartbeat
// every 2 s instead of every 2.8 s.
func TestLeaseDefaultFollowsVNodes(t *testing.T) {
	for _, tc := range []struct {
		vnodes int
		lease  time.Duration
	}{{1, 2500 * time.Millisecond}, {16, 3500 * time.Millisecond}} {
		c := DefaultConfig()
		c.VNodes, c.DataDir = tc.vnodes, t.TempDir()
		_, sc, err := c.effective()
		if err != nil {
			t.Fatal(err)
		}
		if sc.Lease != tc.lease || sc.Positions != tc.vnodes {
			t.Errorf("vnodes %d: lease %v positions %d, want lease %v positions %d", tc.vnodes, sc.Lease, sc.Positions, tc.lease, tc.vnodes)
		}
	}
}
