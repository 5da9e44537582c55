// Package shard keeps each node's slice of the crawl state alive through
// churn: replication to the ring successors, ownership epochs as fencing
// tokens, promotion of a replica when an owner crashes, and handoffs when
// the ring moves a range.
//
// The ring (package ring) says who should own a key: the first node
// clockwise. This package makes that true for state, not just routing,
// and copes with the moments when the ring is wrong or in flux.
//
// # State
//
// The shard record of a URL ([Record]: ring key, URL hash, URL, depth,
// Done) is the source of truth for what an owner must crawl; the
// crawler's queue is a cache of the pending records of the ranges the
// node claims, built by [App].Activate and dropped by [App].Deactivate.
// Records are never deleted and merge by [MergeRecord] (Done wins), so
// copies converge whatever order they travel in. Host politeness state
// ([HostState], an opaque blob) travels with its range.
//
// # Claims, epochs and leases
//
// A node works on a key only under a [Claim]: a [Range] of the ring and an
// [Epoch] {N, Owner}. Every new claim takes N one above the highest epoch
// the node's epoch table knows anywhere in the range, and at least the
// node's clock in milliseconds, so epochs follow the clock and never wrap. The epoch table is
// durable (Storage.SaveEpochs on every change) and maps every ring point
// to the highest epoch seen there, from the node's own claims and from
// every claim it accepted as a replica; it never goes down, across
// restarts included.
//
// An owner replicates to its first K successors (Config.Replicas).
// Every write carries the owner's claims, and the epoch is a fencing
// token: a replica refuses a claim lower than its table anywhere in the
// range and answers with the higher epochs it knows. A refused owner is
// stale: it drops the beaten parts of its claims (the app deactivates
// them; nothing is pushed), raises its table, and later merges the
// records it holds for them into the rightful owner (a digest comparison,
// then a Merge handoff of the differing buckets). A replica that accepts
// a claim above one of its own claims is stale for the overlap the same
// way. Stale owners thus find out at their next write, at the latest one
// HeartbeatInterval later.
//
// Before any claim, write, handoff or merge changes its state, a node
// checks who sent it against its own view of the ring: the epoch must name
// the sender, the sender must be a plausible owner of the range, and the
// epoch may not run ahead of the receiver's clock by more than
// MaxClockSkew (see "Who may claim what" in plausible.go). A stranger
// cannot fence nodes out of their ranges, and a table poisoned with
// epochs from the future loses them when the node starts.
//
// An owner also needs a lease: Owns is true only while its first
// successor acknowledged a heartbeat without refusal within Lease
// (always, for a node with no successor), or, when the first successor
// refused it (withholds), a quorum of the replicas did (leaseQuorum:
// (K+1)/2 of them, with the owner a majority of the K+1 nodes holding
// the range; when every replica refuses, the next K successors are sent
// the claims alone and counted), so that one withholding successor
// cannot stop its predecessor (issue 29). Lease is shorter than
// FailureTimeout, so an owner cut off from its replicas stops fetching
// before a replica may promote itself.
//
// # Receipts and watching
//
// A replica asked for it signs a receipt over the records of a write it
// holds (receipts.go), which the owner returns with its acknowledgement
// so that the sender can check it (package route). A replica also watches
// what its owner does with the pending records it holds, per host key,
// and fetches them itself (through the App's Watcher) when the owner
// neither fetched nor explained them within WatchTimeout (watch.go).
//
// # Writes
//
// Accept (new URLs) is sync-on-accept: the records are stored locally and
// sent to the K replicas in parallel, and Accept returns once they
// acknowledged (or AckTimeout passed). A write that some replica did not
// acknowledge is degraded: it still succeeds, and Stats counts it.
// Progress (Done marks, host states) is stored locally at once and
// replicated asynchronously with the next heartbeat. Every SyncInterval,
// and at once for a new replica or a new claim, the owner compares a
// 64-bucket digest of each claim with each replica; for differing buckets
// it pulls what the replica has (a promoted owner may lack records that
// a degraded write left on the other replica) and pushes what it has. A
// replica that missed a write (failed, refused, not stored) has its next
// round brought forward to Lease/2 from then, doubling while rounds with
// it keep failing (Manager.missed): what it missed is not sent again.
//
// # Ownership changes
//
// Each Tick looks at the node's arc (pred, self] — the whole ring when it
// is alone (ring.Node.Alone: it created the ring and never had another
// member); unknown, and left alone, while the predecessor is unknown or
// the node is isolated (ring.State.Isolated: its successors all failed,
// so it has no replica to hold a lease from and its lease runs out):
//
//   - Push handoff. Active claims outside the arc are deactivated and
//     become releasing; the node pushes their records and hosts in chunks
//     to the ring owner (lookup of the range's end), Final on the last.
//     The receiver accepts only a range inside its own arc (else it
//     answers with its arc and the sender pushes just that piece), and on
//     the Final claims it with an epoch above both its table and the
//     sender's and activates it. Only the Final's acknowledgement ends the
//     release, so at every moment the range is claimed by the receiver or
//     still held (releasing) by the sender; a lost chunk is simply pushed
//     again, and a repeated Final is acknowledged again. This is how a
//     joining node gets its slice from its successor and how Leave hands
//     everything to the successor. A part is walked from its end, owner
//     by owner. An owner further than its view of the ring can judge the
//     sender (more nodes joined in between than a successor list holds)
//     asks the sender's successors whether they witnessed its claim
//     (witness.go) and takes the push if one did; one that claimed its
//     piece by pull meanwhile, no witness vouching, tells the sender so,
//     and the sender gives that piece and the rest of the part up (but
//     not its replicas' arcs), sending their pending records to their
//     owners as tasks (App.Reroute), and the piece's done records and
//     host states to the owner that answered, which takes them only from
//     a sender its view says held the piece (reroute.go). Besides its
//     successors, a node takes
//     handoffs from the K predecessors it replicates: the node that held
//     the whole ring gives its successors their arcs.
//   - Promotion. An unclaimed part of the arc whose table names another
//     owner is taken over after FailureTimeout without hearing from that
//     owner (heartbeats, handoffs), counted from when the node started
//     waiting for the part: the owner crashed or left without a handoff,
//     and this node, its successor, holds its replicated records.
//   - Pull. An unclaimed part nobody else is known to own (a new node, or
//     a restarted one whose table names itself) is, after FailureTimeout,
//     pulled page by page from the first successor along with its epoch
//     table; if that successor still claims or releases part of it, the
//     wait starts over (the handoff is on its way). If the pulled table
//     names another owner, the promotion rule applies; otherwise the part
//     is claimed.
//   - Alone, a node claims at once every part nobody else is known to own.
//
// Releasing parts that come back into the arc are claimed again.
//
// # Guarantees
//
// An accepted URL survives any failure of fewer than K+1 nodes among its
// owner and replicas, provided failures are separated by enough time for
// the ring to repair and anti-entropy to run (degraded writes close their
// gap then). Two nodes may both believe they own a key for a short while
// (a partition, a paused process), so a URL can be fetched twice; the
// epoch fencing ends the overlap at the stale owner's next write, and the
// merge brings whatever it accepted meanwhile to the rightful owner.
//
// The package has no network or storage code of its own: [Transport] and
// [Storage] are implemented by the node (libp2p streams, the store), and
// [MemNet] and [MemStorage] are in-memory versions for tests and the
// simulator, sharing ring.MemNet's fault model.
package shard
