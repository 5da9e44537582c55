package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
	"github.com/swarmcrawl/swarmcrawl/store/warc"
)

// --capture-grace reaches the node's configuration, defaults to the
// node's default, 0 turns the refetch off, and a negative value is a
// usage error that names the flag.
func TestCaptureGraceFlag(t *testing.T) {
	parse := func(args ...string) (node.Config, error) { return parseNodeFlags(t, args...) }
	for args, want := range map[string]time.Duration{"": node.DefaultCaptureGrace, "0": crawl.None, "90s": 90 * time.Second} {
		a := []string{}
		if args != "" {
			a = []string{"--capture-grace", args}
		}
		cfg, err := parse(a...)
		if err != nil || cfg.CaptureGrace != want {
			t.Errorf("%v: CaptureGrace %v, err %v; want %v", a, cfg.CaptureGrace, err, want)
		}
	}
	if _, err := parse("--capture-grace", "-1s"); err == nil || !strings.Contains(err.Error(), "--capture-grace") {
		t.Errorf("--capture-grace -1s: err %v, want one naming the flag", err)
	}
}

// lostGrace is the tests' --capture-grace: short, so that the test waits
// little; the default is minutes.
const lostGrace = 3 * time.Second

// TestLostCapturesFetchedAgain: 5 nodes crawl a synthetic web; one of them
// is killed with SIGKILL and its data dir deleted, taking its captures
// with it. After the grace period every page whose capture it held is
// fetched again, once, by the pages' owners (the dead node's successors
// for its own range), nothing else is fetched again, the done marks name
// the new captures (get verifies them), the survivors count the pages
// queued again in status and /metrics, and a swarm export is whole: every
// ground-truth page, each exactly once, every payload digest right.
func TestLostCapturesFetchedAgain(t *testing.T) {
	start := time.Now()
	bin := binary(t)
	cfg := synthweb.DefaultConfig()
	cfg.Seed = 29
	cfg.Hosts = 10
	web, err := synthweb.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	env := []string{"HTTP_PROXY=" + web.URL(), "http_proxy=" + web.URL(), "NO_PROXY=", "no_proxy="}
	// --hot-queue 3: owners hand hosts with a few queued pages to their
	// successors, so the victim holds captures of pages other (live)
	// nodes own, as a helper, beside those of its own pages.
	common := []string{"--delay", "20ms", "--max-depth", "100", "--discovery=false", "--capture-grace", lostGrace.String(), "--hot-queue", "3"}
	nodes := []*proc{startNode(t, bin, env, common...)}
	for range 4 {
		nodes = append(nodes, startNode(t, bin, env, append(slices.Clone(common), "--bootstrap", nodes[0].addrs[0])...))
	}
	waitRing(t, bin, nodes, 45*time.Second)
	if out, err := exec.Command(bin, append([]string{"seed", "--peer", nodes[1].addrs[0]}, web.Seeds()...)...).CombinedOutput(); err != nil {
		t.Fatalf("seed: %v\n%s", err, out)
	}
	truth := web.GroundTruth(token)
	for deadline := time.Now().Add(2 * time.Minute); len(web.Missing(token)) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("crawl incomplete: %d of %d pages missing", len(web.Missing(token)), len(truth))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The last pages' records, and their done marks on the replicas: a
	// mark the victim held alone would have its page fetched again by
	// the ordinary takeover, which this test does not count on.
	waitDoneMarksReplicated(t, bin, nodes, time.Minute)
	crawled := time.Since(start)
	if d := web.Duplicates(); len(d) > 0 {
		t.Fatalf("the crawl itself fetched pages twice (the test counts refetches): %v", d)
	}

	// The victim: the node holding the most captures, not the one the
	// test talks to.
	victim, lost := 0, map[string]bool{}
	for i, n := range nodes[:len(nodes)-1] {
		if got := responsesIn(t, filepath.Join(n.data, "warc")); len(got) > len(lost) {
			victim, lost = i, got
		}
	}
	if len(lost) == 0 {
		t.Fatal("no node holds any capture")
	}
	v := nodes[victim]
	helped := v.status(t, bin).Delegation.Helped
	if err := v.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-v.done
	if err := os.RemoveAll(v.data); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	mark := len(web.Log())
	survivors := slices.Delete(slices.Clone(nodes), victim, victim+1)
	t.Logf("killed node %d holding %d captures (of %d ground-truth pages, %d fetched as a helper for other owners) after %s of crawl", victim, len(lost), len(truth), helped, crawled.Round(time.Millisecond))

	// Every lost page is fetched again.
	refetched := func() map[string]int {
		by := map[string]int{}
		for _, r := range web.LogSince(mark) {
			if strings.HasSuffix(r.URL, "/robots.txt") || r.Status == 0 || r.Status == 429 || r.Status >= 500 {
				continue
			}
			by[r.URL]++
		}
		return by
	}
	for deadline := time.Now().Add(90 * time.Second); ; {
		got := refetched()
		missing := 0
		for u := range lost {
			if got[u] == 0 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d lost pages not fetched again %s after the kill (grace %s)\nsurvivor stderr:\n%s", missing, len(lost), time.Since(killed).Round(time.Second), lostGrace, tail(logOf(survivors[0]), 3000))
		}
		time.Sleep(200 * time.Millisecond)
	}
	allBack := time.Since(killed)
	// Then long enough for more scans (a scan every grace period at
	// least) to have queued any of them again, and for the new done
	// marks to reach their replicas.
	time.Sleep(3 * lostGrace)
	got := refetched()
	for u := range lost {
		if got[u] != 1 {
			t.Errorf("lost page %s fetched %d times after the kill, want once", u, got[u])
		}
	}
	for u, n := range got {
		if !lost[u] {
			t.Errorf("%s fetched %d times after the kill; its capture was not lost", u, n)
		}
	}

	// The survivors count what they queued again, in status and in
	// /metrics; pages whose done mark had not reached a replica at the
	// kill are fetched again by the ordinary takeover instead.
	var requeued int64
	metric := regexp.MustCompile(`(?m)^swarmcrawl_lost_captures_requeued_total (\d+)$`)
	for _, n := range survivors {
		st := n.status(t, bin)
		requeued += st.LostCaptures.Requeued
		if st.LostCaptures.Requeued > 0 {
			human, err := exec.Command(bin, "status", "--data", n.data).Output()
			if want := fmt.Sprintf("%d URLs queued again for lost captures", st.LostCaptures.Requeued); err != nil || !strings.Contains(string(human), want) {
				t.Errorf("status: %v, want a line saying %q:\n%s", err, want, human)
			}
		}
		_, body := apiGet(t, n.data, "/metrics")
		m := metric.FindSubmatch(body)
		if m == nil {
			t.Fatalf("/metrics lacks swarmcrawl_lost_captures_requeued_total")
		}
		if v, _ := strconv.ParseInt(string(m[1]), 10, 64); v != st.LostCaptures.Requeued {
			t.Errorf("/metrics says %d requeued, status %d", v, st.LostCaptures.Requeued)
		}
	}
	if requeued == 0 || requeued > int64(len(lost)) {
		t.Errorf("the survivors queued %d URLs again for %d lost captures", requeued, len(lost))
	}

	// The done marks name the new captures: get verifies them.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	victimID := v.addrs[0][strings.LastIndex(v.addrs[0], "/")+1:]
	checked := 0
	for u := range lost {
		if checked == 6 {
			break
		}
		checked++
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, "get", "--peer", survivors[0].addrs[0], u)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Errorf("get %s: %v\n%s", u, err, stderr.String())
			continue
		}
		if !strings.Contains(stderr.String(), "verified") || strings.Contains(stderr.String(), victimID) {
			t.Errorf("get %s: %q, want a verified capture not held by the dead node %s", u, stderr.String(), victimID)
		}
	}

	// A swarm export is whole: every ground-truth page exactly once, a
	// response for each, every payload digest right.
	out := t.TempDir()
	exportStart := time.Now()
	code, stdout, stderr := runExportCmd(t, bin, nil, "--swarm", "--peer", survivors[1].addrs[0], "--format", "folder", "--out", out)
	if code != 0 {
		t.Fatalf("export: exit %d\n%s%s", code, stdout, tail(stderr, 3000))
	}
	whole, exportTook := time.Since(killed), time.Since(exportStart)
	responses := map[string]int{}
	for _, name := range warcFilesIn(t, out) {
		recs, err := warcResponses(filepath.Join(out, exportArchiveDir, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			if strings.HasSuffix(rec.TargetURI, "/robots.txt") {
				continue
			}
			responses[rec.TargetURI]++
			i := bytes.Index(rec.Content, []byte("\r\n\r\n"))
			if d := rec.Header.Get("WARC-Payload-Digest"); i < 0 || warc.PayloadDigest(rec.Content[i+4:]) != d {
				t.Errorf("%s: the response of %s does not hash to its payload digest %s", name, rec.TargetURI, d)
			}
		}
	}
	listed := map[string]int{}
	pages := mustReadFile(t, filepath.Join(out, exportPagesFile))
	sc := bufio.NewScanner(bytes.NewReader(pages))
	sc.Buffer(nil, 16<<20)
	sc.Scan() // the header
	for sc.Scan() {
		var p struct{ URL string }
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		listed[p.URL]++
	}
	for _, u := range truth {
		if responses[u] != 1 {
			t.Errorf("the export holds %d responses of %s, want 1", responses[u], u)
		}
		if strings.HasSuffix(u, ".pdf") || strings.HasSuffix(u, ".png") || strings.Contains(u, "/old/") {
			continue // no page
		}
		if listed[u] != 1 {
			t.Errorf("%s listed %d times in pages.jsonl, want once", u, listed[u])
		}
	}
	robots := 0
	for _, r := range web.LogSince(mark) {
		if strings.HasSuffix(r.URL, "/robots.txt") {
			robots++
		}
	}
	t.Logf("%d captures lost; all fetched again %s after the kill (grace %s), %d of them queued again by the lost-capture watch, %d robots.txt requests since the kill; the export took %s and ended %s after the kill (the test waits %s for late refetches first); test wall %s",
		len(lost), allBack.Round(time.Millisecond), lostGrace, requeued, robots, exportTook.Round(time.Millisecond), whole.Round(time.Millisecond), 3*lostGrace, time.Since(start).Round(time.Millisecond))
}

// waitDoneMarksReplicated waits (bounded) until no node has work in
// flight, links to deliver or done marks its replicas have not been sent
// (status done_marks), twice in a row.
func waitDoneMarksReplicated(t *testing.T, bin string, nodes []*proc, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for calm := 0; calm < 2; {
		var busy []string
		for i, n := range nodes {
			st := n.status(t, bin)
			if d := st.DoneMarks; d.WaitingLinks+int(d.Unsent)+st.Outbox+int(st.Crawl.InFlight) > 0 {
				busy = append(busy, fmt.Sprintf("node %d: %d in flight, %d links to deliver, done marks %+v", i, st.Crawl.InFlight, st.Outbox, d))
			}
		}
		if len(busy) == 0 {
			calm++
		} else {
			calm = 0
		}
		if time.Now().After(deadline) {
			t.Fatalf("done marks still not at the replicas %s after the crawl: %v", timeout, busy)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// responsesIn returns the URLs of the response records in a node's WARC
// directory, robots.txt aside.
func responsesIn(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := warc.Files(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, path := range files {
		// An error is the open file's last record being written.
		recs, _ := warcResponses(path)
		for _, rec := range recs {
			if !strings.HasSuffix(rec.TargetURI, "/robots.txt") {
				out[rec.TargetURI] = true
			}
		}
	}
	return out
}

// waitRing waits until the nodes form one ring, every position of every
// node linked to the one before it (ringLinks, ringFormed), within a
// time, and fails the test if they do not.
func waitRing(t testing.TB, bin string, nodes []*proc, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; {
		ring := map[string]string{}
		var sts []node.Status
		for _, n := range nodes {
			st := n.status(t, bin)
			ringLinks(ring, st)
			sts = append(sts, st)
		}
		if ringFormed(ring, sts) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ring of %d did not form: %v", len(nodes), ring)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
