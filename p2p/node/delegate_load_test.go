package node

import (
	"math"
	"testing"
	"time"

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
