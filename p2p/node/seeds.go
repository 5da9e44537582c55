package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	manet "github.com/multiformats/go-multiaddr/net"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"github.com/swarmcrawl/swarmcrawl/p2p/seedsig"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// acceptTasks answers a task batch from another node with the owner,
// within the sender's task quota. Its tasks at depth 0 (that no redirect
// led to) are seeds only if they carry a seeder's signed statement that
// this node's seed policy honours (seedPolicy), whoever forwards them;
// any other is a link, and in a scoped crawl refused unless its host is
// in scope already.
func (n *Node) acceptTasks(ctx context.Context, in p2p.Inbound, tasks []*pb.Task) *pb.TaskBatchResult {
	from := in.From
	if ok, after := n.taskQuota.take(from, len(tasks)); !ok {
		n.log.Debug("tasks refused: sender over its quota", "from", p2p.ShortID(from), "tasks", len(tasks), "retry_after", after)
		return &pb.TaskBatchResult{RetryAfterNs: int64(after),
			Error: fmt.Sprintf("peer %s is over its quota of %d tasks a second: nothing taken, retry in %v", p2p.ShortID(from), n.cfg.TaskQuota.Rate, after.Round(time.Millisecond))}
	}
	res, err := n.owner.Accept(ctx, decodeTasks(tasks), true, false)
	if err != nil {
		return &pb.TaskBatchResult{Error: err.Error()}
	}
	out := &pb.TaskBatchResult{Accepted: uint32(res.Accepted), Duplicates: uint32(res.Duplicates), NotOwned: encodeTasks(res.NotOwned),
		Receipts: p2p.EncodeReceipts(res.Receipts)}
	for _, r := range res.Rejected {
		out.Rejected = append(out.Rejected, &pb.Rejection{Url: r.URL, Reason: r.Reason})
	}
	return out
}

// submitSeeds answers the seed protocol: it routes the seeds of a client
// that may seed (see Config.SeedFrom), each with a signed statement for
// its owner to verify: the client's own (proofs) when the client signed
// and this node lists it (--seed-from, --allow-peers), so that every node
// that lists the same seeder honours it whoever forwards it; otherwise
// this node's, speaking for the client it took the seeds from.
func (n *Node) submitSeeds(ctx context.Context, in p2p.Inbound, seeds []string, proofs []*pb.SeedProof) *pb.SeedResponse {
	from := in.From
	if !n.maySeed(in) {
		n.log.Warn("seeds refused: sender may not seed", "from", from.String(), "addr", in.RemoteAddr)
		return &pb.SeedResponse{Error: fmt.Sprintf("this node does not take seeds from peer %s: seed from the node's machine over a loopback address, or start the node with --seed-from %s", from, from)}
	}
	if ok, after := n.seedQuota.take(from, len(seeds)); !ok {
		n.log.Warn("seeds refused: sender over its quota", "from", p2p.ShortID(from), "seeds", len(seeds), "retry_after", after)
		return &pb.SeedResponse{RetryAfterNs: int64(after),
			Error: fmt.Sprintf("peer %s is over its quota of %d seeds a second: nothing taken, retry in %v", p2p.ShortID(from), n.cfg.SeedQuota.Rate, after.Round(time.Millisecond))}
	}
	res := n.seed(ctx, seeds, proofs, n.seeds.listed(from))
	n.log.Info("seeds submitted", "from", p2p.ShortID(from), "signed", len(proofs) > 0, "accepted", res.Accepted, "duplicates", res.Duplicates, "pending", res.Pending, "rejected", len(res.Rejected))
	out := &pb.SeedResponse{Accepted: uint32(res.Accepted), Duplicates: uint32(res.Duplicates), Pending: uint32(res.Pending)}
	for _, r := range res.Rejected {
		out.Rejected = append(out.Rejected, &pb.Rejection{Url: r.URL, Reason: r.Reason})
	}
	return out
}

// maySeed reports whether the sender of in may submit seeds: a client on
// this machine (connected over loopback), an allowed member, a listed
// seeder, or anyone when the node says so.
func (n *Node) maySeed(in p2p.Inbound) bool {
	switch {
	case n.cfg.SeedFromAnyone:
		return true
	case in.RemoteAddr != nil && manet.IsIPLoopback(in.RemoteAddr):
		return true
	}
	return slices.Contains(n.cfg.SeedFrom, in.From) || slices.Contains(n.cfg.Host.AllowPeers, in.From)
}

// Seed routes seed URLs to their owners, as the seed protocol does for
// remote clients, each signed by this node (the operator's seeds).
func (n *Node) Seed(ctx context.Context, seeds []string) p2p.SeedResult {
	return n.seed(ctx, seeds, nil, false)
}

// seed routes seeds to their owners with their signed statements:
// proofs[i] (the client's, or none) is forwarded for seeds[i] when
// useClient says this node lists the client; else this node signs.
func (n *Node) seed(ctx context.Context, seeds []string, proofs []*pb.SeedProof, useClient bool) p2p.SeedResult {
	var res p2p.SeedResult
	tasks := make([]frontier.Task, 0, len(seeds))
	now := time.Now()
	for i, raw := range seeds {
		u, err := urls.Normalize(nil, strings.TrimSpace(raw))
		if err != nil {
			res.Rejected = append(res.Rejected, p2p.Rejection{URL: raw, Reason: err.Error()})
			continue
		}
		var proof []byte
		if i < len(proofs) {
			if proof, err = seedsig.Encode(proofs[i]); err == nil && proof != nil {
				_, err = n.seeds.verifier.Verify(proof, u)
			}
			if err != nil {
				res.Rejected = append(res.Rejected, p2p.Rejection{URL: raw, Reason: fmt.Sprintf("%v (the client signs the normalised URL %s)", err, u)})
				continue
			}
		}
		if proof == nil || !useClient {
			if proof, err = n.seeds.sign(u, now); err != nil {
				res.Rejected = append(res.Rejected, p2p.Rejection{URL: raw, Reason: err.Error()})
				continue
			}
		}
		if !n.links.proofs.put(u, string(proof)) {
			res.Rejected = append(res.Rejected, p2p.Rejection{URL: raw, Reason: fmt.Sprintf("this node holds %d seeds waiting for their owners: retry later", maxPendingSeeds)})
			continue
		}
		tasks = append(tasks, frontier.Task{URL: u})
	}
	// A few quick passes absorb owners that moved or answered slowly;
	// whatever is left goes to the outbox and is retried until delivered.
	for attempt := 0; attempt < 3 && len(tasks) > 0; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(backoff(attempt)):
			}
		}
		r := n.links.Route(ctx, tasks, false)
		res.Accepted += r.accepted
		res.Duplicates += r.duplicates
		for _, rj := range r.rejected {
			res.Rejected = append(res.Rejected, p2p.Rejection{URL: rj.URL, Reason: rj.Reason})
		}
		tasks = r.undelivered
		if ctx.Err() != nil {
			break
		}
	}
	res.Pending = len(tasks)
	n.links.Defer(tasks, 1)
	return res
}

// The seed policy. A seed mark (a shard record's, a task's at depth 0)
// brings its host into a scoped crawl's scope, so a node honours one
// only with a signed statement (package seedsig) over the URL by a seeder
// it accepts: a peer listed with --seed-from or --allow-peers, any peer
// with --seed-from any, the node itself (which signs for the clients it
// took seeds from: those on its machine, and listed ones that did not
// sign), or a peer on its machine (seen connected over loopback: another
// node the operator runs there). A mark without such a statement is
// treated as absent, wherever it comes from: the member that forwards a
// seed, a replicate write, a handoff, a merge or a pull. The statement
// covers one URL, so it cannot be replayed for another host.

// maxLocalPeers bounds the peers a seed policy remembers as seen over
// loopback.
const maxLocalPeers = 1024

// maxVerified bounds the statements a seed policy remembers as verified.
const maxVerified = 1 << 16

// seedPolicy is a node's judge of seed marks (route.SeedPolicy).
type seedPolicy struct {
	self     peer.ID
	key      crypto.PrivKey // signs for the node's clients
	anyone   bool
	accepted map[peer.ID]bool // --seed-from and --allow-peers
	verifier *seedsig.Verifier
	host     host.Host // nil: no peer is on this machine but the node

	mu sync.Mutex
	// local remembers peers seen connected over loopback; remote lists
	// peers judged off this machine whatever their address (SeeAsRemote).
	local, remote map[peer.ID]bool

	// refused counts the seed marks (of records and tasks) not honoured.
	refused atomic.Int64
}

var _ route.SeedPolicy = (*seedPolicy)(nil)

func newSeedPolicy(cfg Config, h host.Host, key crypto.PrivKey) *seedPolicy {
	p := &seedPolicy{key: key, anyone: cfg.SeedFromAnyone, accepted: map[peer.ID]bool{},
		verifier: seedsig.NewVerifier(maxVerified), host: h, local: map[peer.ID]bool{}, remote: map[peer.ID]bool{}}
	if h != nil {
		p.self = h.ID()
	}
	for _, id := range slices.Concat(cfg.SeedFrom, cfg.Host.AllowPeers) {
		p.accepted[id] = true
	}
	return p
}

// listed reports whether the operator listed id as a seeder (--seed-from,
// --allow-peers).
func (p *seedPolicy) listed(id peer.ID) bool { return p.accepted[id] }

// sign returns this node's statement that u is a seed.
func (p *seedPolicy) sign(u string, at time.Time) ([]byte, error) {
	if p.key == nil {
		return nil, fmt.Errorf("sign seed %s: the node has no key", urls.Truncate(u, 80))
	}
	return seedsig.Sign(p.key, u, at)
}

// Honours implements route.SeedPolicy. It judges the signer before the
// signature: a statement by a seeder the node does not accept costs no
// signature check.
func (p *seedPolicy) Honours(u, proof string) bool {
	id, err := seedsig.Signer([]byte(proof))
	if err == nil && p.accepts(id) {
		if _, err = p.verifier.Verify([]byte(proof), u); err == nil {
			return true
		}
	}
	p.refused.Add(1)
	return false
}

// accepts reports whether the policy takes seeds signed by id.
func (p *seedPolicy) accepts(id peer.ID) bool {
	return p.anyone || id == p.self || p.accepted[id] || p.onMachine(id)
}

// onMachine reports whether id is a peer on this machine: one this node
// is, or was, connected to over a loopback address.
func (p *seedPolicy) onMachine(id peer.ID) bool {
	if p.host == nil {
		return false
	}
	p.mu.Lock()
	remote, known := p.remote[id], p.local[id]
	p.mu.Unlock()
	if remote {
		return false
	}
	if known {
		return true
	}
	for _, c := range p.host.Network().ConnsToPeer(id) {
		if manet.IsIPLoopback(c.RemoteMultiaddr()) {
			p.mu.Lock()
			if len(p.local) < maxLocalPeers {
				p.local[id] = true
			}
			p.mu.Unlock()
			return true
		}
	}
	return false
}

// seeAsRemote judges ids off this machine from now on.
func (p *seedPolicy) seeAsRemote(ids ...peer.ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range ids {
		p.remote[id] = true
		delete(p.local, id)
	}
}

// unmark returns recs with the seed marks the policy does not honour
// removed (with their statements): such a record is kept, as unseeded. It
// copies recs before changing any, and returns how many it unmarked.
func (p *seedPolicy) unmark(recs []shard.Record) ([]shard.Record, int) {
	n := 0
	for i, r := range recs {
		if !r.Seed && r.SeedProof == nil || r.Seed && p.Honours(r.URL, string(r.SeedProof)) {
			continue
		}
		if n == 0 {
			recs = slices.Clone(recs)
		}
		n++
		recs[i].Seed, recs[i].SeedProof = false, nil
	}
	return recs, n
}

// maxPendingSeeds and maxPendingSeedBytes bound the seeds a node holds
// statements for until their owners take them: 65,536 seeds, 32 MiB of
// URLs and statements.
const (
	maxPendingSeeds     = 1 << 16
	maxPendingSeedBytes = 32 << 20
)

// seedProofs holds the statements of seeds on their way to their owners
// (the outbox keeps the tasks), by URL.
type seedProofs struct {
	mu    sync.Mutex
	m     map[string]string
	bytes int
}

// put holds proof for the seed u, false if it holds too many already.
func (s *seedProofs) put(u, proof string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]string{}
	}
	old, ok := s.m[u]
	size := s.bytes + len(proof) - len(old)
	if !ok {
		size += len(u)
	}
	if !ok && len(s.m) >= maxPendingSeeds || size > maxPendingSeedBytes {
		return false
	}
	s.m[u], s.bytes = proof, size
	return true
}

// get returns the statement held for the seed u.
func (s *seedProofs) get(u string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[u]
}

// drop forgets the statements of seeds settled with their owners.
func (s *seedProofs) drop(us []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range us {
		if p, ok := s.m[u]; ok {
			s.bytes -= len(u) + len(p)
			delete(s.m, u)
		}
	}
}
