// Package sim is a deterministic discrete-event simulator that runs the
// unchanged ring (package ring) and shard (package shard) code of
// thousands of nodes in one goroutine, over an in-memory network with
// per-link latency, message loss and partitions, under churn, with a
// simulated crawl of a link graph on top.
//
// # What is real and what is simulated
//
// Every node is a ring.Node and a shard.Manager built exactly as a peer
// builds them; they talk through ring.MemNet and shard.MemNet (the
// project's in-memory network and its fault model: crashes, partitions,
// random drops) behind a thin wrapper that charges link latency and counts
// messages. The simulator calls Stabilize, CheckPredecessor, FixFingers
// and Manager.Tick from its event loop at the configured intervals instead
// of the goroutine tickers of ring.Node.Run and Manager.Run, and the
// Manager's replica fan-outs run one after the other
// (shard.Config.Sequential), so a run is a pure function of its seed.
//
// Simulated: time (a virtual clock every node reads through ring.Clock),
// the network's latency (one-way latency of a link is the sum of a
// per-node term, so 10 to 150 ms), the web (fetches take a drawn time and
// return the page's links from the graph), and the parts of a peer that
// live outside ring and shard: the owner's intake (dedupe against the
// shard records, then shard.Manager.Accept), the outbox and router that
// deliver discovered links to their owners (ring.Node.Lookup, a 5 s owner
// cache, retries with backoff), and the crawler's per-host politeness.
// They follow p2p/node's design (see docs/architecture.md, "The path of
// one URL") but are the simulator's own, smaller code.
//
// # Time
//
// One event runs at a time. A synchronous RPC runs the callee's handler at
// once and charges the link's round trip (or, for a failed call, the RPC
// timeout) to the caller: the virtual clock every node reads is the event's
// time plus what the running event has been charged, and a node's next
// maintenance step is due one interval after the previous step began or,
// if that step took longer, at the next multiple of the interval after it
// ended, as ring.Node.Run's tickers behave.
package sim
