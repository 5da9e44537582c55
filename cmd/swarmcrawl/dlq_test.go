package main

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
)

// TestDeadLettersListedAndRequeued: URLs that fail every retry show up in
// `swarmcrawl dlq` with their attempts and last error, and
// `--requeue-all` puts them back: the server sees them asked for again.
func TestDeadLettersListedAndRequeued(t *testing.T) {
	bin := binary(t)
	cfg := synthweb.DefaultConfig()
	cfg.Seed = 9
	cfg.Hosts = 3
	cfg.Cases = true
	web, err := synthweb.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	env := []string{"HTTP_PROXY=" + web.URL(), "http_proxy=" + web.URL(), "NO_PROXY=", "no_proxy="}
	running := startNode(t, bin, env, "--delay", "20ms", "--retry-base", "20ms", "--max-retries", "3",
		"--timeout", "1s", "--discovery=false", "--max-pages-per-host", "30")
	if out, err := exec.Command(bin, append([]string{"seed", "--peer", running.addrs[0]}, web.Seeds()...)...).CombinedOutput(); err != nil {
		t.Fatalf("seed: %v\n%s", err, out)
	}
	dead := web.DeadURLs()
	var list node.DeadLetters
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, err := exec.Command(bin, "dlq", "--data", running.data, "--json").Output()
		if err != nil {
			t.Fatalf("dlq: %v", err)
		}
		list = node.DeadLetters{}
		if err := json.Unmarshal(out, &list); err != nil {
			t.Fatalf("dlq json: %v\n%s", err, out)
		}
		listed := map[string]node.DeadLetterInfo{}
		for _, d := range list.Items {
			listed[d.URL] = d
		}
		all := true
		for _, u := range dead {
			d, ok := listed[u]
			if !ok {
				all = false
				continue
			}
			if d.Attempts != 4 || !strings.Contains(d.LastError, "500") {
				t.Fatalf("dead letter %+v: want 4 attempts (1 + 3 retries) and the HTTP 500 as last error", d)
			}
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead URLs %v not all in the DLQ: %+v", dead, list)
		}
		time.Sleep(200 * time.Millisecond)
	}
	human, err := exec.Command(bin, "dlq", "--data", running.data).Output()
	if err != nil || !strings.Contains(string(human), dead[0]) || !strings.Contains(string(human), "dead letters") {
		t.Fatalf("dlq listing: %v\n%s", err, human)
	}

	asked := func() int {
		n := 0
		for _, r := range web.Log() {
			if slices.Contains(dead, r.URL) {
				n++
			}
		}
		return n
	}
	before := asked()
	out, err := exec.Command(bin, "dlq", "--data", running.data, "--requeue-all").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "requeued") {
		t.Fatalf("requeue: %v\n%s", err, out)
	}
	for asked() < before+len(dead) {
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatalf("requeued dead letters were not fetched again: %d requests before, %d now", before, asked())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
