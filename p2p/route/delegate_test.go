package route

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// fakeView is a helper's view: its machine, its positions' predecessors
// and the owners its epoch table vouches for.
type fakeView struct {
	machine string
	preds   [][]ring.Peer
	vouched map[string]bool
}

func (v fakeView) Machine() string                     { return v.machine }
func (v fakeView) Predecessors() [][]ring.Peer         { return v.preds }
func (v fakeView) Vouch(key uint64, owner string) bool { return v.vouched[owner] }

func peer(addr string, id uint64) ring.Peer { return ring.Peer{ID: ring.ID(id), Addr: addr} }

// TestHelperAdmissionRefusesNonPredecessors: a helper fetches for the
// owners within Machines machines before one of its positions whose claim
// its epoch table vouches for, and for no one else: not a machine
// further back, not a stranger, not a near one the table does not vouch
// for. Its own machine's positions do not count as machines.
func TestHelperAdmissionRefusesNonPredecessors(t *testing.T) {
	v := fakeView{
		machine: "h",
		preds: [][]ring.Peer{
			{peer("a", 90), peer("h/3", 85), peer("b/1", 80), peer("b", 70), peer("c", 60)},
			{peer("d", 20)},
		},
		vouched: map[string]bool{"a": true, "b": true, "c": true, "d": true, "x": true},
	}
	a := HelperAdmission{View: v, Machines: 2}
	for from, want := range map[string]string{"a": "a", "b": "b", "d": "d"} {
		if owner, err := a.Admit(context.Background(), from, 1); err != nil || owner != want {
			t.Errorf("Admit(%s) = %q, %v; want %q", from, owner, err, want)
		}
	}
	for _, from := range []string{"c", "x", "h"} {
		if _, err := a.Admit(context.Background(), from, 1); !errors.Is(err, ErrNotHelped) {
			t.Errorf("Admit(%s): %v, want ErrNotHelped", from, err)
		}
	}
	v.vouched = map[string]bool{"a": true}
	a.View = v
	if _, err := a.Admit(context.Background(), "b", 1); !errors.Is(err, ErrNotVouched) {
		t.Errorf("Admit(b) unvouched: %v, want ErrNotVouched", err)
	}
	if a.Still(context.Background(), 1, "b/1") || !a.Still(context.Background(), 1, "a") {
		t.Error("Still: want a held and b/1 not")
	}
	if _, err := (HelperAdmission{View: v, Machines: 1}).Admit(context.Background(), "b", 1); !errors.Is(err, ErrNotHelped) {
		t.Errorf("Admit(b) with one machine: %v, want ErrNotHelped", err)
	}
}

// TestHelperOfGoesRound: successive turns go round the first h machines
// of the successor list, skipping the owner's own machine and the other
// positions of a machine already counted.
func TestHelperOfGoesRound(t *testing.T) {
	self := peer("o", 0)
	succs := []ring.Peer{peer("o/1", 1), peer("a", 2), peer("a/2", 3), peer("b", 4), peer("c", 5), peer("d", 6)}
	var got []string
	for turn := range uint64(7) {
		p, ok := HelperOf(self, succs, 3, turn)
		if !ok {
			t.Fatal("no helper")
		}
		got = append(got, p.Addr)
	}
	if want := []string{"a", "b", "c", "a", "b", "c", "a"}; !equalStrings(got, want) {
		t.Errorf("helpers %v, want %v", got, want)
	}
	if _, ok := HelperOf(self, succs[:1], 3, 0); ok {
		t.Error("a successor list of the owner's own machine named a helper")
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDelegatorOneBatchOfAHostAtATime: while a batch of a host is out at
// one helper, the owner's delegator sends no other batch of that host to
// any helper (it may send another host's); successive batches of a host
// go to the helpers in turn.
func TestDelegatorOneBatchOfAHostAtATime(t *testing.T) {
	rnet := ring.NewMemNet(1)
	net := NewMemFetchNet[int, string](rnet)
	owner := peer("o", 0)
	helpers := []ring.Peer{peer("a", 1), peer("b", 2), peer("c", 3)}
	var mu sync.Mutex
	running := map[int]int{} // batch key -> batches running
	var served []string
	held := false
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	for _, h := range helpers {
		net.Register(h, func(ctx context.Context, from string, key int) (string, error) {
			mu.Lock()
			running[key]++
			if running[key] > 1 {
				t.Errorf("%d batches of host %d at once", running[key], key)
			}
			served = append(served, h.Addr)
			mu.Unlock()
			mu.Lock()
			first := key == 1 && !held
			held = held || first
			mu.Unlock()
			if first { // the first batch of host 1 stays out
				entered <- struct{}{}
				<-release
			}
			mu.Lock()
			running[key]--
			mu.Unlock()
			return h.Addr, nil
		})
	}
	d := NewDelegator(net.Transport(owner), 3, func(uint64) (ring.Peer, []ring.Peer) { return owner, helpers })
	ctx := context.Background()
	done := make(chan error)
	go func() {
		_, _, err := d.Send(ctx, 1, 1)
		done <- err
	}()
	<-entered
	// Host 1's batch is out: no second one, whichever helper is next.
	for range 3 {
		if _, _, err := d.Send(ctx, 1, 1); !errors.Is(err, ErrHostBusy) {
			t.Fatalf("second batch of a host while one is out: %v, want ErrHostBusy", err)
		}
	}
	if _, _, err := d.Send(ctx, 2, 2); err != nil {
		t.Fatalf("another host's batch: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, _, err := d.Send(ctx, 3, 3); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"a", "b", "c", "a", "b"}; !equalStrings(served, want) {
		t.Errorf("batches went to %v, want %v (one at a time, in turn)", served, want)
	}
}

// TestDelegatorSkipsRefusingHelper: a helper that refuses the sender or
// cannot be reached fetched nothing; the next one takes the batch, and
// when none does the error wraps ErrNoHelper.
func TestDelegatorSkipsRefusingHelper(t *testing.T) {
	rnet := ring.NewMemNet(1)
	net := NewMemFetchNet[int, string](rnet)
	owner := peer("o", 0)
	a, b := peer("a", 1), peer("b", 2)
	net.Register(a, func(context.Context, string, int) (string, error) { return "", ErrNotHelped })
	net.Register(b, func(context.Context, string, int) (string, error) { return "b", nil })
	d := NewDelegator(net.Transport(owner), 2, func(uint64) (ring.Peer, []ring.Peer) { return owner, []ring.Peer{a, b} })
	for range 2 {
		p, rep, err := d.Send(context.Background(), 1, 1)
		if err != nil || p != b || rep != "b" {
			t.Fatalf("Send = %v, %q, %v; want b", p, rep, err)
		}
	}
	rnet.Crash("b")
	if _, _, err := d.Send(context.Background(), 1, 1); !errors.Is(err, ErrNoHelper) {
		t.Fatalf("no helper took it: %v, want ErrNoHelper", err)
	}
}

// leaseAlways is an owner that always holds a long lease.
func leaseAlways(context.Context, string, uint64) (time.Duration, error) { return time.Minute, nil }

// linksNone is an outbox with nothing to settle.
type linksNone struct{}

func (linksNone) Settled([]uint64) bool     { return true }
func (linksNone) TakeLinks(string) []uint64 { return nil }

// TestHelperKeepsTheGapAcrossHelpers: an owner hands two batches of one
// host, one after the other, to two helpers that know nothing of each
// other's requests; the second helper's first request comes at least the
// gap after the first helper's last, because a helper waits one full gap
// after a batch reaches it.
func TestHelperKeepsTheGapAcrossHelpers(t *testing.T) {
	const gap = 60 * time.Millisecond
	rnet := ring.NewMemNet(1)
	net := NewMemFetchNet[[]string, int](rnet)
	owner := peer("o", 0)
	hs := []ring.Peer{peer("a", 1), peer("b", 2)}
	var mu sync.Mutex
	var hits []time.Time
	for i, h := range hs {
		preds := [][]ring.Peer{{owner}}
		if i == 1 {
			preds = [][]ring.Peer{{hs[0], owner}}
		}
		helper := &Helper{
			Admission: HelperAdmission{View: fakeView{machine: h.Addr, preds: preds, vouched: map[string]bool{"o": true}}, Machines: 2},
			Links:     linksNone{},
			Lease:     leaseAlways,
		}
		net.Register(h, func(ctx context.Context, from string, pages []string) (int, error) {
			req := HelpRequest{From: from, Key: 7, Pages: pages, Gap: gap, Received: time.Now(), Deadline: time.Now().Add(5 * time.Second)}
			n := 0
			_, err := helper.Serve(ctx, req, func(ctx context.Context, _ func() time.Time) error {
				// The fetcher paces its own requests by the gap.
				for j := range pages {
					if j > 0 {
						time.Sleep(gap)
					}
					mu.Lock()
					hits = append(hits, time.Now())
					mu.Unlock()
					n++
				}
				return nil
			})
			return n, err
		})
	}
	d := NewDelegator(net.Transport(owner), 2, func(uint64) (ring.Peer, []ring.Peer) { return owner, hs })
	for range 2 {
		if _, n, err := d.Send(context.Background(), 7, []string{"p1", "p2"}); err != nil || n != 2 {
			t.Fatalf("batch: %d fetched, %v", n, err)
		}
	}
	if len(hits) != 4 {
		t.Fatalf("%d requests, want 4", len(hits))
	}
	for i := 1; i < len(hits); i++ {
		if g := hits[i].Sub(hits[i-1]); g < gap {
			t.Errorf("requests %d and %d %v apart, under the %v gap", i-1, i, g, gap)
		}
	}
}

// TestHelperWaitsTheRestOfTheGap: a batch's first request waits what was
// left of the gap when its owner sent it, counted from its arrival: the
// whole gap when the owner says nothing (or lies below zero), none when
// the host's turn had come, never more than the gap. With the host's turn
// come, a helper of a host whose gap is an hour fetches at once.
func TestHelperWaitsTheRestOfTheGap(t *testing.T) {
	at := time.Unix(1000, 0)
	const gap = 10 * time.Second
	for _, c := range []struct {
		since, wait time.Duration
	}{{0, gap}, {-time.Hour, gap}, {3 * time.Second, 7 * time.Second}, {gap, 0}, {time.Hour, 0}} {
		if got := (HelpRequest{Gap: gap, SinceLast: c.since, Received: at}).FirstRequest().Sub(at); got != c.wait {
			t.Errorf("since last %v: first request %v after arrival, want %v", c.since, got, c.wait)
		}
	}

	h := &Helper{Admission: HelperAdmission{View: fakeView{machine: "h", preds: [][]ring.Peer{{peer("o", 0)}}, vouched: map[string]bool{"o": true}}, Machines: 1}, Links: linksNone{}, Lease: leaseAlways}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fetched := false
	req := HelpRequest{From: "o", Key: 1, Gap: time.Hour, SinceLast: time.Hour, Received: time.Now(), Deadline: time.Now().Add(10 * time.Second)}
	if _, err := h.Serve(ctx, req, func(context.Context, func() time.Time) error {
		fetched = true
		return nil
	}); err != nil || !fetched {
		t.Fatalf("batch sent with the host's turn come: fetched %v, %v; want fetched at once", fetched, err)
	}
}

// slowLookup is a slot view whose lookup of a host's holder answers only
// once the owner's lease was asked (or after 5 s, not found).
type slowLookup struct {
	asked chan struct{}
	owner ring.Peer
}

func (v slowLookup) Holds(uint64) bool { return true }
func (v slowLookup) Owner(ctx context.Context, _ uint64) (ring.Peer, error) {
	select {
	case <-v.asked:
		return v.owner, nil
	case <-time.After(5 * time.Second):
		return ring.Peer{}, ring.ErrUnreachable
	case <-ctx.Done():
		return ring.Peer{}, ctx.Err()
	}
}

// TestHelperAsksTheLeaseBesideAdmission: the helper asks the sender's
// machine for its lease while the slot admission's lookup runs, so a
// batch waits for the slower of the two round trips, not both; a sender
// refused admission gets no fetch.
func TestHelperAsksTheLeaseBesideAdmission(t *testing.T) {
	asked := make(chan struct{})
	var once sync.Once
	var askedOf string
	lease := func(_ context.Context, owner string, _ uint64) (time.Duration, error) {
		once.Do(func() { askedOf = owner; close(asked) })
		return time.Minute, nil
	}
	lookup := slowLookup{asked: asked, owner: peer("o/3", 7)}
	h := &Helper{Admission: HelperAdmission{View: fakeView{machine: "h"}, Machines: 1, Slots: lookup, SlotCount: 1}, Links: linksNone{}, Lease: lease}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fetched := false
	req := HelpRequest{From: "o", Key: 1, Gap: time.Second, SinceLast: time.Second, Received: time.Now(), Deadline: time.Now().Add(10 * time.Second)}
	if _, err := h.Serve(ctx, req, func(context.Context, func() time.Time) error {
		fetched = true
		return nil
	}); err != nil || !fetched {
		t.Fatalf("admission's lookup answering only after the lease question: fetched %v, %v; want the question asked beside the lookup and the batch fetched", fetched, err)
	}
	if askedOf != "o" {
		t.Errorf("lease asked of %q, want the sender's machine %q", askedOf, "o")
	}

	// The lookup finds another machine holding the key: refused, not
	// fetched, whatever the lease answer.
	h.Admission.Slots = slowLookup{asked: asked, owner: peer("x/1", 9)}
	fetched = false
	_, err := h.Serve(ctx, req, func(context.Context, func() time.Time) error {
		fetched = true
		return nil
	})
	if !errors.Is(err, ErrNotVouched) || fetched {
		t.Fatalf("sender not holding the key: err %v, fetched %v; want ErrNotVouched, nothing fetched", err, fetched)
	}
}

// TestHelperServeRefusesBeforeFetching: a refused sender's batch is never
// fetched.
func TestHelperServeRefusesBeforeFetching(t *testing.T) {
	h := &Helper{Admission: HelperAdmission{View: fakeView{machine: "h", preds: [][]ring.Peer{{peer("a", 1)}}, vouched: map[string]bool{"a": true, "x": true}}, Machines: 1}, Links: linksNone{}, Lease: leaseAlways}
	fetched := false
	_, err := h.Serve(context.Background(), HelpRequest{From: "x", Key: 1, Deadline: time.Now().Add(time.Second)}, func(context.Context, func() time.Time) error {
		fetched = true
		return nil
	})
	if !errors.Is(err, ErrNotHelped) || fetched {
		t.Fatalf("stranger's batch: err %v, fetched %v", err, fetched)
	}
}

// TestDelegatorSendsTheLargestWorthyBatch: an owner with 10 pages queued
// besides a batch of 16 may move 8 of them to an idle helper (moving 16
// would leave the helper busier than the owner; route.Worth): Send cuts
// the batch to its first 8 pages and the helper gets those. An owner with
// 1 page besides a batch of 2 moves none.
func TestDelegatorSendsTheLargestWorthyBatch(t *testing.T) {
	rnet := ring.NewMemNet(1)
	net := NewMemFetchNet[[]int, int](rnet)
	owner, a := peer("o", 0), peer("a", 1)
	var got []int
	net.Register(a, func(_ context.Context, _ string, pages []int) (int, error) { got = pages; return len(pages), nil })
	d := NewDelegator(net.Transport(owner), 1, func(uint64) (ring.Peer, []ring.Peer) { return owner, []ring.Peer{a} })
	queued := 10
	d.UseLoad(func() int { return queued }, func(p []int) int { return len(p) }, func(p []int, n int) []int { return p[:n] })
	batch := make([]int, 16)
	for i := range batch {
		batch[i] = i
	}
	if _, n, err := d.Send(context.Background(), 1, batch); err != nil || n != 8 || len(got) != 8 || got[7] != 7 {
		t.Fatalf("Send = %d pages, %v; the helper got %v; want the first 8", n, err, got)
	}
	queued = 1
	got = nil
	if _, _, err := d.Send(context.Background(), 2, batch[:2]); !errors.Is(err, ErrNoHelper) || got != nil {
		t.Fatalf("Send of 2 pages by an owner with 1 more: %v, helper got %v; want no batch moved", err, got)
	}
}

// TestDelegatorAsksTheNextWhenBusy: a helper that declines a batch as
// busier than the owner fetched nothing; Send records the load it
// reported and asks the next helper at once, rather than leaving the
// batch to the owner (issue 28: the owners that kept what busy helpers
// declined were the busiest machines). A helper the loads heard say is
// not less loaded by two batches is not asked.
func TestDelegatorAsksTheNextWhenBusy(t *testing.T) {
	rnet := ring.NewMemNet(1)
	net := NewMemFetchNet[[]int, string](rnet)
	owner := peer("o", 0)
	helpers := []ring.Peer{peer("a", 1), peer("b", 2), peer("c", 3)}
	var mu sync.Mutex
	var asked []string
	for _, h := range helpers {
		net.Register(h, func(_ context.Context, _ string, pages []int) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			asked = append(asked, h.Addr)
			if len(asked) == 1 {
				return "", &Busy{Load: 37}
			}
			return h.Addr, nil
		})
	}
	d := NewDelegator(net.Transport(owner), 3, func(uint64) (ring.Peer, []ring.Peer) { return owner, helpers })
	queued := 40
	d.UseLoad(func() int { return queued }, func(p []int) int { return len(p) }, func(p []int, n int) []int { return p[:n] })
	p, rep, err := d.Send(context.Background(), 1, []int{1, 2})
	if err != nil || len(asked) != 2 || p.Addr != asked[1] || rep != asked[1] {
		t.Fatalf("Send = %v, %q, %v after asking %v; want the second helper asked to take it", p.Addr, rep, err, asked)
	}
	if got := d.heard(peer(asked[0], 0)); got != 37 {
		t.Errorf("load heard from the busy helper %s = %d, want 37", asked[0], got)
	}

	// Two helpers: b was heard too loaded to take a batch from this
	// owner; a declines. b is not asked, and the owner keeps the batch.
	rnet2 := ring.NewMemNet(1)
	net2 := NewMemFetchNet[[]int, string](rnet2)
	a, b := peer("a", 1), peer("b", 2)
	asked = nil
	net2.Register(a, func(context.Context, string, []int) (string, error) {
		asked = append(asked, "a")
		return "", &Busy{Load: 38}
	})
	net2.Register(b, func(context.Context, string, []int) (string, error) {
		asked = append(asked, "b")
		return "b", nil
	})
	d2 := NewDelegator(net2.Transport(owner), 2, func(uint64) (ring.Peer, []ring.Peer) { return owner, []ring.Peer{a, b} })
	d2.UseLoad(func() int { return queued }, func(p []int) int { return len(p) }, func(p []int, n int) []int { return p[:n] })
	d2.Report(b, 39)
	_, _, err = d2.Send(context.Background(), 2, []int{1, 2})
	if !errors.Is(err, ErrNoHelper) || !errors.Is(err, ErrHelperBusy) || !equalStrings(asked, []string{"a"}) {
		t.Fatalf("Send = %v after asking %v; want only a asked, and ErrNoHelper wrapping ErrHelperBusy", err, asked)
	}
}
