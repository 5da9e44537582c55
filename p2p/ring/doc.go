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
package ring
