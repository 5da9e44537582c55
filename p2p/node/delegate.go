package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// Hot hosts: fetch delegation over /swarmcrawl/fetch/1.0.0. The owner of a
// host with a long queue keeps its control plane and hands fetch batches to
// its first successor (crawl.Delegator); a helper fetches a batch for an
// owner its epoch table vouches for and that is its own ring predecessor,
// under the larger of the owner's gap and its own, and answers once the
// links found on the batch's pages are settled with their owners.
//
// One helper per owner: whatever an owner asks, and of however many
// nodes, only its first successor fetches for it, one batch of a host at
// a time, so the honest nodes' requests to a host never come faster than
// one per delay (the owner holds the host's lease while a batch runs). An
// owner that sent its batches to every replica at once had each fetch
// side by side with the others (issue 29: 60 of 120 gaps under 90 ms at
// a 100 ms delay). Each node checks this from its own ring state, not the
// sender's word: its predecessor is the only owner it helps.

// Helper tuning.
const (
	// fetchReplyMargin is how long before the batch's Wait runs out,
	// counted from when the stream arrived, the helper stops and replies
	// (at most a quarter of Wait): enough for the request's and the
	// reply's transit, so no request outlives the owner's wait and the
	// reply arrives while the owner still waits.
	fetchReplyMargin = time.Second
	// settleMax bounds how long a helper waits for the links of a batch's
	// pages to be settled before it replies, polling every settlePoll.
	settleMax  = 5 * time.Second
	settlePoll = 25 * time.Millisecond
	// vouchPoll is how often a helper checks, during a batch, that its
	// sender still owns the host.
	vouchPoll = 50 * time.Millisecond
)

// delegator implements crawl.Delegator over the fetch transport: it hands
// a batch to the first successor of the ring position that owns it, the
// one helper that takes that position's batches.
type delegator struct {
	fetch *p2p.FetchTransport
	// successors returns the node's position that holds a ring key, and
	// its successor list, nearest first.
	successors func(key uint64) (self ring.Peer, succs []ring.Peer)
	log        *slog.Logger

	sent, noHelper, sendFails atomic.Int64
}

var _ crawl.Delegator = (*delegator)(nil)

func newDelegator(fetch *p2p.FetchTransport, successors func(key uint64) (ring.Peer, []ring.Peer), log *slog.Logger) *delegator {
	return &delegator{fetch: fetch, successors: successors, log: log}
}

// helper returns the first successor on another machine of the position
// that holds key, if the host is connected to it: the only node that
// helps that position (see helper.serve).
func (d *delegator) helper(key uint64) (ring.Peer, bool) {
	self, succs := d.successors(key)
	for _, p := range succs {
		if p.Machine() != self.Machine() {
			return p, d.fetch.Connected(p)
		}
	}
	return ring.Peer{}, false
}

// Delegate sends b to the helper and returns its outcome. The whole
// exchange ends by b.Wait. A helper that is busy, refuses the batch or
// cannot be reached fetched nothing: the error wraps crawl.ErrNoHelper, and
// the owner fetches the batch itself.
func (d *delegator) Delegate(ctx context.Context, b *crawl.Batch) (*crawl.BatchResult, error) {
	ctx, cancel := context.WithDeadline(ctx, time.Now().Add(b.Wait))
	defer cancel()
	p, ok := d.helper(b.RingKey)
	if !ok {
		d.noHelper.Add(1)
		return nil, fmt.Errorf("delegate %d tasks of %s: no live successor: %w", len(b.Tasks), b.Host, crawl.ErrNoHelper)
	}
	res, err := d.send(ctx, p, b, encodeBatch(b))
	switch {
	case err == nil:
		d.sent.Add(1)
		return res, nil
	case errors.Is(err, crawl.ErrNoHelper):
		d.noHelper.Add(1)
		d.log.Debug("helper did not take the batch", "helper", p.Addr, "host", b.Host, "err", err)
		return nil, fmt.Errorf("delegate %d tasks of %s: %w", len(b.Tasks), b.Host, err)
	default:
		d.sendFails.Add(1)
		return nil, fmt.Errorf("delegate %d tasks of %s: %w", len(b.Tasks), b.Host, err)
	}
}

// send is one exchange with helper p. Errors that wrap crawl.ErrNoHelper
// mean the helper did nothing with the batch (it never saw it, was busy or
// refused it); any other error means it may have made requests.
func (d *delegator) send(ctx context.Context, p ring.Peer, b *crawl.Batch, req *pb.FetchBatchRequest) (*crawl.BatchResult, error) {
	reply, err := d.fetch.Fetch(ctx, p, req, b.Wait)
	if err != nil {
		if errors.Is(err, p2p.ErrNotDelivered) {
			return nil, fmt.Errorf("%w: %w", err, crawl.ErrNoHelper)
		}
		return nil, err
	}
	res, err := decodeFetchReply(b, reply)
	if err != nil {
		return nil, fmt.Errorf("from %s: %w", p.Addr, err)
	}
	return res, nil
}

// helper is the helper side of the fetch protocol: it fetches batches for
// the owners its epoch table vouches for.
type helper struct {
	log *slog.Logger
	// predecessors are the ring predecessors of the node's positions,
	// the only owners it fetches for (ring.Node.Predecessor).
	predecessors func() []ring.Peer
	// vouch reports whether owner, a ring position, holds key
	// (shard.Manager.Vouch of one of the node's positions); fetch
	// fetches a batch (crawl.Crawler.FetchBatch); links settles the links
	// found on its pages (the node's outbox).
	vouch func(key uint64, owner string) bool
	fetch func(ctx context.Context, b *crawl.Batch) (*crawl.BatchResult, error)
	links linkSettler

	served, refused, busy atomic.Int64
}

// linkSettler is what the helper needs of the outbox.
type linkSettler interface {
	TakeLinks(page string) []uint64
	Settled(ids []uint64) bool
}

// serve fetches one batch for in.From, which arrived at in.Received, and
// builds the reply. It runs under ctx, which ends when the node stops
// serving the protocol.
func (s *helper) serve(ctx context.Context, in p2p.Inbound, req *pb.FetchBatchRequest) *pb.FetchBatchReply {
	from := in.From.String()
	b, err := decodeBatch(req)
	if err != nil {
		s.refused.Add(1)
		return &pb.FetchBatchReply{Error: err.Error()}
	}
	owner, ok := s.predecessorOf(from)
	if !ok {
		s.refused.Add(1)
		s.log.Debug("fetch batch refused: sender not this node's predecessor", "from", p2p.ShortID(in.From), "host", b.Host)
		return &pb.FetchBatchReply{Error: fmt.Sprintf("fetch batch: %s is not this node's ring predecessor, the only owner it helps", p2p.ShortID(in.From))}
	}
	if !s.vouch(b.RingKey, owner) {
		s.refused.Add(1)
		s.log.Debug("fetch batch refused: sender not the owner", "from", p2p.ShortID(in.From), "host", b.Host)
		return &pb.FetchBatchReply{Error: fmt.Sprintf("fetch batch: %s does not own %s as far as this node knows", p2p.ShortID(in.From), b.Host)}
	}
	ctx, cancel := context.WithDeadline(ctx, in.Received.Add(b.Wait-min(fetchReplyMargin, b.Wait/4)))
	defer cancel()
	stopWatch := s.watchOwner(ctx, cancel, b.RingKey, owner)
	res, err := s.fetch(ctx, b)
	stopWatch()
	fetched := time.Now()
	// Whatever happened, the links of the batch's pages are this
	// handler's to settle: the owner never calls TakeLinks for them.
	settled := s.settle(ctx, b)
	switch {
	case errors.Is(err, crawl.ErrBusy):
		s.busy.Add(1)
		return &pb.FetchBatchReply{Busy: true}
	case err != nil:
		// FetchBatch fails only by refusing a malformed batch, before
		// any request.
		s.refused.Add(1)
		s.log.Warn("fetch batch refused by the crawler", "from", p2p.ShortID(in.From), "host", b.Host, "err", err)
		return &pb.FetchBatchReply{Error: err.Error()}
	case res == nil:
		return &pb.FetchBatchReply{Error: "fetch batch: no result", Failed: true}
	}
	if !settled {
		// The links are in this node's durable outbox and will be
		// delivered; only if it dies for good before are they lost.
		s.log.Debug("replying before every link of the batch is settled", "host", b.Host)
	}
	s.served.Add(1)
	out := encodeFetchReply(res)
	if res.Contacted {
		// The wait for links happened after the last request.
		out.SinceLastNs = int64(res.SinceLast + time.Since(fetched))
	}
	return out
}

// predecessorOf returns the position of machine from that is the ring
// predecessor of one of this node's positions, if any: with virtual
// nodes, a machine helps the predecessors of each of its positions.
func (s *helper) predecessorOf(from string) (string, bool) {
	for _, p := range s.predecessors() {
		if !p.IsZero() && p.Machine() == from {
			return p.Addr, true
		}
	}
	return "", false
}

// watchOwner cancels a batch as soon as this node's epoch table stops
// vouching for its sender (a replica promoted itself, or learnt of a higher
// claim), or the sender stops being its predecessor (a node joined between
// them, and helps the owner from now), so that a stale owner's batch does not run on beside the new
// owner's fetches of the same host. The returned function stops the watch
// and waits for it.
func (s *helper) watchOwner(ctx context.Context, cancel context.CancelFunc, key uint64, owner string) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(vouchPoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-quit:
				return
			case <-tick.C:
			}
			if !s.vouch(key, owner) || !slices.ContainsFunc(s.predecessors(), func(p ring.Peer) bool { return p.Addr == owner }) {
				s.log.Info("fetch batch cut short: sender no longer owns the host, or is no longer this node's predecessor", "owner", owner)
				cancel()
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// settle waits until the links found on the pages of b's tasks are
// settled with their owners, at most settleMax or until ctx ends, and
// reports whether they are.
func (s *helper) settle(ctx context.Context, b *crawl.Batch) bool {
	var ids []uint64
	for _, t := range b.Tasks {
		ids = append(ids, s.links.TakeLinks(t.Task.URL)...)
	}
	if len(ids) == 0 {
		return true
	}
	deadline := time.NewTimer(settleMax)
	defer deadline.Stop()
	tick := time.NewTicker(settlePoll)
	defer tick.Stop()
	for !s.links.Settled(ids) {
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
	return true
}
