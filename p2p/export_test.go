package p2p

// Exported for tests.
var ResourceLimits = resourceLimits

// The node's own resource bounds, for tests.
const (
	PeerStreamsInbound   = peerStreamsInbound
	PeerMemory           = peerMemory
	MaxInboundConns      = maxInboundConns
	SystemStreamsInbound = systemStreamsInbound
)

// NewNATForTest returns the NAT monitor of a private host that has not
// started: it counts the hole-punch events given to Trace.
func NewNATForTest() *NAT { return newNAT(Config{Reachability: ReachabilityPrivate}, nil) }
