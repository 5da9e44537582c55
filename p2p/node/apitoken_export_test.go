package node

import "github.com/swarmcrawl/swarmcrawl/store"

// PutDeadLetter stores d in n's store as the crawler does after a task's
// last retry, so that API tests have a dead letter to requeue without
// waiting for fetches to fail.
func PutDeadLetter(n *Node, d store.DeadLetter) error { return n.db.PutDeadLetter(d) }
