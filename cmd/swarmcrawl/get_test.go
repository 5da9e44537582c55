package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/store/warc"
)

// TestGetEveryPage: five processes of a private swarm crawl a synthetic
// web; a client that is no member but holds the key gets every
// ground-truth page through one member with `swarmcrawl get`, each
// digest verified (the command fails otherwise), the body printed or the
// records written with --warc; a page never crawled and one out of scope
// each fail with one line and their own exit code.
func TestGetEveryPage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a five-process swarm")
	}
	bin := binary(t)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "swarm.key")
	if out, err := exec.Command(bin, "swarm-key", "--out", keyFile).CombinedOutput(); err != nil {
		t.Fatalf("swarm-key: %v\n%s", err, out)
	}
	cfg := synthweb.DefaultConfig()
	cfg.Seed = 11
	cfg.Hosts = 6
	web, err := synthweb.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	truth := web.GroundTruth(token)
	env := []string{"HTTP_PROXY=" + web.URL(), "http_proxy=" + web.URL(), "NO_PROXY=", "no_proxy="}
	args := []string{"--delay", "20ms", "--max-depth", "100", "--discovery=false", "--swarm-key", keyFile, "--scope-exclude", "/excluded-by-test/"}
	nodes := []*proc{startNode(t, bin, env, args...)}
	for range 4 {
		nodes = append(nodes, startNode(t, bin, env, append(args, "--bootstrap", nodes[0].addrs[0])...))
	}
	time.Sleep(3 * time.Second) // let the ring form
	if out, err := exec.Command(bin, append([]string{"seed", "--swarm-key", keyFile, "--peer", nodes[1].addrs[0]}, web.Seeds()...)...).CombinedOutput(); err != nil {
		t.Fatalf("seed: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for len(web.Missing(token)) > 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("crawl incomplete: %d of %d pages missing", len(web.Missing(token)), len(truth))
		case <-time.After(200 * time.Millisecond):
		}
	}
	time.Sleep(2 * time.Second) // the last done marks reach their owners' replicas

	member := nodes[3].addrs[0]
	get := func(extra ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, bin, append([]string{"get", "--swarm-key", keyFile, "--peer", member}, extra...)...)
		return cmd
	}
	warcFile := filepath.Join(dir, "one.warc.gz")
	for i, u := range truth {
		if i%10 == 0 {
			// Every tenth page as WARC records, read back.
			if out, err := get("--warc", warcFile, u).CombinedOutput(); err != nil {
				t.Errorf("get --warc %s: %v\n%s", u, err, out)
				continue
			}
			b, err := os.ReadFile(warcFile)
			if err != nil {
				t.Fatal(err)
			}
			recs, err := warc.ParseExchange(b)
			if err != nil || len(recs) < 2 {
				t.Errorf("get --warc %s: %d records, %v", u, len(recs), err)
			}
			continue
		}
		var stdout, stderr bytes.Buffer
		cmd := get(u)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Errorf("get %s: %v\n%s", u, err, stderr.String())
			continue
		}
		if !strings.Contains(stderr.String(), "verified") {
			t.Errorf("get %s: stderr %q", u, stderr.String())
		}
		if strings.Contains(u, "/p/") && !strings.Contains(stdout.String(), "</html>") {
			t.Errorf("get %s: body %q", u, tail(stdout.String(), 200))
		}
	}

	host := strings.TrimPrefix(web.Seeds()[0], "http://")
	host = strings.SplitN(host, "/", 2)[0]
	if line := runFails(t, bin, nil, exitNotKnown, "get", "--swarm-key", keyFile, "--peer", member, "http://"+host+"/never-linked"); !strings.Contains(line, "never crawled") {
		t.Errorf("a page never crawled: %q", line)
	}
	if line := runFails(t, bin, nil, exitOutOfScope, "get", "--swarm-key", keyFile, "--peer", member, "http://"+host+"/excluded-by-test/1"); !strings.Contains(line, "out of scope") {
		t.Errorf("a page out of scope: %q", line)
	}
	if line := runFails(t, bin, nil, exitNoConnection, "get", "--timeout", "10s", "--peer", member, truth[0]); !strings.Contains(line, "--swarm-key") {
		t.Errorf("a client without the key: %q", line)
	}
}
