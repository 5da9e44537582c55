package route

import (
	"log/slog"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol"
)

// Config tunes a Router. A zero field means its default.
type Config struct {
	// OwnerCacheTTL is how long a key's owner is remembered after a
	// lookup: consecutive links mostly point to the same few hosts, and a
	// stale entry costs only a not-owned answer and a second lookup.
	// Default 5 s.
	OwnerCacheTTL time.Duration
	// OwnerCacheMax bounds the owners remembered. Default 100,000.
	OwnerCacheMax int
	// MaxBatch bounds the tasks sent to an owner in one batch. Default
	// protocol.MaxBatchTasks, what one task batch may carry on the wire.
	MaxBatch int
	// RetryMin and RetryMax bound the backoff between two deliveries of a
	// task that could not be delivered (Backoff). Defaults 100 ms and
	// 10 s.
	RetryMin, RetryMax time.Duration
	// Receipts, if set, makes the router count tasks as accepted only when
	// their owner's replicas vouch for them (see "Verifiable
	// acknowledgements" in receipts.go). Nil: every acknowledgement is
	// believed, as before issue 29.
	Receipts *ReceiptCheck
	// Local, if set, reports whether a ring member is this node's own
	// (one of its ring positions, which share its Owner): a batch for it
	// goes to the Owner, not over the transport. Nil: only Ring.Self is.
	Local func(ring.Peer) bool
	// Helpers is how many machines share a hot host's fetch batches: an
	// owner hands successive batches to the first Helpers machines of its
	// successor list in turn (HelperOf, Delegator), and a helper fetches
	// for the owners within Helpers machines before one of its positions
	// (HelperAdmission). Default 1, the first successor alone: a helper
	// knows one predecessor per position (ring.Node.Predecessor), and its
	// epoch table vouches only for the owners it replicates (K).
	Helpers int
	// HelperSlots is how many helper slots a hot host has (SlotKey): the
	// machines holding them may fetch its batches for its owner, which
	// chooses among them by load (Delegator.UseSlots, Choose), and each
	// checks from its own ring state that it holds a slot and that the
	// sender holds the host (HelperAdmission.Slots). It bounds the
	// machines a hostile owner can set on one host at once. Default 8.
	HelperSlots int
	// Clock tells the time (the owner cache's). Default the wall clock.
	Clock ring.Clock
	// Logger receives the router's debug lines and warnings. Default
	// slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		OwnerCacheTTL: 5 * time.Second,
		OwnerCacheMax: 100_000,
		MaxBatch:      protocol.MaxBatchTasks,
		RetryMin:      100 * time.Millisecond,
		RetryMax:      10 * time.Second,
		Helpers:       1,
		HelperSlots:   8,
		Clock:         ring.RealClock(),
		Logger:        slog.Default(),
	}
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	if c.OwnerCacheTTL <= 0 {
		c.OwnerCacheTTL = d.OwnerCacheTTL
	}
	if c.OwnerCacheMax <= 0 {
		c.OwnerCacheMax = d.OwnerCacheMax
	}
	if c.MaxBatch <= 0 || c.MaxBatch > d.MaxBatch {
		c.MaxBatch = d.MaxBatch
	}
	if c.RetryMin <= 0 {
		c.RetryMin = d.RetryMin
	}
	if c.RetryMax <= 0 {
		c.RetryMax = d.RetryMax
	}
	if c.HelperSlots <= 0 {
		c.HelperSlots = d.HelperSlots
	}
	if c.Helpers <= 0 {
		c.Helpers = d.Helpers
	}
	if c.Clock == nil {
		c.Clock = d.Clock
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	return c
}

// Backoff returns how long a task waits before its next delivery after
// attempts failed ones: exponential from RetryMin up to RetryMax, with
// full jitter drawn by jitter (n returns a number in [0, n)), so that
// many nodes retrying a dead owner do not come back in lockstep.
func (c Config) Backoff(attempts int, jitter func(n int64) int64) time.Duration {
	if attempts <= 0 {
		return 0
	}
	c = c.WithDefaults()
	d := c.RetryMin << min(attempts-1, 16)
	if d > c.RetryMax || d <= 0 {
		d = c.RetryMax
	}
	return d/2 + time.Duration(jitter(int64(d/2)+1))
}
