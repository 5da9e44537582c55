package node_test

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// scopeWeb is the synthetic web of the scope tests: a dozen hosts, three
// of them seeded (24 of its 85 pages are theirs), so that most links a
// crawl finds lead out of its seeds' hosts.
func scopeWeb() *synthweb.Config {
	cfg := synthweb.DefaultConfig()
	cfg.Seed = 11
	cfg.Hosts = 12
	cfg.PagesPerHost = 8
	cfg.LinksPerPage = 4
	cfg.PageBytes = 2048
	cfg.Seeds = 3
	return &cfg
}

func hostOfURL(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return p.Hostname()
}

// outOfScope returns the requests any node made to a host other than
// those of allowed, robots.txt included.
func (a *adversary) outOfScope(allowed map[string]bool) []string {
	var out []string
	for _, r := range a.web.Web.Log() {
		if !allowed[r.Host] {
			out = append(out, r.URL)
		}
	}
	for _, r := range a.web.siteLog() {
		if !allowed[r.Host] {
			out = append(out, "http://"+r.Host+r.Path)
		}
	}
	return out
}

// refusals sums the nodes' out-of-scope counts by reason.
func refusals(nodes []*node.Node) map[string]int64 {
	out := map[string]int64{}
	for _, n := range nodes {
		for r, v := range n.Status().Scope.OutOfScope {
			out[r] += v
		}
	}
	return out
}

// TestAdversaryScope is the acceptance test of --scope seed-hosts (issue
// 13, item 3): a swarm crawls the synthetic web seeded with three of its
// hosts while a stranger sends every node links to the other hosts and to
// a victim site (depth 1, and depth 0 after a redirect), and forged seeds
// (depth 0) for them. No request reaches a host outside the seed hosts,
// not even its robots.txt; the seed hosts are crawled whole; every task
// of the stranger is refused by its owner, by reason, and status and
// /metrics count the refusals. A forged seed for a seed host is taken as
// a link: it widens nothing.
// Without the owner's scope check the stranger's tasks are accepted
// (their victims are spared only by the crawler's own check before each
// fetch); without the seed authority its forged seeds widen the scope
// and their hosts are crawled.
func TestAdversaryScope(t *testing.T) {
	a := startAdversary(t, advOptions{Web: scopeWeb(), Configure: func(_ int, c *node.Config) {
		c.Crawl.Scope = crawl.ScopeConfig{Mode: crawl.ScopeSeedHosts}
	}})
	victim := "victim" + advSite
	a.web.addSite(victim, victimSite())
	for _, n := range a.honest {
		n.SeeAsRemote(a.stranger.ID())
	}
	seedHosts := map[string]bool{}
	for _, s := range a.web.Seeds() {
		seedHosts[hostOfURL(t, s)] = true
	}
	want := a.web.Scoped(token, func(u string) bool { return seedHosts[hostOfURL(t, u)] })
	if len(want) < 3*len(seedHosts) || len(want) >= len(a.web.GroundTruth(token)) {
		t.Fatalf("scope of %d of %d pages: a poor test", len(want), len(a.web.GroundTruth(token)))
	}
	a.seedOnly(a.web.Seeds()...)

	// The stranger's tasks: for every host out of scope, a link, a
	// redirect's target at depth 0 and a forged seed; and a forged seed
	// for a seed host's page.
	var out []*pb.Task
	for _, h := range append(a.web.Hosts(), victim) {
		if seedHosts[h] {
			continue
		}
		out = append(out,
			&pb.Task{Url: "http://" + h + "/", Depth: 1},
			&pb.Task{Url: "http://" + h + "/moved", Depth: 0, Redirects: 1},
			&pb.Task{Url: "http://" + h + "/forged-seed", Depth: 0})
	}
	forgedIn := "http://" + hostOfURL(t, a.web.Seeds()[0]) + "/forged-in-scope"
	accepted, refused := a.sendEverywhere(append(slices.Clone(out), &pb.Task{Url: forgedIn}))
	if accepted != 1 {
		t.Errorf("%d of the stranger's tasks accepted, want 1 (the forged seed of a seed host's page, as a link)", accepted)
	}
	for _, task := range out {
		reasons := refused[task.Url]
		wantReason := "not_seed_host"
		if task.Depth == 0 && task.Redirects == 0 {
			wantReason = "unauthorized_seed"
		}
		if len(reasons) != 1 || !strings.Contains(reasons[0], "out of scope ("+wantReason+")") {
			t.Errorf("%s (depth %d, redirects %d): refused %q, want once as %s", task.Url, task.Depth, task.Redirects, reasons, wantReason)
		}
	}

	// The seed hosts are crawled whole; nothing else is contacted.
	a.waitFetched(want)
	a.settle()
	if got := a.outOfScope(seedHosts); len(got) > 0 {
		t.Errorf("%d requests outside the seed hosts, e.g. %v", len(got), got[:min(5, len(got))])
	}
	if v := a.web.CheckPoliteness(advDelay); len(v) > 0 {
		t.Errorf("%d politeness violations, e.g. %v", len(v), v[:min(5, len(v))])
	}
	for i, n := range a.swarm.Nodes {
		if st := n.Status(); st.Outbox > 0 {
			t.Errorf("node %d still holds %d undelivered links: refused links must leave the outbox", i, st.Outbox)
		}
	}
	// Status and /metrics count the refusals: the stranger's, and the
	// links to other hosts the crawl itself found.
	forged := len(out) / 3
	counts := refusals(a.honest)
	if counts["unauthorized_seed"] != int64(forged) || counts["not_seed_host"] < int64(2*forged) {
		t.Errorf("out of scope by reason %v, want %d unauthorized_seed and at least %d not_seed_host", counts, forged, 2*forged)
	}
	var metric float64
	for _, n := range a.honest {
		metric += value(scrape(t, n), "swarmcrawl_out_of_scope_total", map[string]string{"reason": "unauthorized_seed"})
	}
	if metric != float64(forged) {
		t.Errorf("swarmcrawl_out_of_scope_total{reason=unauthorized_seed} sums to %v, want %d", metric, forged)
	}
	if st := a.honest[0].Status().Scope; st.Mode != "seed-hosts" {
		t.Errorf("status scope %+v, want seed-hosts", st)
	}
	t.Logf("out of scope by reason %v; totals %+v", counts, a.swarm.Totals())
}

// sendEverywhere sends tasks, as the stranger, to every honest node, and
// again those no node took as its owner (a lease renewed late under
// load), and returns how many the nodes accepted and, by URL, the reasons
// they gave for those they refused.
func (a *adversary) sendEverywhere(tasks []*pb.Task) (accepted int, refused map[string][]string) {
	a.t.Helper()
	refused = map[string][]string{}
	for len(tasks) > 0 && a.ctx.Err() == nil {
		notOwned := map[string]int{}
		for _, n := range a.honest {
			resp := &pb.TaskBatchResult{}
			if err := a.send(a.stranger, n, protocol.TasksID, &pb.TaskBatch{Tasks: tasks}, resp); err != nil {
				a.t.Fatalf("task batch to %s: %v", p2p.ShortID(n.ID()), err)
			}
			accepted += int(resp.Accepted)
			for _, r := range resp.Rejected {
				refused[r.Url] = append(refused[r.Url], r.Reason)
			}
			for _, task := range resp.NotOwned {
				notOwned[task.Url]++
			}
		}
		tasks = slices.DeleteFunc(tasks, func(task *pb.Task) bool { return notOwned[task.Url] < len(a.honest) })
	}
	return accepted, refused
}

// crash stops n without leaving the ring (nothing handed off), as a crash
// does, and leaves it out of the swarm from then on: its successor takes
// its range over from the replicas after the failure timeout.
func (a *adversary) crash(n *node.Node) {
	a.t.Helper()
	if err := n.Halt(); err != nil {
		a.t.Logf("halting %s: %v", n.ID(), err)
	}
	drop := func(s []*node.Node) []*node.Node {
		return slices.DeleteFunc(slices.Clone(s), func(m *node.Node) bool { return m == n })
	}
	a.swarm.Nodes, a.honest = drop(a.swarm.Nodes), drop(a.honest)
}

// ownerOf waits until one live node owns key and claims it, and returns it.
func (a *adversary) ownerOf(key uint64) *node.Node {
	a.t.Helper()
	if err := a.swarm.WaitConverged(a.ctx); err != nil {
		a.t.Fatal(err)
	}
	for _, n := range a.honest {
		if n.Owns(ring.ID(key)) {
			return n
		}
	}
	a.t.Fatalf("no live node owns %s", ring.ID(key))
	return nil
}

// probeScope sends n, as the stranger, a new link into the seed host, a
// link to a host out of scope and a forged seed for another, both hosts
// in n's range, and checks that n, their owner, takes the first and
// refuses the others for their reasons. A batch n answers "not owned"
// (its claim is still on its way) is sent again.
func (a *adversary) probeScope(n *node.Node, seedHost string, i int) {
	a.t.Helper()
	in := fmt.Sprintf("http://%s/probe/%d", seedHost, i)
	link := "http://" + ownedBy(a.t, n, fmt.Sprintf("out%d-", i)) + "/"
	seed := "http://" + ownedBy(a.t, n, fmt.Sprintf("seed%d-", i)) + "/"
	batch := &pb.TaskBatch{Tasks: []*pb.Task{{Url: in, Depth: 1}, {Url: link, Depth: 1}, {Url: seed}}}
	for {
		resp := &pb.TaskBatchResult{}
		if err := a.send(a.stranger, n, protocol.TasksID, batch, resp); err != nil {
			a.t.Fatalf("probe %d to %s: %v", i, p2p.ShortID(n.ID()), err)
		}
		if len(resp.NotOwned) > 0 && a.ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		reasons := map[string]string{}
		for _, r := range resp.Rejected {
			reasons[r.Url] = r.Reason
		}
		if resp.Accepted != 1 || len(resp.Rejected) != 2 ||
			!strings.Contains(reasons[link], "(not_seed_host)") || !strings.Contains(reasons[seed], "(unauthorized_seed)") {
			a.t.Errorf("probe %d to %s, the owner: accepted %d, rejected %v, not owned %d; want %s accepted, %s not_seed_host, %s unauthorized_seed",
				i, p2p.ShortID(n.ID()), resp.Accepted, reasons, len(resp.NotOwned), in, link, seed)
		}
		return
	}
}

// TestScopeSurvivesChurn: the seed hosts a scope holds travel with their
// range. A seed host's owner leaves (its range is handed off), the next
// one crashes (a replica takes over), and the first comes back on its
// data dir (the range is handed back to it): each owner in turn still
// takes links into the seed host and refuses links and forged seeds for
// hosts out of scope, and no request reaches a host but the seed host.
// Without the seed mark on the records (or without the store's index of
// it being written wherever records are), the first owner after the
// seeding node refuses the seed host's links as not_seed_host.
func TestScopeSurvivesChurn(t *testing.T) {
	cfgs := map[int]node.Config{}
	a := startAdversary(t, advOptions{Nodes: 4, Web: scopeWeb(), Configure: func(i int, c *node.Config) {
		c.Crawl.Scope = crawl.ScopeConfig{Mode: crawl.ScopeSeedHosts}
		cfgs[i] = *c
	}})
	seedURL := a.web.Seeds()[0]
	seedHost := hostOfURL(t, seedURL)
	a.seedOnly(seedURL)
	for _, n := range a.honest {
		n.SeeAsRemote(a.stranger.ID())
	}
	key := urls.HostKey(seedHost)

	first := a.ownerOf(key)
	a.probeScope(first, seedHost, 1)
	// Wait for the seed's page: its record is done and replicated.
	for !slices.ContainsFunc(a.web.Web.Log(), func(r synthweb.Request) bool { return r.URL == seedURL && r.Status == 200 }) {
		if a.ctx.Err() != nil {
			t.Fatalf("the seed %s was never fetched", seedURL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	index := slices.Index(a.swarm.Nodes, first)

	a.stop(first) // graceful leave: handoff
	second := a.ownerOf(key)
	a.probeScope(second, seedHost, 2)

	a.crash(second) // promotion of a replica
	third := a.ownerOf(key)
	a.probeScope(third, seedHost, 3)

	// The first owner comes back on its data dir: the range is handed back.
	cfg := cfgs[index]
	cfg.Bootstrap = third.Addrs()
	back, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = back.Close() })
	if err := back.Start(a.ctx); err != nil {
		t.Fatal(err)
	}
	back.SeeAsRemote(a.stranger.ID())
	a.swarm.Nodes = append(a.swarm.Nodes, back)
	a.honest = append(a.honest, back)
	if owner := a.ownerOf(key); owner != back {
		t.Fatalf("the seed host's owner after the restart is %s, want the restarted %s", p2p.ShortID(owner.ID()), p2p.ShortID(back.ID()))
	}
	a.probeScope(back, seedHost, 4)
	t.Logf("the seed host's owners: %s, after its leave %s, after that one's crash %s, back after its restart %s",
		p2p.ShortID(first.ID()), p2p.ShortID(second.ID()), p2p.ShortID(third.ID()), p2p.ShortID(back.ID()))

	a.settle()
	if got := a.outOfScope(map[string]bool{seedHost: true}); len(got) > 0 {
		t.Errorf("%d requests outside the seed host, e.g. %v", len(got), got[:min(5, len(got))])
	}
}

// linkPage is a site page that links to links.
func linkPage(links ...string) func(string) []byte {
	return func(string) []byte {
		var b strings.Builder
		b.WriteString("<html><body>")
		for _, l := range links {
			fmt.Fprintf(&b, `<p><a href="%s">%s</a></p>`, l, l)
		}
		b.WriteString("</body></html>")
		return []byte(b.String())
	}
}

// TestScopeSeedDomains: a swarm with domain keys and --scope seed-domains,
// seeded with one host of a domain, crawls every host of that domain its
// pages lead to (www., blog. and the bare domain) and nothing of the
// other domains they link to; a stranger's forged seed for another domain
// and its link into a third are refused by their owners, and counted.
func TestScopeSeedDomains(t *testing.T) {
	a := startAdversary(t, advOptions{Web: scopeWeb(), Configure: func(_ int, c *node.Config) {
		c.Crawl.KeyMode = urls.KeyDomain
		c.Crawl.Scope = crawl.ScopeConfig{Mode: crawl.ScopeSeedDomains}
	}})
	for _, n := range a.honest {
		n.SeeAsRemote(a.stranger.ID())
	}
	want := []string{"http://www.alpha.example/", "http://blog.alpha.example/", "http://blog.alpha.example/post/1", "http://alpha.example/about"}
	a.web.addSite("www.alpha.example", &advSiteDef{page: linkPage("http://blog.alpha.example/", "http://alpha.example/about", "http://beta.example/", "http://www.gamma.example/")})
	a.web.addSite("blog.alpha.example", &advSiteDef{page: func(path string) []byte {
		if path == "/" {
			return linkPage("/post/1", "http://www.alpha.example/", "http://beta.example/blog")(path)
		}
		return linkPage()(path)
	}})
	a.web.addSite("alpha.example", &advSiteDef{})
	for _, victim := range []string{"beta.example", "www.gamma.example", "x.gamma.example"} {
		a.web.addSite(victim, victimSite())
	}
	a.seedOnly(want[0])
	accepted, refused := a.sendEverywhere([]*pb.Task{{Url: "http://beta.example/forged"}, {Url: "http://x.gamma.example/", Depth: 1}})
	if accepted > 0 || len(refused) != 2 {
		t.Errorf("the stranger's forged seed and link: %d accepted, refused %v; want both refused", accepted, refused)
	}
	requested := func() map[string]bool {
		got := map[string]bool{}
		for _, r := range a.web.siteLog() {
			got["http://"+r.Host+r.Path] = true
		}
		return got
	}
	for a.ctx.Err() == nil && slices.ContainsFunc(want, func(u string) bool { return !requested()[u] }) {
		time.Sleep(100 * time.Millisecond)
	}
	for _, u := range want {
		if !requested()[u] {
			t.Errorf("%s, in the seed's domain, never fetched", u)
		}
	}
	a.settle()
	inDomain := map[string]bool{"www.alpha.example": true, "blog.alpha.example": true, "alpha.example": true}
	if got := a.outOfScope(inDomain); len(got) > 0 {
		t.Errorf("%d requests outside the seed's domain, e.g. %v", len(got), got[:min(5, len(got))])
	}
	counts := refusals(a.honest)
	if counts["unauthorized_seed"] != 1 || counts["not_seed_domain"] < 3 {
		t.Errorf("out of scope by reason %v, want 1 unauthorized_seed and at least 3 not_seed_domain (2 links found, 1 from the stranger)", counts)
	}
}
