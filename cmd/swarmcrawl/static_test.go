package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
)

// TestStaticSwarmNoRefetch runs four node processes that form one ring
// before the seeds arrive and that nobody joins or leaves afterwards: with
// no churn, every page is fetched exactly once (issue 31, item 4). The
// ring is settled (every node's first successor leads round all four)
// before seeding; anything the swarm still does to settle after that
// counts against it, since no member changed. SWARMCRAWL_STATIC_RUNS
// repeats the crawl that many times on fresh webs and nodes.
func TestStaticSwarmNoRefetch(t *testing.T) {
	runs := 1
	if v := os.Getenv("SWARMCRAWL_STATIC_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SWARMCRAWL_STATIC_RUNS=%q: want a positive count", v)
		}
		runs = n
	}
	for i := range runs {
		t.Run(fmt.Sprintf("run%d", i), func(t *testing.T) {
			const delay = 100 * time.Millisecond
			cfg := synthweb.DefaultConfig()
			cfg.Seed = int64(31 + i)
			cfg.Hosts = 160
			// 12 pages a host and slow answers keep every node busy with
			// queued and in-flight work while the swarm runs.
			cfg.PagesPerHost = 12
			cfg.Latency = 100 * time.Millisecond
			s := newSwarm(t, cfg, delay)
			defer s.report()
			s.startCrawl(4, 0)
			s.waitComplete(2 * time.Minute)
			s.waitQuiet(20 * time.Second)
			extra, dups := s.extraFetches()
			if extra > 0 {
				for _, d := range dups[:min(5, len(dups))] {
					u := strings.Fields(d)[0]
					for _, r := range s.web.Repeated()[u] {
						t.Logf("%s by %s at +%v", r.URL, nodeOf(r), r.Time.Sub(s.start).Round(time.Millisecond))
					}
					for _, m := range s.nodes {
						for _, line := range strings.Split(logOf(m.p), "\n") {
							if strings.Contains(line, strings.TrimPrefix(u, "http://")) {
								t.Logf("%s: %s", m.name, line)
							}
						}
					}
				}
				t.Errorf("%d same-URL refetches in a static swarm of 4 (%d pages): %v", extra, len(s.truth), dups[:min(10, len(dups))])
			}
			s.checkRules()
			t.Logf("4 nodes crawled %d pages on %d hosts, %d refetches", len(s.truth), len(s.web.Hosts()), extra)
		})
	}
}
