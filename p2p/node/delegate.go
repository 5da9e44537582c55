package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// Hot hosts: fetch delegation over /swarmcrawl/fetch/1.0.0. The owner of a
// host with a long queue keeps its control plane and hands fetch batches to
// its successor replicas (crawl.Delegator); a helper fetches a batch for an
// owner its epoch table vouches for, under the owner's gap, and answers
// once the links found on the batch's pages are settled with their owners.

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
// a batch to one of the node's live successors, round robin.
type delegator struct {
	fetch *p2p.FetchTransport
	self  ring.Peer
	// successors returns the ring's successor list, nearest first.
	successors func() []ring.Peer
	replicas   int
	log        *slog.Logger

	next                      atomic.Uint64
	sent, noHelper, sendFails atomic.Int64
}

var _ crawl.Delegator = (*delegator)(nil)

func newDelegator(fetch *p2p.FetchTransport, self ring.Peer, successors func() []ring.Peer, replicas int, log *slog.Logger) *delegator {
	return &delegator{fetch: fetch, self: self, successors: successors, replicas: replicas, log: log}
}

// helpers returns the candidate helpers: the first replicas successors,
// without self or duplicates, that the host is connected to.
func (d *delegator) helpers() []ring.Peer {
	var out []ring.Peer
	seen := map[string]bool{d.self.Addr: true}
	for _, p := range d.successors() {
		if len(out) == d.replicas {
			break
		}
		if seen[p.Addr] {
			continue
		}
		seen[p.Addr] = true
		if d.fetch.Connected(p) {
			out = append(out, p)
		}
	}
	return out
}

// Delegate sends b to a helper and returns its outcome. The whole exchange
// ends by b.Wait. A helper that is busy or refuses the batch fetched
// nothing, so the next one is tried with what remains of the budget; when
// none takes it the error wraps crawl.ErrNoHelper.
func (d *delegator) Delegate(ctx context.Context, b *crawl.Batch) (*crawl.BatchResult, error) {
	start := time.Now()
	ctx, cancel := context.WithDeadline(ctx, start.Add(b.Wait))
	defer cancel()
	req := encodeBatch(b)
	helpers := d.helpers()
	first := 0
	if len(helpers) > 0 {
		first = int(d.next.Add(1) % uint64(len(helpers)))
	}
	var refusals []error
	for i := range helpers {
		p := helpers[(first+i)%len(helpers)]
		// A later attempt gets only what is left of the budget and of
		// the wait, so the helper stops when the owner stops waiting.
		elapsed := time.Since(start)
		if elapsed >= b.Budget || ctx.Err() != nil {
			break
		}
		req.BudgetNs = int64(b.Budget - elapsed)
		req.WaitNs = int64(b.Wait - elapsed)
		res, err := d.send(ctx, p, b, req)
		if err == nil {
			d.sent.Add(1)
			return res, nil
		}
		if !errors.Is(err, crawl.ErrNoHelper) {
			d.sendFails.Add(1)
			return nil, fmt.Errorf("delegate %d tasks of %s: %w", len(b.Tasks), b.Host, err)
		}
		d.log.Debug("helper did not take the batch", "helper", p.Addr, "host", b.Host, "err", err)
		refusals = append(refusals, err)
	}
	d.noHelper.Add(1)
	if len(refusals) == 0 {
		return nil, fmt.Errorf("delegate %d tasks of %s: no live successor among %d replicas: %w", len(b.Tasks), b.Host, d.replicas, crawl.ErrNoHelper)
	}
	return nil, fmt.Errorf("delegate %d tasks of %s: %w", len(b.Tasks), b.Host, errors.Join(refusals...))
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
	// vouch reports whether owner holds key (shard.Manager.Vouch); fetch
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
	if !s.vouch(b.RingKey, from) {
		s.refused.Add(1)
		s.log.Debug("fetch batch refused: sender not the owner", "from", p2p.ShortID(in.From), "host", b.Host)
		return &pb.FetchBatchReply{Error: fmt.Sprintf("fetch batch: %s does not own %s as far as this node knows", p2p.ShortID(in.From), b.Host)}
	}
	ctx, cancel := context.WithDeadline(ctx, in.Received.Add(b.Wait-min(fetchReplyMargin, b.Wait/4)))
	defer cancel()
	stopWatch := s.watchOwner(ctx, cancel, b.RingKey, from)
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

// watchOwner cancels a batch as soon as this node's epoch table stops
// vouching for its sender (a replica promoted itself, or learnt of a higher
// claim), so that a stale owner's batch does not run on beside the new
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
			if !s.vouch(key, owner) {
				s.log.Info("fetch batch cut short: sender no longer owns the host", "owner", owner)
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
