package route

import (
	"testing"

	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// pendingLinks is an outbox: the entries not settled yet.
type pendingLinks map[uint64]bool

func (p pendingLinks) Settled(ids []uint64) bool {
	for _, id := range ids {
		if p[id] {
			return false
		}
	}
	return true
}

// TestProgressWaitsForLinks: a fetched page's done record reaches the
// replicas only once every link found on it is settled with its owner; a
// page without links is done at once.
func TestProgressWaitsForLinks(t *testing.T) {
	out := pendingLinks{1: true, 2: true, 3: true}
	p := NewProgress(out)
	p.Finished(shard.Record{URL: "http://a.test/1", Done: true}, []uint64{1, 2})
	p.Finished(shard.Record{URL: "http://a.test/2", Done: true}, []uint64{3})
	p.Finished(shard.Record{URL: "http://a.test/leaf", Done: true}, nil)
	if got := p.TakeSettled(); len(got) != 1 || got[0].URL != "http://a.test/leaf" {
		t.Fatalf("settled %v, want only the page without links", got)
	}
	delete(out, 1)
	if got := p.TakeSettled(); len(got) != 0 {
		t.Fatalf("a page with one of its two links settled was released: %v", got)
	}
	delete(out, 2)
	delete(out, 3)
	if got := p.TakeSettled(); len(got) != 2 || p.Waiting() != 0 {
		t.Fatalf("settled %v with %d waiting, want both pages and none left", got, p.Waiting())
	}
}
