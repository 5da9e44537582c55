package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/p2p/census"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
)

// TestSwarmStatusAndSeedWait runs five node processes: `seed --wait`
// returns once every page of the synthetic web is fetched, with exit code
// 0; `status --swarm` then counts exactly and its totals are the sums of
// each member's own `status --json`; a seed that can only fail makes
// `seed --wait` exit 3.
func TestSwarmStatusAndSeedWait(t *testing.T) {
	bin := binary(t)
	cfg := synthweb.DefaultConfig()
	cfg.Seed = 5
	cfg.Hosts = 12
	cfg.Cases = true // for the dead host; the first crawl does not reach the case hosts
	web, err := synthweb.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	env := []string{"HTTP_PROXY=" + web.URL(), "http_proxy=" + web.URL(), "NO_PROXY=", "no_proxy="}
	common := []string{"--delay", "1s", "--max-depth", "100", "--max-retries", "1", "--retry-base", "100ms"}
	first := startNode(t, bin, env, common...)
	boot := append(slices.Clone(common), "--bootstrap", first.addrs[0])
	nodes := []*proc{first}
	for range 4 {
		nodes = append(nodes, startNode(t, bin, env, boot...))
	}
	waitRing(t, bin, nodes, 60*time.Second)

	// seed --wait returns when the crawl is complete: every page fetched.
	seeds := web.Seeds()
	seeds = seeds[:len(seeds)-1] // the case hosts' hub is the last seed
	seed := exec.Command(bin, append([]string{"seed", "--wait", "--poll", "2s", "--wait-timeout", "3m", "--peer", nodes[3].addrs[0]}, seeds...)...)
	out, err := seed.CombinedOutput()
	if err != nil {
		t.Fatalf("seed --wait: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "crawl complete: ") {
		t.Fatalf("seed --wait output: %s", out)
	}
	var missing []string // of the generated hosts: the case hosts are not seeded yet
	for _, u := range web.Missing(token) {
		if !slices.ContainsFunc(web.CaseHosts(), func(h string) bool { return strings.HasPrefix(u, "http://"+h+"/") }) {
			missing = append(missing, u)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("seed --wait returned with %d pages not fetched, e.g. %s\n%s", len(missing), missing[0], out)
	}
	t.Logf("seed --wait: %s", strings.TrimSpace(string(out)))

	// On the quiescent swarm, status --swarm sums the members' statuses.
	raw, err := exec.Command(bin, "status", "--swarm", "--json", "--peer", nodes[1].addrs[0]).Output()
	if err != nil {
		t.Fatalf("status --swarm: %v %s", err, stderrOf(err))
	}
	var sw node.SwarmStatus
	if err := json.Unmarshal(raw, &sw); err != nil {
		t.Fatalf("status --swarm json: %v\n%s", err, raw)
	}
	sum := map[string]float64{}
	for _, n := range nodes {
		st := n.status(t, bin)
		c := st.Crawl
		for k, v := range map[string]int64{"fetched": c.Fetched, "queued": c.Queued, "scheduled": c.Scheduled, "in_flight": c.InFlight,
			"errors": c.Errors, "dead_letters": c.DeadLetters, "hosts": c.Hosts, "seen": st.Seen, "outbox": int64(st.Outbox)} {
			sum[k] += float64(v)
		}
	}
	if sw.Method != census.Exact || sw.Members.Value != float64(len(nodes)) || len(sw.Reports) != len(nodes) {
		t.Fatalf("status --swarm: %s census of %v members (%d reports), want exact of %d", sw.Method, sw.Members.Value, len(sw.Reports), len(nodes))
	}
	if sw.Work {
		t.Errorf("status --swarm says a member has work on a quiescent swarm")
	}
	for k, want := range sum {
		if got := sw.Totals[k].Value; got != want {
			t.Errorf("status --swarm %s = %v, the members' statuses sum to %v", k, got, want)
		}
	}
	if sum["fetched"] == 0 {
		t.Fatal("nothing fetched")
	}
	// seed --wait saw the crawl as it is now, finished: the same pages.
	var waited float64
	if _, err := fmt.Sscanf(string(out[strings.Index(string(out), "crawl complete: "):]), "crawl complete: %g pages fetched", &waited); err != nil || waited != sum["fetched"] {
		t.Errorf("seed --wait returned at %v pages fetched (%v), the crawl ended at %v", waited, err, sum["fetched"])
	}
	// The same census through a node's HTTP API, and the swarm page.
	raw, err = exec.Command(bin, "status", "--swarm", "--json", "--data", nodes[4].data).Output()
	var viaAPI node.SwarmStatus
	if err != nil || json.Unmarshal(raw, &viaAPI) != nil || viaAPI.Totals["fetched"] != sw.Totals["fetched"] || viaAPI.Method != census.Exact {
		t.Errorf("status --swarm --data: %v %s\n%s", err, stderrOf(err), raw)
	}
	code, page := apiGet(t, nodes[4].data, "/swarm.html")
	if code != http.StatusOK || !strings.Contains(string(page), "swarm.js") {
		t.Errorf("swarm page: %d\n%s", code, page)
	}
	human, err := exec.Command(bin, "status", "--swarm", "--peer", nodes[0].addrs[0]).Output()
	if err != nil || !strings.Contains(string(human), fmt.Sprintf("%d members, counted exactly", len(nodes))) {
		t.Errorf("status --swarm output: %v\n%s", err, human)
	}

	// A seed that can only fail (500 forever, given up after a retry)
	// completes with a new dead letter: exit code 3.
	seed = exec.Command(bin, "seed", "--wait", "--poll", "2s", "--wait-timeout", "2m", "--peer", nodes[2].addrs[0], "http://"+web.CaseHost("dead")+"/")
	out, err = seed.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("seed --wait of a failing URL: %v, want exit code 3\n%s", err, out)
	}
	if !strings.Contains(string(out), "1 new dead letters") {
		t.Errorf("seed --wait of a failing URL: %s", out)
	}
}

func stderrOf(err error) string {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(exit.Stderr)
	}
	return ""
}
