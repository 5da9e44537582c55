package shard

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// ownerClaim returns n's single active claim.
func ownerClaim(t *testing.T, n *testNode) Claim {
	t.Helper()
	cs := n.stats().Claims
	if len(cs) != 1 {
		t.Fatalf("%s claims %v, want one claim", n.peer.Addr, cs)
	}
	return cs[0]
}

// successor returns the live node after n on the ring.
func (c *cluster) successor(n *testNode) *testNode {
	return c.byAddr(n.rn.Successors()[0].Addr)
}

// A replica refuses a claim lower than its epoch table, reports the higher
// epoch for exactly the conflicting part, and stores nothing of it; a
// claim at or above the table is accepted together with its records.
func TestReplicaRejectsLowerEpoch(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 2)
	rep := c.add(1 << 40) // alone, never ticked: claims nothing, empty table
	// Each sender sits at the end of what it claims, as an owner does.
	a, b := ring.Peer{ID: 2000, Addr: "a"}, ring.Peer{ID: 6000, Addr: "b"}
	rep.m.placeForTest(a)
	rep.m.placeForTest(b)

	high := Epoch{5, "a"}
	reply := rep.m.HandleReplicate(ctx, a, &WriteRequest{
		Claims:  []Claim{{Range{1000, 2000}, high}},
		Records: []Record{{Key: 1500, Hash: 1}, {Key: 2500, Hash: 9}}, // the second lies outside every claim
	})
	if len(reply.Rejected) != 0 {
		t.Fatalf("first claim rejected: %v", reply.Rejected)
	}
	if _, ok := rep.st.Record(1500, 1); !ok {
		t.Fatal("record inside the accepted claim not stored")
	}
	if _, ok := rep.st.Record(2500, 9); ok {
		t.Fatal("record outside every claim stored")
	}

	// b claims an overlapping range at a lower epoch, plus a disjoint one.
	reply = rep.m.HandleReplicate(ctx, b, &WriteRequest{
		Claims: []Claim{
			{Range{1800, 3000}, Epoch{3, "b"}},
			{Range{5000, 6000}, Epoch{1, "b"}},
		},
		Records: []Record{{Key: 2500, Hash: 2}, {Key: 5500, Hash: 3}},
	})
	want := []Claim{{Range{1800, 2000}, high}}
	if !slices.Equal(reply.Rejected, want) {
		t.Fatalf("Rejected = %v, want %v", reply.Rejected, want)
	}
	if _, ok := rep.st.Record(2500, 2); ok {
		t.Fatal("record of the refused claim stored")
	}
	if _, ok := rep.st.Record(5500, 3); !ok {
		t.Fatal("record of the accepted disjoint claim not stored")
	}
	// Same N, lower owner name: still lower.
	zero := ring.Peer{ID: 2000, Addr: "0"}
	rep.m.placeForTest(zero)
	reply = rep.m.HandleReplicate(ctx, zero, &WriteRequest{Claims: []Claim{{Range{1000, 2000}, Epoch{5, "0"}}}})
	if len(reply.Rejected) != 1 {
		t.Fatalf("equal N with a lower owner accepted")
	}
	// A higher claim is accepted and raises the table.
	reply = rep.m.HandleReplicate(ctx, b, &WriteRequest{Claims: []Claim{{Range{1800, 3000}, Epoch{6, "b"}}}})
	if len(reply.Rejected) != 0 || rep.tableAt(1900) != (Epoch{6, "b"}) || rep.tableAt(1500) != high {
		t.Fatalf("higher claim: rejected %v, table %v / %v", reply.Rejected, rep.tableAt(1900), rep.tableAt(1500))
	}
	if got := rep.stats().RejectedWrites; got != 2 {
		t.Fatalf("RejectedWrites = %d, want 2", got)
	}
}

// injectHigher makes rep believe someone claimed r at epoch e.
func injectHigher(t *testing.T, rep *testNode, r Range, e Epoch) {
	t.Helper()
	// The claimer sits at the range's end, where its owner would.
	from := ring.Peer{ID: r.To, Addr: e.Owner}
	rep.m.placeForTest(from)
	reply := rep.m.HandleReplicate(context.Background(), from, &WriteRequest{Claims: []Claim{{r, e}}})
	if len(reply.Rejected) != 0 || reply.Refused != "" {
		t.Fatalf("injection refused: %v %s", reply.Rejected, reply.Refused)
	}
}

// A stale owner learns from a refused write that someone holds its range
// under a higher epoch, and drops the claim: Accept returns ErrStale, the
// app deactivates the range, Owns turns false, and the table remembers the
// higher epoch. If the higher owner never shows up, the node (the ring
// owner) takes the range back above it after FailureTimeout.
func TestStaleOwnerDropsClaimOnRejection(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 3)
	c.build(4)
	owner := c.nodes[2]
	claim := ownerClaim(t, owner)
	rep := c.successor(owner)
	higher := Epoch{claim.Epoch.N + 10, "zz"}
	injectHigher(t, rep, claim.Range, higher)

	outBefore := owner.stats().HandoffsOut
	key := c.keyIn(claim.Range)
	if !owner.m.Owns(key) {
		t.Fatal("owner does not own its key before the test")
	}
	err := owner.m.Accept(ctx, []Record{c.record(key)})
	if !errors.Is(err, ErrStale) {
		t.Fatalf("Accept by a stale owner: err = %v, want ErrStale", err)
	}
	st := owner.stats()
	if len(st.Claims) != 0 || st.StaleRejections != 1 {
		t.Fatalf("after rejection: claims %v, stale rejections %d", st.Claims, st.StaleRejections)
	}
	if owner.m.Owns(key) {
		t.Fatal("stale owner still owns the key")
	}
	if got := owner.tableAt(key); got != higher {
		t.Fatalf("table at key = %v, want %v", got, higher)
	}
	if err := owner.m.Accept(ctx, []Record{c.record(key)}); !errors.Is(err, ErrNotOwned) {
		t.Fatalf("second Accept: %v, want ErrNotOwned", err)
	}
	// The app hears about it at the next tick; nothing was pushed.
	c.round()
	if overlaps(owner.app.activeSet(), spansOf(claim.Range)) {
		t.Fatalf("app still active on %s", claim.Range)
	}
	if owner.stats().HandoffsOut != outBefore {
		t.Fatal("a stale claim was handed off")
	}
	// "zz" never speaks: the ring owner promotes itself above it.
	start := c.clock.Now()
	c.until(100, "reclaim above the phantom owner", func() error {
		cs := owner.stats().Claims
		if len(cs) != 1 || cs[0].Range != claim.Range || !higher.Less(cs[0].Epoch) {
			return errors.New("not reclaimed")
		}
		return nil
	})
	if waited := c.clock.Now().Sub(start); waited < c.cfg.FailureTimeout {
		t.Fatalf("reclaimed after %v, before FailureTimeout", waited)
	}
	if errs := owner.app.problems(); len(errs) > 0 {
		t.Fatalf("app protocol violations: %v", errs)
	}
}

// The other path to staleness: a replica receives a higher claim over its
// own active range (say from a node that promoted itself during a
// partition) and drops the overlap.
func TestHigherClaimMakesReceiverStale(t *testing.T) {
	c := newCluster(t, 4)
	c.build(3)
	n := c.nodes[0]
	claim := ownerClaim(t, n)
	injectHigher(t, n, claim.Range, Epoch{claim.Epoch.N + 1, "intruder"})
	if st := n.stats(); len(st.Claims) != 0 || st.StaleRejections != 1 {
		t.Fatalf("claims %v, stale %d", st.Claims, st.StaleRejections)
	}
}

// A node accepts the links from its own outbox with AcceptOwn: its own
// write is not synced (the outbox stands for it until a later sync), but
// the replicas' are, as with Accept; and any synced write covers it.
func TestAcceptOwnSyncsOnlyAtReplicas(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 4)
	c.build(4)
	owner := c.nodes[2]
	claim := ownerClaim(t, owner)
	succs := owner.rn.Successors()
	r1, r2 := c.byAddr(succs[0].Addr), c.byAddr(succs[1].Addr)

	own := c.record(c.keyIn(claim.Range))
	if err := owner.m.AcceptOwn(ctx, []Record{own}); err != nil {
		t.Fatal(err)
	}
	if !owner.st.Unsynced(own.Key, own.Hash) {
		t.Fatal("AcceptOwn synced the owner's own write")
	}
	for _, n := range []*testNode{r1, r2} {
		if _, ok := n.st.Record(own.Key, own.Hash); !ok {
			t.Fatalf("replica %s lacks the record right after AcceptOwn", n.peer.Addr)
		}
		if n.st.Unsynced(own.Key, own.Hash) {
			t.Fatalf("replica %s stored the record without a sync", n.peer.Addr)
		}
	}
	routed := c.record(c.keyIn(claim.Range))
	if err := owner.m.Accept(ctx, []Record{routed}); err != nil {
		t.Fatal(err)
	}
	if owner.st.Unsynced(routed.Key, routed.Hash) || owner.st.Unsynced(own.Key, own.Hash) {
		t.Fatal("Accept left a record unsynced: a routed URL must survive a power loss once it is acknowledged, and its sync covers the earlier writes")
	}
}

// Accept returns only after every replica has stored the records. With a
// replica down it still succeeds but counts a degraded write, and the
// record reaches the replacement replica once the ring has repaired.
func TestSyncOnAccept(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 5)
	c.build(5) // parallel fan-out: c.serial is false
	owner := c.nodes[3]
	claim := ownerClaim(t, owner)
	succs := owner.rn.Successors()
	r1, r2 := c.byAddr(succs[0].Addr), c.byAddr(succs[1].Addr)
	var other *testNode
	for _, n := range c.nodes {
		if n != owner && n != r1 && n != r2 {
			other = n
		}
	}

	rec := c.record(c.keyIn(claim.Range))
	if err := owner.m.Accept(ctx, []Record{rec}); err != nil {
		t.Fatal(err)
	}
	// No round has run: the records got there synchronously.
	for _, n := range []*testNode{owner, r1, r2} {
		if _, ok := n.st.Record(rec.Key, rec.Hash); !ok {
			t.Fatalf("%s lacks the record right after Accept", n.peer.Addr)
		}
	}
	if _, ok := other.st.Record(rec.Key, rec.Hash); ok {
		t.Fatal("a non-replica got the record")
	}
	if st := owner.stats(); st.Degraded || st.DegradedWrites != 0 {
		t.Fatalf("healthy write degraded: %+v", st)
	}

	c.crash(r1)
	rec2 := c.record(c.keyIn(claim.Range))
	if err := owner.m.Accept(ctx, []Record{rec2}); err != nil {
		t.Fatalf("Accept with a replica down: %v", err)
	}
	if st := owner.stats(); !st.Degraded || st.DegradedWrites != 1 {
		t.Fatalf("write with a replica down not degraded: %+v", st)
	}
	if _, ok := r2.st.Record(rec2.Key, rec2.Hash); !ok {
		t.Fatal("the reachable replica lacks the degraded write")
	}
	// The ring routes around r1; the new second replica gets rec2 by
	// anti-entropy.
	c.until(100, "new replica catches up", func() error {
		s := owner.rn.Successors()
		if len(s) < 2 || s[0] == r1.peer || s[1] == r1.peer {
			return errors.New("ring still lists the crashed replica")
		}
		newRep := c.byAddr(s[1].Addr)
		if _, ok := newRep.st.Record(rec2.Key, rec2.Hash); !ok {
			return errors.New("new replica lacks the degraded write")
		}
		return nil
	})
	rec3 := c.record(c.keyIn(claim.Range))
	if err := owner.m.Accept(ctx, []Record{rec3}); err != nil {
		t.Fatal(err)
	}
	if st := owner.stats(); st.Degraded || st.DegradedWrites != 1 {
		t.Fatalf("fully acked write after repair: %+v", st)
	}
	// A replica that cannot store the write (a full disk) does not
	// acknowledge it: the write is degraded, as with a replica down.
	repl := c.byAddr(owner.rn.Successors()[0].Addr)
	repl.st.FailWrites(errors.New("no space left on device"))
	rec4 := c.record(c.keyIn(claim.Range))
	if err := owner.m.Accept(ctx, []Record{rec4}); err != nil {
		t.Fatalf("Accept with a replica's store failing: %v", err)
	}
	if st := owner.stats(); !st.Degraded || st.DegradedWrites != 2 {
		t.Fatalf("write a replica could not store not degraded: %+v", st)
	}
	repl.st.FailWrites(nil)
	// Keys outside the node's claims are refused outright.
	out := c.record(uint64(claim.Range.From))
	if err := owner.m.Accept(ctx, []Record{rec3, out}); !errors.Is(err, ErrNotOwned) {
		t.Fatalf("Accept of a foreign key: %v", err)
	}
}

// A replica takes over a crashed owner's range only after FailureTimeout
// without hearing from it, under a higher epoch, and queues the crashed
// owner's pending records.
func TestPromotionAfterFailureTimeout(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 6)
	c.serial = true
	c.build(4)
	owner := c.nodes[1]
	claim := ownerClaim(t, owner)
	rec := c.record(c.keyIn(claim.Range))
	if err := owner.m.Accept(ctx, []Record{rec}); err != nil {
		t.Fatal(err)
	}
	succ := c.successor(owner)
	c.crash(owner)
	succ.m.mu.Lock()
	lastHeard := succ.m.heard[owner.peer.Addr].at
	succ.m.mu.Unlock()

	covered := func() bool { return subsetOf(spansOf(claim.Range), claimSpans(succ.stats().Claims)) }
	for covered() == false {
		if silence := c.clock.Now().Sub(lastHeard); silence > c.cfg.FailureTimeout+3*time.Second {
			t.Fatalf("no promotion after %v of silence:\n%s", silence, c.dump())
		}
		c.round()
		if covered() {
			if silence := c.clock.Now().Sub(lastHeard); silence <= c.cfg.FailureTimeout {
				t.Fatalf("promoted after only %v of silence (FailureTimeout %v)", silence, c.cfg.FailureTimeout)
			}
		}
	}
	st := succ.stats()
	if st.Promotions != 1 {
		t.Fatalf("Promotions = %d", st.Promotions)
	}
	for _, cl := range st.Claims {
		if overlaps(spansOf(cl.Range), spansOf(claim.Range)) && !claim.Epoch.Less(cl.Epoch) {
			t.Fatalf("promoted claim %v not above the old %v", cl, claim)
		}
	}
	if !succ.app.queued(IDOf(rec)) {
		t.Fatal("promoted node did not queue the crashed owner's record")
	}
	c.until(100, "settle after promotion", c.settled)
}

// A joining node gets exactly its slice of its successor's range, under a
// higher epoch, with the slice's records and host states; the old owner's
// claim shrinks to the rest.
func TestJoinHandoff(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 7)
	c.serial = true
	c.build(3)
	old := c.nodes[1]
	claim := ownerClaim(t, old)
	// Records spread over the old range, more than one chunk's worth.
	recs := c.acceptIn(ctx, old, claim.Range, 50)
	old.app.enqueue(recs...)
	// A new node in the middle of the range.
	mid := claim.Range.From + ring.ID(uint64(claim.Range.To-claim.Range.From)/2)
	host := HostState{Key: uint64(mid) - 5, Host: "h.example", Data: []byte("politeness")}
	old.app.mu.Lock()
	old.app.hosts[host.Host] = host
	old.app.mu.Unlock()

	outBefore := old.stats().HandoffsOut
	n := c.add(mid)
	c.until(100, "join settles", c.settled)

	slice := Range{claim.Range.From, mid}
	nc := ownerClaim(t, n)
	if nc.Range != slice {
		t.Fatalf("new node claims %s, want exactly %s", nc.Range, slice)
	}
	if !claim.Epoch.Less(nc.Epoch) {
		t.Fatalf("new epoch %v not above the old %v", nc.Epoch, claim.Epoch)
	}
	oc := ownerClaim(t, old)
	if oc.Range != (Range{mid, claim.Range.To}) {
		t.Fatalf("old owner claims %s, want %s", oc.Range, Range{mid, claim.Range.To})
	}
	for _, r := range recs {
		holder, other := old, n
		if slice.Contains(ring.ID(r.Key)) {
			holder, other = n, old
		}
		if !holder.app.queued(IDOf(r)) {
			t.Fatalf("record %s not queued at its owner %s", ring.ID(r.Key), holder.peer.Addr)
		}
		if other.app.queued(IDOf(r)) {
			t.Fatalf("record %s queued at non-owner %s", ring.ID(r.Key), other.peer.Addr)
		}
	}
	var got []HostState
	n.st.ScanHosts(slice, func(h HostState) error { got = append(got, h); return nil })
	if len(got) != 1 || string(got[0].Data) != "politeness" {
		t.Fatalf("host state not handed over: %+v", got)
	}
	if old.stats().HandoffsOut != outBefore+1 || n.stats().HandoffsIn != 1 {
		t.Fatalf("handoff counters: out %d in %d", old.stats().HandoffsOut, n.stats().HandoffsIn)
	}
	for _, x := range []*testNode{old, n} {
		if errs := x.app.problems(); len(errs) > 0 {
			t.Fatalf("%s app protocol violations: %v", x.peer.Addr, errs)
		}
	}
}

// A graceful leave pushes everything to the successor before Leave
// returns.
func TestGracefulLeave(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 8)
	c.serial = true
	c.build(4)
	leaver := c.nodes[2]
	claim := ownerClaim(t, leaver)
	recs := c.acceptIn(ctx, leaver, claim.Range, 40)
	done := recs[0]
	done.Done = true
	leaver.m.Progress([]Record{done}, nil)
	succ := c.successor(leaver)
	succArc := claimSpans(succ.stats().Claims)
	outBefore := leaver.stats().HandoffsOut
	if err := c.leave(leaver); err != nil {
		t.Fatalf("leave: %v", err)
	}
	// No round has run since.
	st := leaver.stats()
	if len(st.Claims) != 0 || len(st.Releasing) != 0 || st.HandoffsOut != outBefore+1 {
		t.Fatalf("leaver after Leave: %+v", st)
	}
	if !subsetOf(spansOf(claim.Range), claimSpans(succ.stats().Claims)) {
		t.Fatalf("successor claims %v, missing %s", succ.stats().Claims, claim.Range)
	}
	for _, cl := range succ.stats().Claims {
		if overlaps(spansOf(cl.Range), spansOf(claim.Range)) && !claim.Epoch.Less(cl.Epoch) {
			t.Fatalf("taken-over claim %v not above %v", cl, claim)
		}
	}
	for _, r := range recs[1:] {
		if !succ.app.queued(IDOf(r)) {
			t.Fatalf("record %s not queued at the successor", ring.ID(r.Key))
		}
	}
	if succ.app.queued(IDOf(done)) {
		t.Fatal("a Done record was queued again")
	}
	if r, _ := succ.st.Record(done.Key, done.Hash); !r.Done {
		t.Fatal("the Done mark did not travel")
	}
	c.until(100, "settle after leave", c.settled)
	if got, want := claimSpans(succ.stats().Claims), union(succArc, spansOf(claim.Range)); !slices.Equal(got, want) {
		t.Fatalf("successor ends with %v, want %v", got.ranges(), want.ranges())
	}
}

// dropFinal wraps a transport and loses Final handoff chunks while armed:
// the request (the receiver never sees it) or the reply (it claimed, the
// sender does not know).
type dropFinal struct {
	Transport
	armed     atomic.Bool
	loseReply bool
	dropped   atomic.Int64
}

func (d *dropFinal) Handoff(ctx context.Context, to ring.Peer, req *HandoffRequest) (*HandoffReply, error) {
	if !req.Final || req.Merge || !d.armed.Load() {
		return d.Transport.Handoff(ctx, to, req)
	}
	d.dropped.Add(1)
	if d.loseReply {
		d.Transport.Handoff(ctx, to, req)
		return nil, errors.New("test: reply lost")
	}
	return nil, errors.New("test: request lost")
}

// A handoff broken at its Final chunk is retried until acknowledged, and
// at every moment the slice is either still held (releasing) by the old
// owner or claimed by the new one.
func TestBrokenHandoffRetried(t *testing.T) {
	for _, loseReply := range []bool{false, true} {
		name := map[bool]string{false: "request lost", true: "reply lost"}[loseReply]
		t.Run(name, func(t *testing.T) {
			c := newCluster(t, 9)
			c.serial = true
			var mu sync.Mutex
			drops := map[string]*dropFinal{}
			c.wrap = func(self ring.Peer, tr Transport) Transport {
				d := &dropFinal{Transport: tr, loseReply: loseReply}
				mu.Lock()
				drops[self.Addr] = d
				mu.Unlock()
				return d
			}
			c.build(3)
			old := c.nodes[0]
			claim := ownerClaim(t, old)
			drops[old.peer.Addr].armed.Store(true)
			mid := claim.Range.From + ring.ID(uint64(claim.Range.To-claim.Range.From)/2)
			n := c.add(mid)
			slice := spansOf(Range{claim.Range.From, mid})

			held := func() error {
				o, s := old.stats(), n.stats()
				have := union(union(claimSpans(o.Claims), claimSpans(o.Releasing)), claimSpans(s.Claims))
				if !subsetOf(slice, have) {
					return errors.New("slice neither claimed nor releasing")
				}
				return nil
			}
			for r := 0; r < 60; r++ {
				c.round()
				if err := held(); err != nil {
					t.Fatalf("round %d: %v\n%s", r, err, c.dump())
				}
			}
			if drops[old.peer.Addr].dropped.Load() < 3 {
				t.Fatalf("only %d Finals attempted in 60 rounds; want retries", drops[old.peer.Addr].dropped.Load())
			}
			if !loseReply && len(n.stats().Claims) != 0 {
				t.Fatal("new node claimed without a Final")
			}
			epochBefore := n.stats().Claims
			drops[old.peer.Addr].armed.Store(false)
			c.until(50, "handoff completes", func() error {
				if err := held(); err != nil {
					t.Fatal(err)
				}
				return c.settled()
			})
			nc := ownerClaim(t, n)
			if loseReply {
				// The receiver claimed on the first Final; later copies
				// were acknowledged without raising the epoch again.
				if len(epochBefore) != 1 || epochBefore[0] != nc {
					t.Fatalf("retried Final changed the claim: %v -> %v", epochBefore, nc)
				}
			}
			if n.stats().HandoffsIn != 1 {
				t.Fatalf("HandoffsIn = %d, want 1", n.stats().HandoffsIn)
			}
		})
	}
}

// Run ticks on its clock until cancelled, refuses a second Run, and
// leaves no goroutine behind.
func TestRun(t *testing.T) {
	c := newCluster(t, 10)
	c.build(1)
	n := c.nodes[0]
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- n.m.Run(ctx) }()
	for c.clock.Tickers() == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := n.m.Run(ctx); !errors.Is(err, ErrRunning) {
		t.Fatalf("second Run: %v", err)
	}
	// A progress record is flushed by a tick: watch the heartbeat time.
	n.m.mu.Lock()
	before := n.m.lastBeat
	n.m.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.clock.Advance(c.cfg.HeartbeatInterval)
		time.Sleep(time.Millisecond)
		n.m.mu.Lock()
		after := n.m.lastBeat
		n.m.mu.Unlock()
		if after.After(before) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run never ticked")
		}
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run returned %v", err)
	}
	if c.clock.Tickers() != 0 {
		t.Fatal("ticker left running")
	}
}

func TestConfigValidation(t *testing.T) {
	c := newCluster(t, 12)
	c.build(1)
	n := c.nodes[0]
	bad := c.cfg
	bad.Lease = bad.FailureTimeout
	if _, err := New(NewOwnership(n.rn), c.snet.Transport(n.peer), n.st, n.app, bad); err == nil {
		t.Fatal("Lease >= FailureTimeout accepted")
	}
	cfg, err := Config{}.Effective()
	if err != nil || cfg.Replicas != 2 || cfg.FailureTimeout != 5*time.Second || cfg.Lease != 2500*time.Millisecond ||
		cfg.HeartbeatInterval != 500*time.Millisecond || cfg.ChunkRecords != 1000 {
		t.Fatalf("defaults: %+v, %v", cfg, err)
	}
	if cfg, err := (Config{Positions: 16}).Effective(); err != nil || cfg.Lease != 3500*time.Millisecond {
		t.Fatalf("defaults with 16 positions: lease %v, %v; want 3.5s", cfg.Lease, err)
	}
}

// A paused owner comes back with stale ring pointers and a record it
// accepted but never replicated (a degraded write). Meanwhile its range
// was promoted and split among three new nodes, none of which has it as a
// replica. Fencing makes it drop the stale claim without a push, and the
// merge reconcile must bring the record to its rightful owner.
func TestStaleRecordsMergedIntoOwner(t *testing.T) {
	c := newCluster(t, 13)
	c.serial = true
	const q = ring.ID(1 << 60) // a sixteenth of the ring
	p := c.add(1 * q)
	a := c.add(8 * q)
	c.add(10 * q)
	c.add(12 * q)
	c.until(100, "settle", c.settled)
	_ = p

	lost := Record{Key: uint64(q + q/2), Hash: 77, URL: "https://degraded.example/"}
	a.st.PutRecords([]Record{lost}) // accepted by a, replicas never got it
	c.pause(a)
	c.until(100, "promotion while paused", c.settled)
	j1 := c.add(2 * q)
	c.add(4 * q)
	c.add(6 * q)
	c.until(100, "joins settle", c.settled)
	for _, n := range c.live() {
		if n != a {
			if _, ok := n.st.Record(lost.Key, lost.Hash); ok {
				t.Fatalf("%s already has the record; the test would prove nothing", n.peer.Addr)
			}
		}
	}

	// The resumed process's shard loop ticks before its ring loop: its
	// view is still the old (P, A], and its heartbeat is refused.
	outBefore := a.stats().HandoffsOut
	c.resume(a)
	a.m.Tick(context.Background())
	if st := a.stats(); st.StaleRejections == 0 || len(st.Claims) != 0 || st.HandoffsOut != outBefore {
		t.Fatalf("resumed stale owner not fenced at its first tick: %+v", st)
	}
	c.until(200, "resume settles", func() error {
		if err := c.settled(); err != nil {
			return err
		}
		if !j1.app.queued(IDOf(lost)) {
			return errors.New("record not queued at its owner")
		}
		return nil
	})
	if a.stats().StaleRejections == 0 {
		t.Fatal("the resumed owner was never fenced")
	}
	if j1.stats().MergesIn == 0 {
		t.Fatal("the record did not arrive by merge")
	}
}

// The lease makes an owner that lost contact with its first successor
// stop working before that successor may promote itself: here the owner's
// ring has not noticed anything (its pointers are frozen), so only the
// lease can stop it.
func TestLeaseStopsCutOffOwnerBeforePromotion(t *testing.T) {
	c := newCluster(t, 15)
	c.serial = true
	c.build(4)
	owner := c.nodes[2]
	claim := ownerClaim(t, owner)
	key := c.keyIn(claim.Range)
	succ := c.successor(owner)
	var others []string
	for _, n := range c.nodes {
		if n != owner {
			others = append(others, n.peer.Addr)
		}
	}
	c.rnet.Partition([]string{owner.peer.Addr}, others)
	cut := c.clock.Now()
	var stopped, promoted time.Time
	for stopped.IsZero() || promoted.IsZero() {
		if c.clock.Now().Sub(cut) > 3*c.cfg.FailureTimeout {
			t.Fatalf("after %v: owner stopped at %v, successor promoted at %v", c.clock.Now().Sub(cut), stopped, promoted)
		}
		// Everyone else runs normally; the owner's shard loop runs but
		// its ring loop does not, so its view keeps the old successor.
		for _, n := range c.nodes {
			if n != owner {
				n.rn.Stabilize(c.ctx)
				n.rn.CheckPredecessor(c.ctx)
			}
		}
		for _, n := range c.nodes {
			n.m.Tick(c.ctx)
		}
		c.clock.Advance(roundStep)
		now := c.clock.Now()
		if stopped.IsZero() && !owner.m.Owns(key) {
			stopped = now
			if owner.stats().LeaseValid {
				t.Fatal("Owns false but Stats says the lease is valid")
			}
			if len(owner.stats().Claims) == 0 {
				t.Fatal("the owner dropped its claim; only the lease should stop it")
			}
		}
		if promoted.IsZero() && subsetOf(spansOf(claim.Range), claimSpans(succ.stats().Claims)) {
			promoted = now
		}
	}
	if !stopped.Before(promoted) {
		t.Fatalf("cut-off owner still owned at %v, successor promoted at %v", stopped.Sub(cut), promoted.Sub(cut))
	}
	if lag := stopped.Sub(cut); lag > c.cfg.Lease+roundStep {
		t.Fatalf("owner kept working %v after the cut, Lease is %v", lag, c.cfg.Lease)
	}
	t.Logf("owner stopped %v after the cut, successor promoted %v after", stopped.Sub(cut), promoted.Sub(cut))
}
