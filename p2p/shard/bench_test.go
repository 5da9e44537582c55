package shard

import (
	"testing"
)

// BenchmarkHandleReplicate measures a replica serving a heartbeat from its
// predecessor in a settled 32-node ring: the claims it already holds, no
// records. Every write and heartbeat a node receives takes this path.
func BenchmarkHandleReplicate(b *testing.B) {
	c := newCluster(b, 41)
	c.build(32)
	owner := c.live()[0]
	var replica *testNode
	for _, n := range c.live() {
		if n.rn.Predecessor() == owner.peer {
			replica = n
		}
	}
	if replica == nil {
		b.Fatal("no node has the owner as predecessor")
	}
	req := &WriteRequest{Claims: owner.stats().Claims}
	if len(req.Claims) == 0 {
		b.Fatal("owner claims nothing")
	}
	for b.Loop() {
		if r := replica.m.HandleReplicate(c.ctx, owner.peer, req); len(r.Rejected) > 0 || r.Refused != "" {
			b.Fatalf("heartbeat refused: %+v", r)
		}
	}
}
