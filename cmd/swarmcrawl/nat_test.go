//go:build linux

package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
)

// natMember is one node process of the NAT test.
type natMember struct {
	member
	role string // its namespace
	lan  int    // 1 or 2 behind a NAT router, 0 on the public segment
	id   string // peer ID
	port string // TCP port it listens on
}

// natSwarm is the NAT test's swarm: nodes in the namespaces of a netTopo,
// crawling a synthetic web served on the public segment.
type natSwarm struct {
	t      *testing.T
	bin    string
	topo   *netTopo
	web    *synthweb.Web
	env    []string
	common []string
	nodes  []*natMember
}

// natRingWork is the ring work of the NAT test's swarm (testRingWork).
const natRingWork p2p.RingWork = 8

// natDelay is the politeness delay of the NAT test's nodes.
const natDelay = 50 * time.Millisecond

// nodeArgs returns the flags of a node named name listening on listen.
func (s *natSwarm) nodeArgs(name, data, listen string, extra ...string) []string {
	args := []string{"node", "--data", data, "--listen", listen, "--api", "127.0.0.1:0", "--user-agent", userAgent(name), "--ring-work", testRingWork}
	return append(append(args, s.common...), extra...)
}

// start runs a node in the namespace of role and waits until it listens.
func (s *natSwarm) start(role string, lan int, data, listen string, extra ...string) *natMember {
	s.t.Helper()
	name := fmt.Sprintf("node-%d", len(s.nodes))
	args := s.nodeArgs(name, data, listen, extra...)
	p := startProc(s.t, s.topo.command(role, s.env, s.bin, args...), data)
	m := &natMember{member: member{name: name, args: args, p: p}, role: role, lan: lan, port: listen[strings.LastIndex(listen, "/")+1:]}
	s.nodes = append(s.nodes, m)
	if st, err := s.status(m); err == nil {
		m.id = st.PeerID
	} else {
		s.t.Fatal(err)
	}
	return m
}

// addrOn returns m's address on ip, a local address of its namespace:
// its listen port there, with its peer ID.
func (m *natMember) addrOn(ip string) string {
	return fmt.Sprintf("/ip4/%s/tcp/%s/p2p/%s", ip, m.port, m.id)
}

func (s *natSwarm) status(m *natMember) (nodeStatus, error) {
	st, err := s.topo.status(m.role, m.p.data)
	if err != nil {
		return st, fmt.Errorf("%s (%s): %w", m.name, m.role, err)
	}
	return st, nil
}

// statuses returns the status of every live node, failing the test if
// one does not answer.
func (s *natSwarm) statuses() map[*natMember]nodeStatus {
	s.t.Helper()
	out := map[*natMember]nodeStatus{}
	for _, m := range s.nodes {
		if m.state != running {
			continue
		}
		st, err := s.status(m)
		if err != nil {
			s.t.Fatal(err)
		}
		out[m] = st
	}
	return out
}

// waitFor polls cond every 300ms until it returns "" (done), failing the
// test with its last answer after timeout.
func (s *natSwarm) waitFor(what string, timeout time.Duration, cond func() string) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		why := cond()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: not after %v: %s", what, timeout, why)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// logs returns the end of every node's log, for a failure message.
func (s *natSwarm) logs() string {
	var b strings.Builder
	for _, m := range s.nodes {
		fmt.Fprintf(&b, "\n--- %s (%s, %v):\n%s", m.name, m.role, m.state, lastLines(logOf(m.p), 15))
	}
	return b.String()
}

// lanOf returns the LAN of the node with peer ID id, -1 if none is known.
func (s *natSwarm) lanOf(id string) int {
	for _, m := range s.nodes {
		if m.id == id {
			return m.lan
		}
	}
	return -1
}

// TestNATTraversal puts four of six peers of a private swarm behind two
// NAT routers (two LANs of two) in network namespaces: a bootstrap node
// and a relay (--relay-service) on the public segment. Without the relay,
// the NATed peers refuse to start with one line. With it, they reserve a
// slot, advertise their relayed addresses and join; peers in different
// LANs end up directly connected by hole punching (DCUtR, TCP
// simultaneous open: a private swarm runs over TCP only); the NATed peers
// hold ranges; a synthetic web is crawled to the last page, politely,
// while a NATed peer is killed and its range taken over.
func TestNATTraversal(t *testing.T) {
	topo := newNetTopo(t)
	bin := binary(t)
	began := time.Now()

	dir := t.TempDir()
	keyFile := filepath.Join(dir, "swarm.key")
	if out, err := exec.Command(bin, "swarm-key", "--out", keyFile).CombinedOutput(); err != nil {
		t.Fatalf("swarm-key: %v\n%s", err, out)
	}
	ln, err := topo.listen(nsPub, webIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := synthweb.DefaultConfig()
	cfg.Seed = 11
	cfg.Hosts = 24
	cfg.PagesPerHost = 24
	web, err := synthweb.Serve(cfg, ln)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(web.Close)
	s := &natSwarm{
		t: t, bin: bin, topo: topo, web: web,
		env: []string{"HTTP_PROXY=" + web.URL(), "http_proxy=" + web.URL(), "NO_PROXY=", "no_proxy="},
		common: []string{"--swarm-key", keyFile, "--delay", natDelay.String(), "--max-depth", "100",
			"--discovery=false", "--replicas", "2", "--failure-timeout", "5s"},
	}
	// NATTEST_GOLOG sets the nodes' libp2p log levels, to see what hole
	// punching does: NATTEST_GOLOG=error,p2p-holepunch=debug.
	if lv := os.Getenv("NATTEST_GOLOG"); lv != "" {
		s.env = append(s.env, "GOLOG_LOG_LEVEL="+lv)
	}
	defer func() {
		if t.Failed() {
			t.Logf("node logs:%s", s.logs())
		}
	}()

	boot := s.start(nsBoot, 0, t.TempDir(), "/ip4/0.0.0.0/tcp/4001", "--reachability", "public")
	bootAddr := boot.addrOn(bootIP)
	// The relay's identity is made first, so that the NATed peers can be
	// pointed at it before it runs.
	relayData := t.TempDir()
	relayKey, err := p2p.LoadOrCreateIdentity(context.Background(), relayData, natRingWork)
	if err != nil {
		t.Fatal(err)
	}
	relayID, err := peer.IDFromPrivateKey(relayKey)
	if err != nil {
		t.Fatal(err)
	}
	relayAddr := fmt.Sprintf("/ip4/%s/tcp/4001/p2p/%s", relayIP, relayID)

	lans := []struct {
		role   string
		lan    int
		listen string
	}{
		{nsL1A, 1, "/ip4/0.0.0.0/tcp/4101"}, {nsL1B, 1, "/ip4/0.0.0.0/tcp/4102"},
		{nsL2A, 2, "/ip4/0.0.0.0/tcp/4201"}, {nsL2B, 2, "/ip4/0.0.0.0/tcp/4202"},
	}
	natFlags := []string{"--bootstrap", bootAddr, "--reachability", "private", "--relay", relayAddr}

	// Without the relay: each NATed peer says in one line that no peer
	// could reach it, and exits.
	noRelay := time.Now()
	lines := make([]string, len(lans))
	var wg sync.WaitGroup
	for i, l := range lans {
		wg.Go(func() {
			args := s.nodeArgs("node-x", t.TempDir(), l.listen, append(slices.Clone(natFlags), "--reservation-timeout", "8s")...)
			lines[i] = runFailsIn(topo, l.role, s.env, bin, args)
		})
	}
	wg.Wait()
	for i, line := range lines {
		if !strings.HasPrefix(line, "swarmcrawl node: start: unreachable: this node is behind NAT") || !strings.Contains(line, relayID.String()) {
			t.Fatalf("NATed peer in %s without its relay: %q, want one line saying it is unreachable and naming the relay", lans[i].role, line)
		}
	}
	t.Logf("without the relay, every NATed peer refused to start in %v: %s", time.Since(noRelay).Round(time.Second), lines[0])

	relay := s.start(nsRelay, 0, relayData, "/ip4/0.0.0.0/tcp/4001", "--relay-service", "--bootstrap", bootAddr)
	for _, l := range lans {
		s.start(l.role, l.lan, t.TempDir(), l.listen, natFlags...)
	}
	joined := time.Now()

	// All join: one ring of six. The NATed peers are private, hold a
	// reservation on the relay and advertise the relayed address.
	s.waitFor("one ring of six, NATed peers reserved on the relay", 60*time.Second, func() string {
		sts := s.statuses()
		next := map[string]string{}
		var all []node.Status
		for m, st := range sts {
			ringLinks(next, st.Status)
			all = append(all, st.Status)
			if m.lan == 0 {
				continue
			}
			n := st.NAT
			if n.Reachability != "private" || !slices.Contains(n.Reservations, relayID.String()) || n.Unreachable != "" {
				return fmt.Sprintf("%s: reachability %s, reservations %v, %q", m.name, n.Reachability, n.Reservations, n.Unreachable)
			}
			if !slices.ContainsFunc(st.Addrs, func(a string) bool { return strings.Contains(a, "/p2p/"+relayID.String()+"/p2p-circuit/") }) {
				return fmt.Sprintf("%s advertises no relayed address: %v", m.name, st.Addrs)
			}
		}
		if len(sts) != len(s.nodes) || !ringFormed(next, all) {
			return fmt.Sprintf("successor map %v", next)
		}
		return ""
	})
	t.Logf("ring of six formed %v after the NATed peers started", time.Since(joined).Round(100*time.Millisecond))
	if st, err := s.status(relay); err != nil || !st.NAT.RelayService || st.NAT.Reachability != "public" {
		t.Fatalf("relay status: %+v, %v", st.NAT, err)
	}

	seeds := web.Seeds()
	out, err := topo.command(nsBoot, nil, bin, append([]string{"seed", "--swarm-key", keyFile, "--peer", boot.addrOn("127.0.0.1")}, seeds...)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("accepted %d of %d seeds", len(seeds), len(seeds))) {
		t.Fatalf("seed: %v\n%s", err, out)
	}
	truth := web.GroundTruth(token)
	fetched := func() int { return len(truth) - len(web.Missing(token)) }

	// The NATed peers hold ranges, and every connection between ring
	// neighbours is direct: ring, replication and task traffic never
	// rests on a relayed connection.
	s.waitFor("NATed peers hold ranges, ring neighbours directly connected", 60*time.Second, func() string {
		for m, st := range s.statuses() {
			if m.lan > 0 && (st.Shard == nil || len(st.Shard.Claims) == 0) {
				return m.name + " holds no range"
			}
			for _, nb := range append(slices.Clone(st.Successors), ptrOr(st.Predecessor)...) {
				if nb.Conn == p2p.ConnRelayed {
					return fmt.Sprintf("%s reaches neighbour %s only through the relay", m.name, nb.PeerID)
				}
			}
		}
		return ""
	})
	s.waitFor("a quarter of the web fetched", 90*time.Second, func() string {
		if f := fetched(); f < len(truth)/4 {
			return fmt.Sprintf("%d of %d pages", f, len(truth))
		}
		return ""
	})

	// Peers in different LANs are directly connected, through the other
	// LAN's NAT router: a connection only hole punching can open, since
	// each router drops every SYN it did not expect.
	crossDirect := func(sts map[*natMember]nodeStatus) (direct []string, relayed []string) {
		for m, st := range sts {
			if m.lan == 0 {
				continue
			}
			for _, c := range st.NAT.Connections {
				other := s.lanOf(c.PeerID)
				if other <= 0 || other == m.lan {
					continue
				}
				pair := fmt.Sprintf("%s→%s", m.name, c.PeerID[len(c.PeerID)-6:])
				switch {
				case c.Conn == p2p.ConnDirect && strings.HasPrefix(c.Addr, "/ip4/"+natIP(other)+"/tcp/"):
					direct = append(direct, pair)
				case c.Conn == p2p.ConnRelayed:
					relayed = append(relayed, pair)
				}
			}
		}
		return direct, relayed
	}
	var cross []string
	s.waitFor("cross-LAN connections direct", 60*time.Second, func() string {
		direct, relayed := crossDirect(s.statuses())
		cross = direct
		// Every NATed peer is directly connected to a peer of the other
		// LAN, and no cross-LAN connection rests on the relay. (Two
		// peers connect only when the ring gives them something to say,
		// so not every one of the four pairs need meet; most runs see
		// all four.)
		if len(relayed) > 0 {
			return fmt.Sprintf("direct %v, relayed %v", direct, relayed)
		}
		for m := range s.statuses() {
			if m.lan > 0 && m.name != "" && !slices.ContainsFunc(direct, func(p string) bool { return strings.HasPrefix(p, m.name+"→") }) {
				return fmt.Sprintf("%s has no direct connection to the other LAN; direct %v", m.name, direct)
			}
		}
		return ""
	})
	slices.Sort(cross)
	t.Logf("cross-LAN direct connections: %v", cross)

	// Kill a NATed peer: its successor takes its range over from the
	// replicas, and the crawl still reaches every page.
	var victim *natMember
	sts := s.statuses()
	work := func(st nodeStatus) int64 { return st.Crawl.Queued + st.Crawl.InFlight }
	promotions := int64(0)
	for m, st := range sts {
		if m.lan > 0 && st.Shard != nil && len(st.Shard.Claims) > 0 && (victim == nil || work(st) > work(sts[victim])) {
			victim = m
		}
		if st.Shard != nil {
			promotions += st.Shard.Promotions
		}
	}
	if victim == nil || work(sts[victim]) == 0 {
		t.Fatalf("no NATed peer with work in progress to kill: %v", sts)
	}
	hp := map[string]p2p.HolePunchStats{}
	for m, st := range sts {
		hp[m.name] = st.NAT.HolePunch
	}
	// The status as a person reads it, on the peer about to be killed.
	text, err := topo.command(victim.role, nil, bin, "status", "--data", victim.p.data).CombinedOutput()
	if err != nil || !strings.Contains(string(text), "reachable   private (--reachability), reservations on 1 of 1 relays") ||
		!strings.Contains(string(text), "(direct)") || !strings.Contains(string(text), "relayed at  /ip4/"+relayIP) {
		t.Errorf("status of a NATed peer: %v\n%s", err, text)
	}
	victimWork := work(sts[victim])
	if err := victim.p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-victim.p.done
	victim.state = killed
	killedAt := time.Now()
	s.waitFor("the whole web fetched after the kill", 120*time.Second, func() string {
		if missing := web.Missing(token); len(missing) > 0 {
			return fmt.Sprintf("%d of %d pages missing, e.g. %v", len(missing), len(truth), missing[:min(3, len(missing))])
		}
		return ""
	})
	s.waitFor("the live nodes' claims partition the ring, after a promotion", 30*time.Second, func() string {
		byMember := map[*member]nodeStatus{}
		after := int64(0)
		for m, st := range s.statuses() {
			byMember[&m.member] = st
			if st.Shard != nil {
				after += st.Shard.Promotions
			}
		}
		if p := claimProblems(byMember); len(p) > 0 {
			return strings.Join(p, "; ")
		}
		if after == promotions {
			return fmt.Sprintf("no replica promoted since the kill (%d promotions)", after)
		}
		return ""
	})
	t.Logf("%s (LAN %d) killed with %d URLs queued or in flight; its range taken over, whole web (%d pages) fetched %v later",
		victim.name, victim.lan, victimWork, len(truth), time.Since(killedAt).Round(100*time.Millisecond))
	if v := web.CheckRobots(token); len(v) > 0 {
		t.Errorf("%d robots.txt violations, e.g. %v", len(v), v[:min(5, len(v))])
	}
	if v := web.CheckPoliteness(natDelay); len(v) > 0 {
		t.Errorf("%d politeness violations, e.g. %v", len(v), v[:min(5, len(v))])
	}

	// The hole punching between the two home NATs, from the last
	// statuses (the killed peer's from before the kill).
	for m, st := range s.statuses() {
		hp[m.name] = st.NAT.HolePunch
	}
	var total p2p.HolePunchStats
	var per []string
	for _, m := range s.nodes {
		h := hp[m.name]
		total.Attempts += h.Attempts
		total.Successes += h.Successes
		total.Failures += h.Failures
		total.DirectDials += h.DirectDials
		total.DirectDialFailures += h.DirectDialFailures
		total.ProtocolErrors += h.ProtocolErrors
		per = append(per, fmt.Sprintf("%s %d/%d", m.name, h.Successes, h.Attempts))
	}
	t.Logf("hole punching between the two home NATs: %d attempts, %d successes, %d failures, %d protocol errors (both sides count); %d dials back (%d failed); per node successes/attempts: %s",
		total.Attempts, total.Successes, total.Failures, total.ProtocolErrors, total.DirectDials, total.DirectDialFailures, strings.Join(per, ", "))
	if total.Successes == 0 {
		t.Errorf("no hole punch succeeded")
	}

	sym := s.symmetricPeer(natFlags, keyFile)
	if st, err := s.status(sym); err == nil {
		h := st.NAT.HolePunch
		t.Logf("%s, behind a symmetric NAT: %d hole punches, %d failed, %d protocol errors, %d succeeded: %s", sym.name, h.Attempts, h.Failures, h.ProtocolErrors, h.Successes, st.NAT.Unreachable)
	}
	t.Logf("wall time %v", time.Since(began).Round(100*time.Millisecond))
}

// symmetricPeer starts a peer behind LAN 2's router in l2c, where every
// connection gets a new random port (a symmetric NAT), placed on the ring
// just before a position of a public peer so that it can join (through
// public peers only; it holds one position); a URL of its range is then
// seeded through a LAN 1 peer, whose tasks would reach it through the
// relay. No hole punch can work (its
// replication to peers behind NAT cannot either, so it may never hold its
// range), and the peer says so in status and in one log line. It returns
// the peer.
func (s *natSwarm) symmetricPeer(natFlags []string, keyFile string) *natMember {
	t := s.t
	t.Helper()
	type position struct {
		at uint64
		m  *natMember
	}
	var ring []position
	for m, st := range s.statuses() {
		for _, p := range st.Positions {
			at, err := parseRingID(p.Range.To)
			if err != nil {
				t.Fatal(err)
			}
			ring = append(ring, position{at, m})
		}
	}
	slices.SortFunc(ring, func(a, b position) int { return cmp.Compare(a.at, b.at) })
	// The largest arc of the ring that ends at a public peer: the new
	// peer goes in its middle half.
	var from, size uint64
	for i, p := range ring {
		prev := ring[(i+len(ring)-1)%len(ring)]
		if p.m.lan == 0 && p.at-prev.at > size {
			from, size = prev.at, p.at-prev.at
		}
	}
	data := t.TempDir()
	var at uint64
	for i := 0; ; i++ {
		if i == 100_000 {
			t.Fatalf("no key placed in (%x, %x] in %d tries", from, from+size, i)
		}
		key, _, err := crypto.GenerateEd25519Key(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		id, err := peer.IDFromPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		if at = uint64(p2p.RingID(id)); at-from < size/4 || at-from > 3*(size/4) || !natRingWork.Admits(id) {
			continue
		}
		raw, err := crypto.MarshalPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(data, "identity.key"), raw, 0o600); err != nil {
			t.Fatal(err)
		}
		break
	}
	// A host of the new peer's range (from, at].
	host := ""
	for i := 0; host == ""; i++ {
		if i == 1_000_000 {
			t.Fatalf("no host name with a key in (%x, %x]", from, at)
		}
		if h := fmt.Sprintf("sym%d.synth.test", i); inArc(urls.HostKey(h), from, at) {
			host = h
		}
	}
	// One position: the peer joins through the public peer its position
	// precedes. With more, its positions would land before peers behind
	// NAT too, which it cannot reach to join.
	sym := s.start(nsL2C, 2, data, "/ip4/0.0.0.0/tcp/4203", append(slices.Clone(natFlags), "--vnodes", "1")...)
	var lan1 *natMember
	for _, m := range s.nodes {
		if m.lan == 1 && m.state == running {
			lan1 = m
		}
	}
	out, err := s.topo.command(lan1.role, nil, s.bin, "seed", "--swarm-key", keyFile, "--peer", lan1.addrOn("127.0.0.1"), "http://"+host+"/").CombinedOutput()
	// The seed may well fail: the member that takes it routes it to its
	// owner before it answers, and cannot reach it. (It may also go to
	// the range's previous owner: a member drops from its view of the ring
	// a peer it cannot reach. The ring's own maintenance between the new
	// peer and those behind LAN 1's router tries hole punches too.)
	t.Logf("seed through %s, to %s: %v %s", lan1.name, sym.name, err, bytes.TrimSpace(out))
	const want = "unreachable from other NATs: "
	s.waitFor(sym.name+" says peers behind NAT cannot reach it", 90*time.Second, func() string {
		st, err := s.status(sym)
		if err != nil {
			return err.Error()
		}
		if !strings.HasPrefix(st.NAT.Unreachable, want) {
			return fmt.Sprintf("unreachable %q, hole punching %+v", st.NAT.Unreachable, st.NAT.HolePunch)
		}
		if !strings.Contains(logOf(sym.p), "level=ERROR msg=\""+want) {
			return "no ERROR line in its log"
		}
		return ""
	})
	return sym
}

// natIP returns the public address of the NAT router of LAN lan.
func natIP(lan int) string {
	if lan == 1 {
		return nat1IP
	}
	return nat2IP
}

// ptrOr returns the neighbour p points to, if any.
func ptrOr[T any](p *T) []T {
	if p == nil {
		return nil
	}
	return []T{*p}
}

// runFailsIn runs a node in the namespace of role, which must exit with
// code 1 within a minute, and returns the last line of its stderr, which
// must be the only line not from its logger.
func runFailsIn(topo *netTopo, role string, env []string, bin string, args []string) string {
	cmd := topo.command(role, env, bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return "start: " + err.Error()
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		_ = cmd.Process.Kill()
		<-done
		return "still running after a minute"
	}
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		return fmt.Sprintf("exit %v, want 1: %s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	return lines[len(lines)-1]
}
