package sim

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// physNode is one simulated machine: it holds VNodes ring positions, and
// crashes or leaves with all of them.
type physNode struct {
	idx     int
	lat     time.Duration // its share of every link's latency
	vnodes  []*vnode
	alive   bool
	liveIdx int   // index in Sim.live while alive
	work    int64 // pages fetched
	group   int   // partition side (1 or 2) while partitioned
	// dishonest: acknowledges and drops what it owns, and withholds its
	// predecessors' leases (Config.Dishonest).
	dishonest bool
}

// vnode is one ring position: a ring.Node and its shard.Manager, built as
// a peer builds them, with the simulator's crawl app, outbox and router.
type vnode struct {
	s      *Sim
	phys   *physNode
	peer   ring.Peer
	rn     *ring.Node
	own    *shard.Ownership
	m      *shard.Manager
	st     *shard.MemStorage
	app    *app
	alive  bool
	joined bool

	// The routing layer, as a peer builds it (p2p/route): the owner that
	// admits tasks routed here and the router that delivers the outbox.
	owner  *route.Owner
	router *route.Router
	look   lookState
	// strans is the position's shard transport (a dishonest one's squat
	// writes go through it).
	strans *shardTransport

	progress *route.Progress // fetched pages waiting for their links

	outbox    []task
	unsettled map[uint64]struct{} // outbox entries not settled yet
	nextID    uint64
	routing   bool // a route event is scheduled
}

// newPhys creates a physical node with its ring positions, registered on
// the network but not joined.
func (s *Sim) newPhys() *physNode {
	p := &physNode{idx: len(s.phys), alive: true}
	if s.cfg.Dishonest > 0 {
		p.dishonest = s.rng.Float64() < s.cfg.Dishonest
		if p.dishonest {
			s.dishonest++
		}
	}
	p.lat = minNodeLatency + time.Duration(s.rng.Int64N(int64(maxNodeLatency-minNodeLatency)+1))
	s.phys = append(s.phys, p)
	p.liveIdx = len(s.live)
	s.live = append(s.live, p)
	name := "n" + strconv.Itoa(p.idx)
	if s.cfg.VNodes == 1 {
		p.vnodes = append(p.vnodes, s.newVnode(p, ring.Peer{ID: s.freeID(), Addr: name}))
	} else {
		// Position 0 goes where the machine's identity puts it; it
		// places the others through a member, before any joins, as a
		// peer does (route.PlacePositions), unless RandomPositions.
		// A machine's positions: ring.Peer.Machine.
		at := func(i int) ring.Peer { return ring.Peer{ID: s.freeID(), Addr: name + "/" + strconv.Itoa(i)} }
		first := s.newVnode(p, at(0))
		p.vnodes = append(p.vnodes, first)
		var rest []ring.Peer
		if s.cfg.RandomPositions {
			for i := 1; i < s.cfg.VNodes; i++ {
				rest = append(rest, at(i))
			}
		} else {
			var via ring.Peer
			if m, ok := s.randomMember(p.group); ok {
				via = m.peer
			}
			act := s.act
			s.act = actMaint // placing is ring maintenance traffic
			var err error
			if rest, err = route.PlacePositions(s.ctx, first.peer.ID, s.cfg.VNodes, at, s.probe(first, via)); err != nil {
				s.placeFailures++
			}
			s.act = act
		}
		for _, peer := range rest {
			p.vnodes = append(p.vnodes, s.newVnode(p, peer))
		}
	}
	if s.partitioned {
		p.group = 1
		s.applyPartition()
	}
	return p
}

// freeID draws a ring position no vnode holds.
func (s *Sim) freeID() ring.ID {
	id := ring.ID(s.rng.Uint64())
	for s.ids[id] {
		id = ring.ID(s.rng.Uint64())
	}
	return id
}

// newVnode builds the ring position peer of p, registered on the
// network but not joined.
func (s *Sim) newVnode(p *physNode, peer ring.Peer) *vnode {
	s.ids[peer.ID] = true
	addr := peer.Addr
	v := &vnode{s: s, phys: p, peer: peer, alive: true, unsettled: map[uint64]struct{}{}}
	v.progress = route.NewProgress(v, clock{&s.w})
	rt := &ringTransport{s: s, v: v, in: s.rnet.Transport(v.peer), wait: s.rcfg.RPCTimeout}
	rcfg := s.rcfg
	rcfg.Positions = s.cfg.VNodes // shared maintenance, as a peer's positions
	if s.cfg.VNodes > 1 {
		// The positions of one machine answer each other's keys without
		// the network and start a lookup from the nearest of them, as a
		// peer's positions do (ring.Config.Siblings).
		rcfg.Siblings = func() []*ring.Node {
			out := make([]*ring.Node, 0, len(p.vnodes))
			for _, o := range p.vnodes {
				if o.alive && o.joined {
					out = append(out, o.rn)
				}
			}
			return out
		}
	}
	v.rn = ring.NewNode(v.peer, rt, rcfg)
	s.rnet.Register(v.peer, v.rn)
	v.own = shard.NewOwnership(v.rn)
	v.st = shard.NewMemStorage()
	v.app = newApp(v)
	st := &shardTransport{s: s, v: v, in: s.snet.Transport(v.peer), wait: s.scfg.AckTimeout}
	v.strans = st
	scfg := s.scfg
	scfg.Positions = s.cfg.VNodes
	if !s.cfg.NoDefences {
		scfg.Signer = simSigner{addr}
	}
	m, err := shard.New(v.own, st, v.st, v.app, scfg)
	if err != nil {
		// The configuration was checked by effective; New fails only
		// on a storage that cannot load, which MemStorage cannot.
		panic("sim: shard.New: " + err.Error())
	}
	v.m = m
	s.snet.Register(v.peer, m)
	in := route.NewIntake(simSeen{v}, simQueue{v}, route.NoDepthLimit)
	var repl route.Replicator = countingReplicator{s, m}
	if p.dishonest {
		repl = dishonestReplicator{}
	}
	v.owner = route.NewOwner(v.own, repl, in, simURLs{s.g}, nil, route.NoDepthLimit)
	tt := &taskTransport{s: s, v: v, in: s.tnet.Transport(v.peer)}
	rtc := route.Config{Clock: clock{&s.w}, Logger: discardLog}
	if !s.cfg.NoDefences {
		rtc.Receipts = &route.ReceiptCheck{URLs: simURLs{s.g}, Verifier: simSigner{}, Replicas: s.cfg.Replicas}
	}
	v.router = route.NewRouter(simRing{v}, v.owner, tt, rtc)
	s.tnet.Register(v.peer, v.owner)
	s.byAddr[addr] = v
	return v
}

// probe is route.Probe for a machine placing its positions from first
// (not joined) through via: the lookups run in turn but count as made at
// once, as a peer makes them, so the event is charged the slowest.
func (s *Sim) probe(first *vnode, via ring.Peer) route.Probe {
	return func(ctx context.Context, keys []ring.ID) ([]ring.Arc, []error) {
		arcs, errs := make([]ring.Arc, len(keys)), make([]error, len(keys))
		base, slowest := s.w.charge, s.w.charge
		for i, k := range keys {
			s.w.charge = base
			arcs[i], errs[i] = first.rn.ArcAround(ctx, via, k)
			slowest = max(slowest, s.w.charge)
		}
		s.w.charge = slowest
		return arcs, errs
	}
}

// joinMachine joins the positions of p, a machine newPhys built. A
// machine that placed its positions (route.PlacePositions) joins once
// the lookups that took are done, in an event of its own at that time:
// run in the placing event, its positions would read a clock that many
// round trips ahead of every event that runs in between, and put off
// their maintenance until the others caught up with them.
func (s *Sim) joinMachine(p *physNode) {
	join := func() {
		for _, v := range p.vnodes {
			s.join(v)
		}
	}
	if s.w.charge == 0 {
		join()
		return
	}
	s.w.after(0, join)
}

// join enters v into the ring through a random member, or creates the
// ring, then starts its maintenance; a failed join is retried after a
// second.
func (s *Sim) join(v *vnode) {
	if !v.alive || v.joined {
		return
	}
	s.act = actMaint
	boot, ok := s.randomMember(v.phys.group)
	if !ok {
		if len(s.members) > 0 {
			s.w.after(time.Second, func() { s.join(v) })
			return
		}
		v.rn.Create()
	} else if err := v.rn.Join(s.ctx, boot.peer); err != nil {
		s.joinFailures++
		s.w.after(time.Second, func() { s.join(v) })
		return
	}
	v.joined = true
	s.addMember(v)
	s.maintain(v)
}

// maintain schedules v's maintenance at the configured intervals, each
// loop starting at a random phase.
func (s *Sim) maintain(v *vnode) {
	alive := func() bool { return v.alive }
	now := s.w.elapsed()
	phase := func(d time.Duration) time.Duration { return now + time.Duration(s.rng.Int64N(int64(d))) }
	step := func(f func()) func() {
		return func() {
			s.act = actMaint
			f()
		}
	}
	s.w.every(phase(s.rcfg.StabilizeInterval), s.rcfg.StabilizeInterval, alive, step(func() { v.rn.Stabilize(s.ctx) }))
	s.w.every(phase(s.rcfg.CheckPredecessorInterval), s.rcfg.CheckPredecessorInterval, alive, step(func() { v.rn.CheckPredecessor(s.ctx) }))
	s.w.every(phase(s.rcfg.FixFingersInterval), s.rcfg.FixFingersInterval, alive, step(func() { v.rn.FixFingers(s.ctx) }))
	s.w.every(phase(s.scfg.TickInterval), s.scfg.TickInterval, alive, step(func() {
		s.inTick = true
		v.m.Tick(s.ctx)
		s.inTick = false
	}))
	if v.phys.dishonest {
		hb := s.scfg.HeartbeatInterval
		s.w.every(phase(hb), hb, alive, step(func() { s.squat(v) }))
	}
}

// squat sends, as dishonest v, its successor and the node after it a
// write claiming the successor's range (v, successor] at an epoch 30
// minutes ahead of v's clock, as the squatter did, and counts
// the writes taken.
func (s *Sim) squat(v *vnode) {
	var targets []ring.Peer
	for _, p := range v.rn.Successors() {
		if p != v.peer && len(targets) < 2 && !slices.Contains(targets, p) {
			targets = append(targets, p)
		}
	}
	if len(targets) == 0 {
		return
	}
	now := clock{&s.w}.Now()
	e := shard.Epoch{N: uint64(now.Add(30 * time.Minute).UnixMilli()), Owner: v.peer.Addr}
	req := &shard.WriteRequest{Claims: []shard.Claim{{Range: shard.Range{From: v.peer.ID, To: targets[0].ID}, Epoch: e}}}
	for _, to := range targets {
		s.squatWrites++
		rep, err := v.strans.Replicate(s.ctx, to, req)
		if err == nil && rep.Refused == "" && len(rep.Rejected) == 0 {
			s.squatTaken++
		}
	}
}

// crash kills a physical node: every position stops answering at once
// and its memory and storage are gone (it never comes back).
func (s *Sim) crash(p *physNode) {
	if !p.alive {
		return
	}
	s.retire(p)
	delete(s.delegation().running, p)
	for _, v := range p.vnodes {
		s.rnet.Crash(v.peer.Addr)
		s.rnet.Unregister(v.peer.Addr)
		s.snet.Unregister(v.peer.Addr)
		s.tnet.Unregister(v.peer.Addr)
		s.dropVnode(v)
	}
	s.crashes++
}

// leave departs a physical node gracefully, position by position, as a
// peer does on SIGTERM: maintenance stops, the router gets one more try at
// its outbox, then ring.Node.Leave and shard.Manager.Leave.
func (s *Sim) leave(p *physNode) {
	if !p.alive {
		return
	}
	s.retire(p)
	// Its batches as helper are answered first, as a node's Close does.
	s.helpersLeave(p)
	for _, v := range p.vnodes {
		if v.joined {
			s.act = actCrawl
			s.routeOnce(v)
			s.act = actMaint
			v.alive = false // no more maintenance, fetches or intake
			if err := v.rn.Leave(s.ctx); err != nil {
				s.leaveErrors++
			}
			if err := v.m.Leave(s.ctx); err != nil {
				s.leaveErrors++
			}
		}
		s.rnet.Unregister(v.peer.Addr)
		s.snet.Unregister(v.peer.Addr)
		s.tnet.Unregister(v.peer.Addr)
		s.dropVnode(v)
	}
	s.leaves++
}

// retire takes p off the live list.
func (s *Sim) retire(p *physNode) {
	p.alive = false
	last := s.live[len(s.live)-1]
	s.live[p.liveIdx] = last
	last.liveIdx = p.liveIdx
	s.live = s.live[:len(s.live)-1]
	s.retiredWork = append(s.retiredWork, p.work)
}

// dropVnode forgets a departed position.
func (s *Sim) dropVnode(v *vnode) {
	v.alive = false
	if v.joined {
		s.removeMember(v)
	}
	delete(s.byAddr, v.peer.Addr)
	v.outbox = nil
	v.app = nil
}

// addMember inserts v into the sorted membership, the ground truth of
// ownership.
func (s *Sim) addMember(v *vnode) {
	i, _ := slices.BinarySearchFunc(s.members, v.peer.ID, cmpMember)
	s.members = slices.Insert(s.members, i, v)
}

func (s *Sim) removeMember(v *vnode) {
	i, ok := slices.BinarySearchFunc(s.members, v.peer.ID, cmpMember)
	if ok {
		s.members = slices.Delete(s.members, i, i+1)
	}
}

func cmpMember(v *vnode, id ring.ID) int {
	switch {
	case v.peer.ID < id:
		return -1
	case v.peer.ID > id:
		return 1
	}
	return 0
}

// trueOwner is the live member at or after key: who owns key once the
// ring has caught up with the membership.
func (s *Sim) trueOwner(key ring.ID) *vnode {
	i, _ := slices.BinarySearchFunc(s.members, key, cmpMember)
	if i == len(s.members) {
		i = 0
	}
	return s.members[i]
}

// memberIndex returns v's index in the membership.
func (s *Sim) memberIndex(v *vnode) int {
	i, _ := slices.BinarySearchFunc(s.members, v.peer.ID, cmpMember)
	return i
}

// randomMember returns a random joined live position, on partition side
// group if the network is partitioned.
func (s *Sim) randomMember(group int) (*vnode, bool) {
	if len(s.members) == 0 {
		return nil, false
	}
	for range 64 {
		v := s.members[s.rng.IntN(len(s.members))]
		if !s.partitioned || v.phys.group == group {
			return v, true
		}
	}
	return nil, false
}
