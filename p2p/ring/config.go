package ring

import "time"

// Config tunes a Node. Zero fields take the defaults noted on each field.
type Config struct {
	// SuccessorListLen is how many successors a node tracks; the ring
	// survives up to SuccessorListLen-1 consecutive crashes. Default 8.
	SuccessorListLen int
	// MaxHops bounds the remote calls of one lookup; beyond it Lookup fails
	// with ErrTooManyHops. Default 32.
	MaxHops int
	// StabilizeInterval is how often Run calls Stabilize. Default 500ms.
	StabilizeInterval time.Duration
	// FixFingersInterval is how often Run calls FixFingers. Default 2s.
	FixFingersInterval time.Duration
	// CheckPredecessorInterval is how often Run calls CheckPredecessor.
	// Default 1s.
	CheckPredecessorInterval time.Duration
	// RPCTimeout bounds each Transport call. Default 2s.
	RPCTimeout time.Duration
	// SuspectRetention is how long a peer that stopped answering is
	// remembered and re-probed (one probe per CheckPredecessor). Re-probing
	// is what lets two rings formed during a network partition merge after
	// it heals. Default 10m.
	SuspectRetention time.Duration
	// Clock drives the maintenance loops and suspicion timestamps.
	// Default RealClock().
	Clock Clock
	// Bootstrap lists peers to rejoin through, besides every peer the node
	// still remembers, once it is isolated: it had other members and its
	// successor list ran empty (see State.Isolated). Typically the peers
	// it first joined through. Optional.
	Bootstrap []Peer
	// Siblings, if set, returns the other ring positions of this process
	// (virtual nodes): Lookup answers a key one of them holds without a
	// network hop, as it does for the node's own arc. It is called on
	// every Lookup that does not end at the node itself, must be cheap,
	// and may include the node itself.
	Siblings func() []*Node
	// Positions is how many ring positions (virtual nodes) the process
	// holds, this node among them (the others are Siblings); 0 or 1: one.
	// With more, the positions share the machine's maintenance so that V
	// positions do not cost V times the traffic of one (see shared.go):
	// each position stabilizes and checks its predecessor every
	// max(1, Positions/2) intervals and fixes its fingers every
	// 4*Positions FixFingersIntervals, the machine's loops still ticking at the base
	// intervals; a step runs at once instead, at the next tick, when
	// something changed (a new successor, a notify, a failed call to a
	// neighbour's machine by this position or any sibling), and a
	// predecessor whose machine this position or a sibling heard from
	// within the stretched interval is not pinged. The successor list
	// may grow to 2*Positions peers (at most MaxSharedSuccessorList):
	// replicas go to K other machines, and a list full of one machine's
	// positions reaches fewer. It grows only until it names as many
	// other machines as SuccessorListLen asked for peers.
	Positions int
	// OnChange, if set, is called outside the node's lock whenever its
	// predecessor or first successor changes, with a snapshot taken right
	// after the change. Calls may come from RPC handlers and maintenance
	// loops concurrently, so snapshots can arrive out of order: compare
	// State.Version and ignore older ones. It must not block for long.
	OnChange func(State)
}

// MaxSharedSuccessorList bounds the successor list that Config.Positions
// asks for: a ring message carries it, with every peer's addresses,
// within the node's ring message limit (protocol.MaxRingMsgBytes).
const MaxSharedSuccessorList = 32

// DefaultConfig returns the defaults described on Config's fields.
func DefaultConfig() Config {
	return Config{
		SuccessorListLen:         8,
		MaxHops:                  32,
		StabilizeInterval:        500 * time.Millisecond,
		FixFingersInterval:       2 * time.Second,
		CheckPredecessorInterval: time.Second,
		RPCTimeout:               2 * time.Second,
		SuspectRetention:         10 * time.Minute,
		Clock:                    RealClock(),
	}
}

// WithDefaults fills zero (or nonsensical negative) fields from
// DefaultConfig so callers may set only what they care about.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	if c.SuccessorListLen <= 0 {
		c.SuccessorListLen = d.SuccessorListLen
	}
	if c.Positions > 1 {
		c.SuccessorListLen = max(c.SuccessorListLen, min(2*c.Positions, MaxSharedSuccessorList))
	}
	if c.MaxHops <= 0 {
		c.MaxHops = d.MaxHops
	}
	if c.StabilizeInterval <= 0 {
		c.StabilizeInterval = d.StabilizeInterval
	}
	if c.FixFingersInterval <= 0 {
		c.FixFingersInterval = d.FixFingersInterval
	}
	if c.CheckPredecessorInterval <= 0 {
		c.CheckPredecessorInterval = d.CheckPredecessorInterval
	}
	if c.RPCTimeout <= 0 {
		c.RPCTimeout = d.RPCTimeout
	}
	if c.SuspectRetention <= 0 {
		c.SuspectRetention = d.SuspectRetention
	}
	if c.Clock == nil {
		c.Clock = d.Clock
	}
	return c
}

// State is a snapshot of a node's routing state, for status pages,
// invariant checks and OnChange.
type State struct {
	// Self is the node itself.
	Self Peer
	// Predecessor is zero when unknown.
	Predecessor Peer
	// Successors is the successor list, nearest first; [Self] when alone
	// or isolated.
	Successors []Peer
	// Fingers lists the distinct finger-table peers, nearest first
	// (Snapshot: in finger-table order).
	Fingers []Peer
	// Suspects lists peers that recently failed to answer; lookups route
	// around them until they answer again.
	Suspects []Peer
	// Version increases whenever Predecessor or Successors[0] changes.
	Version uint64
	// Isolated is true when the node has had other members but its
	// successor list ran empty because none of them answers: it is cut
	// off, not alone. It then holds no more than the arc it had under its
	// last known predecessor (see Node.Owns), Lookup does not answer for
	// the rest of the ring, and Stabilize tries to rejoin through every
	// peer it remembers and Config.Bootstrap. A node that Create made and
	// that never had another member is alone, not isolated: it owns the
	// whole ring.
	Isolated bool
}
