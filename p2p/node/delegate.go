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
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
	"google.golang.org/protobuf/proto"
)

// Hot hosts: fetch delegation over /swarmcrawl/fetch/1.0.0, the wiring of
// the routing layer's delegation (p2p/route: Delegator, HelperAdmission,
// Helper) over libp2p. The owner of a host with a long queue keeps its
// control plane and hands fetch batches to the holders of the host's
// helper slots (route.SlotKey, route.Config.HelperSlots; found through the
// router's owner cache), one batch of a host at a time (crawl.Delegator).
// A helper fetches a batch for its ring predecessor that its epoch table
// vouches for, or for the machine its own lookup names as the host's
// holder while one of its positions holds one of the host's slots; under
// the larger of the owner's gap and its own, its first request no sooner
// than the gap after the host's last request as the owner knew it
// (since_last_ns, counted from the batch's arrival); and answers once the
// links found on the batch's pages are settled with their owners.
//
// Each node checks this from its own ring state, not the sender's word,
// so a hostile owner that sends one batch to many nodes at once has it
// fetched by at most the host's slot holders (issue 29: before any check,
// by every node it asked). A helper fetches only within the owner's
// lease on the host's key: it asks the owner (a lease_query on the same
// protocol, answered from shard.Ownership.LeaseLeft) when the batch
// arrives and again before the answer runs out, and stops when it does
// (route.HelperLease), so an owner that crashes mid-batch leaves no
// helper fetching when its replica promotes itself. Every reply carries
// the helper's load (pages queued and in flight, clamped on read), and
// the owner chooses among the slots by load and delegates only to a
// helper less loaded than itself (route.Delegator.UseLoad, Choose).

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

// delegator implements crawl.Delegator over the fetch transport with the
// routing layer's route.Delegator.
type delegator struct {
	fetch *p2p.FetchTransport
	route *route.Delegator[fetchReq, *pb.FetchBatchReply]
	log   *slog.Logger

	sent, noHelper, sendFails atomic.Int64
}

var _ crawl.Delegator = (*delegator)(nil)

// fetchReq is a batch on the wire with how long the owner waits for it.
type fetchReq struct {
	req  *pb.FetchBatchRequest
	wait time.Duration
}

// fetchTransport is route.FetchTransport over libp2p.
type fetchTransport struct{ t *p2p.FetchTransport }

// Connected implements route.FetchTransport.
func (f fetchTransport) Connected(p ring.Peer) bool { return f.t.Connected(p) }

// Fetch implements route.FetchTransport: a batch that never reached the
// helper wraps route.ErrNoHelper, and a helper's busy reply is a
// *route.Busy with the load it reported, so that Send asks the next.
func (f fetchTransport) Fetch(ctx context.Context, to ring.Peer, r fetchReq) (*pb.FetchBatchReply, error) {
	reply, err := f.t.Fetch(ctx, to, r.req, r.wait)
	if errors.Is(err, p2p.ErrNotDelivered) {
		return nil, fmt.Errorf("%w: %w", err, route.ErrNoHelper)
	}
	if err == nil && reply.GetBusy() {
		return nil, &route.Busy{Load: replyLoad(reply)}
	}
	return reply, err
}

// newDelegator returns the delegator of a node whose position holding a
// ring key and its successor list successors returns.
func newDelegator(fetch *p2p.FetchTransport, successors func(key uint64) (ring.Peer, []ring.Peer), log *slog.Logger) *delegator {
	h := route.DefaultConfig().Helpers
	return &delegator{fetch: fetch, route: route.NewDelegator(route.FetchTransport[fetchReq, *pb.FetchBatchReply](fetchTransport{fetch}), h, successors), log: log}
}

// Delegate sends b to the next helper and returns its outcome. The whole
// exchange ends by b.Wait. A helper that is busy, refuses the batch or
// cannot be reached fetched nothing: the error wraps crawl.ErrNoHelper, and
// the owner fetches the batch itself.
func (d *delegator) Delegate(ctx context.Context, b *crawl.Batch) (*crawl.BatchResult, error) {
	ctx, cancel := context.WithDeadline(ctx, time.Now().Add(b.Wait))
	defer cancel()
	req := encodeBatch(b)
	if own := d.route.OwnLoad(); own >= 0 {
		// The helper declines when it would be busier than this node,
		// whose load still holds the batch (as Send counts it).
		req.OwnerLoad = proto.Int64(int64(min(own+len(b.Tasks), route.MaxLoad)))
	}
	p, reply, err := d.route.Send(ctx, b.RingKey, fetchReq{req: req, wait: b.Wait})
	if reply != nil {
		d.route.Report(p, replyLoad(reply))
	}
	var res *crawl.BatchResult
	if err == nil {
		if res, err = decodeFetchReply(b, reply); err != nil {
			err = fmt.Errorf("from %s: %w", p.Addr, err)
		}
	} else if errors.Is(err, route.ErrNoHelper) || errors.Is(err, route.ErrHostBusy) {
		err = fmt.Errorf("%w: %w", err, crawl.ErrNoHelper)
	}
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

// trimBatch cuts r to its first n tasks (route.Delegator.UseLoad): the
// crawler takes the tasks a reply has no outcome for back into its queue.
func trimBatch(r fetchReq, n int) fetchReq {
	req := proto.CloneOf(r.req)
	req.Tasks = req.Tasks[:min(n, len(req.Tasks))]
	return fetchReq{req: req, wait: r.wait}
}

// replyLoad is the load a reply reports, clamped to 0..route.MaxLoad: a
// helper's word, which moves only the choice among its host's slots.
func replyLoad(r *pb.FetchBatchReply) int {
	return int(min(max(r.GetLoad(), 0), route.MaxLoad))
}

// leaseQueryWait bounds a lease question's exchange when the helper's
// lease leaves it no shorter deadline.
const leaseQueryWait = 2 * time.Second

// askLease asks owner, a ring position, how much longer it holds key (a
// lease_query on the fetch protocol; route.Helper.Lease). A negative
// answer counts as none; route.HelperLease clamps a long one.
func askLease(t *p2p.FetchTransport) func(ctx context.Context, owner string, key uint64) (time.Duration, error) {
	return func(ctx context.Context, owner string, key uint64) (time.Duration, error) {
		wait := leaseQueryWait
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		if wait <= 0 {
			return 0, fmt.Errorf("lease of %016x from %s: %w", key, owner, context.DeadlineExceeded)
		}
		reply, err := t.Fetch(ctx, ring.Peer{Addr: owner}, &pb.FetchBatchRequest{RingKey: key, LeaseQuery: true}, wait)
		if err != nil {
			return 0, fmt.Errorf("lease of %016x from %s: %w", key, owner, err)
		}
		if reply.GetError() != "" {
			return 0, fmt.Errorf("lease of %016x from %s: %s", key, owner, reply.GetError())
		}
		return time.Duration(max(reply.GetLeaseLeftNs(), 0)), nil
	}
}

// answerLease is the owner's answer to a lease question: how long the
// position of this node that holds key may still work on it (0: none
// does).
func answerLease(req *pb.FetchBatchRequest, leaseLeft func(key uint64) time.Duration) *pb.FetchBatchReply {
	if req.GetHost() != "" || len(req.GetTasks()) > 0 {
		return &pb.FetchBatchReply{Error: "lease query carries a batch"}
	}
	return &pb.FetchBatchReply{LeaseLeftNs: int64(leaseLeft(req.GetRingKey()))}
}

// leaseLeft returns how long the position holding key may still work on
// it (shard.Ownership.LeaseLeft), 0 when none may.
func (ps positions) leaseLeft(key uint64) time.Duration {
	var left time.Duration
	for _, p := range ps {
		left = max(left, p.own.LeaseLeft(key))
	}
	return left
}

// crawlLoad is this node's load as it reports it to owners and weighs it
// as an owner: pages queued and in flight.
func (n *Node) crawlLoad() int {
	st := n.crawler.Stats()
	return int(min(max(st.Queued+st.InFlight, 0), route.MaxLoad))
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
	// slots, if set, lets the node help owners beyond its predecessors:
	// the holders of hosts whose helper slots it holds
	// (route.HelperAdmission.Slots).
	slots route.SlotView
	fetch func(ctx context.Context, b *crawl.Batch) (*crawl.BatchResult, error)
	links linkSettler
	// leaseLeft answers owners' lease questions about keys this node
	// holds, lease asks an owner (askLease), load is this node's load for
	// its replies.
	leaseLeft func(key uint64) time.Duration
	lease     func(ctx context.Context, owner string, key uint64) (time.Duration, error)
	load      func() int

	// trimmed counts the batches taken in part (route.WorthSize).
	served, refused, busy, trimmed atomic.Int64
}

// linkSettler is what the helper needs of the outbox.
type linkSettler interface {
	TakeLinks(page string) []uint64
	Settled(ids []uint64) bool
}

// serve fetches one batch for in.From, which arrived at in.Received, and
// builds the reply (route.Helper.Serve: admission, the gap after arrival,
// the owner watch, link settling). It runs under ctx, which ends when the
// node stops serving the protocol.
func (s *helper) serve(ctx context.Context, in p2p.Inbound, req *pb.FetchBatchRequest) *pb.FetchBatchReply {
	if req.GetLeaseQuery() {
		return answerLease(req, s.leaseLeft)
	}
	out := s.serveBatch(ctx, in, req)
	if s.load != nil {
		out.Load = int64(s.load())
	}
	return out
}

// serveBatch fetches one batch (serve).
func (s *helper) serveBatch(ctx context.Context, in p2p.Inbound, req *pb.FetchBatchRequest) *pb.FetchBatchReply {
	b, err := decodeBatch(req)
	if err != nil {
		s.refused.Add(1)
		return &pb.FetchBatchReply{Error: err.Error()}
	}
	if req.OwnerLoad != nil && s.load != nil {
		// Many owners may have heard the same low load from this node:
		// it takes no more of a batch than leaves it as busy as the
		// owner (route.WorthSize, the rule the owner applied to what it
		// heard), the rest unstarted, and declines one it can take
		// nothing of.
		owner := int(min(max(req.GetOwnerLoad(), 0), route.MaxLoad))
		n := route.WorthSize(owner, s.load(), len(b.Tasks))
		if n == 0 {
			s.busy.Add(1)
			return &pb.FetchBatchReply{Busy: true}
		}
		if n < len(b.Tasks) {
			s.trimmed.Add(1)
			b.Tasks = b.Tasks[:n]
		}
	}
	pages := make([]string, len(b.Tasks))
	for i, t := range b.Tasks {
		pages[i] = t.Task.URL
	}
	rh := &route.Helper{
		Admission: route.HelperAdmission{View: helperView{s}, Machines: route.DefaultConfig().Helpers, Slots: s.slots, SlotCount: route.DefaultConfig().HelperSlots},
		Links:     s.links,
		Lease:     s.lease,
		WatchPoll: vouchPoll, SettleMax: settleMax, SettlePoll: settlePoll,
	}
	hr := route.HelpRequest{
		From: in.From.String(), Key: b.RingKey, Pages: pages, Gap: b.Gap, SinceLast: b.SinceLast,
		Received: in.Received, Deadline: in.Received.Add(b.Wait - min(fetchReplyMargin, b.Wait/4)),
	}
	var res *crawl.BatchResult
	var fetched time.Time
	settled, err := rh.Serve(ctx, hr, func(ctx context.Context, until func() time.Time) error {
		// No request starts after the owner's lease as confirmed now: the
		// crawler's budget bounds starts, counted from this call.
		b.Budget = min(b.Budget, time.Until(until()))
		if b.Budget <= 0 {
			return route.ErrNoLease
		}
		var ferr error
		res, ferr = s.fetch(ctx, b)
		fetched = time.Now()
		return ferr
	})
	switch {
	case errors.Is(err, route.ErrNotHelped) || errors.Is(err, route.ErrNotVouched) || errors.Is(err, route.ErrNoLease) && fetched.IsZero():
		s.refused.Add(1)
		s.log.Debug("fetch batch refused", "from", p2p.ShortID(in.From), "host", b.Host, "err", err)
		return &pb.FetchBatchReply{Error: fmt.Sprintf("fetch batch from %s: %v", p2p.ShortID(in.From), err)}
	case errors.Is(err, crawl.ErrBusy):
		s.busy.Add(1)
		return &pb.FetchBatchReply{Busy: true}
	case err != nil && fetched.IsZero():
		// Stopped while waiting the gap: nothing was fetched.
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

// helperView is the node's ring and epoch tables as route.HelperAdmission
// sees them: one predecessor per position.
type helperView struct{ s *helper }

// Machine implements route.HelperView. Left empty: a predecessor on this
// node's own machine counts as a machine, as in the node's check before
// the routing layer had it, and never sends (a machine does not delegate
// to itself).
func (v helperView) Machine() string { return "" }

// Predecessors implements route.HelperView.
func (v helperView) Predecessors() [][]ring.Peer {
	ps := v.s.predecessors()
	out := make([][]ring.Peer, len(ps))
	for i, p := range ps {
		out[i] = []ring.Peer{p}
	}
	return out
}

// Vouch implements route.HelperView.
func (v helperView) Vouch(key uint64, owner string) bool { return v.s.vouch(key, owner) }

// helperSlots is the node's route.SlotView: its router's owner lookups
// (cached a few seconds) and its positions' ring arcs.
type helperSlots struct {
	router *route.Router
	pos    positions
}

// Owner implements route.SlotView.
func (h helperSlots) Owner(ctx context.Context, key uint64) (ring.Peer, error) {
	return h.router.Owner(ctx, key)
}

// Holds implements route.SlotView.
func (h helperSlots) Holds(k uint64) bool {
	for _, p := range h.pos {
		if p.ring.Owns(ring.ID(k)) {
			return true
		}
	}
	return false
}
