package node

import (
	"context"
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
	w := newWatcher(slog.New(slog.NewTextHandler(io.Discard, nil)), 0, fetch)
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
