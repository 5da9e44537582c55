package route

// DefaultVNodes is how many ring positions (virtual nodes) a machine
// holds unless told otherwise: the default of a real node
// (node.Config.VNodes, `swarmcrawl node --vnodes`) and of the simulator
// (sim.Config.VNodes, `swarmcrawl simulate --vnodes`), written here once
// because this is the one layer both run (the import rules keep the
// simulator away from p2p/node).
//
// The figure is issue 28's measurements: on 8 machines the busiest holds
// a median 1.53 times the mean number of hosts at V = 8 and 1.38 at
// V = 16; on 300 simulated machines the busiest holds 5.3 times the mean
// at V = 1, 3.1 at V = 8 and 2.4 at V = 16. With the positions of a
// machine sharing its maintenance, V = 16 costs about 1.5 to 1.7 times
// the ring and shard messages of V = 1 (docs/scale.md, "Shared
// maintenance"; docs/operations.md, "Virtual nodes"). Not 32, although
// it keeps the busiest of 8 machines within 1.5 times the mean for 95%
// of identity sets against 75% at 16: beyond 12 positions each sends
// its own heartbeats every 2.8 s, so they grow with V, and 8 processes
// on 2 cores used 4.2 times V = 1's CPU to crawl at 32 against 3.3 at
// 16.
const DefaultVNodes = 16
