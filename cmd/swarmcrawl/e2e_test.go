package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
	"github.com/swarmcrawl/swarmcrawl/store/warc"
)

// buildBinary compiles the command once per test binary run.
var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "swarmcrawl-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "swarmcrawl")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

func binary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// proc is a node process with its announced addresses.
type proc struct {
	cmd    *exec.Cmd
	data   string
	addrs  []string
	stderr *bytes.Buffer
	done   chan error
}

// startNode runs `swarmcrawl node` on a new data dir and waits for its
// listening lines.
func startNode(t testing.TB, bin string, env []string, args ...string) *proc {
	t.Helper()
	return startNodeIn(t, bin, t.TempDir(), env, args...)
}

// testRingWork is the ring work of the tests' swarms (--ring-work): each
// node makes its identity in milliseconds, where the default's 16 bits
// take a second or more of a loaded machine (measured in p2p,
// BenchmarkGenerateIdentity). Every node of a test's swarm uses it.
const testRingWork = "8"

// startNodeIn runs `swarmcrawl node` on data and waits for its listening lines.
func startNodeIn(t testing.TB, bin, data string, env []string, args ...string) *proc {
	t.Helper()
	args = append([]string{"node", "--data", data, "--listen", "/ip4/127.0.0.1/tcp/0", "--api", "127.0.0.1:0", "--nat=false", "--ring-work", testRingWork}, args...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	return startProc(t, cmd, data)
}

// startProc starts cmd, a node on data dir data, and waits for its
// listening lines; the process is killed when the test ends.
func startProc(t testing.TB, cmd *exec.Cmd, data string) *proc {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, data: data, stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	cmd.Stderr = &lockedWriter{w: p.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	exited := make(chan struct{}) // closed once Wait has returned
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		err := cmd.Wait()
		close(exited)
		p.done <- err
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
		}
	})
	deadline := time.After(30 * time.Second)
	for len(p.addrs) == 0 {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("node exited before listening: %s", logOf(p))
			}
			if a, ok := strings.CutPrefix(line, "listening: "); ok {
				p.addrs = append(p.addrs, a)
			}
		case <-deadline:
			t.Fatalf("node did not print its addresses: %s", logOf(p))
		}
	}
	go func() { // keep draining
		for range lines {
		}
	}()
	return p
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (p *proc) status(t testing.TB, bin string) node.Status {
	t.Helper()
	out, err := exec.Command(bin, "status", "--data", p.data, "--json").Output()
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	var st node.Status
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("status json: %v\n%s", err, out)
	}
	return st
}

// TestMultiProcessSwarm runs three node processes, the second and third
// joining through the first, seeds them with the seed command and waits
// for the crawl of a synthetic web reached through HTTP_PROXY to finish.
func TestMultiProcessSwarm(t *testing.T) {
	bin := binary(t)
	const delay = 100 * time.Millisecond
	cfg := synthweb.DefaultConfig()
	cfg.Seed = 3
	cfg.Hosts = 30
	web, err := synthweb.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	env := []string{"HTTP_PROXY=" + web.URL(), "http_proxy=" + web.URL(), "NO_PROXY=", "no_proxy="}
	// --max-depth: see TestSwarmCrawlsSyntheticWeb; full coverage needs a loose cap.
	common := []string{"--delay", delay.String(), "--log-level", "debug", "--max-depth", "100"}

	first := startNode(t, bin, env, common...)
	// The data dir's addrs file holds the same addresses as the output.
	raw, err := os.ReadFile(filepath.Join(first.data, "addrs"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(raw)); !slices.Equal(got, first.addrs) {
		t.Fatalf("addrs file %v differs from printed addresses %v", got, first.addrs)
	}
	boot := append(slices.Clone(common), "--bootstrap", first.addrs[0])
	nodes := []*proc{first, startNode(t, bin, env, boot...), startNode(t, bin, env, boot...)}

	waitRing(t, bin, nodes, 30*time.Second)

	seed := exec.Command(bin, append([]string{"seed", "--peer", nodes[1].addrs[0]}, web.Seeds()...)...)
	out, err := seed.CombinedOutput()
	if err != nil {
		t.Fatalf("seed: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("accepted %d of %d seeds", len(web.Seeds()), len(web.Seeds())); !strings.Contains(string(out), want) {
		t.Fatalf("seed output %q, want %q", out, want)
	}

	truth := web.GroundTruth(token)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for len(web.Missing(token)) > 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("crawl incomplete: %d of %d pages missing\nnode 0 stderr:\n%s", len(web.Missing(token)), len(truth), tail(logOf(nodes[0]), 3000))
		case <-time.After(200 * time.Millisecond):
		}
	}
	if d := web.Duplicates(); len(d) > 0 {
		t.Errorf("%d pages fetched twice, e.g. %v", len(d), d[0])
	}
	if v := web.CheckRobots(token); len(v) > 0 {
		t.Errorf("robots.txt violations: %v", v[0])
	}
	if v := web.CheckPoliteness(delay); len(v) > 0 {
		t.Errorf("politeness violations: %v", v[0])
	}

	// The human status view names the ring and the counts.
	human, err := exec.Command(bin, "status", "--data", nodes[2].data).Output()
	if err != nil || !strings.Contains(string(human), "successor 1") || !strings.Contains(string(human), "fetched") {
		t.Errorf("status output: %v\n%s", err, human)
	}

	// SIGTERM: every node leaves the ring and exits cleanly.
	for _, n := range nodes {
		_ = n.cmd.Process.Signal(syscall.SIGTERM)
	}
	for i, n := range nodes {
		select {
		case err := <-n.done:
			if err != nil {
				t.Errorf("node %d exit: %v\n%s", i, err, tail(logOf(n), 2000))
			}
		case <-time.After(20 * time.Second):
			t.Errorf("node %d did not exit after SIGTERM", i)
		}
	}
	// The crawl is archived: exporting the three data dirs gives every
	// HTML page of the ground truth with its extracted text.
	exported := map[string]string{}
	for _, n := range nodes {
		out, err := exec.Command(bin, "export", "--data", n.data, "--format", "jsonl").Output()
		if err != nil {
			t.Fatalf("export: %v", err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if line == "" {
				continue
			}
			var rec struct{ URL, Text string }
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("export line %q: %v", line, err)
			}
			exported[rec.URL] = rec.Text
		}
	}
	for _, u := range truth {
		if strings.HasSuffix(u, ".pdf") || strings.HasSuffix(u, ".png") || strings.Contains(u, "/old/") {
			continue // not HTML, or a broken link: no text to extract
		}
		if text, ok := exported[u]; !ok || len(text) < 100 {
			t.Errorf("export lacks %s or its text (%d bytes)", u, len(text))
		}
	}
	// The WARC export of all three nodes reads back as one archive holding
	// a response record for every ground-truth page.
	responses := map[string]bool{}
	for i, n := range nodes {
		out := filepath.Join(t.TempDir(), fmt.Sprintf("node%d.warc.gz", i))
		if msg, err := exec.Command(bin, "export", "--data", n.data, "--format", "warc", "--out", out).CombinedOutput(); err != nil {
			t.Fatalf("export warc: %v\n%s", err, msg)
		}
		recs, err := warcResponses(out)
		if err != nil {
			t.Fatalf("read exported WARC of node %d: %v", i, err)
		}
		for _, rec := range recs {
			responses[rec.TargetURI] = true
		}
	}
	for _, u := range truth {
		if !responses[u] {
			t.Errorf("exported WARC lacks the response for %s", u)
		}
	}
	t.Logf("3 processes crawled %d pages on %d hosts; export holds %d pages with text, WARC export %d responses", len(truth), len(web.Hosts()), len(exported), len(responses))
}

const token = "swarmcrawl"

// ringLinks adds to prev the ring links one node's status shows: for each
// of its positions (virtual nodes, --vnodes), its ring id and its
// predecessor's, from the arc (pred, self] it owns. A position that knows
// no predecessor yet (its arc is the whole ring) adds nothing. The swarm
// forms one ring when prev holds every position of every node and is
// one cycle: ringFormed.
func ringLinks(prev map[string]string, st node.Status) {
	for _, p := range st.Positions {
		if p.Range.From != p.Range.To {
			prev[p.Range.To] = p.Range.From
		}
	}
}

// ringFormed reports whether prev (ringLinks of every node) is one cycle
// through all positions of the nodes whose statuses are sts.
func ringFormed(prev map[string]string, sts []node.Status) bool {
	n := 0
	for _, st := range sts {
		n += len(st.Positions)
	}
	return n > 0 && len(prev) == n && cycleLen(prev) == n
}

func cycleLen(next map[string]string) int {
	for start := range next {
		n, cur := 0, start
		for {
			cur = next[cur]
			n++
			if cur == start || n > len(next) {
				return n
			}
		}
	}
	return 0
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestCLIErrors checks that wrong invocations fail with one clear line.
func TestCLIErrors(t *testing.T) {
	bin := binary(t)
	data := t.TempDir()
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no command", nil, "Usage"},
		{"unknown command", []string{"crawl"}, `unknown command "crawl"`},
		{"unknown flag", []string{"node", "--data", data, "--bogus"}, "flag provided but not defined: -bogus"},
		{"missing data", []string{"node", "--listen", "/ip4/127.0.0.1/tcp/0"}, "--data is required"},
		{"bad listen", []string{"node", "--data", data, "--listen", "/ip4/127.0.0.1/tcpx/0", "--nat=false"}, "listen address"},
		{"bootstrap without id", []string{"node", "--data", data, "--listen", "/ip4/127.0.0.1/tcp/0", "--bootstrap", "/ip4/127.0.0.1/tcp/1"}, "must end in /p2p/"},
		{"bad delay", []string{"node", "--data", data, "--delay", "fast"}, "invalid value"},
		{"bad key mode", []string{"node", "--data", data, "--key", "path"}, "--key"},
		{"seed without peer", []string{"seed", "http://a.test/"}, "--peer is required"},
		{"seed malformed peer", []string{"seed", "--peer", "nonsense", "http://a.test/"}, "--peer"},
		{"status without target", []string{"status"}, "exactly one of --api or --data"},
		{"status no node", []string{"status", "--data", data}, "is a node running"},
		{"config unknown option", []string{"node", "--config", writeFile(t, "delay: 1s\ncolour: blue\n")}, `swarmcrawl.conf:2: unknown option "colour"`},
		{"config bad value", []string{"node", "--config", writeFile(t, "# a comment\nworkers: many\n")}, `swarmcrawl.conf:2: workers: invalid value "many"`},
		{"config old format", []string{"node", "--config", writeFile(t, "delay = 1s\n")}, "write `name: value`"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(bin, c.args...)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("succeeded, want failure; output:\n%s", out)
			}
			if !strings.Contains(string(out), c.want) {
				t.Fatalf("output %q does not contain %q", out, c.want)
			}
			if strings.Contains(string(out), "goroutine ") || strings.Contains(string(out), "panic") {
				t.Fatalf("stack trace in output:\n%s", out)
			}
		})
	}
}

// TestUnreachableBootstrap: a node whose bootstrap peers do not answer
// exits with an error naming the problem instead of hanging.
func TestUnreachableBootstrap(t *testing.T) {
	bin := binary(t)
	// A valid peer ID on a port nobody listens on.
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	ghost := "/ip4/127.0.0.1/tcp/9/p2p/" + id.String()
	cmd := exec.Command(bin, "node", "--data", t.TempDir(), "--listen", "/ip4/127.0.0.1/tcp/0", "--nat=false", "--bootstrap", ghost)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("node started with an unreachable bootstrap peer:\n%s", out)
	}
	if !strings.Contains(string(out), "no bootstrap peer reachable") {
		t.Fatalf("unclear error:\n%s", out)
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "swarmcrawl.conf")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// warcResponses reads the WARC file at path and returns its response
// records, those read before an error too.
func warcResponses(path string) ([]*warc.Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []*warc.Record
	r := warc.NewReader(f)
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("%s: %w", path, err)
		}
		if rec.Type == "response" {
			out = append(out, rec)
		}
	}
}

// apiGet asks the HTTP API of the node whose data directory is data for
// path, and returns the answer's status code and body.
func apiGet(t *testing.T, data, path string) (int, []byte) {
	t.Helper()
	addr, err := os.ReadFile(filepath.Join(data, node.APIFile))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + strings.TrimSpace(string(addr)) + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, body
}
