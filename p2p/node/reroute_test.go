package node

import (
	"context"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// TestIntakeReroutedDoneMarksAndHosts: the done marks of a range rerouted
// to this node make links to those pages duplicates and bring the fetch's
// state along, and a host state makes the host's politeness stricter
// only: a later next-allowed time holds, an earlier one changes nothing,
// and the sender's robots.txt is not taken.
func TestIntakeReroutedDoneMarksAndHosts(t *testing.T) {
	ctx := context.Background()
	db, app := newTestIntake(t)
	now := time.Now()
	admit := func(u string, depth int) int {
		t.Helper()
		key, _ := urls.TaskKey(u, urls.KeyHost)
		a := route.Admission{Key: key, Hash: urls.URLHash(u), Task: route.Task{URL: u, Key: key, Depth: depth}}
		fresh, _, err := app.admit.Admit([]route.Admission{a}, func([]route.Admission) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		return len(fresh)
	}
	fetched := "http://a.test/1"
	key, _ := urls.TaskKey(fetched, urls.KeyHost)
	m := store.URLMeta{URL: fetched, Status: 200, LastFetch: now.Add(-time.Minute), NextCrawl: now.Add(time.Hour), Interval: time.Hour, Fetches: 1}
	state, version, err := recordState(m)
	if err != nil {
		t.Fatal(err)
	}
	done := shard.Record{Key: key, Hash: urls.URLHash(fetched), URL: fetched, Depth: 1, Done: true, Meta: state, MetaVersion: version}

	// A page of the slow host is queued here; the host state says it may
	// not be fetched for another 30 seconds, and brings a robots.txt that
	// allows everything.
	if admit("http://slow.test/page", 1) != 1 {
		t.Fatal("the slow host's page was not queued: the test proves nothing")
	}
	strict := now.Add(30 * time.Second)
	host := func(notBefore time.Time) shard.HostState {
		t.Helper()
		hs, err := hostStates([]crawl.HostSnapshot{{
			Host: "slow.test", Key: urls.HostKey("slow.test"), NotBefore: notBefore,
			Origin: "http://slow.test", RobotsStatus: 200, Robots: []byte("User-agent: *\nAllow: /\n"), RobotsFetched: now,
		}})
		if err != nil {
			t.Fatal(err)
		}
		return hs[0]
	}
	app.Rerouted(ctx, []shard.Record{done}, []shard.HostState{host(strict)})
	// A looser clock from a later reroute changes nothing.
	app.Rerouted(ctx, nil, []shard.HostState{host(now.Add(time.Second))})

	if n := admit(fetched, 2); n != 0 {
		t.Errorf("a link to a page fetched by the range's previous holder was queued (%d): it would be fetched again", n)
	}
	if got, ok, err := db.URLMeta(key, done.Hash); err != nil || !ok || !got.LastFetch.Equal(m.LastFetch) {
		t.Errorf("fetch state of the rerouted done page: %+v %v %v, want the previous holder's", got, ok, err)
	}
	if admit("http://b.test/1", 1) != 1 {
		t.Error("a page nobody fetched was not queued")
	}
	snaps, err := app.crawler.ReleaseRange(ctx, func(uint64) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range snaps {
		if s.Host != "slow.test" {
			continue
		}
		found = true
		if s.NotBefore.Before(strict) {
			t.Errorf("the slow host may be fetched at %v, before the carried %v", s.NotBefore, strict)
		}
		if s.RobotsStatus != 0 {
			t.Errorf("the sender's robots.txt was taken (status %d)", s.RobotsStatus)
		}
	}
	if !found {
		t.Errorf("no state for the slow host among %d released", len(snaps))
	}
}
