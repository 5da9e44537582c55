package route

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// Ownership says which keys this node may accept now: a claim under a
// valid lease (shard.Ownership).
type Ownership interface {
	Owns(key uint64) bool
}

// Replicator stores new records with the K replicas before an owner
// acknowledges them (sync-on-accept): shard.Manager.
type Replicator interface {
	// Accept stores records routed here, synced, locally and on the
	// replicas.
	Accept(ctx context.Context, recs []shard.Record) error
	// AcceptOwn is Accept for records this node sends itself from a
	// durable outbox that keeps them until they are settled: the local
	// write need not be synced.
	AcceptOwn(ctx context.Context, recs []shard.Record) error
}

// PartlyStored is the error of a Replicator (or ReceiptReplicator) that
// stored and replicated some of the records and not others: a node's
// ring positions each take the keys they own, and one of them can lose
// its claim, or its lease, between the owner's check and the write.
// Failed are the records, new or held, that it did not take; the others
// it did take (and, asked for them, returned their receipts). Owner.Accept
// queues those and hands the failed ones back as not owned: before, one
// failed position failed the whole batch, leaving the records the others
// had stored neither queued nor marked seen, and the sender, getting no
// receipts, gave them to the replicas to hold, where they waited for the
// replicas' watch (TestGrowthJoins: a page fetched a minute late).
type PartlyStored struct {
	Failed []shard.RecordID
	Err    error
}

func (e *PartlyStored) Error() string {
	return fmt.Sprintf("%d records not stored: %v", len(e.Failed), e.Err)
}

func (e *PartlyStored) Unwrap() error { return e.Err }

// ReceiptReplicator is a Replicator whose replicas sign receipts for what
// they hold (shard.Manager.AcceptWithReceipts): an Owner over one returns
// them with its acknowledgement (see "Verifiable acknowledgements" in
// receipts.go). held are the records of duplicates, acknowledged again.
type ReceiptReplicator interface {
	AcceptWithReceipts(ctx context.Context, recs []shard.Record, held []shard.RecordID, own bool) ([]shard.Receipt, error)
}

// Holder stores records for a predecessor whose acknowledgement a sender
// could not verify (shard.Manager.HoldFor): what Owner.AcceptFor needs.
type Holder interface {
	HoldFor(owner string, recs []shard.Record) (held []bool, took, dups int, err error)
}

// Scope judges whether a URL is in the crawl's scope.
type Scope interface {
	// Judge returns "" for a URL in scope, else why it is not, for the
	// sender. seed says that the task is a seed from a sender allowed to
	// seed here (depth 0, no redirect): it brings its host into a scoped
	// crawl's scope.
	Judge(url string, seed bool, depth, redirects int) (reason string, err error)
}

// SeedPolicy judges seed marks: a task at depth 0 is a seed, which brings
// its host into a scoped crawl's scope, only if the policy honours the
// signed statement it carries.
type SeedPolicy interface {
	// Honours reports whether proof (Task.SeedProof) is a statement over
	// the normalised url by a seeder this node accepts.
	Honours(url, proof string) bool
}

// Owner is the receiving side of routing: it takes tasks whose keys this
// node holds a claim on and that are in the crawl's scope, replicates the
// new ones to the successors before acknowledging them (sync-on-accept)
// and queues them through its Intake.
type Owner struct {
	own      Ownership
	replicas Replicator
	intake   *Intake
	urls     URLs
	scope    Scope // nil: every URL is in scope
	// seeds judges seed marks (VerifySeeds); nil takes the seeder
	// argument of Accept alone.
	seeds SeedPolicy
	// maxDepth refuses tasks deeper than the crawl would follow, so a
	// broken peer cannot push unbounded-depth work.
	maxDepth int

	// What became of the URLs offered (the metrics' dedupe hit rate).
	accepted, duplicates, rejected atomic.Int64
}

// NewOwner returns the owner that accepts what own says this node holds,
// replicates it with replicas and queues it through in. u reads the URLs,
// scope (nil for none) judges them, and tasks deeper than maxDepth are
// refused.
func NewOwner(own Ownership, replicas Replicator, in *Intake, u URLs, scope Scope, maxDepth int) *Owner {
	return &Owner{own: own, replicas: replicas, intake: in, urls: u, scope: scope, maxDepth: max(maxDepth, 0)}
}

// VerifySeeds makes the owner mark a seed only when p honours its signed
// statement, whoever sent it (Accept's seeder must still be true). Call it
// before the owner accepts anything.
func (o *Owner) VerifySeeds(p SeedPolicy) { o.seeds = p }

// Accept takes tasks routed to this node. Every task ends up in exactly
// one of the result's parts. seeder says whether the sender may seed
// here: its tasks at depth 0 that no redirect led to are seeds, which
// bring their host (or domain) into a scoped crawl's scope; anybody
// else's are links like any other, judged by the scope. fromOutbox says
// that this node sends the tasks itself, from a durable outbox: their
// shard records are then written without a sync (Replicator.AcceptOwn),
// as the outbox keeps the tasks until the router settles them after this
// returns.
func (o *Owner) Accept(ctx context.Context, tasks []Task, seeder, fromOutbox bool) (res Result, err error) {
	defer func() { o.count(res) }()
	offered := make([]Admission, 0, len(tasks))
	for _, t := range tasks {
		// Read the URL again: the sender may be buggy or hostile, and
		// the seen set is only as good as the canonical form it stores.
		u, err := o.urls.Normalize(t.URL)
		if err != nil {
			res.Rejected = append(res.Rejected, Rejection{t.URL, err.Error()})
			continue
		}
		if t.Depth < 0 || t.Depth > o.maxDepth {
			res.Rejected = append(res.Rejected, Rejection{t.URL, fmt.Sprintf("depth %d outside 0..%d", t.Depth, o.maxDepth)})
			continue
		}
		if t.Redirects < 0 {
			res.Rejected = append(res.Rejected, Rejection{t.URL, fmt.Sprintf("redirects %d below 0", t.Redirects)})
			continue
		}
		key, err := o.urls.Key(u)
		if err != nil {
			res.Rejected = append(res.Rejected, Rejection{t.URL, err.Error()})
			continue
		}
		if !o.own.Owns(key) {
			res.NotOwned = append(res.NotOwned, t)
			continue
		}
		seed := t.Depth == 0 && t.Redirects == 0 && seeder && (o.seeds == nil || o.seeds.Honours(u, t.SeedProof))
		var proof string
		if seed {
			proof = t.SeedProof // unverified bytes are never stored
		}
		// The scope, before the seen set: a URL refused now is not
		// remembered, so it is taken if the scope takes it later.
		if o.scope != nil {
			reason, err := o.scope.Judge(u, seed, t.Depth, t.Redirects)
			if err != nil {
				return res, fmt.Errorf("accept %d tasks: %w", len(tasks), err)
			}
			if reason != "" {
				res.Rejected = append(res.Rejected, Rejection{t.URL, reason})
				continue
			}
		}
		offered = append(offered, Admission{
			Key: key, Hash: o.urls.Hash(u),
			Task: Task{URL: u, Key: key, Depth: t.Depth, Redirects: t.Redirects, SeedProof: proof},
			Seed: seed,
		})
	}
	if len(offered) == 0 {
		return res, nil
	}
	// Sync-on-accept: the replicas hold the new URLs before the sender is
	// told they are accepted. A node that learns here that it is stale, or
	// whose range moved meanwhile, hands the tasks back as not owned, and
	// the sender routes them to the new owner.
	rr, receipts := o.replicas.(ReceiptReplicator)
	replicated := false
	fresh, dups, err := o.intake.Admit(offered, func(fresh []Admission) error {
		replicated = true
		recs := make([]shard.Record, len(fresh))
		for i, a := range fresh {
			recs[i] = shard.Record{Key: a.Key, Hash: a.Hash, URL: a.Task.URL, Depth: a.Task.Depth, Redirects: a.Task.Redirects, Seed: a.Seed, SeedProof: []byte(a.Task.SeedProof)}
		}
		if receipts {
			var err error
			res.Receipts, err = rr.AcceptWithReceipts(ctx, recs, heldIDs(offered, fresh), fromOutbox)
			return err
		}
		if fromOutbox {
			return o.replicas.AcceptOwn(ctx, recs)
		}
		return o.replicas.Accept(ctx, recs)
	})
	res.Duplicates = dups
	if receipts && err == nil && !replicated && dups > 0 {
		// Duplicates only: the replicas vouch that they hold them. An
		// owner that cannot get them to leaves the sender to judge.
		if rs, herr := rr.AcceptWithReceipts(ctx, nil, heldIDs(offered, nil), fromOutbox); herr == nil {
			res.Receipts = rs
		}
	}
	var part *PartlyStored
	switch {
	case errors.As(err, &part):
		// The admissions the replicator took are queued (Intake.Admit);
		// the others go back to the sender, to route again.
		failed := make(map[shard.RecordID]bool, len(part.Failed))
		for _, id := range part.Failed {
			failed[id] = true
		}
		for _, a := range offered {
			if failed[shard.RecordID{Key: a.Key, Hash: a.Hash}] {
				res.NotOwned = append(res.NotOwned, a.Task)
			}
		}
		freshFailed := 0
		for _, a := range fresh {
			if failed[shard.RecordID{Key: a.Key, Hash: a.Hash}] {
				freshFailed++
			}
		}
		res.Accepted = len(fresh) - freshFailed
		res.Duplicates = dups - (len(res.NotOwned) - freshFailed)
		return res, nil
	case errors.Is(err, shard.ErrNotOwned) || errors.Is(err, shard.ErrStale):
		for _, a := range fresh {
			res.NotOwned = append(res.NotOwned, a.Task)
		}
		return res, nil
	case err != nil:
		return res, fmt.Errorf("accept %d tasks: %w", len(fresh), err)
	}
	res.Accepted = len(fresh)
	return res, nil
}

// heldIDs returns the record IDs of offered that are not in fresh: the
// duplicates an acknowledgement covers.
func heldIDs(offered, fresh []Admission) []shard.RecordID {
	in := make(map[shard.RecordID]bool, len(fresh))
	for _, a := range fresh {
		in[shard.RecordID{Key: a.Key, Hash: a.Hash}] = true
	}
	var out []shard.RecordID
	for _, a := range offered {
		id := shard.RecordID{Key: a.Key, Hash: a.Hash}
		if !in[id] {
			in[id] = true
			out = append(out, id)
		}
	}
	return out
}

// AcceptFor takes tasks a sender could not get owner (this node's
// predecessor, by address) to vouch for, to hold as owner's replica (see
// "Verifiable acknowledgements" in receipts.go): the URLs are read and
// judged as Accept judges them (a seed by its statement alone), and stored, not queued;
// keys this node's epoch table does not name owner for go back as not
// owned.
func (o *Owner) AcceptFor(ctx context.Context, tasks []Task, owner string) (res Result, err error) {
	defer func() { o.count(res) }()
	h, ok := o.replicas.(Holder)
	if !ok {
		res.NotOwned = tasks
		return res, nil
	}
	var recs []shard.Record
	var kept []Task
	for _, t := range tasks {
		u, err := o.urls.Normalize(t.URL)
		if err != nil {
			res.Rejected = append(res.Rejected, Rejection{t.URL, err.Error()})
			continue
		}
		if t.Depth < 0 || t.Depth > o.maxDepth || t.Redirects < 0 {
			res.Rejected = append(res.Rejected, Rejection{t.URL, fmt.Sprintf("depth %d or redirects %d out of bounds", t.Depth, t.Redirects)})
			continue
		}
		key, err := o.urls.Key(u)
		if err != nil {
			res.Rejected = append(res.Rejected, Rejection{t.URL, err.Error()})
			continue
		}
		// A seed held for its owner keeps its mark when its statement is
		// one this node honours (a signature needs no word of the sender's),
		// so that a scoped crawl does not refuse it here.
		seed := t.Depth == 0 && t.Redirects == 0 && o.seeds != nil && o.seeds.Honours(u, t.SeedProof)
		var proof []byte
		if seed {
			proof = []byte(t.SeedProof)
		}
		if o.scope != nil {
			reason, err := o.scope.Judge(u, seed, t.Depth, t.Redirects)
			if err != nil {
				return res, fmt.Errorf("hold %d tasks: %w", len(tasks), err)
			}
			if reason != "" {
				res.Rejected = append(res.Rejected, Rejection{t.URL, reason})
				continue
			}
		}
		recs = append(recs, shard.Record{Key: key, Hash: o.urls.Hash(u), URL: u, Depth: t.Depth, Redirects: t.Redirects, Seed: seed, SeedProof: proof})
		kept = append(kept, t)
	}
	held, took, dups, err := h.HoldFor(owner, recs)
	if err != nil {
		return res, fmt.Errorf("hold %d tasks: %w", len(recs), err)
	}
	res.Accepted, res.Duplicates = took, dups
	for i, ok := range held {
		if !ok {
			res.NotOwned = append(res.NotOwned, kept[i])
		}
	}
	return res, nil
}

// count adds an Accept's outcome to the owner's counters.
func (o *Owner) count(res Result) {
	o.accepted.Add(int64(res.Accepted))
	o.duplicates.Add(int64(res.Duplicates))
	o.rejected.Add(int64(len(res.Rejected)))
}

// OwnerStats is what became of the tasks an owner was offered.
type OwnerStats struct {
	Accepted, Duplicates, Rejected int64
}

// Stats returns the owner's counts so far.
func (o *Owner) Stats() OwnerStats {
	return OwnerStats{Accepted: o.accepted.Load(), Duplicates: o.duplicates.Load(), Rejected: o.rejected.Load()}
}
