package localswarm_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
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

// BenchmarkDoneMarkLag measures how long the done marks of fetched pages
// stay with their fetcher alone (status done_marks.oldest_ms): the pages a
// node killed outright takes with it, which the range's next owner fetches
// again. Six nodes crawl a 200-host synthetic web, with one ring position
// each and with 16; every 100 ms the test reads each node's oldest done
// mark. Reports the median, the 90th percentile and the largest sample
// (the oldest over the nodes), in ms, the crawl's pages/s, and the
// delivery loop's batches per pass and mean pass time (status
// route_batches, route_pass_ms).
func BenchmarkDoneMarkLag(b *testing.B) {
	cfg := synthweb.DefaultConfig()
	cfg.Seed = 21
	cfg.Hosts = 200
	cfg.Latency = 50 * time.Millisecond
	web, err := synthweb.Start(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer web.Close()
	for _, v := range []int{1, 16} {
		b.Run(fmt.Sprintf("vnodes=%d", v), func(b *testing.B) { benchDoneMarkLag(b, web, v) })
	}
}

func benchDoneMarkLag(b *testing.B, web *synthweb.Web, vnodes int) {
	var samples []int64
	var passes, batches int64
	var passMS float64
	var pages int
	var elapsed time.Duration
	for i := 0; i < b.N; i++ {
		web.ResetLog()
		cc := crawl.DefaultConfig()
		cc.Delay = 20 * time.Millisecond
		cc.MaxDepth = 100
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		swarm, err := localswarm.Start(ctx, localswarm.Options{Nodes: 6, Dir: b.TempDir(), Crawl: cc, Proxy: web.Proxy(), VNodes: vnodes})
		if err != nil {
			b.Fatal(err)
		}
		if err := swarm.WaitConverged(ctx); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		swarm.Nodes[1].Seed(ctx, web.Seeds())
		for len(web.Missing(token)) > 0 && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			var oldest int64
			for _, n := range swarm.Nodes {
				oldest = max(oldest, n.Status().DoneMarks.OldestMS)
			}
			samples = append(samples, oldest)
		}
		elapsed += time.Since(start)
		if n := len(web.Missing(token)); n > 0 {
			b.Fatalf("crawl incomplete: %d pages missing", n)
		}
		pages += web.Requested()
		for _, n := range swarm.Nodes {
			st := n.Status()
			passes, batches = passes+st.RoutePasses, batches+st.RouteBatches
			passMS += st.RoutePassMS * float64(st.RoutePasses)
		}
		_ = swarm.Close()
		cancel()
	}
	slices.Sort(samples)
	if len(samples) > 0 {
		b.ReportMetric(float64(samples[len(samples)/2]), "p50-ms")
		b.ReportMetric(float64(samples[len(samples)*9/10]), "p90-ms")
		b.ReportMetric(float64(samples[len(samples)-1]), "max-ms")
	}
	b.ReportMetric(float64(pages)/elapsed.Seconds(), "pages/s")
	if passes > 0 {
		b.ReportMetric(float64(batches)/float64(passes), "batches/pass")
		b.ReportMetric(passMS/float64(passes), "ms/pass")
	}
	b.ReportMetric(0, "ns/op")
}
