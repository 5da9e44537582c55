package node

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// Placing the positions. Position 0 is where the peer ID puts it; each
// further position i is one of route.PlaceChoices candidates, the
// positions of index i + j·V (route.CandidateIndex), chosen once, when
// the node first starts on its data dir, by the arcs of the ring it is
// about to join (route.PlacePositions): the candidate that splits the
// longest arc nearest its middle. The indexes are kept in the store
// (placementMeta) and reused at every restart with the same --vnodes, so
// a node keeps its positions, and with them its ranges and replicas.

// placementMeta is the store meta entry that keeps the positions' indexes,
// in order, as decimal numbers separated by commas.
const placementMeta = "ring/positions"

// probeParallel bounds the lookups placing makes at once.
const probeParallel = 16

// placement returns the indexes of the node's positions, position 0
// first: the ones stored if they are V of them, else newly placed
// through the bootstrap peers (the first that lets it see the ring) and
// stored. A node with no bootstrap peer, or that cannot see the ring
// through any, places them against one another only, which spreads them
// evenly, and says so in the log.
func (n *Node) placement(ctx context.Context, bootstrap []peer.AddrInfo) ([]int, error) {
	v := n.cfg.VNodes
	if v == 1 {
		return []int{0}, nil
	}
	if raw, err := n.db.Meta(placementMeta); err == nil {
		idx, err := parsePlacement(string(raw))
		if err != nil {
			return nil, fmt.Errorf("stored positions: %w", err)
		}
		if len(idx) == v {
			return idx, nil
		}
		n.log.Info("placing positions again: --vnodes changed", "stored", len(idx), "vnodes", v)
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("stored positions: %w", err)
	}
	self := n.host.ID()
	prober := ring.NewNode(p2p.RingPeer(self), n.ringTr, n.cfg.Ring)
	candidate := func(i int) ring.Peer { return p2p.RingPeerAt(self, i) }
	var peers []ring.Peer
	var errs []error
	placed := false
	for _, b := range bootstrap {
		if b.ID == self {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, n.cfg.JoinTimeout)
		err := n.host.Connect(cctx, b)
		if err == nil {
			peers, err = route.PlacePositions(cctx, prober.Self().ID, v, candidate, arcProbe(prober, p2p.RingPeer(b.ID)))
		}
		cancel()
		if err == nil {
			placed = true
			break
		}
		errs = append(errs, fmt.Errorf("through %s: %w", p2p.ShortID(b.ID), err))
	}
	if !placed {
		// Alone, or blind: the positions split the ring among themselves.
		var err error
		if peers, err = route.PlacePositions(ctx, prober.Self().ID, v, candidate, arcProbe(prober, ring.Peer{})); err != nil {
			return nil, fmt.Errorf("place positions: %w", err)
		}
		if len(errs) > 0 {
			n.log.Warn("positions placed without seeing the ring", "err", errors.Join(errs...))
		}
	}
	idx := []int{0}
	for _, p := range peers {
		_, i, err := p2p.PositionOf(p)
		if err != nil {
			return nil, fmt.Errorf("placed position %s: %w", p, err)
		}
		idx = append(idx, i)
	}
	if err := n.db.PutMeta(placementMeta, []byte(formatPlacement(idx))); err != nil {
		return nil, fmt.Errorf("store positions: %w", err)
	}
	n.log.Info("positions placed", "indexes", formatPlacement(idx), "seen_ring", placed)
	return idx, nil
}

// arcProbe is route.Probe for the node: prober, not a member, looks up
// through via (zero: it sees only itself) the arcs that hold the keys,
// probeParallel at a time.
func arcProbe(prober *ring.Node, via ring.Peer) route.Probe {
	return func(ctx context.Context, keys []ring.ID) ([]ring.Arc, []error) {
		arcs, errs := make([]ring.Arc, len(keys)), make([]error, len(keys))
		sem := make(chan struct{}, probeParallel)
		var wg sync.WaitGroup
		for i, k := range keys {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				arcs[i], errs[i] = prober.ArcAround(ctx, via, k)
			})
		}
		wg.Wait()
		return arcs, errs
	}
}

// formatPlacement writes position indexes as placementMeta keeps them.
func formatPlacement(idx []int) string {
	s := make([]string, len(idx))
	for i, x := range idx {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// parsePlacement reads placementMeta: distinct indexes below
// p2p.MaxPositions, position 0's first.
func parsePlacement(s string) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for f := range strings.SplitSeq(s, ",") {
		i, err := strconv.Atoi(f)
		if err != nil || i < 0 || i >= p2p.MaxPositions || seen[i] {
			return nil, fmt.Errorf("bad position index %q in %q", f, s)
		}
		seen[i] = true
		out = append(out, i)
	}
	if len(out) == 0 || out[0] != 0 {
		return nil, fmt.Errorf("positions %q do not start with 0", s)
	}
	return out, nil
}
