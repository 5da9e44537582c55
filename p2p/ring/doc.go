// Package ring implements a Chord ring: the consistent-hashing overlay that
// tells every swarmcrawl node which peer owns a crawl task key.
//
// The package is only the algorithm. Network IO goes through the narrow
// [Transport] interface and time through [Clock], so the same [Node] runs in
// unit tests, in a many-thousand-node simulator and over libp2p. [MemNet] is
// an in-memory Transport with fault hooks (crash, partition, drop, delay)
// shipped in a non-test file so other packages and the simulator can use it;
// [CheckRing] verifies the ring invariants after chaos.
//
// Correctness rests on successor pointers, which Stabilize repairs with a
// successor list; finger tables only make lookups fast (O(log N) hops) and
// may be stale without making answers wrong.
//
// # Beyond the Chord paper
//
// Plain Chord converges slowly, or never, in situations a crawler swarm
// meets: many nodes starting at once through one bootstrap peer, and
// network partitions. Each addition below only ever adopts, as a node's
// successor, a peer that is known to be alive and lies strictly between
// the node and its current successor, so none can make a correct ring
// wrong:
//
//   - Stabilize walks back through predecessor pointers (and looks at the
//     successor's list) instead of taking one step per round.
//   - A Notify from a peer between a node and its successor makes that
//     peer the successor: the notifier is alive and was being skipped.
//   - FixFingers also looks up the node's own ID starting from a finger
//     (rotating), which finds and merges interleaved cycles that
//     stabilization alone leaves in place.
//   - Peers that fail to answer become suspects: routing avoids them, and
//     CheckPredecessor re-probes one per call, so rings that formed on
//     either side of a partition merge once it heals.
//
// Two more depart from the paper's "a node with no live successor is its
// own successor":
//
//   - A node that has had another member and lost every successor is
//     isolated ([State].Isolated), not a ring of one: it owns no more than
//     the arc under its last known predecessor ([Node.Owns]), answers no
//     lookup for the rest of the ring, and each Stabilize tries to rejoin
//     through the peers it remembers and [Config].Bootstrap. Only a node
//     that [Node.Create] made and that never had another member (or whose
//     last other member left gracefully, naming nobody else, while no
//     other peer was suspect) is alone and owns every key.
//   - [Node.Lookup] answers a key in the node's own arc, (predecessor,
//     self], and in the arcs of its [Config].Siblings, without a hop.
package ring
