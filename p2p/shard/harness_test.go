package shard

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// testApp is the crawler stand-in: its queue is the pending records of the
// ranges the Manager activated, and it checks that the Manager drives it
// in a sane order (Activate only what is inactive, Deactivate only what
// is active).
type testApp struct {
	mu         sync.Mutex
	st         *MemStorage
	own        *Ownership // what the node may fetch, as the crawler asks
	active     spanSet
	queue      map[RecordID]Record
	hosts      map[string]HostState // host states the app would save on Deactivate
	violations []string
	log        []string
	// inflight counts fetches under way per key; Deactivate waits for
	// those in its range, as the crawler does.
	inflight map[uint64]int
	cond     *sync.Cond
	// rerouted holds the records Reroute passed, until routed.
	rerouted []Record
	// watched holds the records Watch passed (defences_test.go).
	watched []Record
	// reroutedHosts holds the host states Rerouted passed, by host.
	reroutedHosts map[string]HostState
}

func newTestApp(st *MemStorage, own *Ownership) *testApp {
	a := &testApp{st: st, own: own, queue: make(map[RecordID]Record), hosts: make(map[string]HostState), inflight: make(map[uint64]int)}
	a.cond = sync.NewCond(&a.mu)
	return a
}

// fetchOne takes one queued record the node owns, runs work on it with
// the record marked in flight, and reports whether there was one.
func (a *testApp) fetchOne(work func(Record)) bool {
	a.mu.Lock()
	var rec Record
	found := false
	for id, r := range a.queue {
		if a.own.Owns(id.Key) {
			rec, found = r, true
			delete(a.queue, id)
			break
		}
	}
	if !found {
		a.mu.Unlock()
		return false
	}
	a.inflight[rec.Key]++
	a.mu.Unlock()
	work(rec)
	a.mu.Lock()
	a.inflight[rec.Key]--
	a.cond.Broadcast()
	a.mu.Unlock()
	return true
}

func (a *testApp) Activate(ctx context.Context, r Range) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := spansOf(r)
	if overlaps(a.active, s) {
		a.violations = append(a.violations, fmt.Sprintf("Activate %s overlaps active %v", r, a.active.ranges()))
	}
	a.active = union(a.active, s)
	a.log = append(a.log, "activate "+r.String())
	for id := range a.queue {
		if s.contains(id.Key) {
			delete(a.queue, id)
		}
	}
	return a.st.ScanRecords(r, func(rec Record) error {
		if !rec.Done {
			a.queue[IDOf(rec)] = rec
		}
		return nil
	})
}

func (a *testApp) Deactivate(ctx context.Context, r Range) error {
	a.mu.Lock()
	s := spansOf(r)
	if !subsetOf(s, a.active) {
		a.violations = append(a.violations, fmt.Sprintf("Deactivate %s not within active %v", r, a.active.ranges()))
	}
	a.active = subtract(a.active, s)
	a.log = append(a.log, "deactivate "+r.String())
	for {
		busy := false
		for k, n := range a.inflight {
			if n > 0 && s.contains(k) {
				busy = true
			}
		}
		if !busy {
			break
		}
		a.cond.Wait()
	}
	for id := range a.queue {
		if s.contains(id.Key) {
			delete(a.queue, id)
		}
	}
	var save []HostState
	for _, h := range a.hosts {
		if s.contains(h.Key) {
			save = append(save, h)
		}
	}
	a.mu.Unlock()
	// As the node does: into storage, from where they travel with the
	// range's handoff.
	if len(save) > 0 {
		return a.st.PutHosts(save)
	}
	return nil
}

func (a *testApp) Merged(ctx context.Context, recs []Record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, rec := range recs {
		if !a.active.contains(rec.Key) {
			a.violations = append(a.violations, fmt.Sprintf("Merged record %s outside active %v", ring.ID(rec.Key), a.active.ranges()))
			continue
		}
		if !rec.Done {
			a.queue[IDOf(rec)] = rec
		}
	}
}

// Rerouted implements RerouteApp: done records of an active range leave
// the queue (the crawler would not fetch them again), and host states are
// kept for the test to read.
func (a *testApp) Rerouted(ctx context.Context, recs []Record, hosts []HostState) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range recs {
		if !r.Done || !a.active.contains(r.Key) {
			a.violations = append(a.violations, fmt.Sprintf("Rerouted record %s (done %v) outside active %v", ring.ID(r.Key), r.Done, a.active.ranges()))
		}
		delete(a.queue, IDOf(r))
	}
	for _, h := range hosts {
		if !a.active.contains(h.Key) {
			a.violations = append(a.violations, fmt.Sprintf("Rerouted host %s outside active %v", h.Host, a.active.ranges()))
		}
		if a.reroutedHosts == nil {
			a.reroutedHosts = make(map[string]HostState)
		}
		a.reroutedHosts[h.Host] = h
	}
}

// Reroute implements App: the records wait here until the cluster routes
// them to their owners (cluster.route), as a node's outbox and router do.
func (a *testApp) Reroute(ctx context.Context, recs []Record) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range recs {
		if r.Done {
			a.violations = append(a.violations, fmt.Sprintf("Reroute of done record %s", ring.ID(r.Key)))
		}
	}
	a.rerouted = append(a.rerouted, recs...)
	return nil
}

// enqueue is what the node's owner code does after Accept returned nil.
func (a *testApp) enqueue(recs ...Record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range recs {
		a.queue[IDOf(r)] = r
	}
}

func (a *testApp) queued(id RecordID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.queue[id]
	return ok
}

func (a *testApp) activeSet() spanSet {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.active)
}

func (a *testApp) problems() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.violations)
}

// fetch marks up to k queued records that the node owns right now as done,
// in key order, reports them to the manager as progress (as a node's
// crawler and progress loop do) and returns them.
func (n *testNode) fetch(k int) []Record {
	a, m := n.app, n.m
	a.mu.Lock()
	ids := slices.SortedFunc(maps.Keys(a.queue), func(x, y RecordID) int {
		if x.Key != y.Key {
			return cmpU64(x.Key, y.Key)
		}
		return cmpU64(x.Hash, y.Hash)
	})
	a.mu.Unlock()
	var out []Record
	for _, id := range ids {
		if len(out) == k {
			break
		}
		if !m.Owns(id.Key) {
			continue
		}
		a.mu.Lock()
		rec, ok := a.queue[id]
		delete(a.queue, id)
		a.mu.Unlock()
		if !ok {
			continue
		}
		rec.Done = true
		out = append(out, rec)
	}
	if len(out) > 0 {
		if err := m.Progress(out, nil); err != nil {
			panic(err)
		}
	}
	return out
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// testNode is one simulated process: ring node, manager, app, and the
// storage that survives its crashes.
type testNode struct {
	peer    ring.Peer
	rn      *ring.Node
	m       *Manager
	st      *MemStorage
	app     *testApp
	crashed bool // down, storage kept
	paused  bool // down, memory kept (a stopped process)
	gone    bool // left or removed for good
	joined  bool // in the ring (Create or Join done); only then maintained
}

func (n *testNode) up() bool { return !n.crashed && !n.paused && !n.gone }

// cluster drives nodes round by round on one fake clock from the test
// goroutine.
type cluster struct {
	tb     testing.TB
	ctx    context.Context
	clock  *ring.FakeClock
	rnet   *ring.MemNet
	snet   *MemNet
	cfg    Config
	rcfg   ring.Config
	nodes  []*testNode
	rng    *rand.Rand
	serial bool
	// wrap, if set, wraps each node's transport (fault injection).
	wrap func(self ring.Peer, tr Transport) Transport
	// ringWrap, if set, wraps each node's ring transport.
	ringWrap func(self ring.Peer, tr ring.Transport) ring.Transport
	rounds   int
}

const roundStep = 200 * time.Millisecond

func testConfig(clock ring.Clock) Config {
	return Config{
		Replicas:          2,
		FailureTimeout:    2 * time.Second,
		Lease:             time.Second,
		HeartbeatInterval: 200 * time.Millisecond,
		AckTimeout:        time.Second,
		SyncInterval:      2 * time.Second,
		ChunkRecords:      16,
	}
}

func newCluster(tb testing.TB, seed uint64) *cluster {
	clock := ring.NewFakeClock(time.Unix(1_700_000_000, 0))
	rnet := ring.NewMemNet(int64(seed))
	rcfg := ring.DefaultConfig()
	rcfg.Clock = clock
	return &cluster{
		tb:    tb,
		ctx:   context.Background(),
		clock: clock,
		rnet:  rnet,
		snet:  NewMemNet(rnet),
		cfg:   testConfig(clock),
		rcfg:  rcfg,
		rng:   rand.New(rand.NewPCG(seed, 7)),
	}
}

// start brings up the process for n (new or restarted): ring node,
// manager on n's storage, registration on both networks.
func (c *cluster) start(n *testNode) {
	c.tb.Helper()
	rtr := c.rnet.Transport(n.peer)
	if c.ringWrap != nil {
		rtr = c.ringWrap(n.peer, rtr)
	}
	n.rn = ring.NewNode(n.peer, rtr, c.rcfg)
	c.rnet.Register(n.peer, n.rn)
	own := NewOwnership(n.rn)
	n.app = newTestApp(n.st, own)
	var tr Transport = c.snet.Transport(n.peer)
	if c.wrap != nil {
		tr = c.wrap(n.peer, tr)
	}
	m, err := New(own, tr, n.st, n.app, c.cfg)
	if err != nil {
		c.tb.Fatalf("New %s: %v", n.peer, err)
	}
	m.serial = c.serial
	n.m = m
	c.snet.Register(n.peer, m)
	c.rnet.Restore(n.peer.Addr)
	n.crashed, n.joined = false, false
}

// add creates a node at id (random if zero) and joins it through a live
// node, or creates the ring if there is none.
func (c *cluster) add(id ring.ID) *testNode {
	c.tb.Helper()
	for id == 0 || c.byID(id) != nil {
		id = ring.ID(c.rng.Uint64())
	}
	n := &testNode{peer: ring.Peer{ID: id, Addr: fmt.Sprintf("n%02d", len(c.nodes))}, st: NewMemStorage()}
	c.nodes = append(c.nodes, n)
	c.start(n)
	c.join(n)
	return n
}

func (c *cluster) join(n *testNode) {
	c.tb.Helper()
	var boots []*testNode
	for _, o := range c.live() {
		if o != n && o.joined {
			boots = append(boots, o)
		}
	}
	if len(boots) == 0 {
		n.rn.Create()
		n.joined = true
		return
	}
	var err error
	for try := 0; try < 50; try++ {
		b := boots[c.rng.IntN(len(boots))]
		if err = n.rn.Join(c.ctx, b.peer); err == nil {
			n.joined = true
			return
		}
		// A restarted node can find the ring still listing its old self
		// until the crash is noticed; let maintenance run and retry.
		c.round()
	}
	c.tb.Fatalf("join %s: %v", n.peer, err)
}

func (c *cluster) byID(id ring.ID) *testNode {
	for _, n := range c.nodes {
		if n.peer.ID == id {
			return n
		}
	}
	return nil
}

func (c *cluster) byAddr(addr string) *testNode {
	for _, n := range c.nodes {
		if n.peer.Addr == addr {
			return n
		}
	}
	return nil
}

// checkApps fails the test if a live node's app saw the shard protocol
// broken (see testApp's problems).
func (c *cluster) checkApps() {
	c.tb.Helper()
	for _, n := range c.live() {
		if errs := n.app.problems(); len(errs) > 0 {
			c.tb.Fatalf("%s app protocol violations: %v", n.peer.Addr, errs)
		}
	}
}

func (c *cluster) live() []*testNode {
	var out []*testNode
	for _, n := range c.nodes {
		if n.up() {
			out = append(out, n)
		}
	}
	return out
}

// crash kills n's process: it stops answering and its memory is lost at
// restart; its storage is kept.
func (c *cluster) crash(n *testNode) {
	c.rnet.Crash(n.peer.Addr)
	n.crashed = true
}

// restart brings a crashed node back on its storage and rejoins it.
func (c *cluster) restart(n *testNode) {
	c.tb.Helper()
	c.start(n)
	c.join(n)
}

// leave departs n gracefully.
func (c *cluster) leave(n *testNode) error {
	err := errors.Join(n.rn.Leave(c.ctx), n.m.Leave(c.ctx))
	c.rnet.Unregister(n.peer.Addr)
	c.snet.Unregister(n.peer.Addr)
	n.gone = true
	return err
}

// pause stops n's process (SIGSTOP): unreachable and idle, memory kept.
func (c *cluster) pause(n *testNode) {
	c.rnet.Crash(n.peer.Addr)
	n.paused = true
}

// resume continues a paused process where it stopped, stale pointers and
// all.
func (c *cluster) resume(n *testNode) {
	c.rnet.Restore(n.peer.Addr)
	n.paused = false
}

// round runs one maintenance round on every live node and advances the
// clock by roundStep.
func (c *cluster) round() {
	var live []*testNode
	for _, n := range c.live() {
		if n.joined {
			live = append(live, n)
		}
	}
	for _, n := range live {
		n.rn.Stabilize(c.ctx)
	}
	for _, n := range live {
		n.rn.CheckPredecessor(c.ctx)
	}
	if c.rounds%10 == 0 {
		for _, n := range live {
			n.rn.FixFingers(c.ctx)
		}
	}
	for _, n := range live {
		n.m.Tick(c.ctx)
	}
	c.route()
	c.clock.Advance(roundStep)
	c.rounds++
}

// route delivers the records the live nodes' apps were asked to reroute
// to their owners, as a node's router does with tasks: an owner that owns
// the key and does not hold the record yet accepts and queues it; one
// that does not own it yet gets it again next round.
func (c *cluster) route() {
	for _, n := range c.live() {
		n.app.mu.Lock()
		recs := n.app.rerouted
		n.app.rerouted = nil
		n.app.mu.Unlock()
		var keep []Record
		for _, r := range recs {
			o := c.ownerOf(r.Key)
			if _, ok := o.st.Record(r.Key, r.Hash); ok && o != n {
				continue // the owner has it: a duplicate
			}
			if !o.m.Owns(r.Key) || o.m.Accept(c.ctx, []Record{r}) != nil {
				keep = append(keep, r)
				continue
			}
			o.app.enqueue(r)
		}
		n.app.mu.Lock()
		n.app.rerouted = append(n.app.rerouted, keep...)
		n.app.mu.Unlock()
	}
}

// until runs rounds until cond returns nil, failing after max rounds.
func (c *cluster) until(max int, what string, cond func() error) int {
	c.tb.Helper()
	var err error
	for r := 0; r < max; r++ {
		if err = cond(); err == nil {
			return r
		}
		c.round()
	}
	if err = cond(); err != nil {
		c.tb.Fatalf("%s not reached after %d rounds: %v\n%s", what, max, err, c.dump())
	}
	return max
}

// trueArc is n's arc given the live membership.
func (c *cluster) trueArc(n *testNode) spanSet {
	var ids []ring.ID
	for _, o := range c.live() {
		ids = append(ids, o.peer.ID)
	}
	slices.Sort(ids)
	i := slices.Index(ids, n.peer.ID)
	pred := ids[(i+len(ids)-1)%len(ids)]
	return spansOf(Range{From: pred, To: n.peer.ID})
}

// settled checks that the ring has converged and every live node
// actively claims exactly its arc, with nothing releasing.
func (c *cluster) settled() error {
	var rns []*ring.Node
	for _, n := range c.live() {
		rns = append(rns, n.rn)
	}
	if err := ring.CheckRing(rns); err != nil {
		return fmt.Errorf("ring: %w", firstLine(err))
	}
	for _, n := range c.live() {
		st := n.m.Stats()
		want := c.trueArc(n)
		if got := claimSpans(st.Claims); !slices.Equal(got, want) {
			return fmt.Errorf("%s claims %v, arc %v", n.peer.Addr, st.Claims, want.ranges())
		}
		if len(st.Releasing) > 0 {
			return fmt.Errorf("%s still releasing %v", n.peer.Addr, st.Releasing)
		}
		if !st.LeaseValid {
			return fmt.Errorf("%s has no lease", n.peer.Addr)
		}
		n.app.mu.Lock()
		left := len(n.app.rerouted)
		n.app.mu.Unlock()
		if left > 0 {
			return fmt.Errorf("%s has %d rerouted records undelivered", n.peer.Addr, left)
		}
	}
	return nil
}

func firstLine(err error) error {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return errors.New(s[:i] + " ...")
	}
	return err
}

func claimSpans(cs []Claim) spanSet {
	var all []span
	for _, c := range cs {
		all = append(all, spansOf(c.Range)...)
	}
	return normalize(all)
}

// dump describes every node for failure messages.
func (c *cluster) dump() string {
	var b strings.Builder
	for _, n := range c.nodes {
		state := "up"
		switch {
		case n.gone:
			state = "gone"
		case n.crashed:
			state = "crashed"
		case n.paused:
			state = "paused"
		}
		fmt.Fprintf(&b, "  %s %s %s", n.peer.Addr, n.peer.ID, state)
		if n.up() {
			st := n.m.Stats()
			rs := n.rn.State()
			fmt.Fprintf(&b, " pred=%s succ=%s claims=%v releasing=%v lease=%v stale=%d promo=%d in=%d out=%d",
				rs.Predecessor.Addr, rs.Successors[0].Addr, st.Claims, st.Releasing, st.LeaseValid,
				st.StaleRejections, st.Promotions, st.HandoffsIn, st.HandoffsOut)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// ownerOf returns the live node whose arc holds key.
func (c *cluster) ownerOf(key uint64) *testNode {
	var peers []ring.Peer
	for _, n := range c.live() {
		peers = append(peers, n.peer)
	}
	return c.byAddr(ring.OwnerOf(peers, ring.ID(key)).Addr)
}

// keyIn returns a random key inside r.
func (c *cluster) keyIn(r Range) uint64 {
	s := spansOf(r)
	sp := s[c.rng.IntN(len(s))]
	return sp.lo + c.rng.Uint64N(sp.hi-sp.lo+1)
}

// record makes a record at key with a fresh hash.
func (c *cluster) record(key uint64) Record {
	h := c.rng.Uint64()
	return Record{Key: key, Hash: h, URL: fmt.Sprintf("https://h%016x/p%016x", key, h), Depth: 1}
}

// acceptIn has n accept count new records with keys in r, as an owner
// does for a batch routed to it, and returns them.
func (c *cluster) acceptIn(ctx context.Context, n *testNode, r Range, count int) []Record {
	c.tb.Helper()
	recs := make([]Record, count)
	for i := range recs {
		recs[i] = c.record(c.keyIn(r))
	}
	if err := n.m.Accept(ctx, recs); err != nil {
		c.tb.Fatal(err)
	}
	return recs
}

// build starts size nodes and runs until the shard state has settled.
func (c *cluster) build(size int) {
	c.tb.Helper()
	for range size {
		c.add(0)
		c.round()
	}
	c.until(400, "initial settle", c.settled)
}

// stats of a node, shorthand.
func (n *testNode) stats() Stats { return n.m.Stats() }

// tableAt reads n's epoch table at key.
func (n *testNode) tableAt(key uint64) Epoch {
	n.m.mu.Lock()
	defer n.m.mu.Unlock()
	return n.m.table.m.get(key)
}

// owned is the set of keys n.m.Owns answers true for right now, computed
// exactly: active claims, cut to the ring arc, if the lease holds.
func (n *testNode) owned(now time.Time) spanSet {
	m := n.m
	noSucc := m.noSuccessor()
	m.mu.Lock()
	claims := m.own.claims.domain()
	ok := m.own.leaseValid(now, noSucc)
	m.mu.Unlock()
	if !ok {
		return nil
	}
	if pred := n.rn.Predecessor(); !pred.IsZero() {
		return intersect(claims, spansOf(Range{From: pred.ID, To: n.peer.ID}))
	}
	return claims
}
