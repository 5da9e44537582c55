package shard

import (
	"context"
	"fmt"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// addPeer starts a node at p and joins it, as add does.
func (c *cluster) addPeer(p ring.Peer) *testNode {
	c.tb.Helper()
	n := &testNode{peer: p, st: NewMemStorage()}
	c.nodes = append(c.nodes, n)
	c.start(n)
	c.join(n)
	return n
}

// The positions of one machine (virtual nodes, ring.Peer.Machine) never
// replicate to each other while other machines are on the ring: each
// position's replicas are positions of K other machines, distinct (as
// many as its successor list reaches). So
// when a whole machine crashes, every record its positions accepted is
// still held by a live node, and every key is owned again.
func TestReplicasOnOtherMachines(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 29)
	const machines, positions = 3, 8
	var byMachine [machines][]*testNode
	for i := range positions {
		for m := range machines {
			addr := fmt.Sprintf("m%d", m)
			if i > 0 {
				addr += fmt.Sprintf("/%d", i)
			}
			byMachine[m] = append(byMachine[m], c.addPeer(ring.Peer{ID: ring.ID(c.rng.Uint64()), Addr: addr}))
			c.round()
		}
	}
	c.until(600, "initial settle", c.settled)
	for _, n := range c.live() {
		n.m.mu.Lock()
		replicas := n.m.replicas
		n.m.mu.Unlock()
		seen := map[string]bool{}
		for _, r := range replicas {
			if r.Machine() == n.peer.Machine() || seen[r.Machine()] {
				t.Errorf("%s replicates to %v: not %d other machines", n.peer.Addr, replicas, c.cfg.Replicas)
				break
			}
			seen[r.Machine()] = true
		}
		// As many as the successor list reaches, up to K: a list of 8
		// can miss a machine whose positions lie further on.
		others := map[string]bool{}
		for _, p := range n.rn.Successors() {
			if p.Machine() != n.peer.Machine() {
				others[p.Machine()] = true
			}
		}
		if want := min(len(others), c.cfg.Replicas); len(replicas) != want {
			t.Errorf("%s has %d replicas %v, want %d (successors %v)", n.peer.Addr, len(replicas), replicas, want, n.rn.Successors())
		}
	}
	var accepted []Record
	for _, n := range byMachine[0] {
		st := n.stats()
		accepted = append(accepted, c.acceptIn(ctx, n, st.Claims[0].Range, 10)...)
	}
	for range 3 {
		c.round()
	}
	for _, n := range byMachine[0] {
		c.crash(n)
	}
	c.until(600, "settled after the machine crashed", c.settled)
	for _, r := range accepted {
		held := false
		for _, n := range c.live() {
			if _, ok := n.st.Record(r.Key, r.Hash); ok {
				held = true
				break
			}
		}
		if !held {
			t.Errorf("record %s accepted by the crashed machine is held by no live node", r.URL)
		}
	}
}

// A claim may pass over at most K machines, however many positions each
// holds: a machine that crashes takes all its positions at once, and the
// next machine takes their arcs over together. Counting positions would
// refuse that takeover; counting machines still refuses a claim over
// more than K.
func TestPlausibleCountsMachines(t *testing.T) {
	c := newCluster(t, 31)
	c.build(1)
	m := c.nodes[0].m
	base := c.nodes[0].peer.ID + 1000 // well clear of the node itself
	from := ring.Peer{ID: base + 100, Addr: "b"}
	r := Range{From: base + 50, To: from.ID}
	for _, tc := range []struct {
		name  string
		addrs []string
		ok    bool
	}{
		{"three positions of one machine", []string{"a", "a/1", "a/2"}, true},
		{"two machines", []string{"a", "a/1", "c"}, true},
		{"three machines", []string{"a", "c", "d"}, false},
	} {
		k := knownPeers{peers: []ring.Peer{m.self, from}}
		for i, addr := range tc.addrs {
			k.peers = append(k.peers, ring.Peer{ID: base + 60 + ring.ID(10*i), Addr: addr})
		}
		err := m.plausible(k, from, r, c.clock.Now(), false, false)
		if (err == nil) != tc.ok {
			t.Errorf("%s: plausible = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

// A replica judges whether an owner still feeds it (writes to it as one
// of its K replicas) by the machines that write to it from closer, as
// owners choose replicas by machine: two positions of one machine closer
// than the owner leave room for it at K = 2; two machines do not.
func TestFeedsCountsMachines(t *testing.T) {
	c := newCluster(t, 37)
	c.build(1)
	m := c.nodes[0].m
	self := m.self.ID
	now := c.clock.Now()
	owner := ring.Peer{ID: self - 300, Addr: "o"}
	pred := ring.Peer{ID: self - 100, Addr: "p"}
	for _, tc := range []struct {
		name   string
		closer []string
		feeds  bool
	}{
		{"closer positions of one machine", []string{"p", "p/1"}, true},
		{"closer positions of two machines", []string{"p", "q"}, false},
	} {
		m.mu.Lock()
		m.heard = map[string]heardFrom{owner.Addr: {peer: owner, at: now, wrote: now}}
		for i, addr := range tc.closer {
			p := ring.Peer{ID: self - 100 - ring.ID(50*i), Addr: addr}
			if addr == pred.Addr {
				p = pred
			}
			m.heard[addr] = heardFrom{peer: p, at: now, wrote: now}
		}
		got := m.feedsLocked(owner, pred, now)
		m.mu.Unlock()
		if got != tc.feeds {
			t.Errorf("%s: feeds = %v, want %v", tc.name, got, tc.feeds)
		}
	}
}
