package node

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// TestIntakeAdoptsRecrawlState: the recrawl state that travels in done
// records is taken over when a range is activated (its schedule rebuilt)
// and when records merge into an active range, only when it is newer than
// what the node knows, and a URL is scheduled once per activation.
func TestIntakeAdoptsRecrawlState(t *testing.T) {
	db, err := store.Open(t.TempDir(), store.Options{BloomExpected: 1000, CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cfg := crawl.DefaultConfig()
	c, err := crawl.New(cfg, db, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	app := &intake{db: db, crawler: c, log: slog.New(slog.DiscardHandler)}

	now := time.Now()
	record := func(u string, fetched time.Time) shard.Record {
		key, _ := urls.TaskKey(u, urls.KeyHost)
		m := store.URLMeta{URL: u, ETag: `"e"`, Status: 200, LastFetch: fetched, NextCrawl: fetched.Add(time.Hour), Interval: time.Hour, Fetches: 1}
		b, version, err := recordState(m)
		if err != nil {
			t.Fatal(err)
		}
		return shard.Record{Key: key, Hash: urls.URLHash(u), URL: u, Done: true, Meta: b, MetaVersion: version}
	}
	a, b := record("http://a.test/1", now.Add(-time.Minute)), record("http://b.test/1", now.Add(-time.Minute))
	if err := db.PutShardRecords([]store.ShardRecord{
		{Key: a.Key, URLHash: a.Hash, URL: a.URL, Done: true, Meta: a.Meta, MetaVersion: a.MetaVersion},
		{Key: b.Key, URLHash: b.Hash, URL: b.URL, Done: true}, // fetched, but its state never arrived
	}); err != nil {
		t.Fatal(err)
	}
	whole := shard.Range{}
	for range 2 { // activating twice rebuilds the schedule, not doubles it
		if err := app.Activate(context.Background(), whole); err != nil {
			t.Fatal(err)
		}
		if s := c.Stats(); s.Scheduled != 1 || s.Queued != 0 {
			t.Fatalf("after Activate: %d scheduled, %d queued; want a's recrawl only", s.Scheduled, s.Queued)
		}
	}
	m, ok, err := db.URLMeta(a.Key, a.Hash)
	if err != nil || !ok || m.ETag != `"e"` || !m.NextCrawl.Equal(now.Add(-time.Minute).Add(time.Hour)) {
		t.Fatalf("a's metadata after Activate: %+v %v %v", m, ok, err)
	}

	// A merge brings an older copy of a (ignored) and a newer one of b.
	app.Merged(context.Background(), []shard.Record{record(a.URL, now.Add(-time.Hour)), record(b.URL, now)})
	if s := c.Stats(); s.Scheduled != 2 {
		t.Errorf("after the merge: %d scheduled, want 2 (a as before, b adopted)", s.Scheduled)
	}
	if m, _, _ := db.URLMeta(a.Key, a.Hash); !m.LastFetch.Equal(now.Add(-time.Minute)) {
		t.Errorf("an older merged copy replaced a's metadata: %+v", m)
	}
}
