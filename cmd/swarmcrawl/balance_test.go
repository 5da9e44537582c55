package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
)

// balanceVNodes lists the --vnodes values BenchmarkBalanceEightProcesses
// compares, from BALANCE_VNODES (comma-separated), 1 and 16 by default.
func balanceVNodes(b *testing.B) []int {
	spec := os.Getenv("BALANCE_VNODES")
	if spec == "" {
		return []int{1, 16}
	}
	var out []int
	for f := range strings.SplitSeq(spec, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			b.Fatalf("BALANCE_VNODES %q: %q is not a number of positions", spec, f)
		}
		out = append(out, v)
	}
	return out
}

// Issue 28, acceptance: a real swarm of 8 `swarmcrawl node` processes
// crawls a 1,000-host synthetic web (6,786 pages within robots.txt),
// with --vnodes V for each V of balanceVNodes. Every node is a fresh
// process on a fresh data dir, so its identity, and its ring positions,
// are random, as a user's would be: each run is one honest sample, and
// -count N gives N of them. The crawl must fetch every page exactly once
// (synthweb's Missing and Duplicates) without breaking robots.txt or
// politeness. It reports, from each process's `swarmcrawl status --json`,
// the hosts owned by the busiest node over the mean (hosts-max/mean), the
// same for pages fetched (pages-max/mean), and the time from seeding to
// the last page (crawl-s), the CPU time of the 8 processes from start to
// exit (cpu-s) and during the crawl (crawl-cpu-s). With
// BALANCE_PROFILE=DIR every node writes a CPU profile there
// (--cpu-profile, DIR/V<v>-node-<i>-<unix time>.pprof). A benchmark, not a test: a run takes minutes.
// Run it with `make balance`, or
//
//	BALANCE_VNODES=1,16 go test -run '^$' -bench BalanceEightProcesses -benchtime 1x -count 3 ./cmd/swarmcrawl/
func BenchmarkBalanceEightProcesses(b *testing.B) {
	if _, err := buildBinary(); err != nil {
		b.Fatal(err)
	}
	for _, v := range balanceVNodes(b) {
		b.Run(fmt.Sprintf("V=%d", v), func(b *testing.B) {
			var r balanceRun
			for range b.N {
				r = crawlBalance(b, v)
			}
			b.ReportMetric(r.hosts, "hosts-max/mean")
			b.ReportMetric(r.pages, "pages-max/mean")
			b.ReportMetric(r.crawl.Seconds(), "crawl-s")
			if r.cpu > 0 {
				b.ReportMetric(r.cpu.Seconds(), "cpu-s")
			}
			if r.crawlCPU > 0 {
				b.ReportMetric(r.crawlCPU.Seconds(), "crawl-cpu-s")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// balanceRun is what one crawl of crawlBalance measured.
type balanceRun struct {
	hosts, pages float64       // busiest node over the mean
	crawl        time.Duration // from seeding to the last page
	// cpu is the CPU time (user and system) of the 8 processes from
	// start to exit; crawlCPU of them from seeding to the last page
	// (Linux only, else 0).
	cpu, crawlCPU time.Duration
}

// balanceNodes is the number of node processes of crawlBalance.
const balanceNodes = 8

// crawlBalance crawls a 1,000-host synthetic web with balanceNodes
// processes of v positions each and measures how evenly the hosts and
// the fetches spread over them.
func crawlBalance(b *testing.B, v int) balanceRun {
	b.Helper()
	cfg := synthweb.DefaultConfig()
	cfg.Seed = 28
	cfg.Hosts = 1000
	cfg.Seeds = 50
	const delay = 20 * time.Millisecond
	s := newSwarm(b, cfg, delay)
	defer s.report()
	// The user's flags: the default replication and failure timeout (a
	// loaded machine running 8 processes misses the churn tests' 2 s).
	flags := []string{"--delay", delay.String(), "--max-depth", "100", "--vnodes", strconv.Itoa(v)}
	profiles := os.Getenv("BALANCE_PROFILE")
	start := time.Now()
	for i := range balanceNodes {
		s.common = flags
		if profiles != "" {
			s.common = append(slices.Clip(flags), "--cpu-profile", filepath.Join(profiles, fmt.Sprintf("V%d-node-%d-%d.pprof", v, i, start.Unix())))
		}
		s.add()
	}
	s.waitRing(3 * time.Minute)
	joined := time.Since(start)
	seeded, cpuSeeded := time.Now(), s.cpuTime()
	s.seed(s.nodes[len(s.nodes)-1])
	s.waitComplete(10 * time.Minute)
	crawled, cpuCrawled := time.Since(seeded), s.cpuTime()
	s.waitQuiet(30 * time.Second)
	s.checkCrawlQuality(0)
	// Status counts the owned hosts at most every ownedHostsEvery (5 s):
	// past that, the next status counts them afresh, after the crawl.
	time.Sleep(6 * time.Second)
	var owned, fetched []int64
	var shares []string
	var hosts, pages int64
	// byArcs counts the web's hosts whose keys fall in each node's arcs:
	// what the node should own, to check owned_hosts against.
	byArcs := make([]int, len(s.nodes))
	for i, m := range s.nodes {
		st := m.p.status(b, s.bin) // swarmcrawl status --json
		if len(st.Positions) != v {
			b.Errorf("V=%d: %s shows %d positions", v, m.name, len(st.Positions))
		}
		owned = append(owned, st.OwnedHosts)
		fetched = append(fetched, st.Crawl.Fetched)
		shares = append(shares, fmt.Sprintf("%.3f", st.RingShare))
		hosts += st.OwnedHosts
		pages += st.Crawl.Fetched
		for _, h := range s.web.Hosts() {
			k := urls.HostKey(h)
			for _, p := range st.Positions {
				from, err1 := parseRingID(p.Range.From)
				to, err2 := parseRingID(p.Range.To)
				if err1 == nil && err2 == nil && inArc(k, from, to) {
					byArcs[i]++
					break
				}
			}
		}
	}
	// Links to hosts outside the web are routed too: a few more keys.
	if n := int64(cfg.Hosts); hosts < n*9/10 || hosts > n*11/10 {
		b.Errorf("V=%d: the nodes own %d hosts together, of %d", v, hosts, n)
	}
	r := balanceRun{
		hosts: float64(slices.Max(owned)) * balanceNodes / float64(hosts),
		pages: float64(slices.Max(fetched)) * balanceNodes / float64(pages),
		crawl: crawled,
		cpu:   s.stopAll(),
	}
	if cpuSeeded > 0 && cpuCrawled > 0 {
		r.crawlCPU = cpuCrawled - cpuSeeded
	}
	b.Logf("V=%d: ring of %d positions in %v, crawled %d pages in %v (%v CPU); ring shares %v; hosts owned %v (max/mean %.2f; the web's hosts in the nodes' arcs %v), pages fetched %v (max/mean %.2f); %v CPU in all",
		v, v*balanceNodes, joined.Round(time.Millisecond), len(s.truth), crawled.Round(time.Millisecond), r.crawlCPU.Round(time.Millisecond),
		shares, owned, r.hosts, byArcs, fetched, r.pages, r.cpu.Round(time.Millisecond))
	return r
}

// stopAll stops every running member with SIGTERM (a node leaves the
// ring, and writes its CPU profile) and returns the CPU time the
// processes used, user and system, from start to exit.
func (s *swarm) stopAll() time.Duration {
	s.t.Helper()
	for _, m := range s.live() {
		if err := m.p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			s.t.Fatalf("SIGTERM to %s: %v", m.name, err)
		}
	}
	var cpu time.Duration
	for _, m := range s.live() {
		select {
		case <-m.p.done:
		case <-time.After(30 * time.Second):
			s.t.Fatalf("%s did not exit within 30 s of SIGTERM", m.name)
		}
		m.state = exited
		cpu += m.p.cmd.ProcessState.UserTime() + m.p.cmd.ProcessState.SystemTime()
	}
	return cpu
}

// clockTicks is the unit of the CPU times in /proc/PID/stat, USER_HZ,
// which Linux fixes at 100 on every architecture Go supports.
const clockTicks = 100

// cpuTime returns the CPU time the running members' processes have used
// so far, user and system, from /proc (0 where there is none).
func (s *swarm) cpuTime() time.Duration {
	var total time.Duration
	for _, m := range s.live() {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.p.cmd.Process.Pid))
		if err != nil {
			return 0
		}
		// The fields after the command name, in parentheses that may
		// hold spaces: utime and stime are the 14th and 15th fields of
		// the line, the 12th and 13th after the name.
		_, rest, ok := strings.Cut(string(raw), ") ")
		f := strings.Fields(rest)
		if !ok || len(f) < 13 {
			return 0
		}
		utime, err1 := strconv.ParseInt(f[11], 10, 64)
		stime, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			return 0
		}
		total += time.Duration(utime+stime) * time.Second / clockTicks
	}
	return total
}
