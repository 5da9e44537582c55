package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// TestWatcherReportsToTheHandingPosition: with several ring positions one
// watcher fetches what every position's manager hands it, and each page
// fetched is reported done to the manager of the position that handed it
// over (whose replica role and watch it is), not to another.
func TestWatcherReportsToTheHandingPosition(t *testing.T) {
	rec := func(u string) shard.Record {
		host, err := urls.HostOf(u)
		if err != nil {
			t.Fatal(err)
		}
		return shard.Record{Key: urls.HostKey(host), Hash: urls.URLHash(u), URL: u}
	}
	fetch := func(_ context.Context, b *crawl.Batch) (*crawl.BatchResult, error) {
		res := &crawl.BatchResult{}
		for range b.Tasks {
			res.Results = append(res.Results, crawl.TaskResult{Finished: true})
		}
		return res, nil
	}
	w := newWatcher(slog.New(slog.NewTextHandler(io.Discard, nil)), 0, watchBudget, fetch)
	var mu sync.Mutex
	got := map[int][]string{}
	w.done = func(_ context.Context, pos int, recs []shard.Record) error {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range recs {
			if !r.Done {
				t.Errorf("%s reported without its done mark", r.URL)
			}
			got[pos] = append(got[pos], r.URL)
		}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w.Watch(ctx, 0, "owner-a", []shard.Record{rec("http://a.test/1"), rec("http://b.test/1")})
	w.Watch(ctx, 2, "owner-b", []shard.Record{rec("http://a.test/2"), rec("http://c.test/1")})
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	deadline := time.Now().Add(10 * time.Second)
	for w.fetched.Load() < 4 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	want := map[int]map[string]bool{
		0: {"http://a.test/1": true, "http://b.test/1": true},
		2: {"http://a.test/2": true, "http://c.test/1": true},
	}
	for pos, us := range want {
		if len(got[pos]) != len(us) {
			t.Errorf("position %d told of %v, want %d pages", pos, got[pos], len(us))
		}
		for _, u := range got[pos] {
			if !us[u] {
				t.Errorf("position %d told of %s, which another position handed over", pos, u)
			}
		}
	}
	if len(got) != len(want) {
		t.Errorf("positions told: %v, want 0 and 2", got)
	}
}

// TestWatcherReportsWithinAQuarterOfTheWatch: a watcher fetching a long
// host for a predecessor reports its first pages done within a quarter of
// the replicas' WatchTimeout, so that the owner's next replica, which
// steps in one WatchTimeout later, hears of them first. The fetch here
// honours the batch's budget and takes 100 ms a page, 30 pages; with a
// 2 s watch the first report must come within 0.5 s (plus slack), not
// after the whole host (3 s).
func TestWatcherReportsWithinAQuarterOfTheWatch(t *testing.T) {
	const watch = 2 * time.Second
	const perPage = 100 * time.Millisecond
	fetch := func(ctx context.Context, b *crawl.Batch) (*crawl.BatchResult, error) {
		res := &crawl.BatchResult{}
		start := time.Now()
		for range b.Tasks {
			if time.Since(start) >= b.Budget {
				break
			}
			select {
			case <-ctx.Done():
				return res, nil
			case <-time.After(perPage):
			}
			res.Results = append(res.Results, crawl.TaskResult{Finished: true})
		}
		return res, nil
	}
	w := newWatcher(slog.New(slog.NewTextHandler(io.Discard, nil)), 0, watchBudgetFor(watch), fetch)
	first := make(chan time.Time, 1)
	w.done = func(context.Context, int, []shard.Record) error {
		select {
		case first <- time.Now():
		default:
		}
		return nil
	}
	var recs []shard.Record
	for i := range 30 {
		u := fmt.Sprintf("http://long.test/p/%d", i)
		recs = append(recs, shard.Record{Key: urls.HostKey("long.test"), Hash: urls.URLHash(u), URL: u})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	w.Watch(ctx, 0, "owner", recs)
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	defer wg.Wait()
	defer cancel()
	select {
	case at := <-first:
		if took := at.Sub(start); took > watch/4+3*perPage {
			t.Errorf("first pages reported %v after the watcher took them, want within %v (a quarter of the %v watch)", took.Round(time.Millisecond), watch/4, watch)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no pages reported in 10 s")
	}
}
