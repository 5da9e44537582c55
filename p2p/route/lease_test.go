package route

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// TestHelperStopsWithinTheCrashedOwnersLease: an owner hands a long batch
// of a host to a helper over the in-memory transport and crashes while the
// helper is fetching it. The helper's own view still says the owner holds
// the host (its lookup is cached, so Still answers yes), as in the churn
// run where a helper fetched for up to 5 s after its owner died. The
// owner's replica promotes itself FailureTimeout − Lease after the owner's
// last lease ran out and fetches the host at once; every request of the
// helper must end one gap before that, so no two machines fetch the host
// closer than the gap. The owner renews a short lease while alive and
// answers lease queries with what is left of it (shard.Ownership.LeaseLeft).
func TestHelperStopsWithinTheCrashedOwnersLease(t *testing.T) {
	const (
		gap          = 40 * time.Millisecond
		request      = 10 * time.Millisecond
		lease        = 300 * time.Millisecond
		promoteAfter = 250 * time.Millisecond // FailureTimeout − Lease
		pages        = 40                     // about 2 s of fetching
	)
	rnet := ring.NewMemNet(1)
	batches := NewMemFetchNet[[]string, int](rnet)
	leases := NewMemFetchNet[uint64, time.Duration](rnet)
	owner, helperPeer := peer("o", 0), peer("a", 1)

	// The owner: a lease renewed every 100 ms until it crashes.
	var mu sync.Mutex
	leaseUntil := time.Now().Add(lease)
	ctx, stopOwner := context.WithCancel(context.Background())
	defer stopOwner()
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				mu.Lock()
				leaseUntil = now.Add(lease)
				mu.Unlock()
			}
		}
	}()
	leases.Register(owner, func(_ context.Context, _ string, key uint64) (time.Duration, error) {
		mu.Lock()
		defer mu.Unlock()
		return time.Until(leaseUntil), nil
	})

	type hit struct{ start, end time.Time }
	var hits []hit
	served := make(chan error, 1)
	h := &Helper{
		Admission: HelperAdmission{View: fakeView{machine: "a", preds: [][]ring.Peer{{owner}}, vouched: map[string]bool{"o": true}}, Machines: 1},
		Links:     linksNone{},
		Lease: func(ctx context.Context, to string, key uint64) (time.Duration, error) {
			return leases.Transport(helperPeer).Fetch(ctx, ring.Peer{Addr: to}, key)
		},
		LeaseRenew: 150 * time.Millisecond,
		WatchPoll:  10 * time.Millisecond,
	}
	batches.Register(helperPeer, func(ctx context.Context, from string, ps []string) (int, error) {
		req := HelpRequest{From: from, Key: 7, Pages: ps, Gap: gap, Received: time.Now(), Deadline: time.Now().Add(10 * time.Second)}
		n := 0
		_, err := h.Serve(ctx, req, func(ctx context.Context, until func() time.Time) error {
			for range ps {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if !time.Now().Before(until()) {
					// No request after the owner's lease as last
					// confirmed; a later answer may extend it.
					if err := sleep(ctx, request); err != nil {
						return err
					}
					if !time.Now().Before(until()) {
						return ErrNoLease
					}
				}
				start := time.Now()
				_ = sleep(ctx, request)
				hits = append(hits, hit{start, time.Now()})
				n++
				_ = sleep(ctx, gap)
			}
			return nil
		})
		served <- err
		return n, err
	})

	d := NewDelegator(batches.Transport(owner), 1, func(uint64) (ring.Peer, []ring.Peer) { return owner, []ring.Peer{helperPeer} })
	go func() { _, _, _ = d.Send(context.Background(), 7, make([]string, pages)) }()

	// Crash the owner once the helper has made a few requests.
	time.Sleep(gap + 6*(gap+request))
	rnet.Crash("o")
	stopOwner()
	mu.Lock()
	last := leaseUntil // the owner's last lease: a replica promotes promoteAfter later
	mu.Unlock()

	select {
	case err := <-served:
		if !errors.Is(err, context.Canceled) && !errors.Is(err, ErrNoLease) && err != nil {
			t.Logf("batch ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the helper never stopped")
	}
	if len(hits) < 2 {
		t.Fatalf("%d requests before the crash: the test did not exercise a batch", len(hits))
	}
	promoted := last.Add(promoteAfter)
	for i, x := range hits {
		if x.end.Add(gap).After(promoted) {
			t.Errorf("request %d of %d ended %v after the owner's lease ran out; the promoted replica fetches %v after it, closer than the %v gap",
				i, len(hits), x.end.Sub(last), promoteAfter, gap)
		}
	}
	if len(hits) == pages {
		t.Errorf("the helper fetched the whole batch of %d pages for a crashed owner", pages)
	}
}
