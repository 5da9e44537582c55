package route

import (
	"slices"
	"sync"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
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
	clock ring.Clock

	mu   sync.Mutex
	wait []finished
}

// finished is a fetched URL's done record waiting for its page's links,
// since it was finished at.
type finished struct {
	rec   shard.Record
	links []uint64
	at    time.Time
}

// NewProgress returns the progress of a node whose links are settled as
// links says, telling the time by clock (nil: the wall clock).
func NewProgress(links Links, clock ring.Clock) *Progress {
	if clock == nil {
		clock = ring.RealClock()
	}
	return &Progress{links: links, clock: clock}
}

// Finished holds rec (a URL that needs no more fetching) until the links
// found on its page, the tasks ids, are settled.
func (p *Progress) Finished(rec shard.Record, ids []uint64) {
	at := p.clock.Now()
	p.mu.Lock()
	p.wait = append(p.wait, finished{rec: rec, links: ids, at: at})
	p.mu.Unlock()
}

// TakeSettled returns (and forgets) the records of the finished URLs whose
// links are all settled, for the shard manager to replicate
// (shard.Manager.ProgressSince), and when the first of them was finished.
func (p *Progress) TakeSettled() ([]shard.Record, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ready []shard.Record
	var since time.Time
	p.wait = slices.DeleteFunc(p.wait, func(f finished) bool {
		if p.links.Settled(f.links) {
			if len(ready) == 0 {
				since = f.at
			}
			ready = append(ready, f.rec)
			return true
		}
		return false
	})
	return ready, since
}

// Oldest returns when the longest waiting finished URL was finished; zero
// when none waits.
func (p *Progress) Oldest() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.wait) == 0 {
		return time.Time{}
	}
	return p.wait[0].at
}

// Waiting returns how many finished URLs wait for their links.
func (p *Progress) Waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.wait)
}
