package node

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/store"
	"github.com/swarmcrawl/swarmcrawl/store/warc"
)

// Config configures a swarm node. A zero field takes its default (see
// DefaultConfig, and each part's own Config for the nested ones); DataDir
// is required.
type Config struct {
	// DataDir holds the identity key, the store, the WARC files and the
	// addrs/api files. Required.
	DataDir string
	// Host configures libp2p: listen addresses, NAT, relays.
	Host p2p.Config
	// Bootstrap are full multiaddrs of swarm members to join through. Empty
	// starts a new swarm.
	Bootstrap []string
	// APIAddr is where the HTTP API listens. Default "127.0.0.1:0".
	APIAddr string
	// SeedFrom lists the peers that may submit seeds besides this machine's
	// own clients (connected over loopback) and the members of
	// Host.AllowPeers; SeedFromAnyone lets every peer that can connect do
	// it. By default only the operator seeds: a stranger who knows a
	// node's address cannot aim the swarm at a host. The same peers (and
	// the node itself, and peers on its machine) are the seeders whose
	// signed seed marks the node honours, on routed seeds and on records
	// peers hand over (see seedPolicy).
	SeedFrom       []peer.ID
	SeedFromAnyone bool
	// RingWork is the proof of work the swarm asks of its members'
	// identities (p2p.RingWork): the node creates its identity with it,
	// refuses to start with a stored identity that lacks it, names no
	// peer without it in ring messages, and serves the members'
	// protocols (tasks, replication, handoff, digests, pulls, fetch
	// batches) only to peers whose identity carries it. Every member of
	// a swarm uses the same value. Zero means p2p.DefaultRingWork;
	// p2p.NoRingWork asks none.
	RingWork p2p.RingWork
	// DisableDiscovery turns off the Kademlia DHT that finds swarm members
	// beyond the bootstrap list (on by default).
	DisableDiscovery bool
	// Crawl configures the fetcher and politeness. Its KeyMode is the
	// node's too (the owner and the router key tasks as the crawler
	// does), and its HotQueue says when the owner of a host hands the
	// host's fetches, in batches, to its successor replicas (host keys
	// only; crawl.None never). The node sets its Owns, OnFinished and
	// Delegate.
	Crawl crawl.Config
	// Store configures the durable state. Its MinFreeBytes is also the
	// free space on the store's disk below which the node accepts no new
	// URLs (see Status.Disk); its FreeSpace replaces the reading of it.
	Store store.Options
	// WARC configures the archive of fetched pages in DataDir/warc.
	WARC warc.Options
	// Ring configures Chord maintenance. Its RPCTimeout is at most half
	// the shard failure timeout (see effective).
	Ring ring.Config
	// Shard configures replication, failure detection and handoff.
	// Default: shard's defaults, ticking every 50ms.
	Shard shard.Config
	// JoinTimeout bounds joining through the bootstrap peers. Default 30s.
	JoinTimeout time.Duration
	// ReservationTimeout bounds how long a node behind NAT
	// (Host.Reachability private) waits at start for a reservation on one
	// of Host.Relays before it gives up with ErrUnreachable. Default 30s.
	ReservationTimeout time.Duration
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
	// TaskQuota bounds the tasks one peer may send the node (default
	// 10,000 a second, 20,000 at once), SeedQuota the seed URLs one
	// client may submit (default 1,000 a second, 20,000 at once). A
	// request beyond is refused whole and its sender told when to retry.
	TaskQuota, SeedQuota Quota
	// OutboxMemory bounds the undelivered tasks the outbox holds in
	// memory; the others wait in the store until those are delivered.
	// Default 100,000.
	OutboxMemory int
	// VNodes is how many ring positions (virtual nodes) the node holds,
	// 1 to MaxVNodes: position 0 where its peer ID puts it, each other
	// one where the peer ID and its index put it (p2p.PositionID), the
	// index chosen among 4 when the node first starts, by the arcs of
	// the ring (placement.go), and kept in the store. The node owns the
	// union of their arcs, so more positions spread a swarm's keys more
	// evenly over its machines; the positions share the machine's ring
	// and shard maintenance, so V = 16 costs about 1.5 to 1.7 times the
	// maintenance messages of one position, not 16 times
	// (docs/operations.md, "Virtual nodes"). Every position shares the
	// node's store, crawler and politeness state. Default
	// route.DefaultVNodes (16).
	VNodes int
	// CaptureGrace is how long a peer holding captures of this node's
	// done marks (the WARC records of pages it fetched) must be gone
	// before this node fetches again the URLs it owns whose every
	// capture that peer held (see lostcaptures.go and "Where a capture
	// lives" in docs/architecture.md). Default DefaultCaptureGrace (10
	// minutes); negative: never.
	CaptureGrace time.Duration
	// Census bounds the swarm census this node runs for `status --swarm`
	// and the swarm page: an exact walk of up to MaxMembers machines,
	// else an estimate (package census; zero fields take its defaults).
	Census CensusConfig
}

// DefaultConfig returns a node configuration with every default set;
// DataDir is left for the caller.
func DefaultConfig() Config {
	sc := shard.DefaultConfig()
	// A node ticks faster than the shard package's default: a tick is
	// cheap, and it bounds how soon a new URL's range is claimed.
	sc.TickInterval = 50 * time.Millisecond
	return Config{
		Host:               p2p.DefaultConfig(),
		APIAddr:            "127.0.0.1:0",
		Crawl:              crawl.DefaultConfig(),
		Store:              store.DefaultOptions(),
		WARC:               warc.DefaultOptions(),
		Ring:               ring.DefaultConfig(),
		Shard:              sc,
		JoinTimeout:        30 * time.Second,
		ReservationTimeout: 30 * time.Second,
		TaskQuota:          Quota{Rate: 10_000, Burst: 20_000},
		SeedQuota:          Quota{Rate: 1_000, Burst: 20_000},
		OutboxMemory:       100_000,
		VNodes:             route.DefaultVNodes,
		CaptureGrace:       DefaultCaptureGrace,
	}
}

// effective fills the zero fields of c from DefaultConfig and checks it;
// it also returns the shard configuration with the shard package's own
// defaults filled in.
func (c Config) effective() (Config, shard.Config, error) {
	d := DefaultConfig()
	if c.DataDir == "" {
		return c, shard.Config{}, errors.New("data dir is required")
	}
	if _, err := p2p.ParseAddrInfos(c.Bootstrap); err != nil {
		return c, shard.Config{}, fmt.Errorf("bootstrap: %w", err)
	}
	if c.APIAddr == "" {
		c.APIAddr = d.APIAddr
	}
	if c.Shard.TickInterval == 0 {
		c.Shard.TickInterval = d.Shard.TickInterval
	}
	if c.JoinTimeout <= 0 {
		c.JoinTimeout = d.JoinTimeout
	}
	if c.ReservationTimeout <= 0 {
		c.ReservationTimeout = d.ReservationTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	c.TaskQuota = c.TaskQuota.orDefault(d.TaskQuota)
	c.SeedQuota = c.SeedQuota.orDefault(d.SeedQuota)
	if err := c.RingWork.Validate(); err != nil {
		return c, shard.Config{}, err
	}
	if c.OutboxMemory <= 0 {
		c.OutboxMemory = d.OutboxMemory
	}
	if c.VNodes == 0 {
		c.VNodes = d.VNodes
	}
	if c.VNodes < 1 || c.VNodes > MaxVNodes {
		return c, shard.Config{}, fmt.Errorf("vnodes %d: want 1 to %d", c.VNodes, MaxVNodes)
	}
	if c.CaptureGrace == 0 {
		c.CaptureGrace = d.CaptureGrace
	}
	// Positions before Effective: the default Lease depends on it, and
	// Effective fills it in once.
	c.Shard.Positions = c.VNodes
	sc, err := c.Shard.Effective()
	if err != nil {
		return c, sc, err
	}
	// The ring must notice a silent neighbour well within the failure
	// timeout: a paused process keeps its connections open, so every ring
	// RPC to it runs into this timeout before the ring moves on.
	if limit := sc.FailureTimeout / 2; c.Ring.RPCTimeout == 0 || c.Ring.RPCTimeout > limit {
		c.Ring.RPCTimeout = min(d.Ring.RPCTimeout, limit)
	}
	return c, sc, nil
}
