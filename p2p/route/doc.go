// Package route is the distributed crawl layer between the ring and the
// crawl engine: it carries a discovered link to the owner of its ring key
// (lookup(key), then send(task, owner), seed 000) and admits it there.
//
//   - Router is the sending side: it groups tasks by the owner a ring
//     lookup names, answers this node's own keys without the network, and
//     sends the rest over a Transport, so that every task comes back
//     settled (accepted, duplicate, rejected) or undelivered, to be tried
//     again later.
//   - Owner is the receiving side: it reads every URL again (never trust
//     a peer), refuses keys this node does not hold a claim on
//     (shard.Ownership), tasks deeper than the crawl goes and URLs out of
//     the crawl's scope, and hands the rest to the Intake.
//   - Intake deduplicates against the owner's seen set and queues the new
//     URLs once the replicas hold them (sync-on-accept, shard.Manager).
//
// The package knows neither libp2p nor the store nor the crawl engine: a
// node gives it the crawl engine's URL rules (URLs), its seen set and
// crawl queue (SeenSet, Queue), its scope (Scope), the ring (Lookup) and
// the libp2p task protocol (Transport); the simulator gives it its own
// graph and queues and the in-memory MemNet. The same code thus runs in
// unit tests, in the 10,000-node simulator and in every peer.
package route
