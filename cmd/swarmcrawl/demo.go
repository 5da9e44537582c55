package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/p2p/localswarm"
)

// runDemo starts a synthetic web and a swarm of real libp2p peers on
// loopback, seeds the swarm and shows the crawl until every reachable,
// robots-allowed page is fetched. Nothing leaves the machine: every fetch
// goes through the synthetic web's proxy, and NAT traversal is off.
func runDemo(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", stderr)
	nodes := fs.Int("nodes", 5, "peers in the swarm")
	hosts := fs.Int("hosts", 50, "virtual hosts in the synthetic web")
	delay := fs.Duration("delay", 200*time.Millisecond, "minimum time between two requests to one host (0 = no pause)")
	seed := fs.Int64("seed", 1, "seed of the synthetic web's link graph")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	data := fs.String("data", "", "parent directory for the nodes' data (default: a temporary directory, removed at exit)")
	logLevel := fs.String("log-level", "warn", "node log level: debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "text (key=value) or json")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *nodes < 1 || *hosts < 1 {
		return usageErr("--nodes and --hosts must be at least 1")
	}
	if *delay < 0 {
		return usageErr("--delay must not be negative")
	}
	log, err := newLogger(stderr, *logLevel, *logFormat)
	if err != nil {
		return err
	}
	dir := *data
	if dir == "" {
		if dir, err = os.MkdirTemp("", "swarmcrawl-demo-"); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		defer os.RemoveAll(dir)
	}

	webCfg := synthweb.DefaultConfig()
	webCfg.Seed = *seed
	webCfg.Hosts = *hosts
	web, err := synthweb.Start(webCfg)
	if err != nil {
		return fmt.Errorf("demo: synthetic web: %w", err)
	}
	defer web.Close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	cc := crawl.DefaultConfig()
	cc.Delay = zeroIsNone(*delay)
	// Crawl order across hosts is not breadth-first, so a page can first
	// arrive by a long path; a depth cap of 16 could then cut links that a
	// shorter path would have followed. Full coverage needs a loose cap.
	cc.MaxDepth = 100
	token := "swarmcrawl"
	truth := web.GroundTruth(token)
	fmt.Fprintf(stdout, "synthetic web: %d hosts at %s, %d reachable robots-allowed pages from %d seeds\n",
		len(web.Hosts()), web.URL(), len(truth), len(web.Seeds()))

	swarm, err := localswarm.Start(ctx, localswarm.Options{Nodes: *nodes, Dir: dir, Crawl: cc, Proxy: web.Proxy(), Logger: log})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer swarm.Halt() // the whole swarm stops: no node leaves for another
	for i, n := range swarm.Nodes {
		fmt.Fprintf(stdout, "node %d  ring %s  %s\n", i, n.Ring().Self().ID, n.Addrs()[0])
	}
	if err := swarm.WaitConverged(ctx); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	res := swarm.Nodes[0].Seed(ctx, web.Seeds())
	fmt.Fprintf(stdout, "seeded %d URLs through node 0 (%d accepted, %d pending)\n", len(web.Seeds()), res.Accepted, res.Pending)

	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		missing := len(web.Missing(token))
		done := len(truth) - missing
		t := swarm.Totals()
		fmt.Fprintf(stdout, "[%5.1fs] %d/%d pages (%3.0f%%)  queued %d  in flight %d  routing %d  errors %d%s\n",
			time.Since(start).Seconds(), done, len(truth), 100*float64(done)/float64(max(1, len(truth))), t.Queued, t.InFlight, t.Outbox, t.Errors, errorKinds(t.ErrorsByKind))
		if missing == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("demo: stopped with %d of %d pages fetched: %w", done, len(truth), ctx.Err())
		case <-tick.C:
		}
	}
	elapsed := time.Since(start)
	fmt.Fprintf(stdout, "\ncrawl complete: %d pages in %s (%.1f pages/s) across %d nodes\n",
		len(truth), elapsed.Round(100*time.Millisecond), float64(len(truth))/elapsed.Seconds(), len(swarm.Nodes))
	report := func(name string, problems []string) {
		if len(problems) == 0 {
			fmt.Fprintf(stdout, "  %-28s ok\n", name)
			return
		}
		fmt.Fprintf(stdout, "  %-28s %d problems, first: %s\n", name, len(problems), problems[0])
	}
	if t := swarm.Totals(); t.Errors > 0 {
		fmt.Fprintf(stdout, "  errors%s: the synthetic web links to missing pages (404) on purpose\n", errorKinds(t.ErrorsByKind))
	}
	report("pages fetched twice", web.Duplicates())
	report("robots.txt violations", web.CheckRobots(token))
	report(fmt.Sprintf("requests closer than %s", *delay), web.CheckPoliteness(*delay))
	return nil
}

// errorKinds lists errors by kind, most first: " (4xx 6, 5xx 3)".
func errorKinds(byKind map[string]int64) string {
	type kind struct {
		name string
		n    int64
	}
	var kinds []kind
	for k, n := range byKind {
		if n > 0 {
			kinds = append(kinds, kind{k, n})
		}
	}
	if len(kinds) == 0 {
		return ""
	}
	slices.SortFunc(kinds, func(a, b kind) int {
		if a.n != b.n {
			return cmp.Compare(b.n, a.n)
		}
		return strings.Compare(a.name, b.name)
	})
	words := map[string]string{"http_4xx": "4xx", "http_5xx": "5xx", "too_many_redirects": "redirect loops", "bad_url": "bad URLs", "timeout": "timeouts"}
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		name := k.name
		if w, ok := words[name]; ok {
			name = w
		}
		parts[i] = fmt.Sprintf("%s %d", name, k.n)
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
