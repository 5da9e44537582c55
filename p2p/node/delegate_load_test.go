package node

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// TestReplyLoadIsClamped: a helper's load is its word; one reporting a
// huge load counts as route.MaxLoad and one reporting a negative load as
// idle, so neither overflows the owner's arithmetic, and the owner's
// choice still puts the least loaded first and moves a batch only to a
// helper less loaded than itself.
func TestReplyLoadIsClamped(t *testing.T) {
	for in, want := range map[int64]int{
		-1: 0, math.MinInt64: 0, 0: 0, 500: 500,
		route.MaxLoad + 1: route.MaxLoad, math.MaxInt64: route.MaxLoad,
	} {
		if got := replyLoad(&pb.FetchBatchReply{Load: in}); got != want {
			t.Errorf("reported load %d read as %d, want %d", in, got, want)
		}
	}
	d := route.NewDelegator[fetchReq, *pb.FetchBatchReply](nil, 1, nil)
	huge, liar, honest := ring.Peer{Addr: "huge"}, ring.Peer{Addr: "liar"}, ring.Peer{Addr: "honest"}
	d.Report(huge, replyLoad(&pb.FetchBatchReply{Load: math.MaxInt64}))
	d.Report(liar, replyLoad(&pb.FetchBatchReply{Load: math.MinInt64}))
	d.Report(honest, replyLoad(&pb.FetchBatchReply{Load: 40}))
	for range 6 {
		order, ok := d.Choose([]ring.Peer{huge, liar, honest}, 1000, 16)
		if !ok || len(order) != 3 || order[len(order)-1] != huge {
			t.Fatalf("choice %v (%v): the helper reporting a huge load must come last and the batch still move", order, ok)
		}
	}
	if _, ok := d.Choose([]ring.Peer{huge}, 1000, 16); ok {
		t.Error("a batch moved to a helper reporting more work than the owner's")
	}
}

// TestLeaseQueryAnswersTheOwnersLease: a lease question is answered with
// what the owner's positions hold of the key and nothing else; one that
// carries a batch is refused, not fetched.
func TestLeaseQueryAnswersTheOwnersLease(t *testing.T) {
	left := func(key uint64) time.Duration {
		if key == 7 {
			return 1500 * time.Millisecond
		}
		return 0
	}
	if r := answerLease(&pb.FetchBatchRequest{RingKey: 7, LeaseQuery: true}, left); r.GetLeaseLeftNs() != int64(1500*time.Millisecond) || r.GetError() != "" {
		t.Errorf("held key: %v", r)
	}
	if r := answerLease(&pb.FetchBatchRequest{RingKey: 8, LeaseQuery: true}, left); r.GetLeaseLeftNs() != 0 {
		t.Errorf("key not held: %v", r)
	}
	r := answerLease(&pb.FetchBatchRequest{RingKey: 7, LeaseQuery: true, Host: "a.example", Tasks: []*pb.FetchTask{{Url: "http://a.example/"}}}, left)
	if r.GetError() == "" || r.GetLeaseLeftNs() != 0 {
		t.Errorf("a lease query carrying a batch was answered: %v", r)
	}
}

// TestHelperTakesTheWorthyPart: many owners may have heard the same low
// load from one helper; of a batch whose owner tells its own load
// (owner_load) the helper fetches only the first pages that leave it no
// busier than that owner (route.WorthSize), the others unstarted for the
// owner, and declines as busy, unfetched, a batch it can take no page of.
// A batch that tells no load is taken whole.
func TestHelperTakesTheWorthyPart(t *testing.T) {
	var fetched []int
	owner := newTestHost(t).ID()
	s := &helper{
		log:          slog.New(slog.DiscardHandler),
		predecessors: func() []ring.Peer { return []ring.Peer{{Addr: owner.String()}} },
		vouch:        func(uint64, string) bool { return true },
		fetch: func(_ context.Context, b *crawl.Batch) (*crawl.BatchResult, error) {
			fetched = append(fetched, len(b.Tasks))
			res := &crawl.BatchResult{}
			for range b.Tasks {
				res.Results = append(res.Results, crawl.TaskResult{Finished: true})
			}
			return res, nil
		},
		links: &fakeLinks{pages: map[string][]uint64{}},
		lease: func(context.Context, string, uint64) (time.Duration, error) { return time.Minute, nil },
		load:  func() int { return 100 },
	}
	host := "hot.example"
	batch := func(ownerLoad *int64) *pb.FetchBatchRequest {
		req := &pb.FetchBatchRequest{Host: host, RingKey: urls.HostKey(host), GapNs: int64(time.Second), SinceLastNs: int64(time.Second),
			BudgetNs: int64(10 * time.Second), WaitNs: int64(20 * time.Second), OwnerLoad: ownerLoad}
		for i := range 8 {
			req.Tasks = append(req.Tasks, &pb.FetchTask{Url: fmt.Sprintf("https://%s/p%d", host, i)})
		}
		return req
	}
	in := p2p.Inbound{From: owner, Received: time.Now()}
	// The helper is at 100 pages. An owner at 110 leaves room for 5 (100
	// + 2 x 5 <= 110), at 116 for all 8, at 101 (or a negative load, read
	// as 0) for none.
	for _, tc := range []struct {
		load *int64
		take int
	}{{proto.Int64(110), 5}, {proto.Int64(116), 8}, {nil, 8}, {proto.Int64(101), 0}, {proto.Int64(-5), 0}} {
		fetched = nil
		r := s.serve(t.Context(), in, batch(tc.load))
		switch {
		case tc.take == 0 && (!r.GetBusy() || r.GetLoad() != 100 || fetched != nil):
			t.Errorf("owner load %v: reply %v, fetched %v; want busy with the helper's load, nothing fetched", tc.load, r, fetched)
		case tc.take > 0 && (r.GetBusy() || r.GetError() != "" || len(r.GetResults()) != tc.take || len(fetched) != 1 || fetched[0] != tc.take):
			t.Errorf("owner load %v: reply %v, fetched batches %v; want the first %d pages fetched and answered", tc.load, r, fetched, tc.take)
		}
	}
	if s.busy.Load() != 2 || s.trimmed.Load() != 1 {
		t.Errorf("busy %d, trimmed %d; want 2 and 1", s.busy.Load(), s.trimmed.Load())
	}
}

// TestOwnerAsksTheNextHelperWhenBusy: a helper's busy reply (busier than
// the owner after the batch) reaches the routing layer as route.Busy with
// the helper's load, so the owner asks the host's next helper at once and
// does not fetch the batch itself; the busy helper fetched nothing.
func TestOwnerAsksTheNextHelperWhenBusy(t *testing.T) {
	busy := newTestHelper(t, fetchAll)
	busy.srv.load = func() int { return 1000 }
	idle := newTestHelper(t, fetchAll)
	idle.srv.load = func() int { return 0 }
	d := newTestOwner(t, busy, idle)
	idle.pred.Store(d.host.ID().String())
	// Both successors share the host's batches (as a host's helper slots
	// do), the busy one asked first.
	self, succs := p2p.RingPeer(d.host.ID()), []ring.Peer{p2p.RingPeer(busy.h.ID()), p2p.RingPeer(idle.h.ID())}
	d.route = route.NewDelegator(route.FetchTransport[fetchReq, *pb.FetchBatchReply](fetchTransport{d.fetch}), 2,
		func(uint64) (ring.Peer, []ring.Peer) { return self, succs })
	d.route.UseLoad(func() int { return 50 }, func(r fetchReq) int { return len(r.req.GetTasks()) }, trimBatch)
	res, err := d.Delegate(context.Background(), testBatch(3))
	if err != nil || res == nil {
		t.Fatalf("Delegate = %v, %v; want the idle helper's outcome", res, err)
	}
	if busy.srv.busy.Load() != 1 || busy.calls.Load() != 0 || idle.calls.Load() != 1 {
		t.Errorf("busy helper declined %d and fetched %d batches, idle fetched %d; want 1, 0, 1",
			busy.srv.busy.Load(), busy.calls.Load(), idle.calls.Load())
	}
	if d.noHelper.Load() != 0 {
		t.Errorf("%d batches left to the owner", d.noHelper.Load())
	}
}
