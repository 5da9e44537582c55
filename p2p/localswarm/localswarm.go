// Package localswarm runs a swarm of real swarmcrawl nodes inside one
// process, on loopback: the demo, the integration tests and the benchmarks
// all use it. Nodes are full libp2p peers talking over TCP on 127.0.0.1;
// only their number and placement are chosen here.
package localswarm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// Options configures a local swarm.
type Options struct {
	// Nodes is the number of peers. Default 5.
	Nodes int
	// Dir holds one data dir per node (Dir/node-00, ...). Required.
	Dir string
	// Crawl is the crawl configuration of every node (its KeyMode and
	// HotQueue included). Default: crawl's defaults.
	Crawl crawl.Config
	// Proxy routes every node's HTTP fetches (e.g. to a synthetic web).
	// Default: none, the nodes connect directly.
	Proxy func(*http.Request) (*url.URL, error)
	// Ring tunes ring maintenance. Default: ring.DefaultConfig() with
	// faster stabilization, which a swarm on loopback can afford.
	Ring *ring.Config
	// Shard tunes replication and failover. Default: the node's defaults
	// with a 2s failure timeout.
	Shard *shard.Config
	// RingWork is the ring work every node asks of members
	// (node.Config.RingWork). Default p2p.NoRingWork, not the node's
	// default: the swarm is the test's or the demo's own, on loopback,
	// and each node's identity is made anew.
	RingWork p2p.RingWork
	// Configure, if set, adjusts node i's configuration last, e.g. to
	// give each node its own User-Agent.
	Configure func(i int, cfg *node.Config)
	// Discovery runs the DHT on every node. Default false: nodes join
	// through node 0 directly.
	Discovery bool
	// Logger receives every node's logs. Default: discard.
	Logger *slog.Logger
	// VNodes is the ring positions of every node (node.Config.VNodes).
	// Default: the node's default.
	VNodes int
}

// Swarm is a running local swarm.
type Swarm struct {
	// Nodes are the peers, node 0 first: it created the ring and the others
	// joined through it.
	Nodes []*node.Node
}

// Start launches opts.Nodes peers: the first creates the ring and the
// others join through it, one at a time as real peers would.
func Start(ctx context.Context, opts Options) (*Swarm, error) {
	if opts.Dir == "" {
		return nil, errors.New("local swarm: Dir is required")
	}
	if opts.Nodes <= 0 {
		opts.Nodes = 5
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Proxy == nil {
		opts.Proxy = crawl.NoProxy
	}
	rc := ring.DefaultConfig()
	rc.StabilizeInterval = 100 * time.Millisecond
	rc.CheckPredecessorInterval = 200 * time.Millisecond
	rc.FixFingersInterval = 500 * time.Millisecond
	if opts.Ring != nil {
		rc = *opts.Ring
	}
	s := &Swarm{}
	for i := 0; i < opts.Nodes; i++ {
		cfg := node.DefaultConfig()
		cfg.DataDir = filepath.Join(opts.Dir, fmt.Sprintf("node-%02d", i))
		cfg.Host = p2p.Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, DisableNAT: true}
		cfg.RingWork = opts.RingWork
		if cfg.RingWork == 0 {
			cfg.RingWork = p2p.NoRingWork
		}
		cfg.DisableDiscovery = !opts.Discovery
		cfg.Crawl = opts.Crawl
		cfg.Crawl.Proxy = opts.Proxy
		cfg.Ring = rc
		cfg.Shard.FailureTimeout = 2 * time.Second
		if opts.Shard != nil {
			cfg.Shard = *opts.Shard
		}
		cfg.Logger = opts.Logger.With("i", i)
		if opts.VNodes > 0 {
			cfg.VNodes = opts.VNodes
		}
		if opts.Configure != nil {
			opts.Configure(i, &cfg)
		}
		if i > 0 {
			cfg.Bootstrap = s.Nodes[0].Addrs()
		}
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("local swarm: %w", err)
		}
		n, err := node.New(cfg)
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("local swarm node %d: %w", i, err)
		}
		if err := n.Start(ctx); err != nil {
			_ = n.Close()
			_ = s.Close()
			return nil, fmt.Errorf("local swarm node %d: %w", i, err)
		}
		s.Nodes = append(s.Nodes, n)
	}
	return s, nil
}

// Converged reports whether every ring position's predecessor and first
// successor are its true neighbours on the ring of all live nodes'
// positions, and every node claims its whole range.
func (s *Swarm) Converged() bool {
	var ids []ring.ID
	for _, n := range s.Nodes {
		for _, p := range n.Positions() {
			ids = append(ids, p.Self().ID)
		}
	}
	slices.Sort(ids)
	for _, n := range s.Nodes {
		for _, p := range n.Positions() {
			self := p.Self().ID
			i, _ := slices.BinarySearch(ids, self)
			wantSucc := ids[(i+1)%len(ids)]
			wantPred := ids[(i+len(ids)-1)%len(ids)]
			succ := p.Successors()
			if len(succ) == 0 || succ[0].ID != wantSucc {
				return false
			}
			if len(ids) > 1 && p.Predecessor().ID != wantPred {
				return false
			}
		}
		if !n.Settled() {
			return false
		}
	}
	return true
}

// WaitConverged polls until the ring has converged or ctx ends.
func (s *Swarm) WaitConverged(ctx context.Context) error {
	for !s.Converged() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("ring of %d nodes did not converge: %w", len(s.Nodes), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// Totals sums the nodes' counters.
type Totals struct {
	Fetched, Queued, InFlight, Errors, RobotsDenied, Seen int64
	Outbox                                                int
	// ErrorsByKind splits Errors by kind (see crawl.Stats.ErrorsByKind).
	ErrorsByKind map[string]int64
}

// Totals sums every node's counters.
func (s *Swarm) Totals() Totals {
	t := Totals{ErrorsByKind: map[string]int64{}}
	for _, n := range s.Nodes {
		st := n.Status()
		for k, v := range st.Crawl.ErrorsByKind {
			t.ErrorsByKind[k] += v
		}
		t.Fetched += st.Crawl.Fetched
		t.Queued += st.Crawl.Queued
		t.InFlight += st.Crawl.InFlight
		t.Errors += st.Crawl.Errors
		t.RobotsDenied += st.Crawl.RobotsDenied
		t.Seen += st.Seen
		t.Outbox += st.Outbox
	}
	return t
}

// Idle reports whether no node has queued, in-flight or undelivered work.
func (s *Swarm) Idle() bool {
	for _, n := range s.Nodes {
		if !n.Idle() {
			return false
		}
	}
	return true
}

// Halt stops every node at once without a departure (node.Node.Halt):
// the whole swarm stops, so there is nobody to hand ranges to.
func (s *Swarm) Halt() error {
	errs := make([]error, len(s.Nodes))
	var wg sync.WaitGroup
	for i, n := range s.Nodes {
		wg.Go(func() {
			if err := n.Halt(); err != nil {
				errs[i] = fmt.Errorf("node %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close stops every node, last first; each leaves the ring gracefully.
func (s *Swarm) Close() error {
	var errs []error
	for i := len(s.Nodes) - 1; i >= 0; i-- {
		if err := s.Nodes[i].Close(); err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}
