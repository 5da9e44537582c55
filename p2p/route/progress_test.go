package route

import (
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
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
	p := NewProgress(out, nil)
	p.Finished(shard.Record{URL: "http://a.test/1", Done: true}, []uint64{1, 2})
	p.Finished(shard.Record{URL: "http://a.test/2", Done: true}, []uint64{3})
	p.Finished(shard.Record{URL: "http://a.test/leaf", Done: true}, nil)
	if got, _ := p.TakeSettled(); len(got) != 1 || got[0].URL != "http://a.test/leaf" {
		t.Fatalf("settled %v, want only the page without links", got)
	}
	delete(out, 1)
	if got, _ := p.TakeSettled(); len(got) != 0 {
		t.Fatalf("a page with one of its two links settled was released: %v", got)
	}
	delete(out, 2)
	delete(out, 3)
	if got, _ := p.TakeSettled(); len(got) != 2 || p.Waiting() != 0 {
		t.Fatalf("settled %v with %d waiting, want both pages and none left", got, p.Waiting())
	}
}

// TestProgressTellsItsOldest: the status reports how long the oldest done
// mark has waited (node done_marks.oldest_ms), and the shard manager is
// told when the oldest of a settled batch was finished, so that the age
// survives the hand-over to the heartbeat.
func TestProgressTellsItsOldest(t *testing.T) {
	clock := ring.NewFakeClock(time.Unix(1_700_000_000, 0))
	out := pendingLinks{1: true}
	p := NewProgress(out, clock)
	if !p.Oldest().IsZero() {
		t.Fatalf("nothing waits, oldest %v", p.Oldest())
	}
	first := clock.Now()
	p.Finished(shard.Record{URL: "http://a.test/1", Done: true}, []uint64{1})
	clock.Advance(time.Second)
	p.Finished(shard.Record{URL: "http://a.test/leaf", Done: true}, nil)
	if got := p.Oldest(); !got.Equal(first) {
		t.Errorf("oldest %v, want the first page's %v", got, first)
	}
	if got, since := p.TakeSettled(); len(got) != 1 || !since.Equal(first.Add(time.Second)) {
		t.Errorf("settled %v since %v, want the leaf since %v", got, since, first.Add(time.Second))
	}
	delete(out, 1)
	if got, since := p.TakeSettled(); len(got) != 1 || !since.Equal(first) || !p.Oldest().IsZero() {
		t.Errorf("settled %v since %v, oldest left %v; want the first page since %v and none left", got, since, p.Oldest(), first)
	}
}
