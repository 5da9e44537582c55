package sim

import (
	"context"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// activity is what a message is counted as.
type activity int

const (
	actMaint activity = iota // ring and shard maintenance, handoffs
	actCrawl                 // the crawl's lookups, task deliveries and Accepts
	actProbe                 // the simulator's measuring lookups
	numActs
)

// traffic counts messages (a request and its reply are two) and their
// estimated bytes.
type traffic struct{ msgs, bytes int64 }

// rpcKind is the kind of a message, for the breakdown of maintenance
// traffic (Report.Maint).
type rpcKind int

const (
	kindNeighbours  rpcKind = iota // ring Stabilize's (and its walk's) Neighbours
	kindNotify                     // ring Notify
	kindPing                       // ring Ping: check-predecessor, suspect probes, dead successors
	kindLookup                     // ring lookup steps in ring maintenance: fix-fingers, position checks, joins
	kindShardLookup                // ring lookup steps in shard Ticks: placing senders, handoff targets, witnesses
	kindLeave                      // ring Leave notices
	kindReplicate                  // shard writes in Tick carrying claims alone: heartbeats
	kindProgress                   // shard writes in Tick carrying records or host states: progress
	kindDigest                     // shard anti-entropy digests
	kindHandoff                    // shard handoffs and anti-entropy merges
	kindPull                       // shard pulls
	kindTask                       // task deliveries (the crawl's, not maintenance)
	numKinds
)

// kindNames are the report's names of the kinds, in order.
var kindNames = [numKinds]string{"neighbours", "notify", "ping", "lookup", "shard-lookup", "leave", "heartbeat", "progress", "digest", "handoff", "pull", "task"}

// Message sizes are estimates of the protobuf encoding on a libp2p
// stream, not measurements: frameBytes per message for framing and stream
// overhead, peerBytes per peer (ring ID and a 38-byte peer ID).
const (
	frameBytes = 48
	peerBytes  = 8 + 40
	claimBytes = 16 + 8 + 40 + 4
)

func peersBytes(ps []ring.Peer) int { return len(ps) * peerBytes }

func recordsBytes(rs []shard.Record) int {
	n := 0
	for _, r := range rs {
		n += 8 + 8 + len(r.URL) + 4 + 1 + len(r.Meta) + 8 + 8
	}
	return n
}

func hostsBytes(hs []shard.HostState) int {
	n := 0
	for _, h := range hs {
		n += 8 + len(h.Host) + len(h.Data) + 4
	}
	return n
}

// oneWay is the one-way latency between two ring positions: the sum of
// their physical nodes' terms (each uniform in [5, 75] ms), nothing
// between positions of one node.
func (s *Sim) oneWay(from *vnode, to string) time.Duration {
	v := s.byAddr[to]
	if v == nil {
		return 2 * maxNodeLatency
	}
	if v.phys == from.phys {
		return 0
	}
	return from.phys.lat + v.phys.lat
}

const (
	minNodeLatency = 5 * time.Millisecond
	maxNodeLatency = 75 * time.Millisecond
)

// account charges one RPC from v to the running event and counts it:
// a round trip when it succeeded, the caller's timeout when it failed.
func (s *Sim) account(v *vnode, to string, kind rpcKind, req, rep int, err error, timeout time.Duration) {
	t := &s.traffic[s.act]
	var d traffic
	if err != nil {
		s.w.charge += timeout
		d = traffic{1, int64(frameBytes + req)}
	} else {
		s.w.charge += 2 * s.oneWay(v, to)
		d = traffic{2, int64(2*frameBytes + req + rep)}
	}
	t.msgs += d.msgs
	t.bytes += d.bytes
	if s.act == actMaint {
		if kind == kindLookup && s.inTick {
			kind = kindShardLookup
		}
		k := &s.maintKinds[kind]
		k.msgs += d.msgs
		k.bytes += d.bytes
	}
}

// ringTransport is one ring position's ring.Transport: ring.MemNet's
// (faults, handlers run in the caller's goroutine) plus latency and
// counting.
type ringTransport struct {
	s    *Sim
	v    *vnode
	in   ring.Transport
	wait time.Duration // charged for a failed call: the RPC timeout
}

var _ ring.Transport = (*ringTransport)(nil)

func (t *ringTransport) call(to ring.Peer, kind rpcKind, req int, rpc func() (int, error)) error {
	rep, err := rpc()
	t.s.account(t.v, to.Addr, kind, req, rep, err, t.wait)
	return err
}

// FindSuccessorStep implements ring.Transport.
func (t *ringTransport) FindSuccessorStep(ctx context.Context, to ring.Peer, key ring.ID) (ring.Step, error) {
	var st ring.Step
	err := t.call(to, kindLookup, 10, func() (int, error) {
		var err error
		st, err = t.in.FindSuccessorStep(ctx, to, key)
		return 1 + peerBytes + peersBytes(st.Successors), err
	})
	return st, err
}

// Neighbours implements ring.Transport.
func (t *ringTransport) Neighbours(ctx context.Context, to ring.Peer) (ring.Neighbours, error) {
	var nb ring.Neighbours
	err := t.call(to, kindNeighbours, 0, func() (int, error) {
		var err error
		nb, err = t.in.Neighbours(ctx, to)
		return peerBytes + peersBytes(nb.Successors), err
	})
	return nb, err
}

// Notify implements ring.Transport.
func (t *ringTransport) Notify(ctx context.Context, to ring.Peer, candidate ring.Peer) error {
	return t.call(to, kindNotify, peerBytes, func() (int, error) { return 0, t.in.Notify(ctx, to, candidate) })
}

// Ping implements ring.Transport.
func (t *ringTransport) Ping(ctx context.Context, to ring.Peer) error {
	return t.call(to, kindPing, 0, func() (int, error) { return 0, t.in.Ping(ctx, to) })
}

// Leave implements ring.Transport.
func (t *ringTransport) Leave(ctx context.Context, to ring.Peer, n ring.LeaveNotice) error {
	return t.call(to, kindLeave, 2*peerBytes+peersBytes(n.Successors), func() (int, error) { return 0, t.in.Leave(ctx, to, n) })
}

// shardTransport is one ring position's shard.Transport: shard.MemNet's
// plus latency and counting.
type shardTransport struct {
	s    *Sim
	v    *vnode
	in   shard.Transport
	wait time.Duration // charged for a failed call: the shard AckTimeout
}

var _ shard.Transport = (*shardTransport)(nil)

func (t *shardTransport) call(to ring.Peer, kind rpcKind, req int, rpc func() (int, error)) error {
	rep, err := rpc()
	t.s.account(t.v, to.Addr, kind, req, rep, err, t.wait)
	return err
}

// Replicate implements shard.Transport.
func (t *shardTransport) Replicate(ctx context.Context, to ring.Peer, req *shard.WriteRequest) (*shard.WriteReply, error) {
	var out *shard.WriteReply
	n := len(req.Claims)*claimBytes + recordsBytes(req.Records) + hostsBytes(req.Hosts) + 16*len(req.Held) + recordsBytes(req.Watched)
	kind := kindReplicate
	if len(req.Records)+len(req.Hosts)+len(req.Watched) > 0 {
		kind = kindProgress
	}
	err := t.call(to, kind, n, func() (int, error) {
		if r := t.s.byAddr[to.Addr]; r != nil && r.alive && r.phys.dishonest {
			// A dishonest replica withholds the lease: it answers, and
			// refuses every write.
			out = &shard.WriteReply{Refused: "withheld by a dishonest replica"}
			return len(out.Refused), nil
		}
		var err error
		out, err = t.in.Replicate(ctx, to, req)
		if err != nil {
			return 0, err
		}
		return len(out.Rejected)*claimBytes + len(out.StoreError) + len(out.Refused) + len(out.Receipt), nil
	})
	return out, err
}

// Handoff implements shard.Transport.
func (t *shardTransport) Handoff(ctx context.Context, to ring.Peer, req *shard.HandoffRequest) (*shard.HandoffReply, error) {
	var out *shard.HandoffReply
	n := claimBytes + 2 + recordsBytes(req.Records) + hostsBytes(req.Hosts)
	err := t.call(to, kindHandoff, n, func() (int, error) {
		var err error
		out, err = t.in.Handoff(ctx, to, req)
		if err != nil {
			return 0, err
		}
		return 1 + 16 + claimBytes + len(out.Reason), nil
	})
	return out, err
}

// Digest implements shard.Transport.
func (t *shardTransport) Digest(ctx context.Context, to ring.Peer, req *shard.DigestRequest) (*shard.DigestReply, error) {
	var out *shard.DigestReply
	err := t.call(to, kindDigest, 16+4+1, func() (int, error) {
		var err error
		out, err = t.in.Digest(ctx, to, req)
		if err != nil {
			return 0, err
		}
		return 8*len(out.Sums) + len(out.Witnessed)*claimBytes, nil
	})
	return out, err
}

// Pull implements shard.Transport.
func (t *shardTransport) Pull(ctx context.Context, to ring.Peer, req *shard.PullRequest) (*shard.PullReply, error) {
	var out *shard.PullReply
	err := t.call(to, kindPull, 16+17, func() (int, error) {
		var err error
		out, err = t.in.Pull(ctx, to, req)
		if err != nil {
			return 0, err
		}
		return 1 + recordsBytes(out.Records) + hostsBytes(out.Hosts) + len(out.Epochs)*claimBytes + 17, nil
	})
	return out, err
}
