package shard

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// TestRandomChurn runs many seeded random schedules of joins, graceful
// leaves, crashes (memory lost, storage kept), restarts, partitions and
// URL submissions over ring.Nodes and Managers on one fake clock, checking
// after every round that
//
//   - every accepted URL not yet fetched is held (pending or done) in the
//     storage of at least one live node,
//   - no node's epoch table ever goes down at sampled keys, restarts
//     included,
//   - every app is driven sanely (Activate only inactive ranges,
//     Deactivate only active ones, Merged only inside active ones) and is
//     active exactly on its node's claims,
//
// and after a final convergence phase (heal, restart or remove the crashed
// nodes, run rounds) that the live nodes' claims cover the ring exactly
// once, each node claiming exactly its ring arc, and that every accepted
// URL is fetched or queued at its owner.
//
// A failure prints the seed and the schedule; SHARD_CHURN_SEED=n reruns
// one seed alone (with -v, its schedule is logged).
func TestRandomChurn(t *testing.T) {
	schedules := 300
	if testing.Short() {
		schedules = 40
	}
	first := uint64(1)
	if s := os.Getenv("SHARD_CHURN_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SHARD_CHURN_SEED: %v", err)
		}
		first, schedules = n, 1
	}
	var total churnTotals
	results := make(chan churnTotals, schedules)
	t.Run("schedules", func(t *testing.T) {
		for seed := first; seed < first+uint64(schedules); seed++ {
			t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
				t.Parallel()
				results <- runChurn(t, seed)
			})
		}
	})
	close(results)
	for r := range results {
		total.add(r)
	}
	t.Logf("%d schedules: %d events, %d URLs accepted (%d refused), %d fetches (%d duplicate), %d promotions, %d handoffs, %d stale rejections, %d degraded writes, %d rounds",
		schedules, total.events, total.accepted, total.refused, total.fetches, total.dupFetches,
		total.promotions, total.handoffs, total.stale, total.degraded, total.rounds)
	if schedules > 1 && (total.promotions == 0 || total.handoffs == 0 || total.stale == 0 || total.degraded == 0) {
		t.Errorf("the schedules never exercised some path: %+v", total)
	}
	// Duplicates come only from Done marks lost with a crashed owner
	// (they replicate asynchronously) and from partitions; anything more
	// means finished work is being queued again.
	if schedules > 1 && total.dupFetches*50 > total.fetches {
		t.Errorf("%d of %d fetches were duplicates (over 2%%)", total.dupFetches, total.fetches)
	}
}

type churnTotals struct {
	events, accepted, refused, fetches, dupFetches, rounds int
	promotions, handoffs, stale, degraded                  int64
}

func (a *churnTotals) add(b churnTotals) {
	a.events += b.events
	a.accepted += b.accepted
	a.refused += b.refused
	a.fetches += b.fetches
	a.dupFetches += b.dupFetches
	a.rounds += b.rounds
	a.promotions += b.promotions
	a.handoffs += b.handoffs
	a.stale += b.stale
	a.degraded += b.degraded
}

// churn is one schedule's world.
type churn struct {
	*cluster
	seed        uint64
	schedule    []string
	accepted    map[RecordID]Record
	fetched     map[RecordID]int // times fetched
	holder      map[RecordID]*testNode
	sampleKeys  []uint64
	seenEpochs  map[string][]Epoch // per node address, per sample key
	partitioned bool
	// healing: a partition healed and the ring has not converged since;
	// both sides' owners legitimately overlap until it has.
	healing bool
	calm    int // rounds since the last membership change
	// fetchPerRound is how many records an app fetches when it fetches;
	// draining makes every app fetch every round.
	fetchPerRound int
	draining      bool
	totals        churnTotals
	// stats of nodes that are gone or restarted, so totals count them.
	retired []Stats
}

// Recovery rounds required before a crash: long enough for the ring to
// route around the last change, a promotion (FailureTimeout) and an
// anti-entropy pass, so K=2 replicas are back in place.
const calmRounds = 20

func runChurn(t *testing.T, seed uint64) churnTotals {
	c := &churn{
		cluster:       newCluster(t, seed),
		seed:          seed,
		accepted:      make(map[RecordID]Record),
		fetched:       make(map[RecordID]int),
		holder:        make(map[RecordID]*testNode),
		seenEpochs:    make(map[string][]Epoch),
		fetchPerRound: 1,
	}
	c.serial = true
	for range 32 {
		c.sampleKeys = append(c.sampleKeys, c.rng.Uint64())
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d (rerun: SHARD_CHURN_SEED=%d go test -run 'TestRandomChurn' ./p2p/shard/): %s\nschedule:\n  %s\nnodes:\n%s",
			seed, seed, fmt.Sprintf(format, args...), strings.Join(c.schedule, "\n  "), c.dump())
	}

	size := 4 + c.rng.IntN(3)
	for range size {
		n := c.add(0)
		c.note("join %s", n.peer)
		c.step(1+c.rng.IntN(3), fail)
	}
	events := 20 + c.rng.IntN(15)
	for i := 0; i < events; i++ {
		c.event(fail)
		c.step(1+c.rng.IntN(6), fail)
	}
	c.totals.events = len(c.schedule)

	// Convergence: heal, resume the paused, bring back or bury the
	// crashed, run rounds.
	if c.partitioned {
		c.rnet.Heal()
		c.partitioned = false
		c.healing = true
		c.note("heal")
	}
	for _, n := range c.nodes {
		if n.paused && !n.gone {
			c.resume(n)
			c.note("resume %s", n.peer.Addr)
		}
	}
	for _, n := range c.nodes {
		if n.crashed && !n.gone {
			if c.rng.IntN(2) == 0 {
				c.restartNode(n)
			} else {
				n.gone = true
				c.note("remove %s for good", n.peer.Addr)
			}
		}
	}
	var err error
	for r := 0; r < 800; r++ {
		if err = c.converged(); err == nil {
			break
		}
		c.step(1, fail)
	}
	if err != nil {
		fail("no convergence after 800 rounds: %v", err)
	}
	// Drain: the owners fetch everything.
	for r := 0; r < 400 && len(c.accepted) > c.doneCount(); r++ {
		c.fetchPerRound, c.draining = 8, true
		c.step(1, fail)
	}
	if n := len(c.accepted) - c.doneCount(); n > 0 {
		fail("%d accepted URLs never fetched", n)
	}
	c.totals.rounds = c.rounds
	c.totals.accepted = len(c.accepted)
	for _, k := range slices.Collect(maps.Values(c.fetched)) {
		c.totals.fetches += k
		c.totals.dupFetches += k - 1
	}
	for _, n := range c.live() {
		c.retired = append(c.retired, n.stats())
	}
	for _, st := range c.retired {
		c.totals.promotions += st.Promotions
		c.totals.handoffs += st.HandoffsIn
		c.totals.stale += st.StaleRejections
		c.totals.degraded += st.DegradedWrites
	}
	return c.totals
}

func (c *churn) note(format string, args ...any) {
	c.schedule = append(c.schedule, fmt.Sprintf("r%d ", c.rounds)+fmt.Sprintf(format, args...))
	if os.Getenv("SHARD_CHURN_SEED") != "" {
		c.tb.Log(c.schedule[len(c.schedule)-1])
	}
}

func (c *churn) doneCount() int {
	n := 0
	for id := range c.accepted {
		if c.fetched[id] > 0 {
			n++
		}
	}
	return n
}

// step runs rounds, with fetching and the invariant checks after each.
func (c *churn) step(rounds int, fail func(string, ...any)) {
	for range rounds {
		c.round()
		c.calm++
		for _, n := range c.live() {
			// Crawling is slow next to routing: URLs wait in the queues,
			// so crashes catch owners with pending work.
			if c.draining || c.rng.IntN(10) < 3 {
				for _, r := range n.fetch(c.fetchPerRound) {
					c.fetched[IDOf(r)]++
				}
			}
		}
		if err := c.invariants(); err != nil {
			fail("%v", err)
		}
	}
}

// event applies one random event allowed in the current state.
func (c *churn) event(fail func(string, ...any)) {
	live := c.live()
	var down, paused []*testNode
	for _, n := range c.nodes {
		if (n.crashed || n.paused) && !n.gone {
			down = append(down, n)
		}
		if n.paused && !n.gone {
			paused = append(paused, n)
		}
	}
	var crashed []*testNode
	for _, n := range down {
		if n.crashed {
			crashed = append(crashed, n)
		}
	}
	type option struct {
		weight int
		do     func()
	}
	var opts []option
	add := func(w int, ok bool, do func()) {
		if ok {
			opts = append(opts, option{w, do})
		}
	}
	add(6, true, func() { c.submit(1 + c.rng.IntN(8)) })
	add(2, !c.partitioned && len(live) < 9, func() {
		n := c.add(0)
		c.note("join %s", n.peer)
		c.calm = 0
	})
	add(2, !c.partitioned && len(live) > 3, func() {
		n := live[c.rng.IntN(len(live))]
		c.retired = append(c.retired, n.stats())
		err := c.leave(n)
		c.note("leave %s (err %v)", n.peer.Addr, err)
		c.calm = 0
	})
	add(3, !c.partitioned && len(down) < 2 && len(live) > 3, func() {
		// Let the last change heal first so K=2 can hold.
		for c.calm < calmRounds {
			c.step(1, fail)
		}
		n := live[c.rng.IntN(len(live))]
		c.retired = append(c.retired, n.stats())
		c.crash(n)
		c.note("crash %s", n.peer.Addr)
		c.calm = 0
	})
	add(2, !c.partitioned && len(crashed) > 0, func() {
		c.restartNode(crashed[c.rng.IntN(len(crashed))])
	})
	add(2, !c.partitioned && len(down) < 2 && len(live) > 3, func() {
		for c.calm < calmRounds {
			c.step(1, fail)
		}
		n := live[c.rng.IntN(len(live))]
		c.pause(n)
		c.note("pause %s", n.peer.Addr)
		c.calm = 0
	})
	add(3, !c.partitioned && len(paused) > 0, func() {
		n := paused[c.rng.IntN(len(paused))]
		c.resume(n)
		if c.rng.IntN(2) == 0 {
			// The shard loop wakes before the ring loop: one tick on
			// the stale view.
			n.m.Tick(c.ctx)
			c.note("resume %s, shard ticks first", n.peer.Addr)
		} else {
			c.note("resume %s", n.peer.Addr)
		}
		c.calm = 0
	})
	add(1, !c.partitioned && len(down) == 0 && len(live) >= 4, func() {
		for c.calm < calmRounds {
			c.step(1, fail)
		}
		var a, b []string
		for _, n := range live {
			if c.rng.IntN(2) == 0 {
				a = append(a, n.peer.Addr)
			} else {
				b = append(b, n.peer.Addr)
			}
		}
		if len(a) == 0 || len(b) == 0 {
			return
		}
		c.rnet.Partition(a, b)
		c.partitioned = true
		c.note("partition %v | %v", a, b)
		c.calm = 0
	})
	add(3, c.partitioned, func() {
		c.rnet.Heal()
		c.partitioned = false
		c.healing = true
		c.note("heal")
		c.calm = 0
	})
	total := 0
	for _, o := range opts {
		total += o.weight
	}
	x := c.rng.IntN(total)
	for _, o := range opts {
		if x < o.weight {
			o.do()
			return
		}
		x -= o.weight
	}
}

func (c *churn) restartNode(n *testNode) {
	c.restart(n)
	c.note("restart %s", n.peer.Addr)
	c.calm = 0
}

// submit routes n new URLs from random live nodes to their owners by ring
// lookup. A URL counts as accepted only when Accept returned nil.
func (c *churn) submit(n int) {
	live := c.live()
	ok := 0
	for range n {
		from := live[c.rng.IntN(len(live))]
		rec := c.record(c.rng.Uint64())
		owner, _, err := from.rn.Lookup(c.ctx, ring.ID(rec.Key))
		if err != nil {
			c.totals.refused++
			continue
		}
		to := c.byAddr(owner.Addr)
		if to == nil || !to.up() || c.rnet.Reachable(c.ctx, from.peer.Addr, to.peer.Addr) != nil {
			c.totals.refused++
			continue
		}
		if err := to.m.Accept(c.ctx, []Record{rec}); err != nil {
			c.totals.refused++
			continue
		}
		to.app.enqueue(rec)
		c.accepted[IDOf(rec)] = rec
		ok++
	}
	c.note("submit %d URLs, %d accepted", n, ok)
}

// invariants checks what must hold after every round.
func (c *churn) invariants() error {
	live := c.live()
	// Durability: every accepted, unfetched URL is stored on a live node.
	for id, rec := range c.accepted {
		if c.fetched[id] > 0 {
			continue
		}
		// Records are never deleted, so a live node that held the record
		// at the last check still does; search only when it went down.
		if h := c.holder[id]; h != nil && h.up() {
			continue
		}
		held := false
		for _, n := range live {
			if _, ok := n.st.Record(id.Key, id.Hash); ok {
				held = true
				c.holder[id] = n
				break
			}
		}
		if !held {
			var where []string
			for _, n := range c.nodes {
				if _, ok := n.st.Record(id.Key, id.Hash); ok {
					where = append(where, n.peer.Addr)
				}
			}
			return fmt.Errorf("accepted URL %s (key %s) is on no live node; stored only on %v", rec.URL, ring.ID(id.Key), where)
		}
	}
	// Epoch tables never go down, across restarts too.
	for _, n := range c.nodes {
		if n.crashed || n.gone {
			continue
		}
		seen, first := c.seenEpochs[n.peer.Addr], false
		if seen == nil {
			seen, first = make([]Epoch, len(c.sampleKeys)), true
			c.seenEpochs[n.peer.Addr] = seen
		}
		n.m.mu.Lock()
		var err error
		for i, k := range c.sampleKeys {
			e := n.m.table.m.get(k)
			if !first && e.Less(seen[i]) && err == nil {
				err = fmt.Errorf("%s epoch table went down at %s: %v -> %v", n.peer.Addr, ring.ID(k), seen[i], e)
			}
			seen[i] = e
		}
		n.m.mu.Unlock()
		if err != nil {
			return err
		}
	}
	// Exclusive ownership: no two live nodes that can talk to each other
	// may both Own a key, except while a partition (or its healing)
	// leaves two rings, each with its own owners.
	if c.healing {
		var rns []*ring.Node
		for _, n := range live {
			rns = append(rns, n.rn)
		}
		if ring.Converged(rns) {
			c.healing = false
		}
	}
	if !c.partitioned && !c.healing {
		now := c.clock.Now()
		owned := make([]spanSet, len(live))
		for i, n := range live {
			owned[i] = n.owned(now)
		}
		for i := range live {
			for j := i + 1; j < len(live); j++ {
				if both := intersect(owned[i], owned[j]); !both.empty() {
					return fmt.Errorf("%s and %s both own %v", live[i].peer.Addr, live[j].peer.Addr, both.ranges())
				}
			}
		}
	}
	// The app follows the claims.
	for _, n := range live {
		if errs := n.app.problems(); len(errs) > 0 {
			return fmt.Errorf("%s app protocol violations: %v", n.peer.Addr, errs)
		}
		n.m.mu.Lock()
		want := union(n.m.own.claims.domain(), n.m.deact)
		n.m.mu.Unlock()
		if got := n.app.activeSet(); !slices.Equal(got, want) {
			return fmt.Errorf("%s app active on %v, claims (+pending deactivations) %v", n.peer.Addr, got.ranges(), want.ranges())
		}
	}
	return nil
}

// converged checks the end state: the ring and the claims agree, and every
// accepted URL is fetched or queued at its owner.
func (c *churn) converged() error {
	if err := c.settled(); err != nil {
		return err
	}
	for id, rec := range c.accepted {
		if c.fetched[id] > 0 {
			continue
		}
		owner := c.ownerOf(id.Key)
		if !owner.app.queued(id) {
			stored, _ := owner.st.Record(id.Key, id.Hash)
			return fmt.Errorf("accepted URL %s not queued at its owner %s (owner storage: %+v)", rec.URL, owner.peer.Addr, stored)
		}
	}
	return nil
}
