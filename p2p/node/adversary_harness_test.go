package node_test

// The adversary harness: real nodes on loopback crawl a small synthetic
// web while a hostile in-process libp2p peer attacks them, and one check
// judges the outcome as a user would (see TestAdversary* in
// adversary_test.go).

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/pnet"
	libp2pproto "github.com/libp2p/go-libp2p/core/protocol"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/localswarm"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// Harness limits. Every wait is bounded by advTimeout; a run on the code
// the suite defends stays far inside it.
const (
	// advDelay is every node's gap between two requests to one host, and
	// the gap the web's politeness check demands.
	advDelay = 20 * time.Millisecond
	// advTimeout bounds a whole attack: swarm start, attack and crawl.
	advTimeout = 60 * time.Second
	// advHeapGrowth bounds the growth of the process's heap in use over
	// its level before the swarm started, sampled all through an attack:
	// three nodes and the web share this process.
	advHeapGrowth = 384 << 20
	// advSite is the domain of the hostile sites the harness serves
	// beside the synthetic web.
	advSite = ".adv.test"
)

// advWeb is the synthetic web plus the attacker's sites, served by one
// server on loopback that is also every node's HTTP proxy: every request a
// node makes, to any host, direct or not, arrives here and is logged (the
// synthetic web logs its own hosts and any unknown host; the sites log
// theirs).
type advWeb struct {
	*synthweb.Web
	srv *httptest.Server

	mu    sync.Mutex
	sites map[string]*advSiteDef
	log   []advRequest
}

// advSiteDef is one of the attacker's sites.
type advSiteDef struct {
	// robots is the body of /robots.txt (answered 200); "" answers 404.
	robots string
	// disallowed reports whether robots.txt disallows a path for
	// swarmcrawl (the oracle of the site's robots).
	disallowed func(path string) bool
	// page answers every other path; nil answers a small page without
	// links.
	page func(path string) []byte
}

// advRequest is one logged request to an attacker's site.
type advRequest struct {
	Time       time.Time
	Host, Path string
	Node       string // from the User-Agent: "node-i", "" if untagged
}

func newAdvWeb(t *testing.T, cfg synthweb.Config) *advWeb {
	t.Helper()
	web, err := synthweb.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := &advWeb{Web: web, sites: map[string]*advSiteDef{}}
	w.srv = httptest.NewServer(w)
	t.Cleanup(func() {
		web.Close()
		w.srv.Close()
	})
	return w
}

// addSite serves site under host (a name ending in advSite).
func (w *advWeb) addSite(host string, site *advSiteDef) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sites[host] = site
}

// proxy routes every request of a node here.
func (w *advWeb) proxy() func(*http.Request) (*url.URL, error) {
	u, _ := url.Parse(w.srv.URL)
	return http.ProxyURL(u)
}

func (w *advWeb) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	h := strings.ToLower(r.Host)
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	w.mu.Lock()
	site := w.sites[h]
	if site != nil {
		tag := ""
		if m := nodeTag.FindStringSubmatch(r.UserAgent()); m != nil {
			tag = m[1]
		}
		w.log = append(w.log, advRequest{Time: time.Now(), Host: h, Path: r.URL.RequestURI(), Node: tag})
	}
	w.mu.Unlock()
	if site == nil {
		w.Web.ServeHTTP(rw, r)
		return
	}
	if r.URL.Path == "/robots.txt" {
		if site.robots == "" {
			http.NotFound(rw, r)
			return
		}
		rw.Header().Set("Content-Type", "text/plain")
		_, _ = rw.Write([]byte(site.robots))
		return
	}
	body := []byte("<html><body><p>nothing to see</p></body></html>")
	if site.page != nil {
		body = site.page(r.URL.RequestURI())
	}
	rw.Header().Set("Content-Type", "text/html; charset=utf-8")
	rw.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = rw.Write(body)
}

// siteLog returns the requests to the attacker's sites.
func (w *advWeb) siteLog() []advRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.log)
}

// requestsToHost returns the URLs any node requested on host, whichever
// log holds them.
func (w *advWeb) requestsToHost(host string) []string {
	var out []string
	for _, r := range w.Web.Log() {
		if r.Host == host {
			out = append(out, r.URL)
		}
	}
	for _, r := range w.siteLog() {
		if r.Host == host {
			out = append(out, "http://"+r.Host+r.Path)
		}
	}
	return out
}

// siteViolations returns the requests to the attacker's sites that their
// robots.txt disallows, and each pair of consecutive requests by one node
// to one site closer than advDelay. Gaps between different nodes are not
// judged: an attacker that owns a host can point several helpers at it,
// and each answers only for itself.
func (w *advWeb) siteViolations() (robots, politeness []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	last := map[string]time.Time{}
	for _, r := range w.log {
		site := w.sites[r.Host]
		if r.Path != "/robots.txt" && site.disallowed != nil && site.disallowed(r.Path) {
			robots = append(robots, fmt.Sprintf("%s fetched http://%s%s, disallowed by its robots.txt", r.Node, r.Host, r.Path))
		}
		k := r.Node + " " + r.Host
		if prev, ok := last[k]; ok && r.Time.Sub(prev) < advDelay {
			politeness = append(politeness, fmt.Sprintf("%s fetched http://%s%s %v after its previous request there (gap %v)",
				r.Node, r.Host, r.Path, r.Time.Sub(prev).Round(time.Microsecond), advDelay))
		}
		last[k] = r.Time
	}
	return robots, politeness
}

// advOptions shapes an attack's swarm.
type advOptions struct {
	// Nodes is the number of honest nodes (default 3).
	Nodes int
	// HostileMember adds one more node, started like the others (it is a
	// ring member and owns a range), whose host the attacker uses: a
	// member of a public swarm, or of a private one that the key leaked
	// to.
	HostileMember bool
	// SwarmKey makes the swarm private; the stranger does not have the
	// key.
	SwarmKey bool
	// Web overrides the synthetic web's configuration.
	Web *synthweb.Config
	// Configure adjusts node i's configuration after the harness did.
	Configure func(i int, c *node.Config)
}

// adversary is one attack in progress: the web, the swarm, the hostile
// peer and what the check needs.
type adversary struct {
	t      *testing.T
	ctx    context.Context
	web    *advWeb
	swarm  *localswarm.Swarm
	honest []*node.Node
	// member is the hostile member (HostileMember), nil otherwise.
	member *node.Node
	// stranger is the hostile peer: a fresh libp2p identity that knows
	// honest[0]'s multiaddr and is connected to it (unless the swarm is
	// private: then it could not connect).
	stranger host.Host
	psk      pnet.PSK

	heap *heapWatch

	mu sync.Mutex
	// mustFetch are URLs a node acknowledged as accepted during the attack
	// and that a correct crawl fetches: nothing accepted may be lost.
	mustFetch []string
}

// startAdversary starts the web and the swarm, waits for the ring to
// converge and makes the stranger.
func startAdversary(t *testing.T, opts advOptions) *adversary {
	t.Helper()
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	ctx, cancel := context.WithTimeout(context.Background(), advTimeout)
	t.Cleanup(cancel)
	a := &adversary{t: t, ctx: ctx}
	wcfg := synthweb.DefaultConfig()
	wcfg.Seed = 9
	wcfg.Hosts = 10
	wcfg.PagesPerHost = 4
	wcfg.LinksPerPage = 4
	wcfg.PageBytes = 2048
	wcfg.Seeds = 3
	if opts.Web != nil {
		wcfg = *opts.Web
	}
	a.web = newAdvWeb(t, wcfg)
	if n := len(a.web.GroundTruth(token)); n < 15 {
		t.Fatalf("synthetic web too small for the attack: %d ground-truth pages", n)
	}
	a.heap = watchHeap(t)

	if opts.SwarmKey {
		raw, err := p2p.NewSwarmKey()
		if err != nil {
			t.Fatal(err)
		}
		if a.psk, err = pnet.DecodeV1PSK(strings.NewReader(string(raw))); err != nil {
			t.Fatal(err)
		}
	}
	cc := crawl.DefaultConfig()
	cc.Delay = advDelay
	// Crawl order across hosts is not breadth-first: full coverage needs
	// a loose depth cap (as in TestSwarmCrawlsSyntheticWeb).
	cc.MaxDepth = 100
	total := opts.Nodes
	if opts.HostileMember {
		total++
	}
	var logger *slog.Logger
	if os.Getenv("ADVERSARY_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	swarm, err := localswarm.Start(ctx, localswarm.Options{Nodes: total, Dir: t.TempDir(), Crawl: cc, Proxy: a.web.proxy(), Logger: logger,
		Configure: func(i int, c *node.Config) {
			c.Crawl.UserAgent = fmt.Sprintf("%s/0.1 (node-%d)", token, i)
			c.Host.SwarmKey = a.psk
			if opts.Configure != nil {
				opts.Configure(i, c)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = swarm.Close() })
	if err := swarm.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	a.swarm = swarm
	a.honest = a.swarm.Nodes[:opts.Nodes]
	if opts.HostileMember {
		a.member = a.swarm.Nodes[opts.Nodes]
	}
	a.stranger = a.newStranger()
	if !opts.SwarmKey {
		a.connect(a.stranger, a.honest[0])
	}
	return a
}

// hostRequests lists the requests to the host a violation names, each with
// its time and the node that made it (its User-Agent), to tell a race
// between honest nodes from one involving the hostile member.
func (a *adversary) hostRequests(violation string) string {
	host, _, _ := strings.Cut(violation, ":")
	var b strings.Builder
	fmt.Fprintf(&b, "requests to %s:", host)
	log := a.web.Web.Log()
	for _, r := range log {
		if r.Host == host {
			fmt.Fprintf(&b, "\n  +%v %s %q", r.Time.Sub(log[0].Time).Round(time.Microsecond), r.Path, r.UserAgent)
		}
	}
	return b.String()
}

// newStranger returns a fresh hostile identity (listening nowhere, without
// the swarm key), closed when the test ends. Call it again for a second
// identity.
func (a *adversary) newStranger() host.Host {
	a.t.Helper()
	h, err := libp2p.New(libp2p.NoListenAddrs)
	if err != nil {
		a.t.Fatal(err)
	}
	a.t.Cleanup(func() { _ = h.Close() })
	return h
}

// connect connects h to n through n's first multiaddr.
func (a *adversary) connect(h host.Host, n *node.Node) {
	a.t.Helper()
	if err := a.dial(h, n); err != nil {
		a.t.Fatalf("connect to %s: %v", n.ID(), err)
	}
}

// dial tries to connect h to n.
func (a *adversary) dial(h host.Host, n *node.Node) error {
	infos, err := p2p.ParseAddrInfos(n.Addrs())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(a.ctx, 5*time.Second)
	defer cancel()
	return h.Connect(ctx, infos[0])
}

// send sends one request of protocol pid from h to n and reads the
// response, as any peer can: the drop-in for every protocol attack.
func (a *adversary) send(h host.Host, to *node.Node, pid string, req, resp proto.Message) error {
	if h.Network().Connectedness(to.ID()) != network.Connected {
		if err := a.dial(h, to); err != nil {
			return err
		}
	}
	return p2p.NewStreams(h, 0, p2p.NoRingWork).Call(a.ctx, to.ID(), pid, req, resp)
}

// sendRaw opens a stream of protocol pid from h to n, writes data as is
// and returns the stream (the caller resets or reads it): for frames no
// honest encoder writes.
func (a *adversary) sendRaw(h host.Host, to *node.Node, pid string, data []byte) (network.Stream, error) {
	if h.Network().Connectedness(to.ID()) != network.Connected {
		if err := a.dial(h, to); err != nil {
			return nil, err
		}
	}
	st, err := h.NewStream(a.ctx, to.ID(), libp2pproto.ID(pid))
	if err != nil {
		return nil, err
	}
	_ = st.SetDeadline(time.Now().Add(15 * time.Second))
	_, err = st.Write(data)
	return st, err
}

// ownedBy returns a host name under advSite, with prefix, whose key n's
// position 0 ring arc holds (the position its host speaks for).
func ownedBy(t *testing.T, n *node.Node, prefix string) string {
	t.Helper()
	// Position 0's arc: a 16th of the node's share on average with the
	// default 16 positions, and an arc of a millionth of the ring is
	// rare.
	for i := range 1 << 20 {
		h := fmt.Sprintf("%s%d%s", prefix, i, advSite)
		if n.Ring().Owns(ring.ID(urls.HostKey(h))) {
			return h
		}
	}
	t.Fatalf("no %s host owned by %s", prefix, n.ID())
	return ""
}

// seedOnly submits urls alone (not the web's seeds) as the operator
// would; accepted URLs must all be fetched.
func (a *adversary) seedOnly(urls ...string) {
	a.t.Helper()
	res := a.honest[0].Seed(a.ctx, urls)
	if len(res.Rejected) > 0 || res.Accepted+res.Duplicates+res.Pending != len(urls) {
		a.t.Fatalf("operator's seeds: %+v, want all %d accepted", res, len(urls))
	}
	a.mu.Lock()
	a.mustFetch = append(a.mustFetch, urls...)
	a.mu.Unlock()
}

// seed submits the synthetic web's seeds and extra as the operator would
// (node.Seed on honest[0]); accepted URLs must all be fetched.
func (a *adversary) seed(extra ...string) {
	a.t.Helper()
	seeds := append(a.web.Seeds(), extra...)
	res := a.honest[0].Seed(a.ctx, seeds)
	if len(res.Rejected) > 0 || res.Accepted+res.Duplicates+res.Pending != len(seeds) {
		a.t.Fatalf("operator's seeds: %+v, want all %d accepted", res, len(seeds))
	}
	a.mu.Lock()
	a.mustFetch = append(a.mustFetch, seeds...)
	a.mu.Unlock()
}

// pingRing sends a ring Ping from every honest node to every other: the
// honest ring traffic an attack must not crowd out.
func (a *adversary) pingRing() []string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var failed []string
	for _, from := range a.honest {
		s := p2p.NewStreams(from.Host(), 0, p2p.NoRingWork)
		for _, to := range a.honest {
			if from == to {
				continue
			}
			resp := &pb.RingResponse{}
			err := s.Call(ctx, to.ID(), protocol.RingID, &pb.RingRequest{Body: &pb.RingRequest_Ping{Ping: &pb.Ping{}}}, resp)
			if err == nil && resp.GetAck() == nil {
				err = fmt.Errorf("answer %v", resp)
			}
			if err != nil {
				failed = append(failed, fmt.Sprintf("%s -> %s: %v", p2p.ShortID(from.ID()), p2p.ShortID(to.ID()), err))
			}
		}
	}
	return failed
}

// waitFetched waits until every URL of want has been fetched from the
// synthetic web (an answer below 500), and reports those never fetched.
func (a *adversary) waitFetched(want []string) {
	a.t.Helper()
	missing := func() []string {
		got := map[string]bool{}
		for _, r := range a.web.Web.Log() {
			if r.Status != 0 && r.Status < 500 {
				got[r.URL] = true
			}
		}
		return slices.DeleteFunc(slices.Clone(want), func(u string) bool { return got[u] })
	}
	for len(missing()) > 0 && a.ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	if m := missing(); len(m) > 0 {
		a.t.Errorf("%d of the seed hosts' %d pages never fetched, e.g. %v", len(m), len(want), m[:min(5, len(m))])
	}
}

// check waits for the crawl to finish and asserts what a user cares
// about: every reachable page of the synthetic web fetched, no robots.txt
// and no politeness violation (on the synthetic web and the attacker's
// sites), honest ring traffic served, nothing accepted lost, the heap
// bounded.
func (a *adversary) check() {
	t := a.t
	t.Helper()
	truth := a.web.GroundTruth(token)
	for len(a.web.Missing(token)) > 0 && a.ctx.Err() == nil {
		time.Sleep(100 * time.Millisecond)
	}
	if missing := a.web.Missing(token); len(missing) > 0 {
		t.Errorf("crawl incomplete: %d of %d reachable pages never fetched, e.g. %v; totals %+v",
			len(missing), len(truth), missing[:min(5, len(missing))], a.swarm.Totals())
	}
	a.settle()
	if v := a.web.CheckRobots(token); len(v) > 0 {
		t.Errorf("%d robots.txt violations on the synthetic web, e.g. %v", len(v), v[:min(5, len(v))])
	}
	if v := a.web.CheckPoliteness(advDelay); len(v) > 0 {
		t.Errorf("%d politeness violations on the synthetic web, e.g. %v\n%s", len(v), v[:min(5, len(v))], a.hostRequests(v[0]))
	}
	robots, polite := a.web.siteViolations()
	if len(robots) > 0 {
		t.Errorf("%d robots.txt violations on the attacker's sites, e.g. %v", len(robots), robots[:min(5, len(robots))])
	}
	if len(polite) > 0 {
		t.Errorf("%d politeness violations on the attacker's sites, e.g. %v", len(polite), polite[:min(5, len(polite))])
	}
	// Non-canonical spellings of pages are fetches no correct crawler makes.
	var unexpected []string
	for _, u := range a.web.Unexpected(token) {
		if strings.Contains(u, ".synth.test") {
			unexpected = append(unexpected, u)
		}
	}
	if len(unexpected) > 0 {
		t.Errorf("%d requests outside the synthetic web's ground truth, e.g. %v", len(unexpected), unexpected[:min(5, len(unexpected))])
	}
	if failed := a.pingRing(); len(failed) > 0 {
		t.Errorf("honest ring pings failed: %v", failed)
	}
	// Nothing accepted is lost: every URL a node acknowledged was
	// fetched, and no discovered link is left undelivered.
	requested := map[string]bool{}
	for _, r := range a.web.Web.Log() {
		requested[r.URL] = true
	}
	for _, r := range a.web.siteLog() {
		requested["http://"+r.Host+r.Path] = true
	}
	a.mu.Lock()
	for _, u := range a.mustFetch {
		if !requested[u] {
			t.Errorf("%s was accepted but never fetched", u)
		}
	}
	a.mu.Unlock()
	for i, n := range a.swarm.Nodes {
		if st := n.Status(); st.Outbox > 0 {
			t.Errorf("node %d still holds %d undelivered links", i, st.Outbox)
		}
	}
	if base, peak := a.heap.stop(); peak > base+advHeapGrowth {
		t.Errorf("heap in use peaked at %d MiB, %d MiB above its %d MiB before the swarm started (bound %d MiB)",
			peak>>20, (peak-base)>>20, base>>20, advHeapGrowth>>20)
	} else {
		t.Logf("heap in use: %d MiB before, %d MiB at most; totals %+v", base>>20, peak>>20, a.swarm.Totals())
	}
}

// settle waits until the work in flight has ended, so that late
// violations and undelivered links show: until the swarm is idle, or (when
// URLs the crawler will not fetch wait in a queue, such as internal
// addresses whose robots.txt it cannot get) until no node has links to
// deliver or fetches in flight and the web has seen no request for half a
// second. It waits at most 10 s, and up to 40 s while the outboxes keep
// shrinking: delivering the thousands of links of a capped page to their
// owner, each batch replicated before it is acknowledged, took longer than
// 10 s under the race detector on a loaded machine. While links wait to be
// delivered it waits 30 s at least: once in CI a link whose owner had
// left was still in its retry backoff at 10 s.
func (a *adversary) settle() {
	requests := func() int { return len(a.web.Web.Log()) + len(a.web.siteLog()) }
	last, quiet := requests(), 0
	start := time.Now()
	deadline, outbox := start.Add(10*time.Second), a.swarm.Totals().Outbox
	for i := 0; i < 400 && time.Now().Before(deadline) && a.ctx.Err() == nil && !a.swarm.Idle(); i++ {
		time.Sleep(100 * time.Millisecond)
		t := a.swarm.Totals()
		if later := time.Now().Add(5 * time.Second); t.Outbox < outbox && later.After(deadline) {
			deadline = later
			if limit := start.Add(40 * time.Second); deadline.After(limit) {
				deadline = limit
			}
		}
		// A link whose owner just left waits out its backoff (at most
		// route.Config.RetryMax, 10 s) between attempts: give it
		// two more.
		if hold := start.Add(30 * time.Second); t.Outbox > 0 && deadline.Before(hold) {
			deadline = hold
		}
		outbox = t.Outbox
		if n := requests(); n == last && t.Outbox == 0 && t.InFlight == 0 {
			quiet++
		} else {
			last, quiet = n, 0
		}
		if quiet >= 5 {
			return
		}
	}
}

// heapWatch samples the heap in use of the process.
type heapWatch struct {
	base uint64
	quit chan struct{}
	done chan struct{}
	mu   sync.Mutex
	peak uint64
	once sync.Once
}

func watchHeap(t *testing.T) *heapWatch {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	w := &heapWatch{base: ms.HeapInuse, peak: ms.HeapInuse, quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.quit:
				return
			case <-tick.C:
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			w.mu.Lock()
			w.peak = max(w.peak, ms.HeapInuse)
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() { w.stop() })
	return w
}

// stop ends the sampling and returns the base and the peak.
func (w *heapWatch) stop() (base, peak uint64) {
	w.once.Do(func() {
		close(w.quit)
		<-w.done
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.base, w.peak
}

// stop closes n, as an operator stops a node, and leaves it out of the
// swarm from then on: its range passes to its successor (by handoff, or
// promotion from the replicas) and the checks ignore it.
func (a *adversary) stop(n *node.Node) {
	a.t.Helper()
	if err := n.Close(); err != nil {
		a.t.Logf("stopping %s: %v", n.ID(), err)
	}
	drop := func(s []*node.Node) []*node.Node {
		return slices.DeleteFunc(slices.Clone(s), func(m *node.Node) bool { return m == n })
	}
	a.swarm.Nodes, a.honest = drop(a.swarm.Nodes), drop(a.honest)
}
