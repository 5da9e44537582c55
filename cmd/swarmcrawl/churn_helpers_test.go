package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
)

// Helpers of the churn tests (churn_test.go): a swarm of node processes
// crawling one synthetic web, each node sending its own User-Agent so that
// the web's request log tells which node made each request.

// failureTimeout is the --failure-timeout of every churn test node: short,
// so that failover happens within seconds.
const failureTimeout = 2 * time.Second

// shardFlags are the replication flags every churn test node runs with.
var shardFlags = []string{"--replicas", "2", "--failure-timeout", failureTimeout.String()}

// nodeStatus is `status --json` with the shard section of the replication
// contract decoded next to the fields node.Status already has.
type nodeStatus struct {
	node.Status
	Shard *shardStatus `json:"shard"`
}

// shardStatus is the "shard" object of the status JSON.
type shardStatus struct {
	Claims          []claimInfo `json:"claims"`
	LeaseValid      bool        `json:"lease_valid"`
	Degraded        bool        `json:"degraded"`
	StaleRejections int64       `json:"stale_rejections"`
	RejectedWrites  int64       `json:"rejected_writes"`
	Promotions      int64       `json:"promotions"`
	HandoffsOut     int64       `json:"handoffs_out"`
	HandoffsIn      int64       `json:"handoffs_in"`
	MergesIn        int64       `json:"merges_in"`
}

// claimInfo is one claim: the ring range (From, To] in hex (From == To is
// the whole ring) held at an epoch.
type claimInfo struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Epoch uint64 `json:"epoch"`
	Owner string `json:"owner"`
}

func (s *shardStatus) String() string {
	if s == nil {
		return "shard: (absent)"
	}
	var claims []string
	for _, c := range s.Claims {
		claims = append(claims, fmt.Sprintf("(%s,%s]@%d", c.From, c.To, c.Epoch))
	}
	return fmt.Sprintf("shard: claims %v lease_valid=%v degraded=%v stale_rejections=%d rejected_writes=%d promotions=%d handoffs_out=%d handoffs_in=%d merges_in=%d",
		claims, s.LeaseValid, s.Degraded, s.StaleRejections, s.RejectedWrites, s.Promotions, s.HandoffsOut, s.HandoffsIn, s.MergesIn)
}

// memberState is what the test did to a node process last.
type memberState int

const (
	running memberState = iota
	killed
	stopped
	exited
)

func (s memberState) String() string {
	return [...]string{"running", "killed (SIGKILL)", "stopped (SIGSTOP)", "exited (SIGTERM)"}[s]
}

// member is one node of the swarm, across restarts on its data dir.
type member struct {
	name string   // node-N, also its User-Agent tag
	args []string // node flags, reused on restart
	p    *proc    // current process
	past []*proc  // processes killed before p was started
	// restarted holds when each process after the first was started.
	restarted []time.Time
	// killed holds, for each process in start order, when it was killed
	// with SIGKILL (zero if it was not).
	killed []time.Time
	state  memberState
}

// swarm is a set of node processes crawling one synthetic web through
// HTTP_PROXY. Every node tags its User-Agent with its name.
type swarm struct {
	t      testing.TB
	bin    string
	web    *synthweb.Web
	env    []string
	delay  time.Duration
	common []string
	truth  []string
	start  time.Time
	nodes  []*member
}

// startCrawl starts n nodes, waits until they form one ring, seeds the
// crawl through the second node and waits until share of the ground truth
// is fetched.
func (s *swarm) startCrawl(n int, share float64) {
	for range n {
		s.add()
	}
	s.waitRing(60 * time.Second)
	s.seed(s.nodes[1])
	s.waitFetched(share, 90*time.Second)
}

// newSwarm starts the synthetic web for cfg; nodes are added with add.
func newSwarm(t testing.TB, cfg synthweb.Config, delay time.Duration) *swarm {
	t.Helper()
	// Unlike binary(t), no skip under -short: these tests are the proof
	// that the swarm survives churn, and each stays within minutes.
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	web, err := synthweb.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(web.Close)
	s := &swarm{
		t: t, bin: bin, web: web, delay: delay, start: time.Now(),
		env: []string{"HTTP_PROXY=" + web.URL(), "http_proxy=" + web.URL(), "NO_PROXY=", "no_proxy="},
		// --max-depth: see TestSwarmCrawlsSyntheticWeb; full coverage needs a loose cap.
		common: append([]string{"--delay", delay.String(), "--max-depth", "100", "--log-level", "debug"}, shardFlags...),
		truth:  web.GroundTruth(token),
	}
	return s
}

// userAgent is the User-Agent of the node named name: its product token is
// the crawler's ("swarmcrawl"), so robots.txt applies to every node alike,
// and the comment names the node for the request log.
func userAgent(name string) string { return "swarmcrawl/0.1 (" + name + ")" }

var agentTag = regexp.MustCompile(`\((node-\d+)\)$`)

// nodeOf returns the name of the node that made a logged request, "" if
// its User-Agent carries no node tag.
func nodeOf(r synthweb.Request) string {
	if m := agentTag.FindStringSubmatch(r.UserAgent); m != nil {
		return m[1]
	}
	return ""
}

// add starts a node; every node after the first joins through the first.
func (s *swarm) add() *member {
	s.t.Helper()
	name := fmt.Sprintf("node-%d", len(s.nodes))
	args := append(slices.Clone(s.common), "--user-agent", userAgent(name))
	if len(s.nodes) > 0 {
		args = append(args, "--bootstrap", s.nodes[0].p.addrs[0])
	}
	m := &member{name: name, args: args, p: startNode(s.t, s.bin, s.env, args...)}
	s.nodes = append(s.nodes, m)
	return m
}

// live returns the members whose process the test has not killed or stopped.
func (s *swarm) live() []*member {
	var out []*member
	for _, m := range s.nodes {
		if m.state == running {
			out = append(out, m)
		}
	}
	return out
}

// kill sends SIGKILL and waits for the process to be gone.
func (s *swarm) kill(m *member) {
	s.t.Helper()
	if err := m.p.cmd.Process.Kill(); err != nil {
		s.t.Fatalf("kill %s: %v", m.name, err)
	}
	select {
	case <-m.p.done:
	case <-time.After(10 * time.Second):
		s.t.Fatalf("%s did not die after SIGKILL", m.name)
	}
	m.killed = append(m.killed, make([]time.Time, len(m.restarted)+1-len(m.killed))...)
	m.killed[len(m.restarted)] = time.Now()
	m.state = killed
}

// restart starts a killed member again on its data dir with its flags.
func (s *swarm) restart(m *member) {
	s.t.Helper()
	if m.state != killed {
		s.t.Fatalf("restart %s: it is %v", m.name, m.state)
	}
	m.past = append(m.past, m.p)
	m.restarted = append(m.restarted, time.Now())
	m.p = startNodeIn(s.t, s.bin, m.p.data, s.env, m.args...)
	m.state = running
}

// signal sends SIGSTOP or SIGCONT.
func (s *swarm) signal(m *member, sig syscall.Signal) {
	s.t.Helper()
	if err := m.p.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("%v to %s: %v", sig, m.name, err)
	}
	if sig == syscall.SIGSTOP {
		m.state = stopped
	} else {
		m.state = running
	}
}

// status asks a node's HTTP API for its status, giving up after timeout
// (a stopped or dead node does not answer).
func (m *member) status(timeout time.Duration) (nodeStatus, error) {
	var st nodeStatus
	addr, err := apiAddr("", m.p.data)
	if err != nil {
		return st, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/status", nil)
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, fmt.Errorf("status of %s: %w", m.name, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return st, fmt.Errorf("status of %s: %w", m.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("status of %s: %s", m.name, resp.Status)
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, fmt.Errorf("status of %s: %w\n%s", m.name, err, raw)
	}
	return st, nil
}

// statuses returns the status of every live member, failing the test if
// one does not answer.
func (s *swarm) statuses() map[*member]nodeStatus {
	s.t.Helper()
	out := map[*member]nodeStatus{}
	for _, m := range s.live() {
		st, err := m.status(10 * time.Second)
		if err != nil {
			s.t.Fatal(err)
		}
		out[m] = st
	}
	return out
}

// ringSummary describes, one line per member, what the test did to it
// and, for those that answered, their ring neighbours and shard state.
func (s *swarm) ringSummary(sts map[*member]nodeStatus) string {
	var b strings.Builder
	for _, m := range s.nodes {
		st, ok := sts[m]
		if !ok {
			fmt.Fprintf(&b, "\n  %s: %v, no status", m.name, m.state)
			continue
		}
		pred := "(unknown)"
		if st.Predecessor != nil {
			pred = st.Predecessor.RingID
		}
		fmt.Fprintf(&b, "\n  %s: ring %s pred %s, %v", m.name, st.RingID, pred, st.Shard)
	}
	return b.String()
}

// waitRing waits until the live members form one ring: following first
// successors visits all of them.
func (s *swarm) waitRing(timeout time.Duration) {
	s.t.Helper()
	live := s.live()
	deadline := time.Now().Add(timeout)
	for {
		next := map[string]string{} // position's ring id -> its predecessor's
		var sts []node.Status
		complete := true
		for _, m := range live {
			st, err := m.status(5 * time.Second)
			if err != nil {
				complete = false
				continue
			}
			ringLinks(next, st.Status)
			sts = append(sts, st.Status)
		}
		if complete && ringFormed(next, sts) {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the %d live nodes did not form one ring in %v: successor map %v", len(live), timeout, next)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// seed submits the web's seeds through member m and checks that all were
// accepted (new, already seen or pending delivery).
func (s *swarm) seed(m *member) {
	s.t.Helper()
	seeds := s.web.Seeds()
	out, err := exec.Command(s.bin, append([]string{"seed", "--peer", m.p.addrs[0]}, seeds...)...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("seed: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("accepted %d of %d seeds", len(seeds), len(seeds)); !strings.Contains(string(out), want) {
		s.t.Fatalf("seed output %q, want %q", out, want)
	}
}

// fetched returns how many ground-truth pages have been fetched.
func (s *swarm) fetched() int { return len(s.truth) - len(s.web.Missing(token)) }

// waitFetched waits until at least frac of the ground truth is fetched.
func (s *swarm) waitFetched(frac float64, timeout time.Duration) {
	s.t.Helper()
	want := int(frac * float64(len(s.truth)))
	deadline := time.Now().Add(timeout)
	for s.fetched() < want {
		if time.Now().After(deadline) {
			s.t.Fatalf("crawl too slow: %d of %d pages after %v, waited for %d", s.fetched(), len(s.truth), timeout, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitComplete waits until every ground-truth page is fetched.
func (s *swarm) waitComplete(timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		missing := s.web.Missing(token)
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("crawl incomplete after %v: %d of %d ground-truth pages never fetched, e.g. %v",
				timeout, len(missing), len(s.truth), missing[:min(5, len(missing))])
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitQuiet waits (bounded) until no live node has queued, in-flight or
// undelivered work, so that late duplicate fetches show up in the log.
func (s *swarm) waitQuiet(timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	calm := 0
	for calm < 2 {
		busy := []string{}
		for m, st := range s.statuses() {
			if st.Crawl.Queued+st.Crawl.InFlight > 0 || st.Outbox > 0 {
				busy = append(busy, fmt.Sprintf("%s (%d queued, %d in flight, %d outbox)", m.name, st.Crawl.Queued, st.Crawl.InFlight, st.Outbox))
			}
		}
		if len(busy) == 0 {
			calm++
		} else {
			calm = 0
		}
		if time.Now().After(deadline) {
			s.t.Logf("nodes still busy %v after full coverage: %v", timeout, busy)
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// extraFetches counts page fetches beyond the first of each URL (the ones
// synthweb's Duplicates reports; retries, abandoned requests and
// conditional recrawls excluded).
func (s *swarm) extraFetches() (int, []string) {
	s.t.Helper()
	dups := s.web.Duplicates()
	n := 0
	for _, d := range dups {
		f := strings.Fields(d) // "<url> requested <n> times ..."
		if len(f) < 4 || f[1] != "requested" || f[3] != "times" {
			s.t.Fatalf("unexpected Duplicates entry %q", d)
		}
		k, err := strconv.Atoi(f[2])
		if err != nil {
			s.t.Fatalf("unexpected Duplicates entry %q: %v", d, err)
		}
		n += k - 1
	}
	return n, dups
}

// checkCrawlQuality asserts that there are at most maxExtra duplicate
// fetches and that no request broke robots.txt or politeness.
func (s *swarm) checkCrawlQuality(maxExtra int) {
	s.t.Helper()
	extra, dups := s.extraFetches()
	if extra > maxExtra {
		s.t.Errorf("%d duplicate fetches (%d URLs), %.2f%% of %d pages; at most %d (%.2f%%) allowed: %v",
			extra, len(dups), 100*float64(extra)/float64(len(s.truth)), len(s.truth), maxExtra,
			100*float64(maxExtra)/float64(len(s.truth)), dups[:min(10, len(dups))])
	}
	s.checkRules()
}

// checkKillDuplicates asserts that the fetches repeated after SIGKILLs are
// the pages the killed processes fetched last: every repeat of a page
// follows an answer to a process killed at most window(process) later (a
// page is reported done to the replicas once its links are settled with
// their owners, and the killed process took the report of its last pages
// with it), except at most maxOther repeats; and that no request broke
// robots.txt or politeness. It returns how many repeats the kills explain
// and the oldest such answer's age at its kill.
func (s *swarm) checkKillDuplicates(window func(*proc) time.Duration, maxOther int) (explained int, oldest time.Duration) {
	s.t.Helper()
	var other []string
	for u, reqs := range s.web.Repeated() {
		for i, r := range reqs[1:] {
			first := reqs[i] // the fetch this one repeats
			if p, age, ok := s.killedAfter(first); ok && age <= window(p) {
				explained++
				oldest = max(oldest, age)
				continue
			}
			other = append(other, fmt.Sprintf("%s by %s at %v, again by %s at %v", u,
				s.process(first), first.Time.Sub(s.start).Round(time.Millisecond),
				s.process(r), r.Time.Sub(s.start).Round(time.Millisecond)))
		}
	}
	sort.Strings(other)
	if len(other) > maxOther {
		s.t.Errorf("%d fetches repeat a page that no process killed within its window of unreported pages after its answer had fetched; at most %d allowed: %v",
			len(other), maxOther, other[:min(10, len(other))])
	}
	s.checkRules()
	return explained, oldest
}

// killedAfter reports whether the process that made r was killed with
// SIGKILL after r was answered, which process, and how long after.
func (s *swarm) killedAfter(r synthweb.Request) (*proc, time.Duration, bool) {
	name := nodeOf(r)
	for _, m := range s.nodes {
		if m.name != name {
			continue
		}
		i := incarnation(m, r.Time)
		if i >= len(m.killed) || m.killed[i].IsZero() || r.Answered().IsZero() {
			return nil, 0, false
		}
		p := m.p
		if i < len(m.past) {
			p = m.past[i]
		}
		return p, m.killed[i].Sub(r.Answered()), true
	}
	return nil, 0, false
}

// checkRules asserts that no request broke robots.txt or politeness and
// that every request names its node.
func (s *swarm) checkRules() {
	s.t.Helper()
	if v := s.web.CheckRobots(token); len(v) > 0 {
		s.t.Errorf("%d robots.txt violations, e.g. %v", len(v), v[:min(5, len(v))])
	}
	if v := s.web.CheckPoliteness(s.delay); len(v) > 0 {
		s.t.Errorf("%d politeness violations, e.g. %v\n%s", len(v), v[:min(5, len(v))], s.explainPoliteness(v))
	}
	if bad := s.unattributed(); bad > 0 {
		s.t.Errorf("%d requests without a node tag in their User-Agent", bad)
	}
}

// explainPoliteness lists, for the hosts of the first violations, which
// node made each of the host's requests, to tell a handoff race from a
// single node's bug.
func (s *swarm) explainPoliteness(violations []string) string {
	var b strings.Builder
	hosts := map[string]bool{}
	for _, v := range violations[:min(3, len(violations))] {
		host, _, _ := strings.Cut(v, ":")
		hosts[host] = true
	}
	for _, r := range s.web.Log() {
		if hosts[r.Host] {
			fmt.Fprintf(&b, "  %s %s%s by %s (status %d)\n", r.Time.Sub(s.start).Round(time.Millisecond), r.Host, r.Path, nodeOf(r), r.Status)
		}
	}
	return b.String()
}

// unattributed counts logged requests whose node is unknown.
func (s *swarm) unattributed() int {
	n := 0
	for _, r := range s.web.Log() {
		if nodeOf(r) == "" {
			n++
		}
	}
	return n
}

// process names the node process that made a logged request: the node's
// name, with "#2", "#3"... for the processes restarted on its data dir.
// (A process killed with SIGKILL makes no request after it died, so the
// request's arrival time tells the process.)
func (s *swarm) process(r synthweb.Request) string {
	name := nodeOf(r)
	for _, m := range s.nodes {
		if m.name == name {
			return processName(m, r.Time)
		}
	}
	return name
}

// processName names m's process that ran at time at (see swarm.process).
func processName(m *member, at time.Time) string {
	if len(m.restarted) == 0 {
		return m.name
	}
	return fmt.Sprintf("%s#%d", m.name, incarnation(m, at)+1)
}

// incarnation is the index, in start order, of m's process that ran at
// time at.
func incarnation(m *member, at time.Time) int {
	n := 0
	for _, r := range m.restarted {
		if !at.Before(r) {
			n++
		}
	}
	return n
}

// requestsByNode counts logged requests (robots.txt included) per node.
func (s *swarm) requestsByNode(log []synthweb.Request) map[string]int {
	out := map[string]int{}
	for _, r := range log {
		out[nodeOf(r)]++
	}
	return out
}

// crossNodeOverlaps returns, for requests that arrived at or after from,
// the hosts that two node processes (named by who) were crawling at
// overlapping times: the span from one process's first to its last
// request to the host intersects another's span. A clean handoff of a
// host leaves the spans disjoint. Times are shown relative to t0.
func crossNodeOverlaps(log []synthweb.Request, who func(synthweb.Request) string, from, t0 time.Time) []string {
	type span struct{ first, last time.Time }
	spans := map[string]map[string]*span{} // host -> node -> span
	for _, r := range log {
		if r.Time.Before(from) {
			continue
		}
		n := who(r)
		if spans[r.Host] == nil {
			spans[r.Host] = map[string]*span{}
		}
		sp := spans[r.Host][n]
		if sp == nil {
			spans[r.Host][n] = &span{r.Time, r.Time}
			continue
		}
		sp.last = r.Time
	}
	var out []string
	for host, byNode := range spans {
		names := make([]string, 0, len(byNode))
		for n := range byNode {
			names = append(names, n)
		}
		sort.Strings(names)
		for i, a := range names {
			for _, b := range names[i+1:] {
				x, y := byNode[a], byNode[b]
				if !x.first.After(y.last) && !y.first.After(x.last) {
					out = append(out, fmt.Sprintf("%s: %s requested it during [%v, %v] and %s during [%v, %v]",
						host, a, x.first.Sub(t0).Round(time.Millisecond), x.last.Sub(t0).Round(time.Millisecond),
						b, y.first.Sub(t0).Round(time.Millisecond), y.last.Sub(t0).Round(time.Millisecond)))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// hostRuns describes, per host, who requested it as runs of consecutive
// requests by one node with the run's start time relative to t0:
// "node-2 x5 @1.2s, node-3 x4 @7.9s". nodes counts the distinct nodes.
func hostRuns(log []synthweb.Request, t0 time.Time) (runs map[string]string, nodes map[string]int) {
	type run struct {
		node  string
		n     int
		start time.Time
	}
	byHost := map[string][]run{}
	seen := map[string]map[string]bool{}
	for _, r := range log {
		n := nodeOf(r)
		rs := byHost[r.Host]
		if len(rs) > 0 && rs[len(rs)-1].node == n {
			rs[len(rs)-1].n++
		} else {
			rs = append(rs, run{n, 1, r.Time})
		}
		byHost[r.Host] = rs
		if seen[r.Host] == nil {
			seen[r.Host] = map[string]bool{}
		}
		seen[r.Host][n] = true
	}
	runs, nodes = map[string]string{}, map[string]int{}
	for host, rs := range byHost {
		parts := make([]string, len(rs))
		for i, r := range rs {
			parts[i] = fmt.Sprintf("%s x%d @%v", r.node, r.n, r.start.Sub(t0).Round(time.Millisecond))
		}
		runs[host] = strings.Join(parts, ", ")
		nodes[host] = len(seen[host])
	}
	return runs, nodes
}

// sharedHosts describes the hosts that more than one node requested, as
// "host: runs" (see hostRuns), sorted by host.
func sharedHosts(log []synthweb.Request, t0 time.Time) []string {
	runs, nodes := hostRuns(log, t0)
	var out []string
	for host, desc := range runs {
		if nodes[host] > 1 {
			out = append(out, host+": "+desc)
		}
	}
	sort.Strings(out)
	return out
}

// robotsRefetched lists the hosts whose robots.txt was requested more
// than once, with the nodes that asked, in order.
func robotsRefetched(log []synthweb.Request) []string {
	by := map[string][]string{}
	for _, r := range log {
		if r.Path == "/robots.txt" {
			by[r.Host] = append(by[r.Host], nodeOf(r))
		}
	}
	var out []string
	for host, nodes := range by {
		if len(nodes) > 1 {
			out = append(out, host+": "+strings.Join(nodes, ", "))
		}
	}
	sort.Strings(out)
	return out
}

// parseRingID parses a ring position written in hex, with or without 0x.
func parseRingID(s string) (uint64, error) {
	return strconv.ParseUint(strings.TrimPrefix(strings.ToLower(s), "0x"), 16, 64)
}

// arcLen is the number of keys in (from, to]; from == to is the whole ring.
func arcLen(from, to uint64) *big.Int {
	if from == to {
		return new(big.Int).Lsh(big.NewInt(1), 64)
	}
	return new(big.Int).SetUint64(to - from)
}

// inArc reports whether k is in (from, to].
func inArc(k, from, to uint64) bool {
	if from == to {
		return true
	}
	return k-from-1 < to-from // k-from in [1, to-from]
}

// claimsKey reports whether one of the claims contains ring key k.
func claimsKey(sh *shardStatus, k uint64) bool {
	for _, c := range sh.Claims {
		from, err1 := parseRingID(c.From)
		to, err2 := parseRingID(c.To)
		if err1 == nil && err2 == nil && inArc(k, from, to) {
			return true
		}
	}
	return false
}

// claimProblems returns why the live nodes' claims do not partition the
// ring (every key claimed by exactly one live node), nil if they do.
func claimProblems(sts map[*member]nodeStatus) []string {
	type arc struct {
		node     string
		from, to uint64
	}
	var arcs []arc
	var problems []string
	for m, st := range sts {
		if st.Shard == nil {
			problems = append(problems, m.name+" reports no shard section")
			continue
		}
		for _, c := range st.Shard.Claims {
			from, err1 := parseRingID(c.From)
			to, err2 := parseRingID(c.To)
			if err1 != nil || err2 != nil {
				problems = append(problems, fmt.Sprintf("%s: unparsable claim %+v", m.name, c))
				continue
			}
			arcs = append(arcs, arc{m.name, from, to})
		}
	}
	total := new(big.Int)
	for i, a := range arcs {
		total.Add(total, arcLen(a.from, a.to))
		for _, b := range arcs[i+1:] {
			if inArc(a.to, b.from, b.to) || inArc(b.to, a.from, a.to) {
				problems = append(problems, fmt.Sprintf("claims overlap: %s (%016x,%016x] and %s (%016x,%016x]", a.node, a.from, a.to, b.node, b.from, b.to))
			}
		}
	}
	if ring := arcLen(0, 0); total.Cmp(ring) != 0 {
		problems = append(problems, fmt.Sprintf("claims cover %s of %s ring keys", total, ring))
	}
	return problems
}

// waitClaimsPartition waits (bounded) until the live nodes' claims
// partition the ring and returns the statuses that showed it.
func (s *swarm) waitClaimsPartition(timeout time.Duration) map[*member]nodeStatus {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		sts := s.statuses()
		problems := claimProblems(sts)
		if len(problems) == 0 {
			return sts
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("after %v the live nodes' claims still do not partition the ring: %v", timeout, problems)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// report logs, when the test failed, every node's state, a status summary
// and the end of its log; use it with defer right after newSwarm.
func (s *swarm) report() {
	if !s.t.Failed() {
		if os.Getenv("SWARMCRAWL_TEST_LOGS_ALL") != "" {
			s.keepLogs()
		}
		return
	}
	log := s.web.Log()
	counts := s.requestsByNode(log)
	shared := sharedHosts(log, s.start)
	s.t.Logf("%d of %d ground-truth pages fetched; %d hosts were requested by more than one node (runs of requests by one node, from the test's start):\n  %s",
		s.fetched(), len(s.truth), len(shared), strings.Join(shared[:min(15, len(shared))], "\n  "))
	if missing := s.web.Missing(token); len(missing) > 0 {
		runs, _ := hostRuns(log, s.start)
		var lines []string
		for _, u := range missing[:min(40, len(missing))] {
			host := strings.TrimPrefix(u, "http://")
			host, _, _ = strings.Cut(host, "/")
			if d, ok := runs[host]; ok && !slices.Contains(lines, host+": "+d) {
				lines = append(lines, host+": "+d)
			} else if !ok && !slices.Contains(lines, host+": never requested") {
				lines = append(lines, host+": never requested")
			}
		}
		s.t.Logf("who requested the hosts of the first missing pages:\n  %s", strings.Join(lines[:min(8, len(lines))], "\n  "))
	}
	for _, m := range s.nodes {
		var b strings.Builder
		fmt.Fprintf(&b, "=== %s: %v, %d requests in the web's log, data %s\n", m.name, m.state, counts[m.name], m.p.data)
		if m.state == running {
			if st, err := m.status(5 * time.Second); err != nil {
				fmt.Fprintf(&b, "status: %v\n", err)
			} else {
				pred := "(unknown)"
				if st.Predecessor != nil {
					pred = st.Predecessor.RingID
				}
				fmt.Fprintf(&b, "ring %s pred %s succs %d range (%s,%s] seen %d pages %d outbox %d queued %d in flight %d fetched %d errors %d\n%v\n",
					st.RingID, pred, len(st.Successors), st.Range.From, st.Range.To, st.Seen, st.Pages, st.Outbox,
					st.Crawl.Queued, st.Crawl.InFlight, st.Crawl.Fetched, st.Crawl.Errors, st.Shard)
			}
		}
		for i, p := range m.past {
			fmt.Fprintf(&b, "--- log of process %d (killed), last lines:\n%s\n", i+1, lastLines(logOf(p), 15))
		}
		fmt.Fprintf(&b, "--- log, last lines:\n%s", lastLines(logOf(m.p), 40))
		s.t.Log(b.String())
	}
	s.keepLogs()
}

// keepLogs writes every node's whole log, its killed processes' too,
// under $SWARMCRAWL_TEST_LOGS/<test>/ when that is set: the report shows
// only their last lines, and a rare failure needs all of them.
func (s *swarm) keepLogs() {
	root := os.Getenv("SWARMCRAWL_TEST_LOGS")
	if root == "" {
		return
	}
	dir := filepath.Join(root, strings.ReplaceAll(s.t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		s.t.Logf("keep logs: %v", err)
		return
	}
	for _, m := range s.nodes {
		for i, p := range append(slices.Clone(m.past), m.p) {
			name := filepath.Join(dir, fmt.Sprintf("%s.%d.log", m.name, i+1))
			if err := os.WriteFile(name, []byte(logOf(p)), 0o644); err != nil {
				s.t.Logf("keep logs: %v", err)
			}
		}
	}
	for _, m := range s.nodes {
		// A running node's store, copied live: leveldb recovers its journal
		// when the copy is opened.
		if out, err := exec.Command("cp", "-a", m.p.data, filepath.Join(dir, m.name+".data")).CombinedOutput(); err != nil {
			s.t.Logf("keep logs: copy %s: %v: %s", m.p.data, err, out)
		}
	}
	var web strings.Builder
	for _, r := range s.web.Log() {
		fmt.Fprintf(&web, "%v %s %s %d %s\n", r.Time.Sub(s.start).Round(time.Millisecond), nodeOf(r), r.URL, r.Status, r.Time.UTC().Format(time.RFC3339Nano))
	}
	if err := os.WriteFile(filepath.Join(dir, "web.log"), []byte(web.String()), 0o644); err != nil {
		s.t.Logf("keep logs: %v", err)
	}
	s.t.Logf("whole logs kept in %s", dir)
}

// logOf returns what a node process has written to stderr so far.
func logOf(p *proc) string {
	if lw, ok := p.cmd.Stderr.(*lockedWriter); ok {
		lw.mu.Lock()
		defer lw.mu.Unlock()
	}
	return p.stderr.String()
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
