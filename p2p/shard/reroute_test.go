package shard

import (
	"cmp"
	"context"
	"slices"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// pausedOwnerPromoted builds a ring, has its owner g accept records and
// fetch a third of them (done marks and a host state that only g holds:
// it pauses before its next heartbeat), and runs until g's successor o
// took g's arc over by promotion. It returns g, o, g's claim, and the
// records (done first).
func pausedOwnerPromoted(t *testing.T, c *cluster) (g, o *testNode, gc Claim, done, pending []Record, host HostState) {
	t.Helper()
	ctx := context.Background()
	c.build(24)
	nodes := c.live()
	slices.SortFunc(nodes, func(a, b *testNode) int { return cmp.Compare(a.peer.ID, b.peer.ID) })
	g = nodes[5]
	o = c.successor(g)
	gc = ownerClaim(t, g)
	recs := c.acceptIn(ctx, g, gc.Range, 30)
	g.app.enqueue(recs...)
	for i, r := range recs {
		if i%3 == 0 {
			r.Done = true
			done = append(done, r)
		} else {
			pending = append(pending, r)
		}
	}
	host = HostState{Key: done[0].Key, Host: "slow.example", Data: []byte("next allowed in an hour")}
	if err := g.m.Progress(done, []HostState{host}); err != nil {
		t.Fatal(err)
	}
	c.pause(g)
	c.until(100, "g's successor promoted over g's arc", func() error {
		if !o.m.Owns(done[0].Key) {
			return errNotOwned
		}
		return nil
	})
	for _, r := range done {
		if got, ok := o.st.Record(r.Key, r.Hash); !ok || got.Done {
			t.Fatalf("the new owner has %s as %+v (found %v) before the reroute, want it pending: the test proves nothing", ring.ID(r.Key), got, ok)
		}
	}
	return g, o, gc, done, pending, host
}

var errNotOwned = ErrNotOwned

// TestReroutedRangeKeepsDoneMarks: an owner pauses with fetched pages its
// replicas have not heard of; its successor promotes itself over its arc.
// The owner comes back before the ring has it again: its handoff is
// refused (the new owner cannot place it, and claims the arc already),
// so it gives the arc up. Its pending records go as tasks, and its done
// marks and host state reach the new owner, which noted it as the arc's
// owner when it promoted: the fetched pages leave the new owner's queue,
// a later link to one of them is a duplicate, and the host's clock is
// the crawler's to apply.
//
// Before, only the pending records travelled: every fetched page was in
// the new owner's queue, to be fetched again.
func TestReroutedRangeKeepsDoneMarks(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 41)
	g, o, gc, done, pending, host := pausedOwnerPromoted(t, c)
	c.resume(g)

	reply, err := g.m.sendHandoff(ctx, o.peer, gc.Range, gc.Epoch, false, nil)
	if err != nil || reply.Accepted || refusedByOwner(o.peer, reply).empty() {
		t.Fatalf("g's handoff to the new owner: %+v, %v; want it refused by the owner: the test proves nothing", reply, err)
	}
	if !g.m.giveUp(ctx, gc.Range, o.peer, reply.Epoch, gc.Epoch) {
		t.Fatal("g did not give its arc up")
	}
	for _, r := range done {
		if got, ok := o.st.Record(r.Key, r.Hash); !ok || !got.Done {
			t.Errorf("the new owner has fetched page %s as %+v (found %v), want it done", ring.ID(r.Key), got, ok)
		}
		if o.app.queued(IDOf(r)) {
			t.Errorf("the new owner still queues fetched page %s: it would fetch it again", ring.ID(r.Key))
		}
	}
	for _, r := range pending {
		if !o.app.queued(IDOf(r)) {
			t.Errorf("pending record %s not queued at the new owner", ring.ID(r.Key))
		}
	}
	o.app.mu.Lock()
	got, ok := o.app.reroutedHosts[host.Host]
	o.app.mu.Unlock()
	if !ok || string(got.Data) != string(host.Data) {
		t.Errorf("the new owner's app got host state %+v (found %v), want g's", got, ok)
	}
	if st := o.stats(); st.ReroutedIn != int64(len(done)) {
		t.Errorf("ReroutedIn %d, want %d", st.ReroutedIn, len(done))
	}
	// A link to a fetched page, routed to the owner again, is a duplicate.
	h := c.live()[0]
	h.app.mu.Lock()
	h.app.rerouted = append(h.app.rerouted, Record{Key: done[1].Key, Hash: done[1].Hash, URL: done[1].URL, Depth: 2})
	h.app.mu.Unlock()
	c.pause(g) // so that the cluster routes to o, as the ring does
	c.route()
	if o.app.queued(IDOf(done[1])) {
		t.Errorf("a link to fetched page %s was queued again at the new owner", ring.ID(done[1].Key))
	}
	c.checkApps()
}

// TestForgedRerouteChangesNothing: done marks and host states sent as a
// reroute by a member that never held the range (far from it on the
// ring), or by a stranger, change nothing at the range's owner: its
// pending records stay pending and queued, and its app gets no host
// state. The paused old owner's successor, which holds the arc by
// promotion, is the target, as in TestReroutedRangeKeepsDoneMarks.
func TestForgedRerouteChangesNothing(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 41)
	g, o, gc, done, _, host := pausedOwnerPromoted(t, c)
	nodes := c.live()
	slices.SortFunc(nodes, func(a, b *testNode) int { return cmp.Compare(a.peer.ID, b.peer.ID) })
	far := nodes[(slices.Index(nodes, o)+12)%len(nodes)] // beyond its successor list (8)
	stranger := ring.Peer{ID: g.peer.ID, Addr: "stranger"}
	before := o.stats()
	for _, from := range []ring.Peer{far.peer, stranger} {
		for _, e := range []Epoch{{}, {N: clockEpoch(c.clock.Now()), Owner: from.Addr}} {
			reply := o.m.HandleHandoff(ctx, from, &HandoffRequest{Range: gc.Range, Epoch: e, Reroute: true, Records: done, Hosts: []HostState{host}})
			if reply.Accepted {
				t.Errorf("%s (epoch %s): forged reroute accepted", from.Addr, e)
			}
		}
	}
	for _, r := range done {
		if got, ok := o.st.Record(r.Key, r.Hash); !ok || got.Done {
			t.Errorf("after forged reroutes the owner has %s as %+v (found %v), want it pending", ring.ID(r.Key), got, ok)
		}
		if !o.app.queued(IDOf(r)) {
			t.Errorf("after forged reroutes the owner no longer queues %s", ring.ID(r.Key))
		}
	}
	o.app.mu.Lock()
	n := len(o.app.reroutedHosts)
	o.app.mu.Unlock()
	if n != 0 {
		t.Errorf("the owner's app got %d host states from forged reroutes", n)
	}
	if st := o.stats(); st.ReroutedIn != before.ReroutedIn || st.Implausible <= before.Implausible {
		t.Errorf("ReroutedIn %d→%d (want unchanged), Implausible %d→%d (want counted)", before.ReroutedIn, st.ReroutedIn, before.Implausible, st.Implausible)
	}
}

// TestManyJoinsDoneMarks: TestUnwitnessedReleaseRerouted's setting, with
// a third of the old owner's records fetched. Every pending record reaches
// its owner, and only the pages the old owner fetched are done anywhere:
// the far owners that cannot judge it refuse its done marks rather than
// take them from a giver they cannot tell from a stranger (those pages
// may be fetched again when a link to them comes). The log gives how many done marks reached
// their owners (docs/architecture.md, "Rerouted done marks").
func TestManyJoinsDoneMarks(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, 32)
	c.build(1)
	old := c.nodes[0]
	part := Range{From: old.peer.ID - 1<<62, To: old.peer.ID - 1}
	recs := c.acceptIn(ctx, old, part, 120)
	old.app.enqueue(recs...)
	fetched := map[RecordID]bool{}
	var done []Record
	for i, r := range recs {
		if i%3 == 0 {
			r.Done = true
			done = append(done, r)
			fetched[IDOf(r)] = true
		}
	}
	if err := old.m.Progress(done, nil); err != nil {
		t.Fatal(err)
	}
	c.joinInside(part, 20)
	c.until(300, "settle after the joins", c.settled)
	reached := 0
	for _, r := range recs {
		owner := c.ownerOf(r.Key)
		got, ok := owner.st.Record(r.Key, r.Hash)
		switch {
		case !ok && !fetched[IDOf(r)]:
			t.Errorf("pending record at %s never reached its owner %s", ring.ID(r.Key), owner.peer.Addr)
		case !ok:
		case got.Done && !fetched[IDOf(r)]:
			t.Errorf("record at %s is done at %s, but nobody fetched it", ring.ID(r.Key), owner.peer.Addr)
		case got.Done:
			reached++
		}
	}
	var in int64
	for _, n := range c.live() {
		in += n.stats().ReroutedIn
	}
	t.Logf("%d of %d done marks reached their owners (%d by reroute); %d parts rerouted", reached, len(done), in, old.stats().Rerouted)
}
