package shard

import (
	"errors"
	"fmt"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

var (
	// ErrNotOwned is returned by Accept when a key is not this node's to
	// take: no active claim holds it, the lease has run out, or the ring
	// says another node owns it. The sender should look the owner up again.
	ErrNotOwned = errors.New("shard: key not owned here")
	// ErrStale is returned by Accept when a replica refused the write
	// because it knows a higher epoch for the range: another node has taken
	// it over. This node has dropped its claim; the sender should look the
	// owner up again.
	ErrStale = errors.New("shard: claim is stale")
	// ErrRunning is returned by Run when it is already running.
	ErrRunning = errors.New("shard: manager already running")
)

// Range is the arc (From, To] of the ring, going clockwise; From == To is
// the whole ring.
type Range struct{ From, To ring.ID }

// Contains reports whether k lies in the arc.
func (r Range) Contains(k ring.ID) bool { return k.Between(r.From, r.To) }

// Whole reports whether the range is the whole ring.
func (r Range) Whole() bool { return r.From == r.To }

// String formats the range as (from, to].
func (r Range) String() string { return fmt.Sprintf("(%s, %s]", r.From, r.To) }

// Epoch orders ownership of a range: it grows every time the range changes
// hands, and a replica refuses writes carrying an epoch lower than the
// highest it has seen (a fencing token). The zero Epoch means "none".
type Epoch struct {
	N     uint64
	Owner string // the claiming peer's address; breaks ties between equal N
}

// Less orders epochs by N, then by Owner.
func (e Epoch) Less(o Epoch) bool {
	if e.N != o.N {
		return e.N < o.N
	}
	return e.Owner < o.Owner
}

// IsZero reports whether e is the zero Epoch.
func (e Epoch) IsZero() bool { return e == Epoch{} }

// String formats the epoch as N/owner.
func (e Epoch) String() string { return fmt.Sprintf("%d/%s", e.N, e.Owner) }

// Claim is a range held by an owner under an epoch.
type Claim struct {
	Range Range
	Epoch Epoch
}

// String formats the claim for logs.
func (c Claim) String() string { return c.Range.String() + "@" + c.Epoch.String() }

// Record is the replicated shard state of one URL. Key is the URL's ring
// key, Hash its URL hash; together they identify it.
//
// Done means the URL needs no more fetching: fetched, dead-lettered or
// dropped for good. Seed marks a URL a client allowed to seed submitted
// (at depth 0): the scope of a crawl limited to its seeds' hosts or
// domains is derived from such records, so it travels, is replicated and
// survives exactly as they do. Records are never deleted, and merging
// follows MergeRecord, so replicas converge whatever order updates arrive
// in.
//
// Meta is the URL's state after its last fetch (validators and the next
// recrawl time), so that a new owner recrawls on schedule; MetaVersion
// orders such states (the fetch time). This package stores, merges and
// forwards Meta without reading it: its encoding is the wire protocol's
// (a serialized swarmcrawl.UrlMeta), since it travels between nodes.
type Record struct {
	Key, Hash        uint64
	URL              string
	Depth, Redirects int
	Done             bool
	Seed             bool
	// SeedProof is the signed statement behind Seed (package
	// p2p/seedsig, opaque here): it travels with the mark so that every
	// node judges the mark by its own seed policy. Nil without Seed.
	SeedProof   []byte
	Meta        []byte
	MetaVersion uint64
}

// MaxMetaBytes bounds Record.Meta.
const MaxMetaBytes = 16 << 10

// MergeRecord combines the stored record old with an incoming version of
// the same URL: Done and Seed (with its SeedProof) win; otherwise the stored record is kept, except that
// a smaller Depth (with its Redirects), or the same Depth after fewer
// Redirects, replaces the stored ones (so that the merge is commutative,
// and a seed keeps its depth and redirects 0), and the Meta
// of a higher MetaVersion replaces a lower one. Every Storage must merge
// this way.
func MergeRecord(old, incoming Record) Record {
	out := old
	if out.URL == "" {
		out.URL = incoming.URL
	}
	if incoming.Done {
		out.Done = true
	}
	if incoming.Seed && !out.Seed {
		// The mark and its statement go together; a mark held keeps its
		// own statement (each node stores only marks it honours).
		out.Seed, out.SeedProof = true, incoming.SeedProof
	}
	if incoming.Depth < out.Depth || incoming.Depth == out.Depth && incoming.Redirects < out.Redirects {
		out.Depth, out.Redirects = incoming.Depth, incoming.Redirects
	}
	if incoming.MetaVersion > out.MetaVersion {
		out.Meta, out.MetaVersion = incoming.Meta, incoming.MetaVersion
	}
	return out
}

// HostState is the politeness state of one host, handed to the host's
// next owner. Key is the host's ring key. Data is opaque here; its
// encoding is the wire protocol's (a serialized swarmcrawl.HostPoliteness).
type HostState struct {
	Key  uint64
	Host string
	Data []byte
}
