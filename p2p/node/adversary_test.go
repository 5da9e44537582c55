package node_test

// The adversary suite of issue 9: each test runs one attack of the issue
// with a hostile in-process libp2p peer against real nodes on loopback
// that crawl a synthetic web (adversary_harness_test.go), and asserts what
// a user cares about (adversary.check): the crawl reaches every reachable
// page, with no robots.txt and no politeness violation, honest ring
// traffic is served, nothing accepted is lost, the heap stays bounded.
//
// Each test's comment quotes what the issue observed and ends with one line
// "Before issue 9:", the assertion that fails when the test runs on the
// code before the issue (b0e79b5).
//
// Attacks of the issue covered elsewhere:
//   - HTTP_PROXY and the private-address guard: crawl
//     TestProxiedRequestsBlocked sets a proxy that records what it gets and
//     sends every blocked spelling through it. Here the nodes' proxy is the
//     harness's web server, which logs every request, and a stranger's task
//     batch carries http://169.254.169.254/latest/meta-data/ among others
//     (TestAdversaryStrangerTasks).
//   - POST /dlq/requeue with text/plain and Origin: evil.example:
//     TestCrossSiteRequeueRefused (apitoken_test.go) replays it against a
//     real node's API.
//
// Forged claims at epoch 2^64-1 and forged ring Leave and Notify are in
// adversary_ownership_test.go; stalled 16 MiB frames, idle-stream floods
// and a replica on a full disk in adversary_resources_test.go. A corrupted
// journal needs a node to restart: cmd TestCorruptStoreRepair runs it with
// separate processes.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/host"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// victimSite is a site the attacker wants the swarm to hit: any page
// answers, so every request shows in the log.
func victimSite() *advSiteDef { return &advSiteDef{} }

// TestAdversaryStrangerSeeds: "SubmitSeeds ... from the stranger [was]
// accepted and fetched; it sustained about 2,000 URLs/s." A stranger from
// off the node's machine submits seeds aimed at a victim host; by default
// only the operator seeds, so the node refuses them and the victim is never
// contacted, while the operator's crawl completes.
// Before issue 9: "stranger's seeds were taken by …: {Accepted:200 …}",
// "the victim of the stranger's seeds got 201 requests".
func TestAdversaryStrangerSeeds(t *testing.T) {
	a := startAdversary(t, advOptions{})
	victim := "victim" + advSite
	a.web.addSite(victim, victimSite())
	for _, n := range a.honest {
		n.SeeAsRemote(a.stranger.ID())
	}
	var flood []string
	for i := range 200 {
		flood = append(flood, fmt.Sprintf("http://%s/flood/%d", victim, i))
	}
	for _, n := range a.honest {
		res, err := p2p.SubmitSeeds(a.ctx, a.stranger, n.Addrs()[0], flood)
		if err == nil || res.Accepted+res.Pending > 0 {
			t.Errorf("stranger's seeds were taken by %s: %+v, %v", p2p.ShortID(n.ID()), res, err)
		}
	}
	a.seed()
	a.check()
	if got := a.web.requestsToHost(victim); len(got) > 0 {
		t.Errorf("the victim of the stranger's seeds got %d requests, e.g. %v", len(got), got[:min(3, len(got))])
	}
}

// TestAdversaryPrivateSwarm: the same stranger against a private swarm
// (a swarm key it does not hold) cannot connect at all, so neither its
// seeds nor its task batches reach a node; the crawl completes.
// Before issue 9 (no swarm key to set: the swarm runs without one): "a
// peer without the swarm key connected", its seeds and its task batch are
// taken, "the victim got 3 requests".
func TestAdversaryPrivateSwarm(t *testing.T) {
	a := startAdversary(t, advOptions{SwarmKey: true})
	victim := "victim" + advSite
	a.web.addSite(victim, victimSite())
	// Each attempt ends when the handshake fails or times out.
	start := time.Now()
	if err := a.dial(a.stranger, a.honest[0]); err == nil {
		t.Errorf("a peer without the swarm key connected")
	}
	t.Logf("connection refused after %v", time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(a.ctx, 5*time.Second)
	defer cancel()
	if res, err := p2p.SubmitSeeds(ctx, a.stranger, a.honest[1].Addrs()[0], []string{"http://" + victim + "/seed"}); err == nil {
		t.Errorf("a peer without the swarm key submitted seeds: %+v", res)
	}
	batch := &pb.TaskBatch{Tasks: []*pb.Task{{Url: "http://" + victim + "/task"}}}
	if err := a.send(a.stranger, a.honest[2], protocol.TasksID, batch, &pb.TaskBatchResult{}); err == nil {
		t.Errorf("a peer without the swarm key sent a task batch")
	}
	a.seed()
	a.check()
	if got := a.web.requestsToHost(victim); len(got) > 0 {
		t.Errorf("the victim got %d requests, e.g. %v", len(got), got[:min(3, len(got))])
	}
}

// TestAdversaryStrangerTasks: "a raw TaskBatch from the stranger [was]
// accepted and fetched", and "with HTTP_PROXY set,
// http://169.254.169.254/latest/meta-data/ was sent to the proxy". In a
// public swarm any peer may hand an owner links, as a member does with
// the links it finds; what it hands over is treated like a discovered
// link. The stranger sends every node a batch of internal addresses (cloud
// metadata, loopback in several spellings, private and special ranges,
// special-use names), garbage (other schemes, an overlong URL, an
// unbounded depth), non-canonical spellings of the web's pages and pages
// its robots.txt disallows. Through the proxy, which sees every request,
// no internal address is contacted; nothing disallowed or non-canonical is
// fetched; the crawl completes.
// Before issue 9: "internal address requested: 169.254.169.254 (from
// http://169.254.169.254/latest/meta-data/)", and so for 13 more hosts.
func TestAdversaryStrangerTasks(t *testing.T) {
	a := startAdversary(t, advOptions{})
	a.seed()
	internal := map[string]string{ // URL -> the host the proxy would see
		"http://169.254.169.254/latest/meta-data/":            "169.254.169.254",
		"http://[::ffff:169.254.169.254]/latest/meta-data/":   "::ffff:169.254.169.254",
		"http://metadata.google.internal/computeMetadata/v1/": "metadata.google.internal",
		"http://127.0.0.1/admin":                              "127.0.0.1",
		"http://127.1/":                                       "127.1",
		"http://2130706433/":                                  "2130706433",
		"http://0x7f000001/":                                  "0x7f000001",
		"http://[::1]/":                                       "::1",
		"http://localhost:8080/":                              "localhost",
		"http://10.0.0.1/":                                    "10.0.0.1",
		"http://192.168.1.1/":                                 "192.168.1.1",
		"http://100.64.0.1/":                                  "100.64.0.1",
		"http://198.18.0.1/":                                  "198.18.0.1",
		"http://printer.local/":                               "printer.local",
		"http://intranet/":                                    "intranet",
		"http://" + strings.TrimPrefix(a.web.srv.URL, "http://") + "/": "127.0.0.1",
	}
	var tasks []*pb.Task
	for u := range internal {
		tasks = append(tasks, &pb.Task{Url: u})
	}
	for _, u := range []string{"gopher://old.test/", "file:///etc/passwd", "javascript:alert(1)", "data:text/html,hi",
		"http://" + strings.Repeat("a", 3000) + advSite + "/"} {
		tasks = append(tasks, &pb.Task{Url: u})
	}
	tasks = append(tasks, &pb.Task{Url: "http://deep" + advSite + "/", Depth: 1 << 20})
	// Non-canonical spellings of pages the crawl fetches anyway, and pages
	// robots.txt disallows.
	for _, u := range a.web.Seeds() {
		up := strings.Replace(strings.ToUpper(u[:len("http://")])+u[len("http://"):], ".synth.test", ".SYNTH.TEST:80", 1)
		tasks = append(tasks, &pb.Task{Url: up + "./?utm_source=stranger#x"})
	}
	allowed := map[string]bool{}
	for _, u := range a.web.GroundTruth(token) {
		allowed[u] = true
	}
	disallowed := 0
	for _, u := range a.web.Pages() {
		if !a.web.Allowed(token, u) && disallowed < 20 {
			tasks = append(tasks, &pb.Task{Url: u, Depth: 1})
			disallowed++
		}
	}
	if disallowed == 0 {
		t.Fatal("the synthetic web has no page its robots.txt disallows")
	}
	for _, n := range a.honest {
		// A frame no encoder writes first: refused, and the node serves on.
		if st, err := a.sendRaw(a.stranger, n, protocol.TasksID, []byte("\x05\xff\xff\xff\xff\xff")); err == nil {
			_ = st.CloseWrite()
			if k, err := st.Read(make([]byte, 64)); err == nil && k > 0 {
				t.Errorf("%s answered a broken frame", p2p.ShortID(n.ID()))
			}
			_ = st.Reset()
		}
		resp := &pb.TaskBatchResult{}
		if err := a.send(a.stranger, n, protocol.TasksID, &pb.TaskBatch{Tasks: tasks}, resp); err != nil {
			t.Fatalf("task batch to %s: %v", p2p.ShortID(n.ID()), err)
		}
		t.Logf("%s: accepted %d, duplicates %d, not owned %d, rejected %d", p2p.ShortID(n.ID()),
			resp.Accepted, resp.Duplicates, len(resp.NotOwned), len(resp.Rejected))
	}
	a.check()
	for u, h := range internal {
		if got := a.web.requestsToHost(h); len(got) > 0 {
			t.Errorf("internal address requested: %s (from %s): %v", h, u, got[:min(3, len(got))])
		}
	}
	if got := a.web.requestsToHost("deep" + advSite); len(got) > 0 {
		t.Errorf("a task of unbounded depth was fetched: %v", got)
	}
}

// fetchBatch is a fetch batch for host's pages /p/0.. /p/n-1 that asks for
// no gap between requests.
func fetchBatch(host string, n int) *pb.FetchBatchRequest {
	req := &pb.FetchBatchRequest{Host: host, RingKey: urls.HostKey(host), GapNs: 0,
		BudgetNs: int64(3 * time.Second), WaitNs: int64(5 * time.Second)}
	for i := range n {
		req.Tasks = append(req.Tasks, &pb.FetchTask{Url: fmt.Sprintf("http://%s/p/%d", host, i)})
	}
	return req
}

// TestAdversaryFetchBatches: "a fetch batch naming a planted owner made a
// helper send 20 GETs in 7 ms to a host whose robots.txt says Disallow: /;
// the helper never fetched robots.txt and accepts a zero gap." The
// attacker is a member that owns two hosts of its own (so the helpers'
// epoch tables name it as their owner, as they would a planted owner):
// one whose robots.txt disallows everything, one that allows everything.
// It sends every honest node batches of 20 pages of each with a zero gap,
// one batch per host and helper at a time; a stranger does the same. A
// helper fetches robots.txt itself, nothing it disallows, and never two
// requests to a host closer than its own gap; the crawl completes.
// Before issue 9: "40 robots.txt violations on the attacker's sites, e.g.
// node-1 fetched http://closed42.adv.test/p/0", "17 politeness violations".
func TestAdversaryFetchBatches(t *testing.T) {
	fetchBatchAttack(t, 1)
}

// TestAdversaryConcurrentFetchBatches is TestAdversaryFetchBatches with
// two batches of each host sent to each helper at once, as an attacker
// would: each helper must still keep its own gap for the host across
// them (one batch of a host runs at a time; the next starts from the last
// request of the one before: crawl TestFetchBatchesOfOneHostShareTheGap).
// Before issue 9: "160 robots.txt violations", "165 politeness violations";
// before the helper shared its pacing across batches, 72 politeness
// violations.
func TestAdversaryConcurrentFetchBatches(t *testing.T) {
	fetchBatchAttack(t, 2)
}

// fetchBatchAttack is the attack of TestAdversaryFetchBatches with
// concurrent batches of each host sent to each helper at once.
func fetchBatchAttack(t *testing.T, concurrent int) {
	a := startAdversary(t, advOptions{HostileMember: true})
	closed, open := ownedBy(t, a.member, "closed"), ownedBy(t, a.member, "open")
	a.web.addSite(closed, &advSiteDef{robots: "User-agent: *\nDisallow: /\n", disallowed: func(string) bool { return true }})
	a.web.addSite(open, &advSiteDef{robots: "User-agent: *\nAllow: /\n"})
	a.seed()

	var mu sync.Mutex
	served := map[string]int{}
	// attack sends every honest node, from one identity, concurrent
	// batches of each site at once, and waits for the answers.
	attack := func(name string, from host.Host) {
		var wg sync.WaitGroup
		for _, to := range a.honest {
			for _, site := range []string{closed, open} {
				for range concurrent {
					wg.Go(func() {
						resp := &pb.FetchBatchReply{}
						err := a.send(from, to, protocol.FetchID, fetchBatch(site, 20), resp)
						if err == nil && resp.Error == "" && !resp.Busy {
							mu.Lock()
							served[name+" "+site]++
							mu.Unlock()
						}
					})
				}
			}
		}
		wg.Wait()
	}
	// The member's claim reaches its replicas shortly after the ring
	// settles: attack until a helper took a batch, a bounded number of
	// times.
	for i := 0; i < 20 && a.ctx.Err() == nil; i++ {
		attack("member", a.member.Host())
		mu.Lock()
		took := served["member "+open] > 0
		mu.Unlock()
		if took {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	// A stranger names itself the owner: no helper's epoch table names
	// it, so no helper vouches for it.
	attack("stranger", a.stranger)
	t.Logf("batches served: %v", served)
	if served["member "+open] == 0 {
		t.Fatalf("no helper took the owner's batches: the attack was not tried")
	}
	for _, site := range []string{closed, open} {
		if n := served["stranger "+site]; n > 0 {
			t.Errorf("%d of the stranger's batches for %s were served", n, site)
		}
	}
	a.check()
}

// TestAdversaryForgedMerge: "A Merge handoff from the stranger injected a
// URL into all three nodes, unnormalised and with no key check; peer-supplied
// host state (robots body, not-before time) is trusted as is." The stranger
// merges into every node records of its own making (an unnormalised URL, a
// URL under another host's key, one of unbounded depth, one whose hash is
// not its URL's) and host states (under another host's key, a robots.txt
// without a status, a robots.txt of another origin, one above the size
// cap). None of it reaches a seen set or the crawl: no victim URL is
// fetched, and the crawl of the web completes with no robots or politeness
// violation.
// Before issue 9: "the stranger's merge added 6 URLs to the seen sets",
// "injected URLs were fetched: [… http://victim.adv.test/a/../injected …]".
func TestAdversaryForgedMerge(t *testing.T) {
	a := startAdversary(t, advOptions{})
	victim := "victim" + advSite
	a.web.addSite(victim, victimSite())
	politeness := func(notBefore time.Time, origin string, status int, robots []byte) *pb.HostPoliteness {
		return &pb.HostPoliteness{NotBeforeNs: notBefore.UnixNano(), RobotsOrigin: origin, RobotsStatus: int32(status),
			RobotsFetchedNs: time.Now().UnixNano(), Robots: robots}
	}
	allowAll := []byte("User-agent: *\nAllow: /\n")
	forever := time.Now().Add(100 * 365 * 24 * time.Hour)
	webHost := strings.TrimSuffix(strings.TrimPrefix(a.web.Seeds()[0], "http://"), "/")
	before := int64(0)
	for _, n := range a.honest {
		before += n.Status().Seen
	}
	for _, n := range a.honest {
		self := uint64(n.Ring().Self().ID)
		victimURL := "http://" + victim + "/injected"
		victimKey, _ := urls.TaskKey(victimURL, urls.KeyHost)
		recs := []*pb.ShardRecord{
			{Key: victimKey, Hash: urls.URLHash(victimURL), Url: "HTTP://Victim.adv.test:80/a/../injected"}, // not normalised
			{Key: self, Hash: urls.URLHash(victimURL + "2"), Url: victimURL + "2"},                          // key of another host
			{Key: victimKey, Hash: urls.URLHash(victimURL + "3"), Url: victimURL + "3", Depth: 1 << 20},     // depth unbounded
			{Key: victimKey, Hash: urls.URLHash(victimURL+"4") + 1, Url: victimURL + "4"},                   // hash not the URL's
		}
		hosts := []*pb.HostState{
			{Key: self, Host: webHost, Politeness: politeness(forever, "http://"+webHost, 200, allowAll)},                 // key of another host
			{Key: urls.HostKey(webHost), Host: webHost, Politeness: politeness(forever, "", 0, allowAll)},                 // robots without status
			{Key: urls.HostKey(webHost), Host: webHost, Politeness: politeness(forever, "http://"+victim, 200, allowAll)}, // another origin
			{Key: urls.HostKey(webHost), Host: webHost, Politeness: politeness(forever, "http://"+webHost, 200,
				[]byte(strings.Repeat("# padding\n", 60_000)+"User-agent: *\nAllow: /\n"))}, // above the cap
		}
		for _, rec := range recs {
			a.merge(n, rec.Key, []*pb.ShardRecord{rec}, nil)
		}
		for _, h := range hosts {
			a.merge(n, h.Key, nil, []*pb.HostState{h})
		}
	}
	after := int64(0)
	for _, n := range a.honest {
		after += n.Status().Seen
	}
	if after != before {
		t.Errorf("the stranger's merge added %d URLs to the seen sets", after-before)
	}
	a.seed()
	a.check()
	if got := a.web.requestsToHost(victim); len(got) > 0 {
		t.Errorf("injected URLs were fetched: %v", got[:min(3, len(got))])
	}
}

// merge sends n, from the stranger, a final merge chunk of the one-key
// range ending at key, claimed at epoch 1 by the stranger.
func (a *adversary) merge(n *node.Node, key uint64, recs []*pb.ShardRecord, hosts []*pb.HostState) {
	a.t.Helper()
	req := &pb.HandoffRequest{Range: &pb.ShardRange{From: key - 1, To: key}, Epoch: &pb.Epoch{N: 1, Owner: a.stranger.ID().String()},
		Records: recs, Hosts: hosts, Merge: true, Final: true}
	if err := a.send(a.stranger, n, protocol.HandoffID, req, &pb.HandoffReply{}); err != nil {
		a.t.Logf("merge to %s: %v", p2p.ShortID(n.ID()), err)
	}
}

// TestAdversaryHugePage: "A 10 MiB page yielded 481,674 links and a 300 MiB
// heap peak in one worker." The operator seeds a site whose front page is
// 10 MiB of links (just under the body cap), all to pages its robots.txt
// disallows. At most MaxLinksPerPage (5,000) of its links are taken, none
// is fetched, the heap stays bounded and the crawl of the web completes.
// Under the race detector (make test) the HTML tokeniser costs about 1.5 µs
// a byte, so the page is 3 MiB there (125,000 links, 25 times the cap);
// crawl TestParseMemoryBounded and BenchmarkParseHostile parse the full
// 10 MiB.
// Before issue 9: every link is taken: "node 0 still holds 106274
// undelivered links", "seen sets grew to 24045 URLs … more than the 5146 a
// capped page and the web allow" (the heap bound holds at 3 MiB).
func TestAdversaryHugePage(t *testing.T) {
	a := startAdversary(t, advOptions{})
	huge := "huge" + advSite
	var page strings.Builder
	page.WriteString("<html><body>")
	size := 10<<20 - 1024
	if raceEnabled {
		size = 3 << 20
	}
	for i := 0; page.Len() < size; i++ {
		fmt.Fprintf(&page, `<a href="/l/%d">.</a>`, i)
	}
	page.WriteString("</body></html>")
	body := []byte(page.String())
	links := strings.Count(page.String(), "<a ")
	a.web.addSite(huge, &advSiteDef{
		robots:     "User-agent: *\nDisallow: /l/\n",
		disallowed: func(p string) bool { return strings.HasPrefix(p, "/l/") },
		page: func(p string) []byte {
			if p == "/" {
				return body
			}
			return nil
		},
	})
	a.seed("http://" + huge + "/")
	// The crawl of the web ends long before the page is parsed: wait for
	// its links (a bounded number of times).
	deadline := time.Now().Add(40 * time.Second)
	for i := 0; i < 400 && time.Now().Before(deadline) && a.ctx.Err() == nil; i++ {
		var capped int64
		for _, n := range a.swarm.Nodes {
			capped += n.Status().Crawl.LinksCapped
		}
		if capped > 0 && len(a.web.Missing(token)) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	a.check()
	var seen, capped int64
	for _, n := range a.swarm.Nodes {
		st := n.Status()
		seen += st.Seen
		capped += st.Crawl.LinksCapped
	}
	limit := int64(len(a.web.Pages())) + 5000 + 100
	if seen > limit {
		t.Errorf("seen sets grew to %d URLs from a page of %d links, more than the %d a capped page and the web allow", seen, links, limit)
	}
	t.Logf("page of %d links (%d bytes): %d URLs seen, %d links capped", links, len(body), seen, capped)
}
