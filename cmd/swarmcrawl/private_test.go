package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
)

// runFails runs the binary, which must exit with code want within a
// minute, and returns its stderr, which must be one line.
func runFails(t *testing.T, bin string, env []string, want int, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	code := -1
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err == nil {
		code = 0
	}
	msg := strings.TrimSpace(stderr.String())
	if code != want {
		t.Fatalf("swarmcrawl %s: exit %d, want %d; stderr:\n%s", args[0], code, want, tail(msg, 2000))
	}
	// Logs go to stderr too; the error is the last line, and alone.
	lines := strings.Split(msg, "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "swarmcrawl "+args[0]+": ") {
		t.Fatalf("swarmcrawl %s: last stderr line %q is not one error line", args[0], last)
	}
	return last
}

// TestPrivateSwarm: with a swarm key, a node without the key cannot join
// and a seed client without it cannot submit, each failing with one clear
// line; a node with it joins and the swarm crawls a synthetic web to the
// end. Key files readable by others are refused, and swarm-key never
// overwrites a key.
func TestPrivateSwarm(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "swarm.key")
	if out, err := exec.Command(bin, "swarm-key", "--out", keyFile).CombinedOutput(); err != nil {
		t.Fatalf("swarm-key: %v\n%s", err, out)
	}
	fi, err := os.Stat(keyFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	if line := runFails(t, bin, nil, 2, "swarm-key", "--out", keyFile); !strings.Contains(line, "not overwriting") {
		t.Fatalf("swarm-key over an existing key: %q", line)
	}
	printed, err := exec.Command(bin, "swarm-key").Output()
	if err != nil || !strings.HasPrefix(string(printed), "/key/swarm/psk/1.0.0/\n/base16/\n") {
		t.Fatalf("swarm-key printed %q, %v", printed, err)
	}
	open := filepath.Join(dir, "open.key")
	if err := os.WriteFile(open, printed, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	if line := runFails(t, bin, nil, 2, "node", "--data", t.TempDir(), "--listen", "/ip4/127.0.0.1/tcp/0", "--nat=false", "--discovery=false", "--swarm-key", open); !strings.Contains(line, "chmod 600") {
		t.Fatalf("a world-readable key: %q", line)
	}

	cfg := synthweb.DefaultConfig()
	cfg.Seed = 5
	cfg.Hosts = 8
	web, err := synthweb.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	env := []string{"HTTP_PROXY=" + web.URL(), "http_proxy=" + web.URL(), "NO_PROXY=", "no_proxy="}
	private := []string{"--delay", "50ms", "--max-depth", "100", "--discovery=false", "--swarm-key", keyFile}
	first := startNode(t, bin, env, private...)

	// No key: no join, no seeds.
	line := runFails(t, bin, env, 1, "node", "--data", t.TempDir(), "--listen", "/ip4/127.0.0.1/tcp/0", "--api", "127.0.0.1:0",
		"--nat=false", "--discovery=false", "--bootstrap", first.addrs[0])
	if !strings.Contains(line, "no bootstrap peer reachable") || !strings.Contains(line, "--swarm-key") {
		t.Fatalf("a node without the key: %q, want a line that points at --swarm-key", line)
	}
	line = runFails(t, bin, nil, 1, append([]string{"seed", "--timeout", "10s", "--peer", first.addrs[0]}, web.Seeds()...)...)
	if !strings.Contains(line, "--swarm-key") {
		t.Fatalf("a seed client without the key: %q, want a line that points at --swarm-key", line)
	}

	// With the key: a second member joins, and the seeds are crawled.
	second := startNode(t, bin, env, append(private, "--bootstrap", first.addrs[0])...)
	deadline := time.Now().Add(30 * time.Second)
	for len(first.status(t, bin).Successors) == 0 || first.status(t, bin).Successors[0].PeerID == first.status(t, bin).PeerID {
		if time.Now().After(deadline) {
			t.Fatalf("the member with the key did not join:\n%s", tail(logOf(second), 2000))
		}
		time.Sleep(200 * time.Millisecond)
	}
	out, err := exec.Command(bin, append([]string{"seed", "--swarm-key", keyFile, "--peer", second.addrs[0]}, web.Seeds()...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("seed with the key: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for len(web.Missing(token)) > 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("private swarm crawl incomplete: %d pages missing", len(web.Missing(token)))
		case <-time.After(200 * time.Millisecond):
		}
	}
	if v := web.CheckRobots(token); len(v) > 0 {
		t.Errorf("robots.txt violations: %v", v[0])
	}
	if out, err := exec.Command(bin, "status", "--data", first.data, "--swarm-key", keyFile).CombinedOutput(); err != nil {
		t.Errorf("status with the swarm key: %v\n%s", err, out)
	}
	if line := runFails(t, bin, nil, 2, "status", "--data", first.data, "--swarm-key", open); !strings.Contains(line, "chmod 600") {
		t.Errorf("status with a world-readable key: %q", line)
	}
}
