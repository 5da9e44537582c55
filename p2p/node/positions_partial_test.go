package node

import (
	"context"
	"errors"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// TestPositionsReportAPartlyStoredWrite: a write whose keys one position
// owns and no position owns is stored by that position, and its error
// names the records of the other key alone (route.PartlyStored), so that
// the owner queues what was stored; a write no position could store
// fails whole.
func TestPositionsReportAPartlyStoredWrite(t *testing.T) {
	ms := twoPositionRing(t)
	ps := positions{ms["m"].pos, ms["m/1"].pos}
	mine := recordAt(uint64(ms["m"].peer.ID)-5, 1)
	foreign := recordAt(uint64(ms["x"].peer.ID)-5, 2)
	err := ps.Accept(context.Background(), []shard.Record{mine, foreign})
	var part *route.PartlyStored
	if !errors.As(err, &part) {
		t.Fatalf("write of an owned and a foreign key: %v, want a route.PartlyStored", err)
	}
	if len(part.Failed) != 1 || part.Failed[0] != shard.IDOf(foreign) || !errors.Is(err, shard.ErrNotOwned) {
		t.Errorf("failed %v (%v), want the foreign record, not owned", part.Failed, err)
	}
	if _, ok := ms["m"].st.Record(mine.Key, mine.Hash); !ok {
		t.Error("the owned record was not stored")
	}
	rs, err := ps.AcceptWithReceipts(context.Background(), []shard.Record{foreign}, nil, false)
	if err == nil || errors.As(err, &part) || len(rs) != 0 {
		t.Errorf("write of a foreign key alone: %d receipts, %v; want a plain error", len(rs), err)
	}
}
