package shard

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// TestRunConcurrently drives the production paths the serial simulator
// does not: ring and shard Run loops on every node, parallel fan-out,
// handlers racing with ticks, and an app whose Deactivate waits for
// in-flight fetches that themselves Accept new links and report Progress.
// A node joins and another leaves while all of it runs. Under -race this
// checks the locking; the end state checks that nothing was lost.
func TestRunConcurrently(t *testing.T) {
	c := newCluster(t, 14)
	c.build(4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	stops := map[string]context.CancelFunc{}
	var stopsMu sync.Mutex
	run := func(n *testNode) {
		nctx, ncancel := context.WithCancel(ctx)
		stopsMu.Lock()
		stops[n.peer.Addr] = ncancel
		stopsMu.Unlock()
		wg.Go(func() { n.rn.Run(nctx) })
		wg.Go(func() { n.m.Run(nctx) })
	}
	for _, n := range c.nodes {
		run(n)
	}

	var mu sync.Mutex
	accepted := map[RecordID]Record{}
	var fetched atomic.Int64
	nodes := func() []*testNode {
		mu.Lock()
		defer mu.Unlock()
		return c.live()
	}
	// submit routes a record to its owner as seen from n, like the node's
	// router; it counts only if Accept returned nil.
	submit := func(from *testNode, rec Record) {
		owner, _, err := from.rn.Lookup(ctx, ring.ID(rec.Key))
		if err != nil {
			return
		}
		mu.Lock()
		to := c.byAddr(owner.Addr)
		ok := to != nil && to.up() // under mu: the test marks nodes gone under it
		mu.Unlock()
		if !ok {
			return
		}
		if to.m.Accept(ctx, []Record{rec}) == nil {
			to.app.enqueue(rec)
			mu.Lock()
			accepted[IDOf(rec)] = rec
			mu.Unlock()
		}
	}
	var workers sync.WaitGroup
	workCtx, stopWork := context.WithCancel(ctx)
	for w := range 3 {
		workers.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			for workCtx.Err() == nil {
				live := nodes()
				n := live[rng.IntN(len(live))]
				if rng.IntN(3) == 0 {
					submit(n, Record{Key: rng.Uint64(), Hash: rng.Uint64(), URL: "seed"})
				}
				// A fetch: discovered links are routed while the fetch is
				// in flight, then the record is marked done.
				n.app.fetchOne(func(rec Record) {
					submit(n, Record{Key: rng.Uint64(), Hash: rng.Uint64(), URL: "link"})
					rec.Done = true
					n.m.Progress([]Record{rec}, nil)
					fetched.Add(1)
				})
				time.Sleep(100 * time.Microsecond)
			}
		})
	}
	advance := func(steps int) {
		for range steps {
			c.clock.Advance(50 * time.Millisecond)
			time.Sleep(200 * time.Microsecond)
		}
	}
	advance(100)
	mu.Lock()
	joiner := c.add(0)
	mu.Unlock()
	run(joiner)
	advance(100)
	mu.Lock()
	leaver := c.nodes[1]
	mu.Unlock()
	stopsMu.Lock()
	stops[leaver.peer.Addr]()
	stopsMu.Unlock()
	if err := errors.Join(leaver.rn.Leave(ctx), leaver.m.Leave(ctx)); err != nil {
		t.Logf("leave: %v", err)
	}
	mu.Lock()
	c.rnet.Unregister(leaver.peer.Addr)
	c.snet.Unregister(leaver.peer.Addr)
	leaver.gone = true
	mu.Unlock()
	advance(100)
	stopWork()
	workers.Wait()

	// Let the loops settle, then check.
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		advance(10)
		if err = c.settled(); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("no settled state: %v\n%s", err, c.dump())
	}
	missing := 0
	for id := range accepted {
		owner := c.ownerOf(id.Key)
		if r, ok := owner.st.Record(id.Key, id.Hash); !ok || (!r.Done && !owner.app.queued(id)) {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d accepted records neither done nor queued at their owner", missing, len(accepted))
	}
	c.checkApps()
	t.Logf("%d records accepted, %d fetched, with Run loops, a join and a leave", len(accepted), fetched.Load())
	cancel()
	wg.Wait()
}
