package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/sim"
)

// runSimulate runs the deterministic simulator (package p2p/sim): the
// real ring and shard code of many nodes in one process on a virtual
// clock, crawling a link graph under churn, and prints one report.
func runSimulate(args []string, stdout, stderr io.Writer) error {
	d := sim.DefaultConfig()
	fs := newFlagSet("simulate", stderr)
	nodes := fs.Int("nodes", d.Nodes, "physical nodes in the ring")
	vnodes := fs.Int("vnodes", d.VNodes, "ring positions per node")
	replicas := fs.Int("replicas", d.Replicas, "K: replicas of each owner's shard")
	churn := fs.Float64("churn", 0, "fraction of nodes replaced per simulated minute (heavy-tailed sessions)")
	crashShare := fs.Float64("crash-share", d.CrashShare, "share of departures that are crashes rather than graceful leaves")
	burst := fs.Float64("burst", 0, "fraction of nodes that crash at once, a third into --duration")
	partition := fs.Float64("partition", 0, "fraction of nodes cut off for 30s, halfway through --duration")
	loss := fs.Float64("loss", 0, "probability that a message is lost")
	dishonest := fs.Float64("dishonest", 0, "fraction of nodes that acknowledge and drop the URLs they own, withhold their predecessors' leases and squat their successors' ranges")
	randomPositions := fs.Bool("random-positions", false, "put every position of a node where its identity alone puts it, rather than choosing each among 4 candidates, to compare")
	noDefences := fs.Bool("no-defences", false, "turn off the defences against dishonest nodes (receipts, watching replicas, lease from a quorum), to compare")
	graph := fs.String("graph", "", "adjacency list to crawl: line i lists the pages page i links to (LAW WebGraph ASCII)")
	hosts := fs.String("hosts", "", "with --graph: each page's host, one a line (default: consecutive pages grouped by --pages-per-host)")
	pagesPerHost := fs.Int("pages-per-host", 16, "with --graph and no --hosts: pages per host")
	pages := fs.Int("pages", 300_000, "without --graph: pages of the generated web-like graph (0: no crawl)")
	maxHost := fs.Int("max-host-pages", 300, "without --graph: the generated graph's largest host")
	seeds := fs.Int("seeds", d.Seeds, "pages the crawl starts from")
	delay := fs.Duration("delay", d.Delay, "politeness gap between two fetches of one host")
	duration := fs.Duration("duration", d.Duration, "simulated time of the crawl phase (churn, burst, partition)")
	settle := fs.Duration("settle", d.Settle, "longest simulated wait for the ring to settle, after the build and after --duration")
	joinRate := fs.Float64("join-rate", d.JoinRate, "most ring positions joining per simulated second while the ring is built")
	growth := fs.Float64("growth", d.GrowthRate, "while the ring is built, it grows by this fraction of its positions per simulated second")
	seed := fs.Uint64("seed", d.Seed, "seed of every random choice; the same seed gives the same report")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	jsonFile := fs.String("json-file", "", "also write the report as JSON to this file")
	plots := fs.String("plots", "", "directory to write hops.svg and coverage.svg to")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the simulation to this file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *nodes < 1 || *vnodes < 1 || *replicas < 1 {
		return usageErr("--nodes, --vnodes and --replicas must be at least 1")
	}
	cfg := d
	cfg.Seed, cfg.Nodes, cfg.VNodes, cfg.Replicas = *seed, *nodes, *vnodes, *replicas
	cfg.Churn, cfg.Burst, cfg.Partition, cfg.Loss, cfg.Dishonest = *churn, *burst, *partition, *loss, *dishonest
	cfg.NoDefences, cfg.RandomPositions = *noDefences, *randomPositions
	cfg.CrashShare = *crashShare
	if *crashShare == 0 {
		cfg.CrashShare = -1 // explicitly none
	}
	cfg.Seeds, cfg.Delay, cfg.Duration, cfg.Settle, cfg.JoinRate, cfg.GrowthRate = *seeds, *delay, *duration, *settle, *joinRate, *growth
	switch {
	case *graph != "":
		g, err := sim.ReadGraphFiles(*graph, *hosts, *pagesPerHost)
		if err != nil {
			return err
		}
		cfg.Graph = g
	case *hosts != "":
		return usageErr("--hosts needs --graph")
	case *pages > 0:
		cfg.Graph = sim.GenerateGraph(*pages, *maxHost, *seed)
	}
	start := time.Now()
	last := time.Time{}
	cfg.Progress = func(line string) {
		if time.Since(last) < 2*time.Second {
			return
		}
		last = time.Now()
		fmt.Fprintf(stderr, "simulate: %s wall=%v\n", line, time.Since(start).Round(time.Second))
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("simulate: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("simulate: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	// The first interrupt stops the run and reports what was simulated
	// so far; the next one kills the process, as it would without this.
	stop := make(chan struct{})
	cfg.Stop = stop
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	var waiter sync.WaitGroup
	waiter.Go(func() {
		select {
		case s := <-sigs:
			signal.Stop(sigs)
			fmt.Fprintf(stderr, "simulate: %v: stopping; the report covers the run until now (another interrupt kills the process)\n", s)
			close(stop)
		case <-done:
		}
	})
	rep, err := sim.Run(cfg)
	close(done)
	waiter.Wait()
	signal.Stop(sigs)
	if err != nil {
		return err
	}
	if *plots != "" {
		if err := rep.WritePlots(*plots); err != nil {
			return err
		}
	}
	if *jsonFile != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return fmt.Errorf("simulate: %w", err)
		}
		if err := os.WriteFile(*jsonFile, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("simulate: %w", err)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.WriteText(stdout)
}
