package node

import (
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// A peer's quota refuses what goes beyond its burst, tells when to retry,
// and takes the request once that time has passed; another peer's quota
// is its own; a request larger than the burst passes on a full bucket.
// The peers remembered stay within the bound.
func TestQuota(t *testing.T) {
	now := time.Unix(1000, 0)
	q := newQuota(Quota{Rate: 100, Burst: 200}, 3)
	q.now = func() time.Time { return now }
	a, b := peer.ID("a"), peer.ID("b")
	if ok, _ := q.take(a, 150); !ok {
		t.Fatal("first request within the burst refused")
	}
	ok, after := q.take(a, 100)
	if ok || after != 500*time.Millisecond {
		t.Fatalf("request beyond the burst: taken %v, retry after %v; want refused, 500ms", ok, after)
	}
	if ok, _ := q.take(b, 200); !ok {
		t.Fatal("another peer's request refused")
	}
	now = now.Add(after)
	if ok, _ := q.take(a, 100); !ok {
		t.Fatal("request refused after the time given to retry")
	}
	if ok, _ := q.take(peer.ID("c"), 1000); !ok {
		t.Fatal("a request larger than the burst refused on a full bucket")
	}
	if ok, after := q.take(peer.ID("c"), 1); ok || after < 8*time.Second {
		t.Fatalf("after a request larger than the burst: taken %v, retry after %v", ok, after)
	}
	for i := range 10 {
		q.take(peer.ID(rune('d'+i)), 1)
	}
	if n := q.remembered(); n != 3 {
		t.Fatalf("%d peers remembered, bound 3", n)
	}
	if q.refused.Load() != 2 {
		t.Fatalf("%d refusals counted, want 2", q.refused.Load())
	}
	if ok, _ := newQuota(Quota{Rate: -1}, 3).take(a, 1<<30); !ok {
		t.Fatal("no quota refused a request")
	}
}
