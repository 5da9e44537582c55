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
