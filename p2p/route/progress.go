package route

import (
	"slices"
	"sync"

	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// Links says whether tasks a node sends have been settled with their
// owners (accepted, duplicate or rejected): a node's outbox entries.
type Links interface {
	Settled(ids []uint64) bool
}

// Progress holds the done records of the URLs a node fetched until every
// link found on their pages is settled with its owner. A page the
// replicas learn is done while its links still wait in this node's outbox
// would lose them if the node died for good, since the next owner would
// not fetch the page again.
type Progress struct {
	links Links

	mu   sync.Mutex
	wait []finished
}

// finished is a fetched URL's done record waiting for its page's links.
type finished struct {
	rec   shard.Record
	links []uint64
}

// NewProgress returns the progress of a node whose links are settled as
// links says.
func NewProgress(links Links) *Progress { return &Progress{links: links} }

// Finished holds rec (a URL that needs no more fetching) until the links
// found on its page, the tasks ids, are settled.
func (p *Progress) Finished(rec shard.Record, ids []uint64) {
	p.mu.Lock()
	p.wait = append(p.wait, finished{rec: rec, links: ids})
	p.mu.Unlock()
}

// TakeSettled returns (and forgets) the records of the finished URLs whose
// links are all settled, for the shard manager to replicate
// (shard.Manager.Progress).
func (p *Progress) TakeSettled() []shard.Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ready []shard.Record
	p.wait = slices.DeleteFunc(p.wait, func(f finished) bool {
		if p.links.Settled(f.links) {
			ready = append(ready, f.rec)
			return true
		}
		return false
	})
	return ready
}

// Waiting returns how many finished URLs wait for their links.
func (p *Progress) Waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.wait)
}
