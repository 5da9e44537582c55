package main

import (
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
)

// TestKillAndRestart: a node killed with SIGKILL mid-crawl and restarted
// on the same data dir finishes the crawl: its queue, seen set and
// undelivered links survive, and tasks that were in flight are fetched
// again. Only those few in-flight pages may be fetched twice, and no host
// is contacted sooner than its delay or its Crawl-delay allows, across the
// restart as well.
func TestKillAndRestart(t *testing.T) {
	bin := binary(t)
	const delay = 50 * time.Millisecond
	cfg := synthweb.DefaultConfig()
	cfg.Seed = 5
	cfg.Hosts = 25
	// Five hosts ask for a Crawl-delay of 1 s, far longer than the delay:
	// the restarted node must wait it out from its start as well.
	cfg.CrawlDelayHosts = 5
	web, err := synthweb.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	env := []string{"HTTP_PROXY=" + web.URL(), "http_proxy=" + web.URL(), "NO_PROXY=", "no_proxy="}
	const workers = 8
	args := []string{"--delay", delay.String(), "--max-depth", "100", "--discovery=false", "--workers", strconv.Itoa(workers)}
	truth := web.GroundTruth(token)

	running := startNode(t, bin, env, args...)
	if out, err := exec.Command(bin, append([]string{"seed", "--peer", running.addrs[0]}, web.Seeds()...)...).CombinedOutput(); err != nil {
		t.Fatalf("seed: %v\n%s", err, out)
	}
	deadline := time.Now().Add(time.Minute)
	for web.Requested() < len(truth)*2/5 {
		if time.Now().After(deadline) {
			t.Fatalf("crawl did not get going: %d of %d pages", web.Requested(), len(truth))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := running.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-running.done
	before := web.Requested()
	if before >= len(truth) {
		t.Fatalf("crawl finished before the kill (%d pages): the test proves nothing", before)
	}

	restarted := startNodeIn(t, bin, running.data, env, args...)
	deadline = time.Now().Add(2 * time.Minute)
	for len(web.Missing(token)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after restart %d of %d pages still missing\n%s", len(web.Missing(token)), len(truth), tail(logOf(restarted), 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if d := web.Duplicates(); len(d) > workers {
		t.Errorf("%d pages fetched twice, more than the %d that can be in flight at the kill: %v", len(d), workers, d)
	}
	if v := web.CheckRobots(token); len(v) > 0 {
		t.Errorf("robots.txt violations: %v", v[0])
	}
	if v := web.CheckPoliteness(delay); len(v) > 0 {
		t.Errorf("politeness violations: %v", v[0])
	}
	t.Logf("killed at %d of %d pages; restarted node finished the crawl with %d duplicates", before, len(truth), len(web.Duplicates()))
}
