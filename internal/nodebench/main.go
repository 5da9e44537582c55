// Command nodebench measures swarmcrawl node binaries side by side on the
// synthetic web of issue 10 (1,000 hosts, ten hot hosts, 91 hosts with a
// Crawl-delay of 2 s, 20 trap hosts), served by this process so that a
// node's CPU time is its own: one node, default flags, first with no delay
// and then with --delay 20ms, for each binary in turn (new, base, new,
// base, ... for -runs rounds). It prints, as medians over the runs, the new
// pages per second up to 90% coverage, the node's CPU seconds per 1,000
// pages it fetched, this process's (the server's, on the same cores) CPU
// seconds per 1,000 requests served during the crawl, the times to 90%,
// 99% and 100% coverage of the pages
// within the default depth of a seed, the politeness bound (the largest,
// over hosts, of reachable pages times the host's effective delay), and
// the ratios new/base; then each run's checks: duplicates, robots.txt and
// politeness violations and the share of fetches spent on traps.
//
//	go run ./internal/nodebench -new bin/swarmcrawl -base bin/base/swarmcrawl
//
// -server-profile writes a CPU profile of this process over the crawls.
// With NODEBENCH_DEBUG set, the nodes' logs, their status in the first
// seconds and the largest host's stalls go to stderr.
//
// make bench builds both binaries (the base from the previous commit) and
// runs it.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
)

// web is issue 10's synthetic web (crawl's trapWeb).
var web = synthweb.Config{Seed: 1, Hosts: 1000, HotHosts: 10, HotPages: 1600, TrapHosts: 20, CrawlDelayHosts: 91}

// profileDir, when set, is where the new binary's CPU profiles go.
var profileDir string

// serverProfile, when set, is the file where a CPU profile of this process
// (the synthetic web's server) over all crawls goes.
var serverProfile string

// delays are the crawls each binary makes in a round (-delays).
var delays = []time.Duration{0, 20 * time.Millisecond}

func main() {
	newBin := flag.String("new", "bin/swarmcrawl", "node binary under test")
	baseBin := flag.String("base", "", "baseline node binary (none: the new one alone)")
	runs := flag.Int("runs", 1, "rounds: each binary crawls once per delay per round")
	hosts := flag.Int("hosts", web.Hosts, "hosts of the synthetic web")
	timeout := flag.Duration("timeout", 10*time.Minute, "longest one crawl may take")
	flag.StringVar(&profileDir, "profile", "", "directory where the new binary writes a CPU profile of each crawl (new-DELAY-rROUND.prof)")
	flag.StringVar(&serverProfile, "server-profile", "", "file where a CPU profile of this process (the synthetic web's server) during the crawls goes")
	flag.Func("delays", "comma-separated --delay values each binary crawls with in a round (default 0,20ms)", func(v string) error {
		delays = nil
		for _, f := range strings.Split(v, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(f))
			if err != nil || d < 0 {
				return fmt.Errorf("bad delay %q", f)
			}
			delays = append(delays, d)
		}
		return nil
	})
	flag.Parse()
	web.Hosts = *hosts
	// Interrupted (or stopped by timeout(1)), the crawl in progress ends
	// as if it were done, and the node is stopped and its data directory
	// removed before this process exits.
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, *newBin, *baseBin, *runs, *timeout, os.Stdout)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodebench:", err)
		os.Exit(1)
	}
}

// result is what one crawl of the web by one node showed.
type result struct {
	delay          time.Duration
	fetched        int           // distinct URLs requested, robots.txt left out
	reached        []float64     // seconds from seeding to 90%, 99% and 100% coverage; NaN if not reached
	coverage       float64       // share of the reachable pages fetched
	cpu            time.Duration // the node process's user and system time
	server         time.Duration // this process's (the synthetic web's) user and system time during the crawl
	requests       int           // requests the synthetic web logged during the crawl
	duplicates     int
	robots, polite int // violations
	trap, pages    int // requests to traps, of all page requests
	hot            hostPace
}

// hostPace is how the requests to one host (the one with the most pages
// within reach) were spread over a crawl: when the first came, how many
// there were, the median interval between two, and the time spent in
// intervals longer than twice the gap the host needs (stalls) beyond it.
type hostPace struct {
	host          string
	requests      int
	first, median time.Duration
	stalled       time.Duration
}

var levels = []float64{0.90, 0.99, 1}

func run(ctx context.Context, newBin, baseBin string, runs int, timeout time.Duration, out io.Writer) error {
	w, err := synthweb.Start(web)
	if err != nil {
		return err
	}
	defer w.Close()
	if serverProfile != "" {
		f, err := os.Create(serverProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	def := crawl.DefaultConfig()
	token := crawl.ProductToken(def.UserAgent)
	truth := w.Within(token, def.MaxDepth)
	bins := []string{newBin}
	if baseBin != "" {
		bins = append(bins, baseBin)
	}
	results := map[string][]result{}
	for round := range runs {
		for _, bin := range bins {
			for _, d := range delays {
				fmt.Fprintf(os.Stderr, "round %d: %s, delay %v ...", round+1, bin, d)
				var extra []string
				if profileDir != "" && bin == newBin {
					extra = []string{"--cpu-profile", filepath.Join(profileDir, fmt.Sprintf("new-%v-r%d.prof", d, round+1))}
				}
				r, err := crawlOnce(ctx, w, bin, d, truth, token, timeout, extra...)
				if err == nil && ctx.Err() != nil {
					err = fmt.Errorf("interrupted: %w", context.Cause(ctx))
				}
				if err != nil {
					return fmt.Errorf("%s, delay %v: %w", bin, d, err)
				}
				fmt.Fprintf(os.Stderr, " %d pages, %.1f%% coverage, CPU %.1fs, server CPU %.1fs for %d requests\n",
					r.fetched, 100*r.coverage, r.cpu.Seconds(), r.server.Seconds(), r.requests)
				results[bin] = append(results[bin], r)
			}
		}
	}
	report(out, w, truth, bins, results, runs)
	return nil
}

// crawlOnce runs one node of bin with --delay d until it has fetched every
// page of truth (or timeout), stops it and measures the crawl.
func crawlOnce(ctx context.Context, w *synthweb.Web, bin string, d time.Duration, truth []string, token string, timeout time.Duration, extra ...string) (result, error) {
	r := result{delay: d}
	dir, err := os.MkdirTemp("", "nodebench-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	args := []string{"node", "--data", dir, "--listen", "/ip4/127.0.0.1/tcp/0", "--api", "127.0.0.1:0",
		"--nat=false", "--discovery=false", "--log-level", "error", "--delay", d.String()}
	cmd := exec.Command(bin, append(args, extra...)...)
	cmd.Env = append(os.Environ(), "HTTP_PROXY="+w.URL(), "http_proxy="+w.URL(), "NO_PROXY=", "no_proxy=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if os.Getenv("NODEBENCH_DEBUG") != "" {
		cmd.Stderr = io.MultiWriter(&stderr, os.Stderr)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return r, err
	}
	if err := cmd.Start(); err != nil {
		return r, err
	}
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	addr, err := listening(stdout, 30*time.Second)
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // stderr is complete once Wait returns
		return r, fmt.Errorf("%w: %s", err, stderr.Bytes())
	}
	w.ResetLog()
	start := time.Now()
	self0, err := selfCPU()
	if err != nil {
		return r, err
	}
	if out, err := exec.Command(bin, append([]string{"seed", "--peer", addr}, w.Seeds()...)...).CombinedOutput(); err != nil {
		return r, fmt.Errorf("seed: %w: %s", err, out)
	}
	if os.Getenv("NODEBENCH_DEBUG") != "" {
		// The first 8 s of the node's status, five times a second: is
		// discovery (the outbox) or the frontier behind?
		stopPoll, polled := make(chan struct{}), make(chan struct{})
		defer func() { close(stopPoll); <-polled }()
		go func() {
			defer close(polled)
			for i := 0; i < 40; i++ {
				select {
				case <-stopPoll:
					return
				case <-time.After(200 * time.Millisecond):
				}
				out, _ := exec.Command(bin, "status", "--data", dir, "--json").Output()
				var st struct {
					Outbox int `json:"outbox"`
					Crawl  struct {
						Fetched int64 `json:"fetched"`
						Queued  int64 `json:"queued"`
					} `json:"crawl"`
				}
				_ = json.Unmarshal(out, &st)
				fmt.Fprintf(os.Stderr, "+%v outbox %d fetched %d queued %d\n", time.Since(start).Round(time.Millisecond), st.Outbox, st.Crawl.Fetched, st.Crawl.Queued)
			}
		}()
	}
	want := make(map[string]bool, len(truth))
	for _, u := range truth {
		want[u] = true
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Until every page is fetched, or nothing was requested for idle: a
	// crawl that missed pages does not wait for the timeout. The log is
	// read from the first request that was still in progress at the last
	// look: this process serves the web on the node's cores, and rereading
	// all of it four times a second would cost as much as serving it.
	const idle = 30 * time.Second
	requests, active := 0, time.Now()
	var watch logWatch
	for ctx.Err() == nil && time.Since(active) < idle {
		n := watch.update(w, want)
		if len(watch.answered) == len(truth) {
			break
		}
		if n > requests {
			requests, active = n, time.Now()
		}
		time.Sleep(250 * time.Millisecond)
	}
	self1, err := selfCPU()
	if err != nil {
		return r, err
	}
	r.server = self1 - self0
	if err := stop(cmd, 30*time.Second); err != nil {
		return r, err
	}
	r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()

	log := w.Log()
	r.requests = len(log)
	first := firstFetches(log, want)
	times := make([]time.Duration, 0, len(first))
	for _, t := range first {
		times = append(times, t.Sub(start))
	}
	slices.Sort(times)
	for _, l := range levels {
		n := int(math.Ceil(l * float64(len(truth))))
		if n <= len(times) {
			r.reached = append(r.reached, times[n-1].Seconds())
		} else {
			r.reached = append(r.reached, math.NaN())
		}
	}
	r.coverage = float64(len(first)) / float64(len(truth))
	seen := map[string]bool{}
	for _, q := range log {
		if q.Path != "/robots.txt" {
			seen[q.URL] = true
		}
	}
	r.fetched = len(seen)
	r.duplicates = len(w.Duplicates())
	r.robots = len(w.CheckRobots(token))
	r.polite = len(w.CheckPoliteness(d))
	r.trap, r.pages = w.TrapRequests()
	r.hot = paceOf(w, log, largestHost(truth), start, d)
	return r, nil
}

// largestHost is the host with the most pages in truth.
func largestHost(truth []string) string {
	perHost := map[string]int{}
	best := ""
	for _, u := range truth {
		h, _, _ := strings.Cut(strings.TrimPrefix(u, "http://"), "/")
		perHost[h]++
		if perHost[h] > perHost[best] || perHost[h] == perHost[best] && h < best {
			best = h
		}
	}
	return best
}

// paceOf measures the requests to host in log, seeded at start, against
// the gap the host needs at delay d.
func paceOf(w *synthweb.Web, log []synthweb.Request, host string, start time.Time, d time.Duration) hostPace {
	p := hostPace{host: host}
	gap := max(d, min(w.CrawlDelay(host), crawl.DefaultConfig().MaxCrawlDelay))
	var prev time.Time
	var gaps []float64
	for _, q := range log {
		if q.Host != host {
			continue
		}
		p.requests++
		if prev.IsZero() {
			p.first = q.Time.Sub(start)
		} else {
			g := q.Time.Sub(prev)
			gaps = append(gaps, float64(g))
			if g > 2*gap {
				if os.Getenv("NODEBENCH_DEBUG") != "" {
					fmt.Fprintf(os.Stderr, "stall at +%v: %v\n", prev.Sub(start).Round(time.Millisecond), g.Round(time.Millisecond))
				}
				p.stalled += g - gap
			}
		}
		prev = q.Time
	}
	if m := median(gaps); !math.IsNaN(m) {
		p.median = time.Duration(m)
	}
	return p
}

// logWatch follows a web's request log as it grows, collecting the URLs
// of want that have been answered (as firstFetches counts them).
type logWatch struct {
	from     int // the log before it is settled: answered or abandoned
	answered map[string]bool
}

// update reads the log's new and unsettled requests and returns the length
// of the log.
func (lw *logWatch) update(w *synthweb.Web, want map[string]bool) int {
	if lw.answered == nil {
		lw.answered = map[string]bool{}
	}
	log := w.LogSince(lw.from)
	n, next := lw.from+len(log), -1
	for i, q := range log {
		if q.Status == 0 {
			if !q.Abandoned && next < 0 {
				next = lw.from + i
			}
			continue
		}
		if want[q.URL] {
			lw.answered[q.URL] = true
		}
	}
	if next < 0 {
		next = n
	}
	lw.from = next
	return n
}

// firstFetches returns the time of the first answered request of each URL
// of want in log.
func firstFetches(log []synthweb.Request, want map[string]bool) map[string]time.Time {
	first := map[string]time.Time{}
	for _, q := range log {
		if q.Status == 0 || !want[q.URL] {
			continue
		}
		if _, ok := first[q.URL]; !ok {
			first[q.URL] = q.Time
		}
	}
	return first
}

// listening reads a node's output until it prints an address to reach it
// by, and keeps reading the rest.
func listening(stdout io.Reader, timeout time.Duration) (string, error) {
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening: "); ok && !sent {
				found <- a
				sent = true
			}
		}
		if !sent {
			close(found)
		}
	}()
	select {
	case a, ok := <-found:
		if !ok {
			return "", errors.New("node exited before listening")
		}
		return a, nil
	case <-time.After(timeout):
		return "", errors.New("node did not print its address")
	}
}

// selfCPU returns the user and system time this process (the synthetic
// web's server, not the node, a child) has used so far.
func selfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// stop interrupts a node and waits for it to exit, killing it after grace.
func stop(cmd *exec.Cmd, grace time.Duration) error {
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		return fmt.Errorf("interrupt node: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
	return nil
}

// bound is the politeness bound of a crawl at delay d: the largest, over
// hosts, of their reachable pages times their effective delay.
func bound(w *synthweb.Web, truth []string, d time.Duration) time.Duration {
	return boundAt(w, truth, d, 1)
}

// boundAt is the politeness bound for coverage level: the least time by
// which, every host fetched once per its effective delay from the start
// (its k-th page done at k delays), at most 1-level of the pages are left.
// boundAt(..., 1) is bound.
func boundAt(w *synthweb.Web, truth []string, d time.Duration, level float64) time.Duration {
	perHost := map[string]int{}
	for _, u := range truth {
		h, _, _ := strings.Cut(strings.TrimPrefix(u, "http://"), "/")
		perHost[h]++
	}
	maxCD := crawl.DefaultConfig().MaxCrawlDelay
	done := make([]time.Duration, 0, len(truth)) // when each page is done at the latest
	for h, n := range perHost {
		gap := max(d, min(w.CrawlDelay(h), maxCD))
		for k := 1; k <= n; k++ {
			done = append(done, time.Duration(k)*gap)
		}
	}
	if len(done) == 0 {
		return 0
	}
	slices.Sort(done)
	// The least count of pages that leaves at most 1-level of them.
	need := len(done) - int(math.Floor((1-level)*float64(len(done))+1e-9))
	return done[max(need, 1)-1]
}

func report(out io.Writer, w *synthweb.Web, truth []string, bins []string, results map[string][]result, runs int) {
	fmt.Fprintf(out, "synthetic web: %d hosts, %d pages within depth %d of a seed; medians of %d run(s)\n",
		web.Hosts, len(truth), crawl.DefaultConfig().MaxDepth, runs)
	largest := largestHost(truth)
	n := 0
	for _, u := range truth {
		if strings.HasPrefix(u, "http://"+largest+"/") {
			n++
		}
	}
	fmt.Fprintf(out, "largest host: %s, %d pages\n", largest, n)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "\t")
	for _, b := range bins {
		fmt.Fprintf(tw, "%s\t", b)
	}
	if len(bins) == 2 {
		fmt.Fprint(tw, "new/base\t")
	}
	fmt.Fprintln(tw)
	row := func(name string, d time.Duration, f func(result) float64) {
		fmt.Fprintf(tw, "%s\t", name)
		var v []float64
		for _, b := range bins {
			var xs []float64
			for _, r := range results[b] {
				if r.delay == d {
					xs = append(xs, f(r))
				}
			}
			v = append(v, median(xs))
			fmt.Fprintf(tw, "%s\t", format(v[len(v)-1]))
		}
		if len(v) == 2 {
			fmt.Fprintf(tw, "%.2f\t", v[0]/v[1])
		}
		fmt.Fprintln(tw)
	}
	cells := len(bins) // after the name; every line has as many, or tabwriter ends the columns
	if len(bins) == 2 {
		cells++
	}
	for _, d := range delays {
		var bounds []string
		for _, l := range levels {
			bounds = append(bounds, fmt.Sprintf("%g%% %.1fs", 100*l, boundAt(w, truth, d, l).Seconds()))
		}
		fmt.Fprintf(tw, "delay %v (politeness bounds %s)\t%s\n", d, strings.Join(bounds, ", "), strings.Repeat("\t", cells))
		if d == 0 {
			row("  new pages/s to 90%", d, func(r result) float64 { return 0.9 * float64(len(truth)) / r.reached[0] })
		}
		row("  CPU s per 1,000 pages", d, func(r result) float64 { return 1000 * r.cpu.Seconds() / float64(r.fetched) })
		row("  server CPU s per 1,000 requests", d, func(r result) float64 {
			return 1000 * r.server.Seconds() / float64(max(r.requests, 1))
		})
		for i, l := range levels {
			row(fmt.Sprintf("  s to %g%% coverage", 100*l), d, func(r result) float64 { return r.reached[i] })
		}
		for i, l := range levels {
			b := boundAt(w, truth, d, l).Seconds()
			if b == 0 {
				continue // no delay and no Crawl-delay bounds this level: no ratio
			}
			row(fmt.Sprintf("  %g%% / its politeness bound", 100*l), d, func(r result) float64 { return r.reached[i] / b })
		}
		row("  largest host: first request s", d, func(r result) float64 { return r.hot.first.Seconds() })
		row("  largest host: median interval ms", d, func(r result) float64 { return float64(r.hot.median) / 1e6 })
		row("  largest host: s stalled", d, func(r result) float64 { return r.hot.stalled.Seconds() })
	}
	_ = tw.Flush()
	fmt.Fprintln(out, "checks, run by run: coverage, duplicates, robots and politeness violations, trap fetches")
	for _, b := range bins {
		for _, r := range results[b] {
			fmt.Fprintf(out, "  %s, delay %v: %.2f%%, %d, %d, %d, %d of %d (%.1f%%)\n", b, r.delay, 100*r.coverage,
				r.duplicates, r.robots, r.polite, r.trap, r.pages, 100*float64(r.trap)/float64(max(r.pages, 1)))
		}
	}
}

// format writes a figure with three significant digits, in full when it
// is larger.
func format(x float64) string {
	if math.Abs(x) >= 100 {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.3g", x)
}

// median of xs, NaN for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	if n := len(xs); n%2 == 0 {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
	return xs[len(xs)/2]
}
