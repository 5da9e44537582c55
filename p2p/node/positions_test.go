package node

import (
	"bytes"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/store"
)

// Each ring position keeps its own epoch table in the node's one store:
// what position 1 claimed or witnessed as a replica must not fence
// position 0 (or the other way round) after a restart. Position 0 keeps
// the name a node with one position always used, so its table survives an
// upgrade.
func TestPositionsKeepTheirOwnEpochTables(t *testing.T) {
	db, err := store.Open(t.TempDir(), store.Options{BloomExpected: 1000, CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.PutMeta("shard/epochs", []byte("before virtual nodes")); err != nil {
		t.Fatal(err)
	}
	tables := map[int][]byte{1: []byte("position 1"), 2: []byte("position 2"), 17: []byte("position 17")}
	for i, b := range tables {
		if err := (shardStorage{db: db, epochs: epochsMetaOf(i)}).SaveEpochs(b); err != nil {
			t.Fatal(err)
		}
	}
	tables[0] = []byte("before virtual nodes")
	for i, want := range tables {
		got, err := shardStorage{db: db, epochs: epochsMetaOf(i)}.LoadEpochs()
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("position %d loads %q, %v; want %q", i, got, err, want)
		}
	}
	if got, err := (shardStorage{db: db, epochs: epochsMetaOf(3)}).LoadEpochs(); err != nil || got != nil {
		t.Errorf("a new position loads %q, %v; want no table", got, err)
	}
}
