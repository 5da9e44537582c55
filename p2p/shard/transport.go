package shard

import (
	"context"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// WriteRequest replicates an owner's state to one of its replicas. Claims
// are the owner's active claims (or those covering Records); the replica
// refuses any claim lower than its epoch table and keeps Records and Hosts
// only inside the claims it accepted. An empty request with claims is a
// heartbeat: it renews the owner's lease and tells the replica the owner
// is alive.
type WriteRequest struct {
	Claims  []Claim
	Records []Record
	Hosts   []HostState
	// Held names records the owner holds already and acknowledges again
	// (duplicates) in the same write; with WantReceipt the replica vouches
	// for them only if it holds them too.
	Held []RecordID
	// WantReceipt asks the replica to sign a receipt over Records and Held
	// once it holds them all (receipts.go).
	WantReceipt bool
	// Watched are Done marks of a range the sender watches for its
	// predecessor and fetched itself (watch.go): taken only from this
	// node's ring predecessor, only as Done marks, and only for keys this
	// node's table names another owner for.
	Watched []Record
}

// WriteReply lists the refused claims' conflicting parts, each carrying the
// higher epoch the replica knows for it.
type WriteReply struct {
	Rejected []Claim
	// StoreError, when set, says the replica took the claims but could
	// not store the records or host states (its disk is full, its store
	// broke): the owner counts the write as degraded, as if the replica
	// were down. It still answers for the claims: the lease stands.
	StoreError string
	// Refused, when set, says why the replica refused claims because of
	// who sent them (see "Who may claim what" in plausible.go): the owner
	// counts the write as degraded, and its lease is not renewed.
	Refused string
	// Receipt is the replica's signature over the write's records, when
	// asked for and it holds them all (receipts.go).
	Receipt []byte
}

// HandoffRequest is one chunk of a push of a range to another node.
//
// With Merge false it hands ownership over: the old owner, having stopped
// work on Range, streams its records and hosts, and the last chunk has
// Final set; the receiver then claims Range with an epoch above both its
// table and Epoch. With Merge true it only delivers records (a stale owner
// returning what it accepted to the rightful owner); nothing is claimed.
type HandoffRequest struct {
	Range   Range
	Epoch   Epoch
	Records []Record
	Hosts   []HostState
	Final   bool
	Merge   bool
	// Reroute marks the done records and host states of a range the
	// sender gave up without a handoff (see "Rerouted done marks" in
	// reroute.go): the receiver takes only done records, and host states
	// for the app to apply where they make politeness stricter, and only
	// over what its own view says the sender held.
	Reroute bool
}

// HandoffReply answers one handoff chunk. Accepted false means the chunk
// was refused (Reason says why); if HasOwned, Owned is the arc the
// receiver believes is its own, so the sender can push just that part.
// Epoch is the epoch the receiver claimed the range with, on an accepted
// Final.
type HandoffReply struct {
	Accepted bool
	Owned    Range
	HasOwned bool
	Reason   string
	Epoch    Epoch
}

// DigestRequest asks for a summary of the records in Range, in Buckets
// buckets, and with Witness for the claims the asked node witnessed over
// Range (see "Witnesses" in witness.go); a request with Witness and no
// Buckets asks for those alone.
type DigestRequest struct {
	Range   Range
	Buckets int
	Witness bool
}

// DigestReply holds one checksum per bucket: records fall in bucket
// Hash % Buckets, and a bucket's sum is the xor of its records' mixes of
// Key, Hash, Done and MetaVersion. Equal sums mean (almost certainly)
// equal records. Witnessed, when asked for, holds the claims the node
// witnessed over the range within WitnessWindow, clipped to it.
type DigestReply struct {
	Sums      []uint64
	Witnessed []Claim
}

// PullRequest asks a node for the records, hosts and epoch table it holds
// over Range, a page at a time: HasAfter resumes after (AfterKey,
// AfterHash) in ring order.
type PullRequest struct {
	Range               Range
	AfterKey, AfterHash uint64
	HasAfter            bool
}

// PullReply is one page. Owner true means the asked node claims (or is
// still handing off) part of Range itself, and nothing else is filled in.
// Otherwise Records is the page, More says whether another follows (resume
// after NextKey, NextHash), Epochs is the asked node's table over Range
// and Hosts, sent with the last page, the host states in Range.
type PullReply struct {
	Owner             bool
	Records           []Record
	Hosts             []HostState
	Epochs            []Claim
	More              bool
	NextKey, NextHash uint64
}

// Transport carries shard RPCs to other nodes. Every method honours ctx's
// deadline and must be safe for concurrent use; an error means the call
// may or may not have reached the peer.
type Transport interface {
	// Replicate sends an owner's claims, records and hosts to a replica
	// (Handler.HandleReplicate).
	Replicate(ctx context.Context, to ring.Peer, req *WriteRequest) (*WriteReply, error)
	// Handoff sends one chunk of a push (Handler.HandleHandoff).
	Handoff(ctx context.Context, to ring.Peer, req *HandoffRequest) (*HandoffReply, error)
	// Digest asks for a range's digest (Handler.HandleDigest).
	Digest(ctx context.Context, to ring.Peer, req *DigestRequest) (*DigestReply, error)
	// Pull asks for one page of a range's state (Handler.HandlePull).
	Pull(ctx context.Context, to ring.Peer, req *PullRequest) (*PullReply, error)
}

// Handler serves shard RPCs arriving for the local node; *Manager
// implements it. Transports call it from any goroutine. from is the
// authenticated sender.
type Handler interface {
	// HandleReplicate serves a write as a replica.
	HandleReplicate(ctx context.Context, from ring.Peer, req *WriteRequest) *WriteReply
	// HandleHandoff serves one chunk of a push.
	HandleHandoff(ctx context.Context, from ring.Peer, req *HandoffRequest) *HandoffReply
	// HandleDigest summarises the records held over a range.
	HandleDigest(ctx context.Context, from ring.Peer, req *DigestRequest) *DigestReply
	// HandlePull pages out what is held over a range.
	HandlePull(ctx context.Context, from ring.Peer, req *PullRequest) *PullReply
}

// DigestBuckets is the number of buckets the Manager asks for.
const DigestBuckets = 64

// maxDigestBuckets bounds what a peer may ask for.
const maxDigestBuckets = 4096

// mix hashes one record's identity and state into a digest term.
func mix(r Record) uint64 {
	x := r.Key ^ (r.Hash * 0x9e3779b97f4a7c15) ^ (r.MetaVersion * 0xc2b2ae3d27d4eb4f)
	if r.Done {
		x ^= 0xd6e8feb86659fd93
	}
	if r.Seed {
		x ^= 0x8cb92ba72f3d8dd7
	}
	// splitmix64 finalizer
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// digestOf summarises the records st holds in r.
func digestOf(st Storage, r Range, buckets int) ([]uint64, error) {
	sums := make([]uint64, buckets)
	err := st.ScanRecords(r, func(rec Record) error {
		sums[rec.Hash%uint64(buckets)] ^= mix(rec)
		return nil
	})
	return sums, err
}
