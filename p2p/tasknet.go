package p2p

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// TaskTransport carries task batches to their owners
// (/swarmcrawl/tasks/1.0.0) and seeds from clients to any member
// (/swarmcrawl/seed/1.0.0). It checks what every message must hold
// whatever its tasks mean: batch sizes, an owner's accounting for every
// task it was sent, and that sender and owner compute ring keys the same
// way. What a task means is the node's to decide.
type TaskTransport struct {
	streams *Streams
	keyMode string
	// hold answers batches a sender asks this node to hold for its
	// predecessor (TaskBatch.for_owner; ServeHolds), nil to refuse them.
	hold func(ctx context.Context, in Inbound, owner string, tasks []*pb.Task) *pb.TaskBatchResult
}

// NewTaskTransport returns the task transport over s for a node that
// computes ring keys by keyMode (its --key: "host", "url" or "domain").
// Batches carry the mode, and a batch whose sender computes keys another
// way is refused whole (KeyModeError).
func NewTaskTransport(s *Streams, keyMode string) *TaskTransport {
	return &TaskTransport{streams: s, keyMode: keyMode}
}

// KeyModeError is Send's error when the owner refused a batch because it
// computes ring keys another way: the two nodes were started with
// different --key, and neither owns what the other finds it owning.
type KeyModeError struct {
	Owner        string // the owner's short peer ID
	Ours, Theirs string // the key modes of this node and of the owner
}

func (e *KeyModeError) Error() string {
	return fmt.Sprintf("owner %s keys tasks by %q, this node by %q: --key must be the same on every node of a swarm", e.Owner, e.Theirs, e.Ours)
}

// Send delivers tasks to the owner to and returns its answer, which
// accounts for every task: accepted, duplicate, handed back as not owned,
// or rejected. An answer that loses count is an error, as if the batch
// never arrived, so that nothing silently disappears.
func (t *TaskTransport) Send(ctx context.Context, to ring.Peer, tasks []*pb.Task) (*pb.TaskBatchResult, error) {
	id, _, err := PositionOf(to)
	if err != nil {
		return nil, fmt.Errorf("send tasks: owner %q: %w", to.Addr, err)
	}
	return t.send(ctx, id, &pb.TaskBatch{Tasks: tasks, KeyMode: t.keyMode})
}

// SendFor asks the node to to hold tasks for owner, its predecessor,
// whose acknowledgement of them no receipts vouched for (issue 29; see
// route.FallbackTransport). The answer accounts for every task as Send's
// does: accepted or duplicate (held), not owned (not the receiver's to
// hold), or rejected.
func (t *TaskTransport) SendFor(ctx context.Context, to, owner ring.Peer, tasks []*pb.Task) (*pb.TaskBatchResult, error) {
	id, _, err := PositionOf(to)
	if err != nil {
		return nil, fmt.Errorf("send tasks for %s: holder %q: %w", owner.Addr, to.Addr, err)
	}
	return t.send(ctx, id, &pb.TaskBatch{Tasks: tasks, KeyMode: t.keyMode, ForOwner: owner.Addr})
}

// send delivers one batch and checks the answer.
func (t *TaskTransport) send(ctx context.Context, id peer.ID, batch *pb.TaskBatch) (*pb.TaskBatchResult, error) {
	tasks := batch.Tasks
	resp := &pb.TaskBatchResult{}
	if err := t.streams.Call(ctx, id, protocol.TasksID, batch, resp); err != nil {
		return nil, fmt.Errorf("send %d tasks: %w", len(tasks), err)
	}
	if resp.KeyMode != "" && resp.KeyMode != t.keyMode {
		return nil, fmt.Errorf("send %d tasks: %w", len(tasks), &KeyModeError{Owner: ShortID(id), Ours: t.keyMode, Theirs: resp.KeyMode[:min(len(resp.KeyMode), maxKeyModeBytes)]})
	}
	if resp.RetryAfterNs > 0 {
		return nil, fmt.Errorf("send %d tasks: owner %s: %w", len(tasks), ShortID(id), &RetryLater{After: time.Duration(resp.RetryAfterNs), Reason: resp.Error})
	}
	if resp.Error != "" {
		return nil, fmt.Errorf("send %d tasks: owner %s: %s", len(tasks), ShortID(id), resp.Error)
	}
	if got := int(resp.Accepted) + int(resp.Duplicates) + len(resp.NotOwned) + len(resp.Rejected); got != len(tasks) {
		return nil, fmt.Errorf("send %d tasks: owner %s accounted for %d", len(tasks), ShortID(id), got)
	}
	return resp, nil
}

// ServeTasks answers the tasks protocol with accept, which learns who sent
// the batch (an owner judges seeds by their sender). A batch above
// protocol.MaxBatchTasks, or from a sender that computes ring keys
// another way, is refused whole before accept sees it.
func (t *TaskTransport) ServeTasks(accept func(ctx context.Context, in Inbound, tasks []*pb.Task) *pb.TaskBatchResult) {
	t.streams.Handle(protocol.TasksID, func() proto.Message { return &pb.TaskBatch{} },
		func(ctx context.Context, in Inbound, m proto.Message) proto.Message {
			batch := m.(*pb.TaskBatch)
			if len(batch.Tasks) > protocol.MaxBatchTasks {
				return &pb.TaskBatchResult{Error: fmt.Sprintf("batch of %d tasks exceeds %d", len(batch.Tasks), protocol.MaxBatchTasks)}
			}
			if batch.KeyMode != "" && batch.KeyMode != t.keyMode {
				return &pb.TaskBatchResult{
					Error:   fmt.Sprintf("tasks keyed by %.*q, this node keys them by %s", maxKeyModeBytes, batch.KeyMode, t.keyMode),
					KeyMode: t.keyMode,
				}
			}
			if batch.ForOwner != "" {
				if t.hold == nil || len(batch.ForOwner) > maxOwnerBytes {
					return &pb.TaskBatchResult{Error: "this node holds no tasks for other owners"}
				}
				return t.hold(ctx, in, batch.ForOwner, batch.Tasks)
			}
			return accept(ctx, in, batch.Tasks)
		})
}

// maxOwnerBytes bounds TaskBatch.for_owner: a peer ID and a position.
const maxOwnerBytes = 128

// ServeHolds makes the tasks protocol answer batches a sender asks this
// node to hold for its predecessor (TaskBatch.for_owner) with hold. Call
// it before ServeTasks.
func (t *TaskTransport) ServeHolds(hold func(ctx context.Context, in Inbound, owner string, tasks []*pb.Task) *pb.TaskBatchResult) {
	t.hold = hold
}

// maxKeyModeBytes bounds a peer's key mode quoted in an error: the known
// ones are a few bytes.
const maxKeyModeBytes = 32

// ServeSeeds answers the seed protocol with submit, which decides whether
// the sender may seed, with the client's signed statements (one per URL,
// or none). A request above protocol.MaxSeedURLs, or whose statements do
// not match its URLs one for one, is refused whole before submit sees it.
func (t *TaskTransport) ServeSeeds(submit func(ctx context.Context, in Inbound, urls []string, proofs []*pb.SeedProof) *pb.SeedResponse) {
	t.streams.Handle(protocol.SeedID, func() proto.Message { return &pb.SeedRequest{} },
		func(ctx context.Context, in Inbound, m proto.Message) proto.Message {
			req := m.(*pb.SeedRequest)
			if len(req.Urls) > protocol.MaxSeedURLs {
				return &pb.SeedResponse{Error: fmt.Sprintf("%d seeds exceed the limit of %d per request", len(req.Urls), protocol.MaxSeedURLs)}
			}
			if len(req.Proofs) != 0 && len(req.Proofs) != len(req.Urls) {
				return &pb.SeedResponse{Error: fmt.Sprintf("%d seed signatures for %d URLs: want one for each, or none", len(req.Proofs), len(req.Urls))}
			}
			return submit(ctx, in, req.Urls, req.Proofs)
		})
}

// SeedResult is what a member did with submitted seeds.
type SeedResult struct {
	Accepted   int // new URLs queued by their owners
	Duplicates int // already seen by their owners
	Pending    int // owner not reachable yet; the member keeps retrying
	Rejected   []Rejection
}

// Rejection is a URL refused for good, with the reason.
type Rejection struct {
	URL, Reason string
}

// RetryLater is the error of a request a peer refused for now, because
// the sender has spent its quota there: the peer took nothing, and the
// same request may be sent again After.
type RetryLater struct {
	After  time.Duration
	Reason string
}

func (e *RetryLater) Error() string {
	return fmt.Sprintf("refused for now, retry in %v: %s", e.After.Round(time.Millisecond), e.Reason)
}

// ErrNoConnection is SubmitSeeds' error when the member cannot be
// reached at all.
var ErrNoConnection = errors.New("cannot connect")

// SubmitSeeds sends seed URLs to the swarm member at addr (a full
// /p2p/ multiaddr) over the seed protocol, from a short-lived host h, in
// requests of at most protocol.MaxSeedURLs URLs. A request the member
// refuses for now (the client's seed quota is spent) is sent again when
// the member says, until ctx ends. The seeds go unsigned: the member signs
// for a client it takes seeds from (see SubmitSignedSeeds).
func SubmitSeeds(ctx context.Context, h host.Host, addr string, urls []string) (SeedResult, error) {
	return SubmitSignedSeeds(ctx, h, addr, urls, nil)
}

// SubmitSignedSeeds is SubmitSeeds with the client's signed statements
// (package seedsig), proofs[i] over the normalised urls[i]; nil proofs
// sends none.
func SubmitSignedSeeds(ctx context.Context, h host.Host, addr string, urls []string, proofs []*pb.SeedProof) (SeedResult, error) {
	if len(proofs) != 0 && len(proofs) != len(urls) {
		return SeedResult{}, fmt.Errorf("submit seeds: %d signatures for %d URLs", len(proofs), len(urls))
	}
	if len(urls) == 0 {
		return SeedResult{}, errors.New("submit seeds: no URLs")
	}
	infos, err := ParseAddrInfos([]string{addr})
	if err != nil {
		return SeedResult{}, fmt.Errorf("submit seeds: %w", err)
	}
	if len(infos) != 1 {
		return SeedResult{}, fmt.Errorf("submit seeds: peer %q: need exactly one /p2p/ address", addr)
	}
	if err := h.Connect(ctx, infos[0]); err != nil {
		return SeedResult{}, fmt.Errorf("submit seeds: %w: %s: %w", ErrNoConnection, addr, err)
	}
	s := NewStreams(h, 0, NoRingWork) // a client serves nothing
	var total SeedResult
	for len(urls) > 0 {
		n := min(len(urls), protocol.MaxSeedURLs)
		resp := &pb.SeedResponse{}
		req := &pb.SeedRequest{Urls: urls[:n]}
		if len(proofs) > 0 {
			req.Proofs = proofs[:n]
		}
		if err := s.Call(ctx, infos[0].ID, protocol.SeedID, req, resp); err != nil {
			return total, fmt.Errorf("submit seeds: %w", err)
		}
		if resp.RetryAfterNs > 0 {
			wait := time.NewTimer(time.Duration(resp.RetryAfterNs))
			select {
			case <-ctx.Done():
				wait.Stop()
				return total, fmt.Errorf("submit seeds: %w: %w", &RetryLater{After: time.Duration(resp.RetryAfterNs), Reason: resp.Error}, ctx.Err())
			case <-wait.C:
			}
			continue
		}
		if resp.Error != "" {
			return total, fmt.Errorf("submit seeds: %s", resp.Error)
		}
		total.Accepted += int(resp.Accepted)
		total.Duplicates += int(resp.Duplicates)
		total.Pending += int(resp.Pending)
		for _, r := range resp.Rejected {
			total.Rejected = append(total.Rejected, Rejection{URL: r.Url, Reason: r.Reason})
		}
		urls = urls[n:]
		if len(proofs) > 0 {
			proofs = proofs[n:]
		}
	}
	return total, nil
}
