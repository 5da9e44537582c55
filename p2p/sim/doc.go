// Package sim is a deterministic discrete-event simulator that runs the
// unchanged ring (package ring), shard (package shard) and routing
// (package route) code of thousands of nodes in one goroutine, over an in-memory network with
// per-link latency, message loss and partitions, under churn, with a
// simulated crawl of a link graph on top.
//
// # What is real and what is simulated
//
// Every node is a ring.Node, a shard.Manager and a route.Router and
// route.Owner (with its route.Intake) built exactly as a peer builds them;
// they talk through ring.MemNet, shard.MemNet and route.MemNet (the
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
// live in the crawl engine and the store: the graph's URLs (route.URLs),
// the seen set (the position's shard records), the crawl queue and its
// per-host politeness, and the outbox (a list of tasks each retried after
// the routing layer's backoff). A pass of the outbox is route.Router.Plan
// (the owners' lookups, counted as made in parallel) and, in an event of
// its own for each batch, route.Router.Deliver.
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
