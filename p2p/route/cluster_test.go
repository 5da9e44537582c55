package route

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// testURLs reads http://HOST/PATH URLs: the ring key is the hash of the
// host, as a node's host keys are.
type testURLs struct{}

func (testURLs) Normalize(raw string) (string, error) {
	rest, ok := strings.CutPrefix(raw, "http://")
	if !ok || !strings.Contains(rest, "/") || strings.HasPrefix(rest, "/") {
		return "", fmt.Errorf("not a test URL: %q", raw)
	}
	return strings.ToLower(raw), nil
}

func (testURLs) Key(u string) (uint64, error) {
	host, _, _ := strings.Cut(strings.TrimPrefix(u, "http://"), "/")
	return sum64(host), nil
}

func (testURLs) Hash(u string) uint64 { return sum64(u) }

func sum64(s string) uint64 {
	h := sha256.Sum256([]byte(s))
	return binary.BigEndian.Uint64(h[:8])
}

// testQueue is a node's crawl queue and seen set: the pending records it
// must fetch, as the crawler's queue caches the shard records (the
// shard.App), and the seen set in its shard storage.
type testQueue struct {
	mu      sync.Mutex
	st      *shard.MemStorage
	queue   map[uint64]shard.Record // by URL hash
	outbox  *[]Task                 // Reroute's way out
	refused bool                    // Room refuses everything
	watched []shard.Record          // to fetch for an owner (shard.Watcher)
}

// Watch implements shard.Watcher: the records are fetched at the next
// round, once each.
func (q *testQueue) Watch(_ context.Context, _ string, recs []shard.Record) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, r := range recs {
		if !slices.ContainsFunc(q.watched, func(w shard.Record) bool { return w.Hash == r.Hash }) {
			q.watched = append(q.watched, r)
		}
	}
}

func (q *testQueue) SeenDepth(key, hash uint64) (int, bool, error) {
	r, ok := q.st.Record(key, hash)
	return r.Depth, ok, nil
}

func (q *testQueue) IsSeed(key, hash uint64) (bool, error) {
	r, ok := q.st.Record(key, hash)
	return ok && r.Seed, nil
}

func (q *testQueue) Room(n int) error {
	if q.refused {
		return fmt.Errorf("no room for %d URLs", n)
	}
	return nil
}

func (q *testQueue) Queue(fresh []Admission) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, a := range fresh {
		q.queue[a.Hash] = shard.Record{Key: a.Key, Hash: a.Hash, URL: a.Task.URL, Depth: a.Task.Depth}
	}
	return nil
}

func (q *testQueue) Activate(_ context.Context, r shard.Range) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.st.ScanRecords(r, func(rec shard.Record) error {
		if !rec.Done {
			q.queue[rec.Hash] = rec
		}
		return nil
	})
}

func (q *testQueue) Deactivate(_ context.Context, r shard.Range) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for h, rec := range q.queue {
		if r.Contains(ring.ID(rec.Key)) {
			delete(q.queue, h)
		}
	}
	return nil
}

func (q *testQueue) Merged(_ context.Context, recs []shard.Record) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, rec := range recs {
		if !rec.Done {
			q.queue[rec.Hash] = rec
		}
	}
}

func (q *testQueue) Reroute(_ context.Context, recs []shard.Record) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, rec := range recs {
		if !rec.Done {
			*q.outbox = append(*q.outbox, Task{URL: rec.URL, Key: rec.Key, Depth: rec.Depth})
		}
	}
	return nil
}

// testNode is one peer of the cluster: ring node, shard manager, and the
// routing layer under test.
type testNode struct {
	peer    ring.Peer
	rn      *ring.Node
	m       *shard.Manager
	q       *testQueue
	owner   *Owner
	router  *Router
	outbox  []Task
	crashed bool
	// dishonest: the node's owner acknowledges every task and drops it,
	// and it fetches nothing (TestDishonestOwner).
	dishonest bool
}

// cluster drives nodes round by round on one fake clock from the test
// goroutine, over MemNets that share the ring network's faults.
type cluster struct {
	t     *testing.T
	ctx   context.Context
	clock *ring.FakeClock
	rnet  *ring.MemNet
	snet  *shard.MemNet
	tnet  *MemNet
	rcfg  ring.Config
	scfg  shard.Config
	nodes []*testNode
	rng   *rand.Rand
	// defences turns on receipts and watching (receipts.go).
	defences bool

	// fetched counts the fetches of each URL; accepted, the owners that
	// accepted it (by address, with the round).
	fetched  map[string]int
	accepted map[string][]string
}

func newCluster(t *testing.T, seed uint64, n int) *cluster {
	return newClusterWith(t, seed, n, false)
}

// newClusterWith is newCluster with issue 29's defences on or off.
func newClusterWith(t *testing.T, seed uint64, n int, defences bool) *cluster {
	clock := ring.NewFakeClock(time.Unix(1_700_000_000, 0))
	rnet := ring.NewMemNet(int64(seed))
	rcfg := ring.DefaultConfig()
	rcfg.Clock = clock
	c := &cluster{
		t: t, ctx: context.Background(), clock: clock, rnet: rnet,
		snet: shard.NewMemNet(rnet), tnet: NewMemNet(rnet), rcfg: rcfg,
		scfg: shard.Config{Replicas: 2, FailureTimeout: 2 * time.Second, Lease: time.Second,
			HeartbeatInterval: 200 * time.Millisecond, AckTimeout: time.Second, SyncInterval: 2 * time.Second,
			ChunkRecords: 16, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		rng:     rand.New(rand.NewPCG(seed, 11)),
		fetched: map[string]int{}, accepted: map[string][]string{},
		defences: defences,
	}
	if !defences {
		c.scfg.WatchTimeout, c.scfg.LeaseFromFirst = -1, true
	} else {
		c.scfg.WatchTimeout = 2 * time.Second
	}
	for i := range n {
		c.add(fmt.Sprintf("n%02d", i))
	}
	c.rounds(40)
	return c
}

func (c *cluster) add(addr string) *testNode {
	c.t.Helper()
	n := &testNode{peer: ring.Peer{ID: ring.ID(c.rng.Uint64()), Addr: addr}}
	n.rn = ring.NewNode(n.peer, c.rnet.Transport(n.peer), c.rcfg)
	c.rnet.Register(n.peer, n.rn)
	own := shard.NewOwnership(n.rn)
	st := shard.NewMemStorage()
	n.q = &testQueue{st: st, queue: map[uint64]shard.Record{}, outbox: &n.outbox}
	scfg := c.scfg
	rcfg := Config{Clock: c.clock, Logger: c.scfg.Logger}
	if c.defences {
		scfg.Signer = testSigner{addr}
		rcfg.Receipts = &ReceiptCheck{URLs: testURLs{}, Verifier: testSigner{}, Replicas: 2}
	}
	m, err := shard.New(own, c.snet.Transport(n.peer), st, n.q, scfg)
	if err != nil {
		c.t.Fatal(err)
	}
	n.m = m
	c.snet.Register(n.peer, m)
	n.owner = NewOwner(own, recording{c, n.peer.Addr, m}, NewIntake(n.q, n.q, 10), testURLs{}, nil, 10)
	n.router = NewRouter(n.rn, n.owner, c.tnet.Transport(n.peer), rcfg)
	c.tnet.Register(n.peer, n.owner)
	if len(c.nodes) == 0 {
		n.rn.Create()
	} else if err := n.rn.Join(c.ctx, c.nodes[0].peer); err != nil {
		c.t.Fatalf("join %s: %v", addr, err)
	}
	c.nodes = append(c.nodes, n)
	return n
}

// recording is a node's shard manager as its owner's Replicator: it notes
// which owner accepted each URL once the replicas hold it.
type recording struct {
	c    *cluster
	addr string
	m    *shard.Manager
}

func (r recording) Accept(ctx context.Context, recs []shard.Record) error {
	return r.note(recs, r.m.Accept(ctx, recs))
}

func (r recording) AcceptOwn(ctx context.Context, recs []shard.Record) error {
	return r.note(recs, r.m.AcceptOwn(ctx, recs))
}

func (r recording) AcceptWithReceipts(ctx context.Context, recs []shard.Record, held []shard.RecordID, own bool) ([]shard.Receipt, error) {
	rs, err := r.m.AcceptWithReceipts(ctx, recs, held, own)
	return rs, r.note(recs, err)
}

func (r recording) HoldFor(owner string, recs []shard.Record) ([]bool, int, int, error) {
	held, took, dups, err := r.m.HoldFor(owner, recs)
	if err == nil {
		for i, rec := range recs {
			if held[i] {
				r.c.accepted[rec.URL] = append(r.c.accepted[rec.URL], r.addr+" for "+owner)
			}
		}
	}
	return held, took, dups, err
}

// testSigner signs receipts with a hash of the signer's address: the
// test's stand-in for an identity key.
type testSigner struct{ addr string }

func (s testSigner) Sign(msg []byte) ([]byte, error) {
	h := sha256.Sum256(append([]byte(s.addr+"\x00"), msg...))
	return h[:], nil
}

func (testSigner) Verify(p ring.Peer, msg, sig []byte) bool {
	want, _ := testSigner{p.Addr}.Sign(msg)
	return string(want) == string(sig)
}

func (r recording) note(recs []shard.Record, err error) error {
	if err == nil {
		for _, rec := range recs {
			r.c.accepted[rec.URL] = append(r.c.accepted[rec.URL], r.addr)
		}
	}
	return err
}

func (c *cluster) live() []*testNode {
	var out []*testNode
	for _, n := range c.nodes {
		if !n.crashed {
			out = append(out, n)
		}
	}
	return out
}

// round advances the clock one step and runs every live node once: ring
// maintenance, the shard manager's tick, one routing pass of its outbox
// (what it could not deliver goes back), and up to fetch fetches.
func (c *cluster) round(fetch int) {
	c.clock.Advance(200 * time.Millisecond)
	for _, n := range c.live() {
		n.rn.Stabilize(c.ctx)
		n.rn.CheckPredecessor(c.ctx)
		n.rn.FixFingers(c.ctx)
		n.m.Tick(c.ctx)
	}
	for _, n := range c.live() {
		if len(n.outbox) > 0 {
			out := n.outbox
			n.outbox = nil
			d := n.router.Route(c.ctx, out, false)
			n.outbox = append(n.outbox, d.Undelivered...)
			for _, r := range d.Rejected {
				c.t.Errorf("%s: %s rejected: %s", n.peer.Addr, r.URL, r.Reason)
			}
		}
		n.fetch(c, fetch)
	}
}

func (c *cluster) rounds(k int) {
	for range k {
		c.round(0)
	}
}

// fetch fetches up to k queued URLs the node owns now and reports them
// done to the replicas, as a crawler and its progress loop do.
func (n *testNode) fetch(c *cluster, k int) {
	if n.dishonest {
		return
	}
	n.q.mu.Lock()
	watched := n.q.watched
	n.q.watched = nil
	for i := range watched {
		watched[i].Done = true
		c.fetched[watched[i].URL]++
	}
	n.q.mu.Unlock()
	if len(watched) > 0 {
		if err := n.m.WatchDone(c.ctx, watched); err != nil {
			c.t.Logf("watch done: %v", err)
		}
	}
	n.q.mu.Lock()
	var done []shard.Record
	for h, rec := range n.q.queue {
		if len(done) == k {
			break
		}
		if !n.m.Owns(rec.Key) {
			continue
		}
		delete(n.q.queue, h)
		rec.Done = true
		done = append(done, rec)
		c.fetched[rec.URL]++
	}
	n.q.mu.Unlock()
	if len(done) > 0 {
		if err := n.m.Progress(done, nil); err != nil {
			c.t.Fatal(err)
		}
	}
}

func (c *cluster) crash(n *testNode) {
	c.rnet.Crash(n.peer.Addr)
	n.crashed = true
}

// urls returns the test's crawl: pages pages over hosts hosts.
func testTasks(hosts, pages int) []Task {
	var out []Task
	for i := range pages {
		u := fmt.Sprintf("http://h%d.test/p%d", i%hosts, i)
		t, _ := NewTask(testURLs{}, u, 1, 0)
		out = append(out, t)
	}
	return out
}

// seed hands each task to a random live node's outbox.
func (c *cluster) seed(tasks []Task) {
	live := c.live()
	for _, t := range tasks {
		n := live[c.rng.IntN(len(live))]
		n.outbox = append(n.outbox, t)
	}
}

// held reports whether a live node holds url's record, pending or done.
func (c *cluster) held(key, hash uint64) bool {
	for _, n := range c.live() {
		if _, ok := n.q.st.Record(key, hash); ok {
			return true
		}
	}
	return false
}

// checkHeld fails for every accepted URL no live node holds.
func (c *cluster) checkHeld(when string, tasks []Task) {
	c.t.Helper()
	for _, t := range tasks {
		if len(c.accepted[t.URL]) > 0 && !c.held(t.Key, sum64(t.URL)) {
			c.t.Errorf("%s: %s was accepted by %v and no live node holds it", when, t.URL, c.accepted[t.URL])
		}
	}
}

// outboxes counts the tasks still waiting for delivery.
func (c *cluster) outboxes() int {
	k := 0
	for _, n := range c.live() {
		k += len(n.outbox)
	}
	return k
}
