package ring

import "errors"

var (
	// ErrTooManyHops is returned by Lookup when it has made Config.MaxHops
	// remote calls without finding the owner, which means routing loops or
	// the ring is badly broken.
	ErrTooManyHops = errors.New("ring: too many hops")
	// ErrNoRoute is returned by Lookup when every peer that could make
	// progress towards the key has failed to answer.
	ErrNoRoute = errors.New("ring: no live route to key")
	// ErrIDTaken is returned by Join when another peer already sits at the
	// joining node's ID; two nodes at one position would split its arc
	// unpredictably.
	ErrIDTaken = errors.New("ring: ID already taken by another peer")
	// ErrRunning is returned by Run when the node's maintenance loops are
	// already running.
	ErrRunning = errors.New("ring: node already running")
	// ErrNotSender is returned by HandleNotify and HandleLeave for a
	// message about a peer that the peer did not send itself: one node
	// cannot make another adopt a third as predecessor, or forget a live
	// neighbour.
	ErrNotSender = errors.New("ring: message names a peer other than its sender")
)
