package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
)

// largestJournal returns the largest leveldb journal of the node store in
// data: the one holding the node's writes since it last started.
func largestJournal(t *testing.T, data string) string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(data, node.StoreDir, "leveldb", "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no leveldb journal in %s: %v", data, err)
	}
	var best string
	var size int64 = -1
	for _, l := range logs {
		if fi, err := os.Stat(l); err == nil && fi.Size() > size {
			best, size = l, fi.Size()
		}
	}
	return best
}

// TestCorruptStoreRepair is the attack of issue 9 on separate processes:
// 8 bytes of a stopped node's leveldb journal are overwritten. The node
// refuses to start with one line that names `swarmcrawl repair --data
// DIR` (before, it started with part of its seen set silently gone);
// repair recovers the store and reports what was lost; the node then
// starts on the repaired store.
func TestCorruptStoreRepair(t *testing.T) {
	bin := binary(t)
	cfg := synthweb.DefaultConfig()
	cfg.Seed = 9
	cfg.Hosts = 8
	web, err := synthweb.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	env := []string{"HTTP_PROXY=" + web.URL(), "http_proxy=" + web.URL(), "NO_PROXY=", "no_proxy="}
	args := []string{"--delay", "20ms", "--max-depth", "100", "--discovery=false"}

	running := startNode(t, bin, env, args...)
	if out, err := exec.Command(bin, append([]string{"seed", "--peer", running.addrs[0]}, web.Seeds()...)...).CombinedOutput(); err != nil {
		t.Fatalf("seed: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for len(web.Missing(token)) > 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("crawl incomplete: %d pages missing\n%s", len(web.Missing(token)), tail(logOf(running), 2000))
		case <-time.After(100 * time.Millisecond):
		}
	}
	seenBefore := running.status(t, bin).Seen
	_ = running.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-running.done:
		if err != nil {
			t.Fatalf("node exit: %v\n%s", err, tail(logOf(running), 2000))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("node did not exit after SIGTERM")
	}

	journal := largestJournal(t, running.data)
	f, err := os.OpenFile(journal, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := f.Stat()
	if err == nil {
		_, err = f.WriteAt([]byte("GARBAGE!"), fi.Size()/2)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	nodeArgs := append([]string{"node", "--data", running.data, "--listen", "/ip4/127.0.0.1/tcp/0", "--api", "127.0.0.1:0", "--nat=false", "--ring-work", testRingWork}, args...)
	line := runFails(t, bin, env, 1, nodeArgs...)
	if !strings.Contains(line, "swarmcrawl repair --data "+running.data) {
		t.Fatalf("a node on a damaged store: %q, want one line naming `swarmcrawl repair --data %s`", line, running.data)
	}

	out, err := exec.Command(bin, "repair", "--data", running.data).CombinedOutput()
	if err != nil {
		t.Fatalf("repair: %v\n%s", err, out)
	}
	report := string(out)
	if !strings.Contains(report, "journal     "+filepath.Base(journal)) || !strings.Contains(report, "bytes unreadable") || !strings.Contains(report, "result      repaired") {
		t.Fatalf("repair report does not name the damaged journal and what it lost:\n%s", report)
	}
	row := regexp.MustCompile(`(?m)^seen +(\d+) +(\d+) +(\d+)$`).FindStringSubmatch(report)
	if row == nil {
		t.Fatalf("repair report has no seen row:\n%s", report)
	}
	seenAfter, _ := strconv.ParseInt(row[2], 10, 64)

	restarted := startNodeIn(t, bin, running.data, env, args...)
	st := restarted.status(t, bin)
	if st.Seen < seenAfter {
		t.Fatalf("restarted node sees %d URLs, fewer than the %d repair kept", st.Seen, seenAfter)
	}
	t.Logf("seen: %d before the damage; repair recorded %s, kept %s, lost %s; %d after the restart\n%s",
		seenBefore, row[1], row[2], row[3], st.Seen, report)
}
