package ring

import "context"

// Neighbours is what a node reports about itself during stabilization.
type Neighbours struct {
	// Predecessor is the node's predecessor, zero if unknown.
	Predecessor Peer
	// Successors is the node's successor list, nearest first.
	Successors []Peer
}

// Step is one hop of an iterative lookup, answered by the node asked.
type Step struct {
	// Found reports that Next is the key's successor (its owner): the
	// lookup ends.
	Found bool
	// Next is the owner when Found, otherwise the closest node preceding
	// the key that the answering node knows of: the one to ask next.
	Next Peer
	// Successors is the answering node's successor list, which the asker
	// falls back on when Next turns out to be dead.
	Successors []Peer
}

// LeaveNotice tells a neighbour that Leaving is departing gracefully.
type LeaveNotice struct {
	// Leaving is the departing node.
	Leaving Peer
	// Predecessor is the departing node's predecessor; its successor
	// adopts it.
	Predecessor Peer
	// Successors is the departing node's successor list; its predecessor
	// splices it in where Leaving was.
	Successors []Peer
}

// Transport carries ring RPCs to other nodes. Every method honours ctx's
// deadline. Implementations must be safe for concurrent use; a returned
// error means the call may or may not have reached the peer.
type Transport interface {
	// FindSuccessorStep asks to for one step of a lookup of key.
	FindSuccessorStep(ctx context.Context, to Peer, key ID) (Step, error)
	// Neighbours asks to for its predecessor and successor list.
	Neighbours(ctx context.Context, to Peer) (Neighbours, error)
	// Notify tells to that candidate believes it is to's predecessor.
	Notify(ctx context.Context, to Peer, candidate Peer) error
	// Ping checks that to is alive.
	Ping(ctx context.Context, to Peer) error
	// Leave tells to that a neighbour is departing.
	Leave(ctx context.Context, to Peer, notice LeaveNotice) error
}

// Handler serves ring RPCs arriving for a local node; *Node implements it.
// Transports call these methods from any goroutine. from is the address of
// the authenticated sender (Peer.Addr): a message about a peer's own
// membership (Notify, Leave) is refused unless that peer sent it.
type Handler interface {
	// HandleFindSuccessorStep answers one lookup step for key.
	HandleFindSuccessorStep(key ID) Step
	// HandleNeighbours reports the node's predecessor and successors to
	// from (empty when the node asks itself); with shared maintenance
	// the call proves from's machine alive.
	HandleNeighbours(from string) Neighbours
	// HandleNotify considers candidate, the sender, as the node's
	// predecessor; it refuses a candidate other than from.
	HandleNotify(from string, candidate Peer) error
	// HandlePing answers a liveness check.
	HandlePing()
	// HandleLeave repairs pointers around a departing neighbour, the
	// sender; it refuses a notice whose Leaving is not from.
	HandleLeave(from string, notice LeaveNotice) error
}
