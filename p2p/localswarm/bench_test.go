package localswarm_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/p2p/localswarm"
)

// BenchmarkSingleNodeCrawl measures one complete node — seed routing, owner
// dedupe against the leveldb seen set, politeness frontier, fetch, parse,
// page storage — crawling a 1,000-host synthetic web with zero delay.
// Reports pages/s and heap allocations per page (the in-process synthetic
// web server's allocations included).
func BenchmarkSingleNodeCrawl(b *testing.B) {
	cfg := synthweb.DefaultConfig()
	cfg.Seed = 11
	cfg.Hosts = 1000
	cfg.Seeds = 50
	web, err := synthweb.Start(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer web.Close()
	truth := web.GroundTruth(token)
	b.ResetTimer()
	var pages int
	var elapsed time.Duration
	var mallocs uint64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		web.ResetLog()
		cc := crawl.DefaultConfig()
		cc.Delay = crawl.None
		cc.MaxDepth = 1000
		cc.Workers = 64
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		swarm, err := localswarm.Start(ctx, localswarm.Options{Nodes: 1, Dir: b.TempDir(), Crawl: cc, Proxy: web.Proxy()})
		if err != nil {
			b.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		b.StartTimer()
		swarm.Nodes[0].Seed(ctx, web.Seeds())
		for len(web.Missing(token)) > 0 && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		b.StopTimer()
		elapsed += time.Since(start)
		runtime.ReadMemStats(&after)
		mallocs += after.Mallocs - before.Mallocs
		if n := len(web.Missing(token)); n > 0 {
			b.Fatalf("crawl incomplete: %d of %d pages missing", n, len(truth))
		}
		pages += web.Requested()
		_ = swarm.Close()
		cancel()
		b.StartTimer()
	}
	b.ReportMetric(float64(pages)/elapsed.Seconds(), "pages/s")
	b.ReportMetric(float64(mallocs)/float64(pages), "allocs/page")
	b.ReportMetric(0, "ns/op")
}
