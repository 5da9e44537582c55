package sim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// What a position's routing layer (p2p/route, the code a peer runs) needs
// of the simulated world: the graph's URLs, the seen set and crawl queue
// of the simulated crawler, the ring with its lookup statistics, and the
// task network with latency and counting.

// discardLog is every simulated router's logger.
var discardLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// simURLs reads the graph's URLs (route.URLs): http://HOST/pN, whose ring
// key is its host's and whose seen-set hash is the page number.
type simURLs struct{ g *Graph }

var errNotGraphURL = errors.New("sim: not a URL of the graph")

// Normalize implements route.URLs: the graph's URLs are canonical.
func (u simURLs) Normalize(raw string) (string, error) {
	if _, _, err := u.parse(raw); err != nil {
		return "", err
	}
	return raw, nil
}

// Key implements route.URLs.
func (u simURLs) Key(normalized string) (uint64, error) {
	h, _, err := u.parse(normalized)
	if err != nil {
		return 0, err
	}
	return uint64(u.g.hostKey(h)), nil
}

// Hash implements route.URLs.
func (u simURLs) Hash(normalized string) uint64 {
	_, p, _ := u.parse(normalized)
	return uint64(p)
}

// parse returns the host and page of a graph URL.
func (u simURLs) parse(s string) (host, page int32, err error) {
	rest, ok := strings.CutPrefix(s, "http://")
	i := strings.LastIndex(rest, "/p")
	if !ok || i < 0 {
		return 0, 0, errNotGraphURL
	}
	n, err := strconv.Atoi(rest[i+2:])
	if err != nil || n < 0 || n >= u.g.Pages() {
		return 0, 0, errNotGraphURL
	}
	p := int32(n)
	if u.g.hostNames[u.g.host[p]] != rest[:i] {
		return 0, 0, errNotGraphURL
	}
	return u.g.host[p], p, nil
}

// simSeen is a position's seen set (route.SeenSet): its shard records, as
// the simulated crawler keeps no other.
type simSeen struct{ v *vnode }

// SeenDepth implements route.SeenSet.
func (s simSeen) SeenDepth(key, hash uint64) (int, bool, error) {
	r, ok := s.v.st.Record(key, hash)
	return r.Depth, ok, nil
}

// IsSeed implements route.SeenSet.
func (s simSeen) IsSeed(key, hash uint64) (bool, error) {
	r, ok := s.v.st.Record(key, hash)
	return ok && r.Seed, nil
}

// simQueue is a position's crawl queue (route.Queue).
type simQueue struct{ v *vnode }

// Room implements route.Queue: the simulated disk never fills.
func (q simQueue) Room(int) error { return nil }

// Queue implements route.Queue: the replicas hold the records already,
// which is the simulated crawler's seen set.
func (q simQueue) Queue(fresh []route.Admission) error {
	s := q.v.s
	for _, a := range fresh {
		s.accepted[a.Hash] = true
		if q.v.app != nil {
			q.v.app.enqueue(int32(a.Hash), int32(a.Task.Depth))
		}
	}
	return nil
}

// countingReplicator is a position's shard manager as the owner's
// Replicator, counting the accepts a replica fenced off.
type countingReplicator struct {
	s *Sim
	m *shard.Manager
}

// Accept implements route.Replicator.
func (r countingReplicator) Accept(ctx context.Context, recs []shard.Record) error {
	return r.count(r.m.Accept(ctx, recs))
}

// AcceptOwn implements route.Replicator.
func (r countingReplicator) AcceptOwn(ctx context.Context, recs []shard.Record) error {
	return r.count(r.m.AcceptOwn(ctx, recs))
}

// AcceptWithReceipts implements route.ReceiptReplicator.
func (r countingReplicator) AcceptWithReceipts(ctx context.Context, recs []shard.Record, held []shard.RecordID, own bool) ([]shard.Receipt, error) {
	rs, err := r.m.AcceptWithReceipts(ctx, recs, held, own)
	return rs, r.count(err)
}

// HoldFor implements route.Holder.
func (r countingReplicator) HoldFor(owner string, recs []shard.Record) ([]bool, int, int, error) {
	return r.m.HoldFor(owner, recs)
}

// dishonestReplicator is a dishonest position's Replicator: it
// acknowledges without storing anything or writing to the replicas, and
// holds whatever it is asked to hold for a predecessor the same way.
type dishonestReplicator struct{}

// Accept implements route.Replicator.
func (dishonestReplicator) Accept(context.Context, []shard.Record) error { return nil }

// AcceptOwn implements route.Replicator.
func (dishonestReplicator) AcceptOwn(context.Context, []shard.Record) error { return nil }

// HoldFor implements route.Holder: every record "held", none stored.
func (dishonestReplicator) HoldFor(_ string, recs []shard.Record) ([]bool, int, int, error) {
	held := make([]bool, len(recs))
	for i := range held {
		held[i] = true
	}
	return held, len(recs), 0, nil
}

// simSigner is the simulator's stand-in for a node's identity key
// (shard.Signer, shard.Verifier): a receipt's signature is a hash of the
// signer's address and the message. Cheap and deterministic; the
// simulated dishonest nodes do not forge receipts, so it needs no secret.
type simSigner struct{ addr string }

// Sign implements shard.Signer.
func (s simSigner) Sign(msg []byte) ([]byte, error) { return simSig(s.addr, msg), nil }

// Verify implements shard.Verifier.
func (simSigner) Verify(signer ring.Peer, msg, sig []byte) bool {
	return bytes.Equal(sig, simSig(signer.Addr, msg))
}

func simSig(addr string, msg []byte) []byte {
	h := sha256.New()
	h.Write([]byte(addr))
	h.Write([]byte{0})
	h.Write(msg)
	return h.Sum(nil)[:16]
}

func (r countingReplicator) count(err error) error {
	if errors.Is(err, shard.ErrStale) {
		r.s.refusedStale++
	}
	return err
}

// lookState makes a router's lookups in one pass count as made in
// parallel: each starts at base, and the pass is charged the slowest.
type lookState struct {
	parallel      bool
	base, slowest time.Duration
}

// simRing is a position's ring as its router sees it (route.Ring): real
// lookups, checked against the membership and counted (Sim.lookup).
type simRing struct{ v *vnode }

// Self implements route.Ring.
func (r simRing) Self() ring.Peer { return r.v.peer }

// Lookup implements route.Ring.
func (r simRing) Lookup(_ context.Context, key ring.ID) (ring.Peer, int, error) {
	v, s := r.v, r.v.s
	if v.look.parallel {
		s.w.charge = v.look.base
	}
	p, hops, err := s.lookupErr(v, key)
	if v.look.parallel {
		v.look.slowest = max(v.look.slowest, s.w.charge)
	}
	return p, hops, err
}

// taskTimeout is what a failed task delivery costs the sender.
const taskTimeout = 5 * time.Second

// taskTransport is a position's route.Transport: route.MemNet's (the
// ring network's faults, the owner run in the caller's goroutine) plus
// latency and counting.
type taskTransport struct {
	s  *Sim
	v  *vnode
	in route.Transport
}

// Send implements route.Transport.
func (t *taskTransport) Send(ctx context.Context, to ring.Peer, tasks []route.Task) (route.Result, error) {
	req := 0
	for _, x := range tasks {
		req += len(x.URL) + 8
	}
	res, err := t.in.Send(ctx, to, tasks)
	t.s.account(t.v, to.Addr, kindTask, req, 8+len(res.NotOwned)*40+len(res.Receipts)*receiptBytes, err, taskTimeout)
	if err != nil {
		t.s.refusedOther++
	} else {
		t.s.refusedNotOwned += int64(len(res.NotOwned))
	}
	return res, err
}

// receiptBytes is a receipt on the wire: its signer and an Ed25519
// signature, as a node sends it.
const receiptBytes = peerBytes + 64

var _ route.FallbackTransport = (*taskTransport)(nil)

// SendFor implements route.FallbackTransport.
func (t *taskTransport) SendFor(ctx context.Context, to, owner ring.Peer, tasks []route.Task) (route.Result, error) {
	req := peerBytes
	for _, x := range tasks {
		req += len(x.URL) + 8
	}
	res, err := t.in.(route.FallbackTransport).SendFor(ctx, to, owner, tasks)
	t.s.account(t.v, to.Addr, kindTask, req, 8+len(res.NotOwned)*40, err, taskTimeout)
	if err != nil {
		t.s.refusedOther++
	}
	return res, err
}
