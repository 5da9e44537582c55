package node

import (
	"context"
	"fmt"
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
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
	app := testIntake(db, c)

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

// TestIntakeShorterPathQueuesAgain: the owner keeps the smallest depth of
// each URL; a duplicate that arrives by a shorter path is replicated with
// its depth and queued again (so that the crawler follows the page's links
// from there), and so is a URL whose record comes back with a range at a
// smaller depth than this node saw it; a duplicate as deep or deeper is
// only counted.
func TestIntakeShorterPathQueuesAgain(t *testing.T) {
	db, app := newTestIntake(t)
	u := "http://a.test/page"
	key, _ := urls.TaskKey(u, urls.KeyHost)
	var replicated []int
	admit := func(depth int) (queued, dups int) {
		t.Helper()
		a := route.Admission{Key: key, Hash: urls.URLHash(u), Task: route.Task{URL: u, Key: key, Depth: depth}}
		fresh, dups, err := app.admit.Admit([]route.Admission{a, a},
			func(fresh []route.Admission) error {
				for _, a := range fresh {
					replicated = append(replicated, a.Task.Depth)
				}
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		return len(fresh), dups
	}
	for _, step := range []struct{ depth, queued, dups int }{{5, 1, 1}, {5, 0, 2}, {7, 0, 2}, {2, 1, 1}, {3, 0, 2}} {
		if q, d := admit(step.depth); q != step.queued || d != step.dups {
			t.Errorf("depth %d: %d queued, %d duplicates; want %d and %d", step.depth, q, d, step.queued, step.dups)
		}
	}
	if d, seen, err := db.SeenDepth(key, urls.URLHash(u)); err != nil || !seen || d != 2 {
		t.Errorf("seen depth %d (%v, %v), want 2", d, seen, err)
	}
	if want := []int{5, 2}; !slices.Equal(replicated, want) {
		t.Errorf("replicated depths %v, want %v", replicated, want)
	}
	if s := app.crawler.Stats(); s.Queued != 2 {
		t.Errorf("%d tasks queued, want 2 (the URL, then again from the shorter path)", s.Queued)
	}

	// The range comes back with the record at depth 1: queued once more.
	if err := db.PutShardRecords([]store.ShardRecord{{Key: key, URLHash: urls.URLHash(u), URL: u, Depth: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := app.Activate(context.Background(), shard.Range{}); err != nil {
		t.Fatal(err)
	}
	if s := app.crawler.Stats(); s.Queued != 1 {
		t.Errorf("after Activate: %d queued, want the URL once", s.Queued)
	}
	if d, _, _ := db.SeenDepth(key, urls.URLHash(u)); d != 1 {
		t.Errorf("seen depth after Activate %d, want 1", d)
	}
}

// TestOutlinksTravelWithMetadata: a page's links and how deep they were
// followed go with its metadata in a shard record (and a helper's reply),
// so the node that owns the page next can follow them from a shorter path
// without fetching the page again; metadata from a node that sends none,
// or outlinks out of bounds, arrive as unknown.
func TestOutlinksTravelWithMetadata(t *testing.T) {
	m := store.URLMeta{URL: "http://a.test/", Status: 200, LastFetch: time.Unix(100, 0), Fetches: 1,
		Outlinks: store.Outlinks{Known: true, Followed: true, Depth: 3, Links: []string{"http://a.test/x", "http://b.test/"}}}
	b, _, err := recordState(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeRecordState(b)
	if err != nil || !slices.Equal(got.Outlinks.Links, m.Outlinks.Links) || got.Outlinks.Depth != 3 || !got.Outlinks.Followed {
		t.Errorf("outlinks after the trip: %+v, %v", got.Outlinks, err)
	}
	// An older node's metadata: no outlinks field.
	plain := m
	plain.Outlinks = store.Outlinks{}
	b, _, _ = recordState(plain)
	if got, err := decodeRecordState(b); err != nil || got.Outlinks.Known {
		t.Errorf("metadata without outlinks decodes as %+v, %v", got.Outlinks, err)
	}
	// Too many links for a shard record's metadata: left out, and the
	// metadata stays within its bound.
	big := m
	big.Outlinks.Links = make([]string, 3000)
	for i := range big.Outlinks.Links {
		big.Outlinks.Links[i] = fmt.Sprintf("http://a.test/a-rather-long-path-to-page/%d", i)
	}
	b, _, _ = recordState(big)
	if got, err := decodeRecordState(b); err != nil || got.Outlinks.Known || len(b) > shard.MaxMetaBytes {
		t.Errorf("oversized outlinks decode as known (%d links, %d bytes), %v", len(got.Outlinks.Links), len(b), err)
	}
	// A malformed field is dropped, the rest of the metadata kept.
	pm := encodeURLMeta(plain)
	pm.Outlinks = &pb.Outlinks{Depth: -1, Links: []string{"http://a.test/"}}
	if got, err := decodeURLMeta(pm); err != nil || got.Outlinks.Known || got.Status != 200 {
		t.Errorf("malformed outlinks: %+v, %v", got, err)
	}
}

// TestIntakeMarksSeeds: a seed whose URL the seen set holds at depth 0
// already, but not as a seed (it was reached first as the target of
// another seed's redirect), is admitted again so that its record is
// marked seed, once; a seed already marked, and a URL at depth 0 that is
// not a seed, are duplicates.
func TestIntakeMarksSeeds(t *testing.T) {
	db, app := newTestIntake(t)
	u := "http://www.a.test/"
	key, _ := urls.TaskKey(u, urls.KeyHost)
	admit := func(redirects int, seed bool) (fresh, dups int) {
		t.Helper()
		a := route.Admission{Key: key, Hash: urls.URLHash(u), Task: route.Task{URL: u, Key: key, Redirects: redirects}, Seed: seed}
		got, dups, err := app.admit.Admit([]route.Admission{a}, func(fresh []route.Admission) error {
			recs := make([]shard.Record, len(fresh))
			for i, a := range fresh {
				recs[i] = shard.Record{Key: a.Key, Hash: a.Hash, URL: a.Task.URL, Redirects: a.Task.Redirects, Seed: a.Seed}
			}
			return shardStorage{db: db}.PutRecords(recs)
		})
		if err != nil {
			t.Fatal(err)
		}
		return len(got), dups
	}
	for i, step := range []struct {
		redirects   int
		seed        bool
		fresh, dups int
	}{
		{1, false, 1, 0}, // the target of a seed's redirect
		{0, false, 0, 1}, // a depth-0 task from a peer that may not seed
		{0, true, 1, 0},  // the seed: admitted again, to be marked
		{0, true, 0, 1},  // marked: a duplicate
	} {
		if f, d := admit(step.redirects, step.seed); f != step.fresh || d != step.dups {
			t.Errorf("step %d: %d admitted, %d duplicates; want %d and %d", i, f, d, step.fresh, step.dups)
		}
	}
	if ok, err := db.IsSeed(key, urls.URLHash(u)); err != nil || !ok {
		t.Errorf("the seed's record is not marked seed: %v, %v", ok, err)
	}
	if r, _, _ := db.ShardRecord(key, urls.URLHash(u)); !r.Seed || r.Redirects != 0 {
		t.Errorf("record %+v, want a seed after no redirect", r)
	}
}

// newTestIntake returns an intake over a fresh store and crawler, closed
// at the end of the test.
// testIntake builds a node's intake over db and c as node.New does.
func testIntake(db *store.DB, c *crawl.Crawler) *intake {
	log := slog.New(slog.DiscardHandler)
	admit := route.NewIntake(db, &crawlQueue{db: db, crawler: c, log: log}, crawl.DefaultConfig().MaxDepth)
	return &intake{admit: admit, db: db, crawler: c, log: log}
}

func newTestIntake(t *testing.T) (*store.DB, *intake) {
	t.Helper()
	db, err := store.Open(t.TempDir(), store.Options{BloomExpected: 1000, CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c, err := crawl.New(crawl.DefaultConfig(), db, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return db, testIntake(db, c)
}

// TestIntakeDeactivateReportsFetched: the records a range is given up with
// say what this node fetched, whether or not progress reported it yet: a
// URL with metadata or a dead letter is done, one with neither stays
// pending, and a record whose metadata is older than the node's gets the
// node's.
func TestIntakeDeactivateReportsFetched(t *testing.T) {
	db, app := newTestIntake(t)
	now := time.Now()
	rec := func(u string, done bool) store.ShardRecord {
		key, _ := urls.TaskKey(u, urls.KeyHost)
		return store.ShardRecord{Key: key, URLHash: urls.URLHash(u), URL: u, Done: done}
	}
	meta := func(r store.ShardRecord, at time.Time) store.URLMeta {
		m := store.URLMeta{URL: r.URL, Status: 200, LastFetch: at, NextCrawl: at.Add(time.Hour), Interval: time.Hour, Fetches: 1}
		if err := db.PutURLMeta(r.Key, r.URLHash, m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	fetched, dead, pending, stale := rec("http://a.test/1", false), rec("http://b.test/1", false), rec("http://c.test/1", false), rec("http://d.test/1", true)
	old := meta(stale, now.Add(-time.Hour))
	oldState, oldVersion, err := recordState(old)
	if err != nil {
		t.Fatal(err)
	}
	stale.Meta, stale.MetaVersion = oldState, oldVersion
	if err := db.PutShardRecords([]store.ShardRecord{fetched, dead, pending, stale}); err != nil {
		t.Fatal(err)
	}
	fetchedMeta := meta(fetched, now.Add(-time.Minute))
	staleMeta := meta(stale, now)
	if err := db.PutDeadLetter(store.DeadLetter{URL: dead.URL, RingKey: dead.Key, URLHash: dead.URLHash, HostKey: dead.Key, Attempts: 3, Kind: "timeout", At: now}); err != nil {
		t.Fatal(err)
	}

	if err := app.Deactivate(context.Background(), shard.Range{}); err != nil {
		t.Fatal(err)
	}
	get := func(r store.ShardRecord) store.ShardRecord {
		got, ok, err := db.ShardRecord(r.Key, r.URLHash)
		if err != nil || !ok {
			t.Fatalf("record of %s: %v %v", r.URL, ok, err)
		}
		return got
	}
	if got := get(fetched); !got.Done || got.MetaVersion != metaVersion(fetchedMeta) {
		t.Errorf("fetched URL's record %+v, want done with its metadata", got)
	}
	if got := get(dead); !got.Done || got.MetaVersion != 0 {
		t.Errorf("dead URL's record %+v, want done without metadata", got)
	}
	if got := get(pending); got.Done {
		t.Errorf("unfetched URL's record %+v, want pending", got)
	}
	if got := get(stale); !got.Done || got.MetaVersion != metaVersion(staleMeta) {
		t.Errorf("record with old metadata %+v, want the node's (version %d)", got, metaVersion(staleMeta))
	} else if m, err := decodeRecordState(got.Meta); err != nil || !m.LastFetch.Equal(now) {
		t.Errorf("record's metadata %+v %v, want the fetch of %v", m, err, now)
	}
}

// TestIntakeDeactivateDropsARacingAdmission: an admission that checked
// the range's ownership before the range was given up (its records
// written, its tasks not yet queued) leaves nothing in the crawler's
// queue once Deactivate returned. Before, such tasks were queued after
// the release and stayed parked there: counted as queued for good, for
// a range whose records had gone with the handoff.
func TestIntakeDeactivateDropsARacingAdmission(t *testing.T) {
	db, app := newTestIntake(t)
	var offered []route.Admission
	for i := range 5 {
		u := fmt.Sprintf("http://race%d.test/", i)
		key, _ := urls.TaskKey(u, urls.KeyHost)
		offered = append(offered, route.Admission{Key: key, Hash: urls.URLHash(u), Task: route.Task{URL: u, Key: key, Depth: 1}})
	}
	written, release := make(chan struct{}), make(chan struct{})
	admitted := make(chan error, 1)
	go func() {
		_, _, err := app.admit.Admit(offered, func(fresh []route.Admission) error {
			recs := make([]shard.Record, len(fresh))
			for i, a := range fresh {
				recs[i] = shard.Record{Key: a.Key, Hash: a.Hash, URL: a.Task.URL, Depth: a.Task.Depth}
			}
			err := shardStorage{db: db}.PutRecords(recs)
			close(written)
			<-release // the range is given up meanwhile
			return err
		})
		admitted <- err
	}()
	<-written
	deactivated := make(chan error, 1)
	go func() { deactivated <- app.Deactivate(context.Background(), shard.Range{}) }()
	select {
	case err := <-deactivated: // the release did not wait for the admission
		deactivated <- err
	case <-time.After(time.Second): // it waits for it: let it go on
	}
	close(release)
	if err := <-admitted; err != nil {
		t.Fatal(err)
	}
	if err := <-deactivated; err != nil {
		t.Fatal(err)
	}
	if q := app.crawler.Stats().Queued; q != 0 {
		t.Errorf("%d tasks left queued for a range given up", q)
	}
}
