package node

import (
	"time"

	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/protocol"
)

// Virtual nodes: a node holds Config.VNodes ring positions. Position 0 is
// where its peer ID puts it, position i > 0 where the peer ID and i put
// it (p2p.PositionID), so that any peer can check a position and no one
// can choose one. Each position is a full ring member with its own shard
// manager and epoch table; all of them share the node's one store, one
// crawler (frontier and politeness) and one outbox. The node owns the
// union of its positions' claims: the crawler and the owner ask whether
// any position owns a key. Replicas of a position's ranges go to
// positions of K other machines (the shard layer counts machines), and a
// range that moves between two positions of the node crosses no network
// (the transports serve calls between the node's own positions in
// process) and lands in the same store.

// MaxVNodes bounds Config.VNodes: the positions one member's status
// report may carry.
const MaxVNodes = protocol.MaxStatusPositions

// position is one of the node's ring positions and its shard manager.
type position struct {
	index int
	ring  *ring.Node
	own   *shard.Ownership
	shard *shard.Manager
}

// positions are the node's ring positions, position 0 first.
type positions []*position

var (
	_ route.Ownership         = positions(nil)
	_ route.Replicator        = positions(nil)
	_ route.ReceiptReplicator = positions(nil)
	_ route.Holder            = positions(nil)
)

// Owns reports whether any position may work on key now
// (shard.Ownership.Owns): the crawl gate and the owner's.
func (ps positions) Owns(key uint64) bool {
	for _, p := range ps {
		if p.own.Owns(key) {
			return true
		}
	}
	return false
}

// owner returns the position that may work on key now, else the position
// whose ring arc holds key, else position 0.
func (ps positions) owner(key uint64) *position {
	if p := ps.owning(key); p != nil {
		return p
	}
	return ps.arc(key)
}

// arc returns the position whose ring arc holds key, else position 0.
func (ps positions) arc(key uint64) *position {
	if len(ps) > 1 {
		for _, p := range ps {
			if p.ring.Owns(ring.ID(key)) {
				return p
			}
		}
	}
	return ps[0]
}

// group splits recs by the position pick names for each key, in position
// order.
func (ps positions) group(recs []shard.Record, pick func(uint64) *position) map[*position][]shard.Record {
	out := make(map[*position][]shard.Record, 1)
	for _, r := range recs {
		p := pick(r.Key)
		out[p] = append(out[p], r)
	}
	return out
}

// Accept implements route.Replicator: each position's manager takes the
// records of the keys it owns, and replicates them to its replicas; the
// records of a key no position owns are refused (shard.ErrNotOwned). When
// some positions took their records and others failed or were refused,
// the error is a *route.PartlyStored naming the records not taken
// (partly).
func (ps positions) Accept(ctx context.Context, recs []shard.Record) error {
	return ps.accept(ctx, recs, (*shard.Manager).Accept)
}

// AcceptOwn implements route.Replicator, as Accept does.
func (ps positions) AcceptOwn(ctx context.Context, recs []shard.Record) error {
	return ps.accept(ctx, recs, (*shard.Manager).AcceptOwn)
}

func (ps positions) accept(ctx context.Context, recs []shard.Record, fn func(*shard.Manager, context.Context, []shard.Record) error) error {
	if len(ps) == 1 {
		return fn(ps[0].shard, ctx, recs)
	}
	// The positions replicate to their replicas at the same time: a
	// batch spread over V positions waits for one round trip, not V.
	groups := ps.group(recs, ps.owning)
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		if g := groups[p]; len(g) > 0 {
			wg.Go(func() {
				if err := fn(p.shard, ctx, g); err != nil {
					errs[i] = fmt.Errorf("position %d: %w", p.index, err)
				}
			})
		}
	}
	wg.Wait()
	return partly(ps, groups, nil, errs)
}

// owning returns the position that may work on key now, nil when none
// may.
func (ps positions) owning(key uint64) *position {
	for _, p := range ps {
		if p.own.Owns(key) {
			return p
		}
	}
	return nil
}

// partly is the error of a write spread over the positions (groups and
// held by owning), errs[i] being position i's: nil when every record went
// to a position that took it, a *route.PartlyStored naming the records
// and held IDs not taken (of failed positions, and of keys no position
// owns, under nil) when some were, else all the errors.
func partly(ps positions, groups map[*position][]shard.Record, held map[*position][]shard.RecordID, errs []error) error {
	var failed []shard.RecordID
	if n := len(groups[nil]) + len(held[nil]); n > 0 {
		errs = append(errs, fmt.Errorf("%d records of keys no ring position owns: %w", n, shard.ErrNotOwned))
		for _, r := range groups[nil] {
			failed = append(failed, shard.IDOf(r))
		}
		failed = append(failed, held[nil]...)
	}
	err := errors.Join(errs...)
	if err == nil {
		return nil
	}
	took := false
	for i, p := range ps {
		if len(groups[p])+len(held[p]) == 0 {
			continue
		}
		if errs[i] == nil {
			took = true
			continue
		}
		for _, r := range groups[p] {
			failed = append(failed, shard.IDOf(r))
		}
		failed = append(failed, held[p]...)
	}
	if !took {
		return err
	}
	return &route.PartlyStored{Failed: failed, Err: err}
}

// AcceptWithReceipts implements route.ReceiptReplicator: each position's
// manager takes the records of the keys it owns, and the held records of
// those keys, and asks its replicas for receipts over them; the receipts
// of every position come back together. The records of a key no position
// owns are refused (shard.ErrNotOwned); some records not taken, the error
// is a *route.PartlyStored, with the receipts of the positions that took
// theirs (partly).
func (ps positions) AcceptWithReceipts(ctx context.Context, recs []shard.Record, held []shard.RecordID, own bool) ([]shard.Receipt, error) {
	if len(ps) == 1 {
		return ps[0].shard.AcceptWithReceipts(ctx, recs, held, own)
	}
	groups := ps.group(recs, ps.owning)
	heldGroups := make(map[*position][]shard.RecordID, 1)
	for _, id := range held {
		p := ps.owning(id.Key)
		heldGroups[p] = append(heldGroups[p], id)
	}
	errs := make([]error, len(ps))
	receipts := make([][]shard.Receipt, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		if len(groups[p])+len(heldGroups[p]) > 0 {
			wg.Go(func() {
				rs, err := p.shard.AcceptWithReceipts(ctx, groups[p], heldGroups[p], own)
				receipts[i] = rs
				if err != nil {
					errs[i] = fmt.Errorf("position %d: %w", p.index, err)
				}
			})
		}
	}
	wg.Wait()
	return slices.Concat(receipts...), partly(ps, groups, heldGroups, errs)
}

// HoldFor implements route.Holder: each position, in order, holds for
// owner the records its epoch table names owner for
// (shard.Manager.HoldFor), and the next is offered the rest; a record no
// position holds is not held.
func (ps positions) HoldFor(owner string, recs []shard.Record) (held []bool, took, dups int, err error) {
	if len(ps) == 1 {
		return ps[0].shard.HoldFor(owner, recs)
	}
	held = make([]bool, len(recs))
	left := make([]int, len(recs)) // indexes into recs not held yet
	for i := range left {
		left[i] = i
	}
	for _, p := range ps {
		if len(left) == 0 {
			break
		}
		sub := make([]shard.Record, len(left))
		for j, i := range left {
			sub[j] = recs[i]
		}
		h, t, d, err := p.shard.HoldFor(owner, sub)
		if err != nil {
			return nil, took, dups, fmt.Errorf("position %d: %w", p.index, err)
		}
		took, dups = took+t, dups+d
		rest := left[:0]
		for j, i := range left {
			if h[j] {
				held[i] = true
			} else {
				rest = append(rest, i)
			}
		}
		left = rest
	}
	return held, took, dups, nil
}

// ProgressSince hands each position's manager the finished records and
// host states of its own keys (shard.Manager.ProgressSince), for its
// replicas; the oldest of them was finished at since.
func (ps positions) ProgressSince(recs []shard.Record, hosts []shard.HostState, since time.Time) error {
	if len(ps) == 1 {
		return ps[0].shard.ProgressSince(recs, hosts, since)
	}
	groups := ps.group(recs, ps.owner)
	hostGroups := make(map[*position][]shard.HostState, 1)
	for _, h := range hosts {
		p := ps.owner(h.Key)
		hostGroups[p] = append(hostGroups[p], h)
	}
	var errs []error
	for _, p := range ps {
		if len(groups[p])+len(hostGroups[p]) > 0 {
			if err := p.shard.ProgressSince(groups[p], hostGroups[p], since); err != nil {
				errs = append(errs, fmt.Errorf("position %d: %w", p.index, err))
			}
		}
	}
	return errors.Join(errs...)
}

// predecessors returns the ring predecessors of the positions: the
// owners the node helps with hot hosts (helper.serve).
func (ps positions) predecessors() []ring.Peer {
	out := make([]ring.Peer, len(ps))
	for i, p := range ps {
		out[i] = p.ring.Predecessor()
	}
	return out
}

// vouch reports whether the epoch table of one of the positions says
// that owner holds key (shard.Manager.Vouch).
func (ps positions) vouch(key uint64, owner string) bool {
	for _, p := range ps {
		if p.shard.Vouch(key, owner) {
			return true
		}
	}
	return false
}

// successorsFor returns the successor list of the position that owns key,
// for the delegator: its first successor on another machine is the one
// helper of that position.
func (ps positions) successorsFor(key uint64) (self ring.Peer, succs []ring.Peer) {
	p := ps.owner(key)
	return p.ring.Self(), p.ring.Successors()
}

// machineAlone reports whether no position knows a member of another
// machine: the node is alone on its ring, and joins a member discovery
// finds.
func (ps positions) machineAlone() bool {
	self := ps[0].ring.Self().Machine()
	for _, p := range ps {
		if p.ring.Isolated() {
			return false
		}
		for _, s := range p.ring.Successors() {
			if s.Machine() != self {
				return false
			}
		}
	}
	return true
}

// newPositions builds the node's ring positions, of the indexes idx
// (placement), position 0 first: ring members that answer for one
// another's keys (ring.Config.Siblings), each with its ownership. The
// shard managers come later (buildShards).
func newPositions(idx []int, tr *p2p.RingTransport, self func(i int) ring.Peer, cfg ring.Config) positions {
	n := len(idx)
	ps := make(positions, n)
	if n > 1 {
		siblings := make([]*ring.Node, n)
		cfg.Siblings = func() []*ring.Node { return siblings }
		// Shared maintenance, and a successor list that grows with V
		// (ring.Config.Positions).
		cfg.Positions = n
		defer func() {
			for i, p := range ps {
				siblings[i] = p.ring
			}
		}()
	}
	for k, i := range idx {
		r := ring.NewNode(self(i), tr, cfg)
		ps[k] = &position{index: i, ring: r, own: shard.NewOwnership(r)}
	}
	return ps
}

// ringHandlers are the positions' ring members, for the ring transport:
// out[i] is position index i, nil for an index the node does not hold.
func (ps positions) ringHandlers() []ring.Handler {
	out := make([]ring.Handler, ps.maxIndex()+1)
	for _, p := range ps {
		out[p.index] = p.ring
	}
	return out
}

// maxIndex is the highest index of the positions.
func (ps positions) maxIndex() int {
	m := 0
	for _, p := range ps {
		m = max(m, p.index)
	}
	return m
}
