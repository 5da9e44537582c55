package shard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// App is the crawler side of the shard layer: its queue is a cache of the
// pending records of the ranges this node actively claims.
type App interface {
	// Activate starts work on r: drop any local queue for r, then enqueue
	// every pending (not Done) record of r in Storage that was not fetched
	// locally.
	Activate(ctx context.Context, r Range) error
	// Deactivate stops work on r: no new fetches, wait until nothing of r
	// is in flight, drop its queue entries, and save the host states of
	// r's hosts (Manager.Progress or Storage.PutHosts) so they travel with
	// the range.
	Deactivate(ctx context.Context, r Range) error
	// Merged: records that arrived (merge/handoff/pull) inside a range this
	// node actively claims; the app queues the pending ones it lacks, and
	// takes over the Meta of the done ones (their recrawl state).
	Merged(ctx context.Context, recs []Record)
	// Reroute: pending records of a range this node gave up and could not
	// hand over, because the range's owner took it over without them and
	// refuses them from this node (see "Releases the owner will not take"
	// in tick.go). The app sends them to their owners as new tasks, as it
	// sends the links found on a page, for each owner to dedupe against
	// its own state. An error leaves the range releasing, to try again.
	Reroute(ctx context.Context, recs []Record) error
}

// Config tunes a Manager. Zero fields take the defaults noted on each.
type Config struct {
	// Replicas is K, how many successors hold a copy of each owner's
	// records. Default 2.
	Replicas int
	// FailureTimeout is how long a replica waits without hearing from an
	// owner before it takes the owner's range over. Default 5s.
	FailureTimeout time.Duration
	// Lease is how long an owner may keep working after its first
	// successor (or, when that one withholds, a quorum of its replicas)
	// last acknowledged a heartbeat. It must be shorter than
	// FailureTimeout so an owner cut off from its replicas stops before
	// they promote. Default FailureTimeout/2 with one position, 7/10 of
	// it with more (Positions > 1): a machine of many positions spaces
	// its heartbeats up to 4/5 of the lease, and at half the timeout 16
	// positions spent 30.9 heartbeat messages a second per machine, at
	// 7/10 22.0 (300 machines); the 1.5 s left of the default 5 s cover a
	// request already on its way when the lease ends. One position
	// heartbeats every HeartbeatInterval whatever the lease, and its
	// simulated crawl fetched 120 pages twice instead of 3 with the
	// longer lease (300 machines, 1% churn: replicas' watch fetches), a
	// cost not understood yet and not measured at V = 16 (0.13%).
	Lease time.Duration
	// TickInterval is how often Run calls Tick. Default 100ms.
	TickInterval time.Duration
	// HeartbeatInterval is how often an owner sends its claims to its
	// replicas when it has nothing else to send. Default FailureTimeout/10.
	HeartbeatInterval time.Duration
	// AckTimeout bounds each shard RPC, and so how long Accept waits for
	// its replicas. Default 2s.
	AckTimeout time.Duration
	// SyncInterval is how often an owner compares each claim with each
	// replica (anti-entropy). Default 10s.
	SyncInterval time.Duration
	// ChunkRecords is how many records go in one handoff chunk, pull page
	// or anti-entropy write. Default 1000.
	ChunkRecords int
	// MaxClockSkew is how far ahead of this node's clock another node's
	// may run. A new claim's epoch is at least its claimer's clock in
	// milliseconds, and an epoch further ahead than this is refused as
	// forged; a node whose clock runs further ahead has its claims
	// refused. Default 1h.
	MaxClockSkew time.Duration
	// WitnessWindow is how long a replica vouches for a claim of its
	// predecessor after it last saw it: within it, the predecessor may
	// hand the claimed range to a node that cannot judge it by its own
	// view of the ring (see "Witnesses" in witness.go). Default 10m.
	WitnessWindow time.Duration
	// Logger receives transitions (claims, promotions, handoffs, stale
	// drops). Default: discard.
	Logger *slog.Logger
	// Signer signs the receipts this node gives as a replica (receipts.go).
	// Nil: no receipts, and owners that need them find this node's writes
	// unvouched.
	Signer Signer
	// WatchTimeout is how long a replica waits, for a host key it holds
	// pending records of, without a Done mark from their owner before it
	// fetches them itself (watch.go); the n-th replica waits n times as
	// long. Default 60s; negative turns watching off.
	WatchTimeout time.Duration
	// LeaseFromFirst renews the lease on the first successor's
	// acknowledgement alone, as before issue 29: a first successor that
	// refuses is not outvoted by a quorum of the replicas (see
	// Ownership). For measuring the defence; default false.
	LeaseFromFirst bool
	// Positions is how many ring positions (virtual nodes) the process
	// holds, each with its own Manager; 0 or 1: one. With more, each
	// Manager heartbeats its replicas every max(1, Positions/2)
	// HeartbeatIntervals, but never less often than every 4/5 of the
	// Lease (nor more often than HeartbeatInterval), and runs
	// anti-entropy every max(1, Positions/2) SyncIntervals, so that the
	// machine's V*K replica links do not cost V times the heartbeats of
	// one position. The default Lease is longer (see Lease), so that
	// heartbeats may be further apart; FailureTimeout is unchanged, so a
	// replica promotes itself as soon after its owner's machine fails as
	// with one position.
	Positions int
	// Sequential makes every fan-out to the replicas call them one after
	// the other in the caller's goroutine instead of in parallel, so a
	// single-threaded simulator that calls Tick and Accept itself stays
	// deterministic and race-free. Default false (parallel), as a node
	// runs.
	Sequential bool
}

// DefaultConfig returns the defaults noted on Config's fields; Lease and
// HeartbeatInterval follow FailureTimeout, so Effective derives them.
func DefaultConfig() Config {
	return Config{
		Replicas:       2,
		FailureTimeout: 5 * time.Second,
		TickInterval:   100 * time.Millisecond,
		AckTimeout:     2 * time.Second,
		SyncInterval:   10 * time.Second,
		ChunkRecords:   1000,
		MaxClockSkew:   time.Hour,
		WitnessWindow:  10 * time.Minute,
		WatchTimeout:   time.Minute,
	}
}

// Effective returns c with every zero field set to its default, as the
// Manager uses it, or an error for a configuration it refuses.
func (c Config) Effective() (Config, error) {
	d := DefaultConfig()
	if c.Replicas < 0 {
		return c, fmt.Errorf("shard: negative Replicas %d", c.Replicas)
	}
	if c.Replicas == 0 {
		c.Replicas = d.Replicas
	}
	if c.FailureTimeout <= 0 {
		c.FailureTimeout = d.FailureTimeout
	}
	if c.Lease <= 0 {
		c.Lease = c.FailureTimeout / 2
		if c.Positions > 1 {
			c.Lease = c.FailureTimeout * 7 / 10
		}
	}
	if c.Lease >= c.FailureTimeout {
		return c, fmt.Errorf("shard: Lease %v must be shorter than FailureTimeout %v", c.Lease, c.FailureTimeout)
	}
	if c.TickInterval <= 0 {
		c.TickInterval = d.TickInterval
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = c.FailureTimeout / 10
	}
	if c.AckTimeout <= 0 {
		c.AckTimeout = d.AckTimeout
	}
	if c.SyncInterval <= 0 {
		c.SyncInterval = d.SyncInterval
	}
	if c.Positions < 0 {
		return c, fmt.Errorf("shard: negative Positions %d", c.Positions)
	}
	if c.ChunkRecords <= 0 {
		c.ChunkRecords = d.ChunkRecords
	}
	if c.MaxClockSkew <= 0 {
		c.MaxClockSkew = d.MaxClockSkew
	}
	if c.WitnessWindow <= 0 {
		c.WitnessWindow = d.WitnessWindow
	}
	if c.WatchTimeout == 0 {
		c.WatchTimeout = d.WatchTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// stretch is how many base intervals apart a position of a machine with
// Positions positions heartbeats and runs anti-entropy (Config.Positions).
func (c Config) stretch() time.Duration { return time.Duration(max(1, c.Positions/2)) }

// heartbeatEvery is how often a Manager heartbeats its replicas: the
// HeartbeatInterval, stretched with Positions as long as the lease is
// still renewed in time. c is Effective.
func (c Config) heartbeatEvery() time.Duration {
	return max(c.HeartbeatInterval, min(c.HeartbeatInterval*c.stretch(), c.Lease*4/5))
}

// syncEvery is how often a Manager runs anti-entropy with each replica:
// the SyncInterval, stretched with Positions. c is Effective.
func (c Config) syncEvery() time.Duration { return c.SyncInterval * c.stretch() }

// Stats is a snapshot of a Manager for status pages and tests.
type Stats struct {
	// Claims are the active claims; Releasing the parts being handed off.
	Claims, Releasing []Claim
	// LeaseValid: the first successor, or when it withholds a quorum of
	// the replicas, acknowledged a heartbeat within Lease (always true
	// with no successor).
	LeaseValid bool
	// Degraded: the last Accept could not reach every replica.
	Degraded bool
	// DegradedWrites counts Accepts acknowledged by fewer than all
	// replicas; StaleRejections the times this node found a claim of its
	// own stale (a replica refused it, or a higher claim arrived) and
	// dropped it; RejectedWrites the writes this node refused as a
	// replica; Promotions the ranges taken over from a silent owner;
	// HandoffsOut/HandoffsIn completed ownership pushes; MergesIn merge
	// pushes received; Pulls completed pulls; Implausible the claims,
	// handoffs and merges refused because their sender could not own the
	// range (see "Who may claim what"), and FutureEpochs the epochs
	// refused or dropped for being ahead of the clock; Witnessed the
	// handoff givers this node could not judge by its own view and a
	// witness vouched for (see "Witnesses" in witness.go); Rerouted the
	// parts this node gave up without a handoff, their owner having taken
	// them over, and whose pending records it sent as tasks instead;
	// ReroutedIn the done records this node took from a holder of such a
	// part (see "Rerouted done marks" in reroute.go); LateDoneOut the
	// done records of pieces this node had handed off that their
	// receiver took from it (see "Late done marks" in late.go).
	DegradedWrites, StaleRejections, RejectedWrites, Promotions,
	HandoffsOut, HandoffsIn, MergesIn, Pulls, Implausible, FutureEpochs,
	Witnessed, Rerouted, ReroutedIn, LateDoneOut int64
	// Watching is how many host keys this node watches for a
	// predecessor now; WatchFetches the pending records it took over to
	// fetch itself, their owner having neither fetched nor explained them
	// within WatchTimeout (watch.go); WatchedIn the Done marks a fellow
	// watcher told it of; WatchMoved the due keys it did not take over
	// because the ring named another owner or could not tell (ringNames).
	// HeldFor counts the records senders gave this node to hold for a
	// predecessor whose acknowledgement its replicas did not vouch for
	// (Manager.HoldFor); HeldForwarded those of them (and of the pending
	// ones it held already) it pushed to that owner, which took them.
	Watching, WatchFetches, WatchedIn, WatchMoved, HeldFor, HeldForwarded int64
	// Unplaced counts lookups that found a sender's ID owned by another
	// peer: a sender the ring does not hold where it sits (member.go).
	Unplaced int64
	// Unsent counts the progress (done records and host states handed
	// to Progress) no heartbeat has yet taken to the replicas, whether
	// it waits for the next heartbeat or is on its way; UnsentSince is
	// when the oldest of it was finished (ProgressSince), zero with
	// nothing unsent. A node that dies now loses that progress: its
	// replicas fetch those URLs again.
	Unsent      int64
	UnsentSince time.Time
}

// Manager keeps one node's shard state: which ranges it claims and under
// what epoch, replication to its successors, handoffs, promotions and
// reconciliation. See the package documentation for the protocol.
type Manager struct {
	ring    *ring.Node
	self    ring.Peer
	own     *Ownership
	clock   ring.Clock
	tr      Transport
	st      Storage
	app     App
	cfg     Config
	log     *slog.Logger
	running atomic.Bool

	// orderMu guards the cached replica order of the ring's successor
	// list (replicaOrderOf): the list it was built from and the order.
	orderMu sync.Mutex
	orderOf []ring.Peer
	order   []ring.Peer
	// serial makes fan-outs sequential, so a single-threaded simulation
	// is reproducible.
	serial bool

	// tickMu serialises Tick and Leave.
	tickMu sync.Mutex
	// transMu serialises claim transitions with their App calls, so the
	// app sees Activate, Deactivate and Merged in the order the claims
	// changed. It is never held across a network call.
	transMu sync.Mutex
	// acceptMu: Accept holds it shared for its whole run, and removing
	// claims on purpose (shedding, Leave) takes it exclusively, so a
	// record accepted under a claim is in storage before the range's
	// handoff scans it. Lock order: transMu, acceptMu, mu. Accept takes
	// only acceptMu and mu, so a fetch that Accepts can always finish
	// while an App call it waits for holds transMu.
	acceptMu sync.RWMutex

	mu        sync.Mutex
	table     epochTable
	releasing segMap  // parts given up, still to be handed off
	reconcile spanSet // stale parts whose records go to the rightful owner
	deact     spanSet // dropped as stale, still to Deactivate in the app
	// heard is, per peer address, the peer and when this node last took
	// a claim or a handoff from it.
	heard   map[string]heardFrom
	witness witnessTable      // claims this node witnessed as a replica (witness.go)
	placed  map[string]placed // senders' places by this node's lookups (member.go)
	checks  witnessChecks
	// holders are the peers this node's view said held parts of its arc
	// (reroute.go).
	holders map[string]holder
	// handed are the pieces this node handed off lately (late.go).
	handed []handedPiece
	// shedSeen is the arc and the claims' domain of the last tick that
	// found nothing to shed.
	shedSeen struct {
		r       Range
		claimed spanSet
	}
	waitStart time.Time
	lastView  view
	viewSeen  bool
	replicas  []ring.Peer
	succCache []ring.Peer
	// seen is the view's successor list observe last compared (the
	// shared replicaOrderOf result): the same list needs no comparison
	// again.
	seen     []ring.Peer
	lastSync map[string]time.Time
	// owed holds the replicas that missed a write (see missedLocked),
	// each with the wait before its brought-forward round.
	owed map[string]time.Duration
	// syncDue is when the next replica's anti-entropy round is due; zero
	// when unknown (the replica set changed).
	syncDue  time.Time
	lastBeat time.Time
	// beatNow and syncNow ask the next Tick for a heartbeat or a full
	// anti-entropy round right away.
	beatNow, syncNow bool
	// watch holds, per host key, the pending records this node keeps as
	// a replica and whether their owner makes progress (watch.go).
	watch         map[uint64]*watched
	lastWatchScan time.Time
	// forward holds, per owner, the records HoldFor took for it, to push
	// to it at the next tick (forwardHeld); forwardN counts them.
	forward   map[string][]Record
	forwardN  int
	progRecs  []Record
	progHosts []HostState
	// progSince is when the oldest of progRecs and progHosts was
	// finished; sending and sendingSince the same of the progress the
	// heartbeat in progress carries (Stats.Unsent).
	progSince    time.Time
	sending      int
	sendingSince time.Time
	degraded     bool
	stats        Stats
}

var _ Handler = (*Manager)(nil)

// New returns the Manager that keeps own current, for own's ring node,
// loading the epoch table from st. It claims nothing until Tick runs; its
// clock is the ring node's. Register the Manager as the node's Handler on
// the transport before calling Tick or Run.
func New(own *Ownership, tr Transport, st Storage, app App, cfg Config) (*Manager, error) {
	if own == nil || tr == nil || st == nil || app == nil {
		return nil, errors.New("shard: New needs an ownership, transport, storage and app")
	}
	cfg, err := cfg.Effective()
	if err != nil {
		return nil, err
	}
	r := own.ring
	m := &Manager{
		ring:      r,
		self:      r.Self(),
		own:       own,
		clock:     r.Clock(),
		tr:        tr,
		st:        st,
		app:       app,
		cfg:       cfg,
		log:       cfg.Logger.With("node", r.Self().Addr),
		heard:     make(map[string]heardFrom),
		witness:   make(witnessTable),
		placed:    make(map[string]placed),
		watch:     make(map[uint64]*watched),
		lastSync:  make(map[string]time.Time),
		owed:      make(map[string]time.Duration),
		waitStart: r.Clock().Now(),
		serial:    cfg.Sequential,
	}
	b, err := st.LoadEpochs()
	if err != nil {
		return nil, fmt.Errorf("shard: load epoch table: %w", err)
	}
	if b != nil {
		if err := m.table.UnmarshalBinary(b); err != nil {
			return nil, fmt.Errorf("shard: load epoch table: %w", err)
		}
	}
	if n := m.table.dropFuture(m.epochLimit(m.clock.Now())); n > 0 {
		m.log.Warn("epoch table: dropped entries from the future (forged, or the clock went back)",
			"entries", n, "max_clock_skew", cfg.MaxClockSkew)
		m.stats.FutureEpochs += int64(n)
		m.saveTableLocked()
	}
	return m, nil
}

// Owns is the Manager's Ownership.Owns.
func (m *Manager) Owns(key uint64) bool { return m.own.Owns(key) }

// setClaimsLocked replaces the active claims; callers hold m.mu.
func (m *Manager) setClaimsLocked(c segMap) {
	d := c.domain()
	m.own.mu.Lock()
	m.own.claims, m.own.domain = c, d
	m.own.mu.Unlock()
}

// claimedLocked is the set of points the active claims cover; callers
// hold m.mu and must not change it. Every tick asks it (shed, acquire),
// and recomputing it each time was 3% of a 32,000-position simulation.
func (m *Manager) claimedLocked() spanSet { return m.own.domain }

// Vouch reports whether owner (a peer address, as in Epoch.Owner) holds
// key as far as this node's epoch table knows: the highest epoch it has
// seen for the key names owner. A helper asks this before it fetches for
// another node, so that an owner fenced off by a higher epoch cannot have
// its stale batches fetched, nor a peer whose claim it never took in (its
// helpers are its replicas, which hold its claims).
func (m *Manager) Vouch(key uint64, owner string) bool {
	m.mu.Lock()
	e := m.table.max(Range{From: ring.ID(key - 1), To: ring.ID(key)})
	m.mu.Unlock()
	return !e.IsZero() && e.Owner == owner
}

func (m *Manager) noSuccessor() bool { return m.own.noSuccessor() }

// Accept takes new records routed to this node (sync-on-accept). Every key
// must satisfy Owns, else nothing is stored and ErrNotOwned is returned.
// The records are written locally and then to the K replicas in parallel,
// and Accept returns once they acknowledged or AckTimeout passed. A
// replica that refuses the claim makes Accept return ErrStale (the claim
// is dropped). A replica that cannot be reached makes the write degraded:
// Accept still returns nil, and Stats counts it.
func (m *Manager) Accept(ctx context.Context, recs []Record) error {
	return m.accept(ctx, recs, m.st.PutRecords)
}

// AcceptOwn is Accept for records this node sends itself from a durable
// outbox that keeps them until they are accepted: the local write is not
// synced (Storage.PutRecordsNoSync), the replicas' are. Until a later
// sync covers the records, the outbox entries, written before them and
// deleted after them, stand for them.
func (m *Manager) AcceptOwn(ctx context.Context, recs []Record) error {
	return m.accept(ctx, recs, m.st.PutRecordsNoSync)
}

// accept is Accept with put the local write.
func (m *Manager) accept(ctx context.Context, recs []Record, put func([]Record) error) error {
	if len(recs) == 0 {
		return nil
	}
	return m.acceptWith(ctx, recs, nil, put, nil)
}

// acceptWith stores recs with put and replicates them; with held or
// onReply it asks each replica for a receipt over recs and held and
// passes onReply every reply that took the write.
func (m *Manager) acceptWith(ctx context.Context, recs []Record, held []RecordID, put func([]Record) error, onReply func(ring.Peer, *WriteReply)) error {
	m.acceptMu.RLock()
	defer m.acceptMu.RUnlock()
	for _, r := range recs {
		if !m.Owns(r.Key) {
			return fmt.Errorf("shard: accept key %s: %w", ring.ID(r.Key), ErrNotOwned)
		}
	}
	for _, id := range held {
		if !m.Owns(id.Key) {
			return fmt.Errorf("shard: accept key %s: %w", ring.ID(id.Key), ErrNotOwned)
		}
	}
	if len(recs) > 0 {
		if err := put(recs); err != nil {
			return fmt.Errorf("shard: accept: store records: %w", err)
		}
	}
	m.mu.Lock()
	var covering segMap
	for _, g := range m.own.claims {
		in := func(k uint64) bool { return g.lo <= k && k <= g.hi }
		if slices.ContainsFunc(recs, func(r Record) bool { return in(r.Key) }) ||
			slices.ContainsFunc(held, func(id RecordID) bool { return in(id.Key) }) {
			covering = append(covering, g)
		}
	}
	replicas := slices.Clone(m.replicas)
	m.mu.Unlock()
	if len(replicas) == 0 {
		return nil
	}
	req := &WriteRequest{Claims: covering.claims(), Records: recs, Held: held, WantReceipt: onReply != nil}
	res := fanout(m, ctx, replicas, func(ctx context.Context, p ring.Peer) (*WriteReply, error) {
		return m.tr.Replicate(ctx, p, req)
	})
	var rejected []Claim
	failed := 0
	for _, r := range res {
		switch {
		case r.err != nil:
			failed++
			m.missed(r.peer)
			m.log.Debug("replicate on accept failed", "to", r.peer, "err", r.err)
			continue
		case r.reply.Refused != "":
			failed++
			m.missed(r.peer)
			m.log.Warn("replica refused this node's claim", "to", r.peer, "reason", r.reply.Refused)
		case r.reply.StoreError != "":
			failed++
			m.missed(r.peer)
			m.log.Warn("replica could not store accepted URLs", "to", r.peer, "err", r.reply.StoreError)
		case onReply != nil && len(r.reply.Rejected) == 0:
			onReply(r.peer, r.reply)
		}
		rejected = append(rejected, r.reply.Rejected...)
	}
	if len(rejected) > 0 {
		if m.handleRejected(rejected) > 0 {
			return fmt.Errorf("shard: accept: %s refused by a replica: %w", rangesOf(covering), ErrStale)
		}
		failed++
	}
	m.mu.Lock()
	if failed > 0 {
		m.stats.DegradedWrites++
		m.degraded = true
	} else {
		m.degraded = false
	}
	m.mu.Unlock()
	return nil
}

func rangesOf(m segMap) []Range {
	var out []Range
	for _, c := range m.claims() {
		out = append(out, c.Range)
	}
	return out
}

// Progress records state changes of owned records (Done marks, host
// states): written locally now and replicated with the next heartbeat,
// asynchronously. It is ProgressSince with the time now.
func (m *Manager) Progress(recs []Record, hosts []HostState) error {
	return m.ProgressSince(recs, hosts, m.clock.Now())
}

// ProgressSince is Progress of changes the oldest of which was made at
// since (a URL finished while its page's links were being settled):
// Stats.UnsentSince reports it until a heartbeat has taken them to the
// replicas.
func (m *Manager) ProgressSince(recs []Record, hosts []HostState, since time.Time) error {
	if len(recs) > 0 {
		if err := m.st.PutRecords(recs); err != nil {
			return fmt.Errorf("shard: progress: store records: %w", err)
		}
	}
	if len(hosts) > 0 {
		if err := m.st.PutHosts(hosts); err != nil {
			return fmt.Errorf("shard: progress: store hosts: %w", err)
		}
	}
	m.mu.Lock()
	if len(recs)+len(hosts) > 0 {
		m.progSince = earliest(m.progSince, since)
	}
	m.progRecs = append(m.progRecs, recs...)
	m.progHosts = append(m.progHosts, hosts...)
	m.mu.Unlock()
	return nil
}

// earliest returns the earlier of two times, zero standing for none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// Stats returns a snapshot of the Manager's claims and counters.
func (m *Manager) Stats() Stats {
	now := m.clock.Now()
	noReplica := m.noSuccessor()
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats
	s.Claims = m.own.claims.claims()
	s.Releasing = m.releasing.claims()
	s.LeaseValid = m.own.leaseValid(now, noReplica)
	s.Degraded = m.degraded
	s.Watching = int64(len(m.watch))
	s.Unsent = int64(len(m.progRecs) + len(m.progHosts) + m.sending)
	s.UnsentSince = earliest(m.progSince, m.sendingSince)
	return s
}

// Run calls Tick at once, so that a node alone claims the ring as soon as
// it starts rather than a TickInterval later, and then every TickInterval
// until ctx is done; it returns nil. It returns ErrRunning if it is
// already running.
func (m *Manager) Run(ctx context.Context) error {
	if !m.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer m.running.Store(false)
	t := m.clock.NewTicker(m.cfg.TickInterval)
	defer t.Stop()
	m.Tick(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			m.Tick(ctx)
		}
	}
}

// Leave hands every claim to its new owner before the node departs. Call
// it after ring.Node.Leave, so the successor already counts the range as
// its own, and stop Run before ring.Node.Leave (a Tick in between would
// find the node alone). Leave deactivates every claim, pushes each range
// to its owner (ring lookup, then the successors known before leaving)
// and returns an error naming what could not be handed off; replicas
// still hold that data and the successor takes it over after
// FailureTimeout. The Manager claims nothing afterwards.
func (m *Manager) Leave(ctx context.Context) error {
	m.tickMu.Lock()
	defer m.tickMu.Unlock()
	m.mu.Lock()
	if m.own.leaving {
		m.mu.Unlock()
		return nil
	}
	m.own.mu.Lock()
	m.own.leaving = true
	m.own.mu.Unlock()
	targets := slices.Clone(m.succCache)
	m.mu.Unlock()
	for _, p := range m.ring.Successors() {
		if p != m.self && !slices.Contains(targets, p) {
			targets = append([]ring.Peer{p}, targets...)
		}
	}

	m.transMu.Lock()
	m.acceptMu.Lock()
	m.mu.Lock()
	parts := m.own.claims
	m.setClaimsLocked(nil)
	for _, g := range parts {
		m.releasing = m.releasing.set(spanSet{{g.lo, g.hi}}, g.e)
	}
	m.mu.Unlock()
	m.acceptMu.Unlock()
	m.flushDeactivations(ctx)
	for _, c := range parts.claims() {
		if err := m.app.Deactivate(ctx, c.Range); err != nil {
			m.log.Warn("deactivate on leave", "range", c.Range, "err", err)
		}
	}
	m.transMu.Unlock()

	m.mu.Lock()
	rel := m.releasing.claims()
	m.mu.Unlock()
	var errs []error
	for _, p := range rel {
		order := targets
		if t, _, err := m.ring.Lookup(ctx, p.Range.To); err == nil && t != m.self {
			order = append([]ring.Peer{t}, targets...)
		}
		for _, t := range order {
			for _, c := range m.releasingWithin(p.Range) {
				// A leaving node stops hearing nobody's wait: its
				// replicas promote themselves after FailureTimeout.
				m.pushTo(ctx, t, c, nil)
			}
		}
		if left := m.releasingWithin(p.Range); len(left) > 0 {
			errs = append(errs, fmt.Errorf("shard: leave: %v not handed off", left))
		}
	}
	return errors.Join(errs...)
}

// releasingWithin returns the releasing parts inside r.
func (m *Manager) releasingWithin(r Range) []Claim {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.releasing.within(spansOf(r)).claims()
}

// result is one peer's answer in a fan-out.
type result[T any] struct {
	peer  ring.Peer
	reply T
	err   error
}

// fanout calls every peer in parallel (sequentially with m.serial), all
// within AckTimeout, and waits for all of them.
func fanout[T any](m *Manager, ctx context.Context, peers []ring.Peer, call func(context.Context, ring.Peer) (T, error)) []result[T] {
	out := make([]result[T], len(peers))
	cctx, cancel := context.WithTimeout(ctx, m.cfg.AckTimeout)
	defer cancel()
	one := func(i int, p ring.Peer) {
		r, err := call(cctx, p)
		out[i] = result[T]{p, r, err}
	}
	if m.serial || len(peers) == 1 {
		for i, p := range peers {
			one(i, p)
		}
		return out
	}
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Go(func() { one(i, p) })
	}
	wg.Wait()
	return out
}

// missed notes that replica p did not take a write: it failed, or p
// refused the claims (say, p does not yet hold this node where it sits in
// the ring) or could not store the records. The records and Done marks of
// that write are not sent to p again (a heartbeat's progress goes once),
// and p, which watches this node's pending records, would take the pages
// this node fetched for pages it neglects. So p's next anti-entropy round,
// which brings it everything it lacks, is brought forward to
// Lease/2 from now; while rounds with p keep failing the wait doubles, up
// to the usual interval (antiEntropy).
func (m *Manager) missed(p ring.Peer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.missedLocked(p, m.clock.Now())
}

func (m *Manager) missedLocked(p ring.Peer, now time.Time) {
	if _, ok := m.owed[p.Addr]; ok || !slices.Contains(m.replicas, p) {
		return // brought forward already, or no longer a replica
	}
	m.owed[p.Addr] = m.cfg.Lease / 2
	m.syncAtLocked(p, now.Add(m.cfg.Lease/2))
}

// syncAtLocked makes p's next anti-entropy round due at the latest at at.
func (m *Manager) syncAtLocked(p ring.Peer, at time.Time) {
	every := m.cfg.syncEvery()
	if t, ok := m.lastSync[p.Addr]; ok && t.Add(every).After(at) {
		m.lastSync[p.Addr] = at.Add(-every)
	}
	if m.syncDue.IsZero() || at.Before(m.syncDue) {
		m.syncDue = at
	}
}

// handleRejected takes in the higher epochs a replica reported, except
// those from the future, drops whatever of our claims they beat, and
// returns how many it took in.
func (m *Manager) handleRejected(rejected []Claim) int {
	now := m.clock.Now()
	rejected, future := m.splitFuture(rejected, now)
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(future) > 0 {
		m.stats.FutureEpochs += int64(len(future))
		m.log.Warn("a replica reported epochs from the future; ignored", "claims", future)
	}
	changed := false
	for _, c := range rejected {
		if m.table.raise(c.Range, c.Epoch) {
			changed = true
		}
	}
	if changed {
		m.saveTableLocked()
	}
	m.dropStaleLocked(now)
	return len(rejected)
}

// dropStaleLocked drops every part of an active claim that the epoch
// table beats: someone else holds it under a higher epoch. The app is told
// at the next transition (Deactivate), nothing is pushed, and the records
// are later merged into the rightful owner.
func (m *Manager) dropStaleLocked(now time.Time) {
	var dropped []span
	for _, c := range m.own.claims {
		for _, p := range m.table.m.within(spanSet{{c.lo, c.hi}}) {
			if c.e.Less(p.e) {
				dropped = append(dropped, span{p.lo, p.hi})
			}
		}
	}
	if len(dropped) == 0 {
		return
	}
	d := normalize(dropped)
	m.log.Info("claim stale, dropped", "ranges", d.ranges(), "table", m.table.m.within(d).claims())
	m.setClaimsLocked(m.own.claims.remove(d))
	m.deact = union(m.deact, d)
	m.reconcile = union(m.reconcile, d)
	m.waitStart = now
	m.beatNow = true
	m.stats.StaleRejections++
}

// saveTableLocked persists the epoch table.
func (m *Manager) saveTableLocked() {
	b, err := m.table.MarshalBinary()
	if err == nil {
		err = m.st.SaveEpochs(b)
	}
	if err != nil {
		m.log.Error("save epoch table", "err", err)
	}
}

// flushDeactivations tells the app about claims dropped as stale. Callers
// hold transMu.
func (m *Manager) flushDeactivations(ctx context.Context) {
	m.mu.Lock()
	d := m.deact
	m.deact = nil
	m.mu.Unlock()
	for _, r := range d.ranges() {
		if err := m.app.Deactivate(ctx, r); err != nil {
			m.log.Warn("deactivate stale range", "range", r, "err", err)
		}
	}
}

// claim makes s active under fresh epochs (one per arc, above anything
// the table knows there) and activates it in the app.
func (m *Manager) claim(ctx context.Context, s spanSet, promotion bool) {
	m.transMu.Lock()
	defer m.transMu.Unlock()
	m.flushDeactivations(ctx)
	m.mu.Lock()
	if m.own.leaving {
		m.mu.Unlock()
		return
	}
	s = subtract(s, m.claimedLocked())
	var got []Claim
	now := m.clock.Now()
	m.noteTableOwnersLocked(s, now)
	for _, r := range s.ranges() {
		e := m.newEpochLocked(r, Epoch{}, now)
		m.setClaimLocked(r, e)
		got = append(got, Claim{r, e})
	}
	if len(got) == 0 {
		m.mu.Unlock()
		return
	}
	if promotion {
		m.stats.Promotions += int64(len(got))
	}
	m.saveTableLocked()
	m.mu.Unlock()
	m.log.Info("claimed", "claims", got, "promotion", promotion)
	for _, c := range got {
		m.activate(ctx, c.Range)
	}
}

// setClaimLocked records r as actively claimed under e.
func (m *Manager) setClaimLocked(r Range, e Epoch) {
	s := spansOf(r)
	m.setClaimsLocked(m.own.claims.set(s, e))
	m.releasing = m.releasing.remove(s)
	m.reconcile = subtract(m.reconcile, s)
	m.table.raise(r, e)
	m.beatNow = true
	m.syncNow = true
}

// activate tells the app about a new claim; if the app fails, the claim
// is dropped again (and the app told to clean up) so a later Tick retries.
// Callers hold transMu.
func (m *Manager) activate(ctx context.Context, r Range) {
	err := m.app.Activate(ctx, r)
	if err == nil {
		return
	}
	m.log.Error("activate failed; claim dropped", "range", r, "err", err)
	m.mu.Lock()
	m.setClaimsLocked(m.own.claims.remove(spansOf(r)))
	m.deact = union(m.deact, spansOf(r))
	m.beatNow = true
	m.mu.Unlock()
}

// notifyMerged passes the app the records just stored that lie in active
// claims and are still pending after the merge, or that brought a fetched
// URL's state (Meta): the stored version, so a stale pending copy of a
// record this node already finished is not queued again, and an older
// Meta never wins. Callers hold transMu.
func (m *Manager) notifyMerged(ctx context.Context, recs []Record) {
	if len(recs) == 0 {
		return
	}
	m.mu.Lock()
	var in []Record
	for _, r := range recs {
		if m.own.claims.covers(r.Key) && (!r.Done || len(r.Meta) > 0) {
			in = append(in, r)
		}
	}
	m.mu.Unlock()
	var out []Record
	for _, r := range in {
		stored, ok, err := m.storedRecord(r.Key, r.Hash)
		switch {
		case err != nil:
			m.log.Warn("read merged record", "key", ring.ID(r.Key), "err", err)
			out = append(out, r)
		case ok && (!stored.Done || len(r.Meta) > 0):
			out = append(out, stored)
		}
	}
	if len(out) > 0 {
		m.app.Merged(ctx, out)
	}
}

// RecordGetter is implemented by a Storage that reads one record by its
// key and hash directly (a point lookup, not a scan of its host's
// records): checking the records a receipt vouches for uses it.
type RecordGetter interface {
	GetRecord(key, hash uint64) (Record, bool, error)
}

// storedRecord reads one record, through RecordGetter if the storage has
// it, else through Storage.ScanRecords.
func (m *Manager) storedRecord(key, hash uint64) (Record, bool, error) {
	if g, ok := m.st.(RecordGetter); ok {
		return g.GetRecord(key, hash)
	}
	var out Record
	found := false
	k := ring.ID(key)
	err := m.st.ScanRecords(Range{From: k - 1, To: k}, func(r Record) error {
		if r.Hash == hash {
			out, found = r, true
			return errStopScan
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopScan) {
		return Record{}, false, err
	}
	return out, found, nil
}
