// Package node assembles a swarmcrawl peer: a libp2p host (package p2p), a
// ring member (p2p/ring), the shard manager that replicates and hands off
// the node's ranges (p2p/shard), the crawl engine (crawl) and the durable
// store (store), and between them the parts that make one peer of them:
// the owner that accepts routed URLs, the router and its durable outbox
// that deliver discovered links, the intake that keeps the crawl queue in
// step with the shard records, progress reporting, fetch delegation of hot
// hosts, the page sink (WARC and page records) and the HTTP status API.
//
// New builds every part in dependency order and hands each what it needs
// at construction; Start joins the swarm and starts the loops; Close
// leaves gracefully and stops them in order.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/store"
	"github.com/swarmcrawl/swarmcrawl/store/warc"
)

// Files a node writes into its data dir for outside tools.
const (
	// AddrsFile lists the node's full multiaddrs, one a line.
	AddrsFile = "addrs"
	// APIFile holds the HOST:PORT of the node's HTTP API.
	APIFile = "api"
	// WARCDir holds the node's WARC files: every fetch, with its extracted text.
	WARCDir = "warc"
	// StoreDir holds the node's store (package store), which `swarmcrawl
	// repair` recovers.
	StoreDir = "store"
)

// Node is one swarm peer: a libp2p host, a ring member, the owner of an
// arc of task keys and a crawler of its own queue.
type Node struct {
	cfg      Config
	crawlCfg crawl.Config // in effect: defaults filled in, the node's hooks set
	shardCfg shard.Config // in effect: defaults filled in
	log      *slog.Logger

	host    host.Host
	metrics *prometheus.Registry // served at /metrics; libp2p's metrics too
	nat     *p2p.NAT             // the host's reachability, relays and hole punching
	streams *p2p.Streams
	ringTr  *p2p.RingTransport
	// pos are the node's ring positions (Config.VNodes), each a ring
	// member with its shard manager; ring is position 0's member, the
	// one its peer ID places.
	pos     positions
	ring    *ring.Node
	db      *store.DB
	archive *warc.Writer
	outbox  *outbox
	// delegator hands hot hosts' fetch batches to helpers (nil with URL
	// keys or Crawl.HotQueue None); helper fetches batches for other
	// owners (nil with URL keys), whatever this node's own HotQueue.
	delegator *delegator
	helper    *helper
	// watcher fetches what a predecessor neither fetched nor explained
	// (watch.go); nil without host keys.
	watcher   *watcher
	finished  *finishedURLs
	progressQ *route.Progress // finished URLs waiting for their links
	crawler   *crawl.Crawler
	queue     *crawlQueue // where admitted URLs go
	admit     *route.Intake
	intake    *intake
	shardTr   *p2p.ShardTransport
	peerState peerState   // checks the state peers hand over
	seeds     *seedPolicy // judges seed marks by their signatures
	scope     *ownerScope
	owner     *route.Owner
	tasks     *p2p.TaskTransport
	fetchTr   *p2p.FetchTransport
	warcSrv   *archiveServer // serves the WARC files to export clients
	router    *route.Router
	links     *linkRouter  // delivers the outbox through router
	swarm     *swarmStatus // answers status requests and runs censuses
	progress  *progress
	owned     ownedHostsCache // the last count of owned hosts (Status)

	// lost fetches again captures whose holders are gone (nil: off).
	lost *lostCaptures

	// taskQuota and seedQuota bound what one peer may send.
	taskQuota, seedQuota *quota
	// neighbours keeps the ring neighbours' connections from being
	// trimmed.
	neighbours *p2p.Protected

	disc     *p2p.Discovery
	started  time.Time
	apiToken string // guards the API's mutating endpoints (DATA/api.token)
	api      *http.Server
	apiAddr  string

	// Loops stop in four stages on Close: the crawler first (no fetch
	// after the node starts leaving), then the shard manager (no claim
	// changes while handing ranges off), then the ring's maintenance (no
	// stabilize in flight notifies a peer after the leave notice), then
	// everything else.
	cancelCrawl context.CancelFunc
	crawlWG     sync.WaitGroup
	cancelShard context.CancelFunc
	shardWG     sync.WaitGroup
	cancelRing  context.CancelFunc
	ringWG      sync.WaitGroup
	cancel      context.CancelFunc
	wg          sync.WaitGroup

	closeOnce sync.Once
	closeErr  error

	// failed receives the store's failure once (see Failed).
	failed chan error
}

// New opens the node's store, archive and identity and starts listening;
// it builds every part of the node in the order they depend on each other.
// It does not join the swarm: Start does.
func New(cfg Config) (*Node, error) {
	cfg, shardCfg, err := cfg.effective()
	if err != nil {
		return nil, fmt.Errorf("new node: %w", err)
	}
	n := &Node{cfg: cfg, shardCfg: shardCfg, failed: make(chan error, 1)}
	if err := n.openStorage(); err != nil {
		return nil, err
	}
	if err := n.build(); err != nil {
		n.closeStorage()
		return nil, err
	}
	return n, nil
}

// openStorage opens what outlives a process: the data dir, the identity
// key, the store and the WARC archive, then the libp2p host.
func (n *Node) openStorage() error {
	cfg := n.cfg
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("new node: %w", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, p2p.IdentityFile)); errors.Is(err, os.ErrNotExist) && cfg.RingWork.Bits() > 0 {
		cfg.Logger.Info("creating the node's identity with the swarm's ring work", "bits", cfg.RingWork.Bits())
	}
	key, err := p2p.LoadOrCreateIdentity(context.Background(), cfg.DataDir, cfg.RingWork)
	if err != nil {
		return fmt.Errorf("new node: %w", err)
	}
	// The API token is checked now, not once the node has joined: a node
	// that would refuse to serve its API refuses to start at all.
	if n.apiToken, err = LoadOrCreateAPIToken(filepath.Join(cfg.DataDir, APITokenFile)); err != nil {
		return fmt.Errorf("new node: %w", err)
	}
	if n.db, err = store.Open(filepath.Join(cfg.DataDir, StoreDir), cfg.Store); err != nil {
		return fmt.Errorf("new node: %w", err)
	}
	if n.archive, err = warc.NewWriter(filepath.Join(cfg.DataDir, WARCDir), cfg.WARC); err != nil {
		n.closeStorage()
		return fmt.Errorf("new node: %w", err)
	}
	n.metrics = newRegistry()
	hostCfg := cfg.Host
	hostCfg.Metrics = n.metrics
	h, err := p2p.NewHost(key, hostCfg)
	if err != nil {
		n.closeStorage()
		return fmt.Errorf("new node: %w", err)
	}
	n.host, n.nat = h, h.NAT
	n.log = cfg.Logger.With("node", p2p.ShortID(n.host.ID()))
	return nil
}

// closeStorage closes whatever openStorage opened.
func (n *Node) closeStorage() {
	if n.host != nil {
		_ = n.host.Close()
	}
	if n.archive != nil {
		_ = n.archive.Close()
	}
	if n.db != nil {
		_ = n.db.Close()
	}
}

// build makes the parts of the node, each from the parts it needs:
//
//	streams → ring transport → positions' rings → their ownerships
//	store → outbox → finished URLs
//	rings, fetch transport → delegator
//	ownerships, outbox, finished URLs, delegator → crawler
//	store, crawler → intake
//	ring, ownership, shard transport, intake → each position's shard manager
//	ownerships, shard managers, intake → owner
//	rings, owner, task transport, outbox → router
//	finished URLs, shard managers, crawler → progress
//	shard managers, crawler, outbox → helper
func (n *Node) build() error {
	cfg := n.cfg
	h := n.host
	n.streams = p2p.NewStreams(h, 0, n.cfg.RingWork)
	n.ringTr = p2p.NewRingTransport(h, n.streams)
	bootstrap, _ := p2p.ParseAddrInfos(cfg.Bootstrap) // checked by Config.effective
	idx, err := n.placement(context.Background(), bootstrap)
	if err != nil {
		return fmt.Errorf("new node: %w", err)
	}
	n.pos = newPositions(idx, n.ringTr, func(i int) ring.Peer { return p2p.RingPeerAt(h.ID(), i) }, cfg.Ring)
	n.ring = n.pos[0].ring

	n.outbox = newOutbox(n.db, n.log, cfg.OutboxMemory)
	n.progressQ = route.NewProgress(n.outbox, nil)
	n.finished = &finishedURLs{links: n.outbox, progress: n.progressQ, log: n.log}
	n.fetchTr = p2p.NewFetchTransport(h, n.streams, n.log)
	n.warcSrv = newArchiveServer(filepath.Join(cfg.DataDir, WARCDir))
	// The crawler, the owner and the router must agree on what a key is.
	crawlCfg := cfg.Crawl.WithDefaults()
	keyMode := crawlCfg.KeyMode
	// Hot hosts are delegated only with host keys: with URL keys a host's
	// URLs are spread over the ring already.
	if keyMode == urls.KeyHost && crawlCfg.HotQueue > 0 {
		n.delegator = newDelegator(n.fetchTr, n.pos.successorsFor, n.log)
	}

	// The crawler fetches only what the node owns right now, reports every
	// finished URL so that replicas learn it, and hands hot hosts' batches
	// to the delegator.
	crawlCfg.Owns = n.pos.Owns
	crawlCfg.OnFinished = n.finished.Add
	crawlCfg.CaptureHolder = n.host.ID().String()
	crawlCfg.Delegate = nil
	if n.delegator != nil {
		crawlCfg.Delegate = n.delegator
		// A batch must not outlive the owner's lease: an owner cut off
		// from its replicas stops before they promote, and so must the
		// batches it handed out.
		crawlCfg.DelegateBudget = n.shardCfg.Lease
	}
	n.crawlCfg = crawlCfg
	n.crawler, err = crawl.New(crawlCfg, n.db, pageStore{db: n.db, archive: n.archive, mode: keyMode}, n.outbox)
	if err != nil {
		return fmt.Errorf("new node: %w", err)
	}

	n.queue = &crawlQueue{db: n.db, crawler: n.crawler, log: n.log}
	// The owner refuses tasks deeper than the crawler follows links
	// (MaxDepth None: seeds only), and state from peers is held to the
	// same rules.
	maxDepth := max(crawlCfg.MaxDepth, 0)
	n.admit = route.NewIntake(n.db, n.queue, maxDepth)
	n.intake = &intake{admit: n.admit, db: n.db, crawler: n.crawler, log: n.log,
		route:     func(ts []frontier.Task) { n.outbox.Add(ts, 0, time.Now()) },
		holdProof: func(u string, proof []byte) bool { return n.links.proofs.put(u, string(proof)) }}
	n.shardTr = p2p.NewShardTransport(h, n.streams)
	n.seeds = newSeedPolicy(n.cfg, n.host, n.host.Peerstore().PrivKey(n.host.ID()))
	n.peerState = peerState{keyMode: keyMode, maxDepth: maxDepth}
	shardCfg := cfg.Shard
	if shardCfg.Logger == nil {
		shardCfg.Logger = n.log
	}
	// Receipts are signed with the identity key, whichever position's
	// replica signs; a replica watches its predecessors' progress through
	// the crawler's helper path, which needs host keys (watch.go): one
	// watcher for every position, which reports what it fetched to the
	// position that handed it over.
	if shardCfg.Signer, err = p2p.NewIdentitySigner(h.Peerstore().PrivKey(h.ID())); err != nil {
		return fmt.Errorf("new node: %w", err)
	}
	if keyMode == urls.KeyHost {
		n.watcher = newWatcher(n.log, 0, watchBudgetFor(shardCfg.WatchTimeout), n.crawler.FetchBatch)
	}
	for slot, p := range n.pos {
		pc := shardCfg
		pc.Positions = len(n.pos) // shared maintenance (shard.Config.Positions)
		if len(n.pos) > 1 {
			pc.Logger = shardCfg.Logger.With("position", p.index)
		}
		var app shard.App = n.intake
		if n.watcher != nil {
			app = watchingApp{intake: n.intake, w: n.watcher, pos: slot}
		}
		tr := checkedTransport{Transport: n.shardTr.Position(p.index), check: n.peerState, log: n.log}
		p.shard, err = shard.New(p.own, tr, shardStorage{db: n.db, epochs: epochsMetaOf(p.index), seeds: n.seeds}, app, pc)
		if err != nil {
			return fmt.Errorf("new node: position %d: %w", p.index, err)
		}
	}
	if n.watcher != nil {
		n.watcher.done = func(ctx context.Context, i int, recs []shard.Record) error {
			return n.pos[i].shard.WatchDone(ctx, recs)
		}
	}

	rules := urlRules{mode: keyMode}
	n.scope = &ownerScope{scope: n.crawler.Scope()}
	n.owner = route.NewOwner(n.pos, n.pos, n.admit, rules, n.scope, maxDepth)
	n.owner.VerifySeeds(n.seeds)
	n.tasks = p2p.NewTaskTransport(n.streams, keyMode.String())
	n.taskQuota = newQuota(cfg.TaskQuota, quotaPeers)
	n.seedQuota = newQuota(cfg.SeedQuota, quotaPeers)
	n.neighbours = p2p.NewProtected(h, "swarmcrawl-ring")
	n.tasks.ServeHolds(n.holdTasks)
	receipts := &route.ReceiptCheck{URLs: rules, Verifier: p2p.IdentityVerifier{}, Replicas: n.shardCfg.Replicas}
	// The router looks keys up from position 0, which answers a key any
	// position of this node holds without a hop (ring.Config.Siblings),
	// and takes a batch for any of them as its own (Local: the positions
	// share the node's owner, store and crawler); a batch for another
	// node goes to the position that holds its keys, whose replicas sign
	// the receipts for that position (route.ReceiptCheck).
	n.router = route.NewRouter(n.ring, n.owner, taskSender{n.tasks}, route.Config{Logger: n.log, Receipts: receipts,
		Local: func(p ring.Peer) bool { return p.Machine() == n.ring.Self().Machine() }})
	if n.delegator != nil {
		// A hot host's batches go to the holders of its helper slots,
		// found through the router's owner cache.
		n.delegator.route.UseSlots(route.DefaultConfig().HelperSlots, n.router.Owner)
		n.delegator.route.UseLoad(n.crawlLoad, func(r fetchReq) int { return len(r.req.GetTasks()) }, trimBatch)
	}
	n.links = &linkRouter{router: n.router, outbox: n.outbox, rules: rules, proofs: &seedProofs{}}
	n.outbox.proofs = n.links.proofs
	n.swarm = &swarmStatus{n: n}
	n.lost = n.newLostCaptures()
	n.progress = &progress{finished: n.progressQ, shard: n.pos, crawler: n.crawler, log: n.log}
	n.metrics.MustRegister(nodeCollector{n})
	if keyMode == urls.KeyHost {
		n.helper = &helper{log: n.log, predecessors: n.pos.predecessors, vouch: n.pos.vouch, fetch: n.crawler.FetchBatch, links: n.outbox,
			slots: helperSlots{router: n.router, pos: n.pos}, leaseLeft: n.pos.leaseLeft, lease: askLease(n.fetchTr), load: n.crawlLoad}
	}
	return nil
}

// taskSender delivers tasks to remote owners over the task transport
// (route.Transport).
type taskSender struct{ tasks *p2p.TaskTransport }

// Send implements route.Transport.
func (t taskSender) Send(ctx context.Context, to ring.Peer, tasks []route.Task) (route.Result, error) {
	resp, err := t.tasks.Send(ctx, to, encodeTasks(tasks))
	if err != nil {
		return route.Result{}, err
	}
	res := route.Result{Accepted: int(resp.Accepted), Duplicates: int(resp.Duplicates), NotOwned: decodeTasks(resp.NotOwned),
		Receipts: p2p.DecodeReceipts(resp.Receipts)}
	for _, r := range resp.Rejected {
		res.Rejected = append(res.Rejected, route.Rejection{URL: r.Url, Reason: r.Reason})
	}
	return res, nil
}

// Start joins the swarm (or starts a new one without bootstrap peers),
// begins crawling and serves the API. It returns once the node is a ring
// member.
func (n *Node) Start(ctx context.Context) error {
	n.started = time.Now()
	// The outbox is loaded before seeds can add to it, so that its tasks
	// stay in the order of their entries.
	if loaded, err := n.outbox.Load(); err != nil {
		return fmt.Errorf("start: %w", err)
	} else if loaded > 0 {
		n.log.Info("resuming undelivered links", "tasks", loaded)
	}
	n.ringTr.Serve(n.pos.ringHandlers()...)
	p2p.ServeArchive(n.streams, n.warcSrv.list, n.warcSrv.read)
	handlers := make([]shard.Handler, n.pos.maxIndex()+1) // by position index; nil where none
	for _, p := range n.pos {
		handlers[p.index] = checkedHandler{Handler: p.shard, check: n.peerState, log: n.log}
	}
	n.shardTr.Serve(handlers...)
	n.tasks.ServeTasks(n.acceptTasks)
	n.tasks.ServeSeeds(n.submitSeeds)
	n.serveCaptures()
	n.swarm.handle()

	// A node behind NAT joins once peers can reach it (through a relay),
	// or not at all.
	if err := n.waitReachable(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	bootstrap, _ := p2p.ParseAddrInfos(n.cfg.Bootstrap)
	if !n.cfg.DisableDiscovery {
		d, err := p2p.NewDiscovery(ctx, n.host, bootstrap, n.log)
		if err != nil {
			return fmt.Errorf("start: %w", err)
		}
		n.disc = d
	}
	if err := n.join(ctx, bootstrap); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if err := n.startAPI(); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if err := n.writeInfoFiles(); err != nil {
		return fmt.Errorf("start: %w", err)
	}

	runCtx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	crawlCtx, cancelCrawl := context.WithCancel(runCtx)
	n.cancelCrawl = cancelCrawl
	shardCtx, cancelShard := context.WithCancel(runCtx)
	n.cancelShard = cancelShard
	if n.helper != nil {
		n.fetchTr.Serve(n.helper.serve)
	}
	ringCtx, cancelRing := context.WithCancel(runCtx)
	n.cancelRing = cancelRing
	for _, p := range n.pos {
		goRunIn(&n.ringWG, n.log, "ring", func() { _ = p.ring.Run(ringCtx) })
		goRunIn(&n.shardWG, n.log, "shard", func() { _ = p.shard.Run(shardCtx) })
	}
	goRunIn(&n.crawlWG, n.log, "crawler", func() { _ = n.crawler.Run(crawlCtx) })
	goRunIn(&n.crawlWG, n.log, "unpark", func() { n.unparkLoop(crawlCtx) })
	n.goRun("router", func() { n.links.Run(runCtx) })
	n.goRun("progress", func() { n.progress.Run(runCtx) })
	if n.watcher != nil {
		n.goRun("watcher", func() { n.watcher.Run(runCtx) })
	}
	n.goRun("neighbours", func() { n.protectNeighbours(runCtx) })
	n.goRun("reachability", func() { n.reachLoop(runCtx) })
	n.goRun("store watch", func() { n.watchStore(runCtx) })
	if n.lost != nil {
		goRunIn(&n.crawlWG, n.log, "lost captures", func() { n.lost.Run(crawlCtx) })
	}
	if n.disc != nil {
		n.goRun("discovery", func() { n.disc.Run(runCtx, n.found) })
	}
	n.log.Info("node started", "ring_id", n.ring.Self().ID, "positions", len(n.pos), "addrs", strings.Join(n.Addrs(), " "), "api", n.apiAddr)
	return nil
}

func (n *Node) goRun(name string, fn func()) { goRunIn(&n.wg, n.log, name, fn) }

// goRunIn runs one of the node's loops in a goroutine that wg waits for.
func goRunIn(wg *sync.WaitGroup, log *slog.Logger, name string, fn func()) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		fn()
		log.Debug("loop stopped", "loop", name)
	}()
}

// Failed delivers, at most once, the error of a store that failed: the
// disk refused a write, and the store refuses every write after it (see
// store.DB.Failed). The node can then keep nothing new for its ranges, so
// whoever runs it should Close it at once: it leaves the ring, and its
// successors, which hold replicas of its ranges, take them over. The
// swarmcrawl node command does so and exits with the error (fail-stop).
func (n *Node) Failed() <-chan error { return n.failed }

// storeWatchInterval is how often the node looks whether its store failed.
const storeWatchInterval = 500 * time.Millisecond

// watchStore reports the store's failure on n.failed, once, with an ERROR
// log line, and stops the crawl: nothing fetched now could be stored.
func (n *Node) watchStore(ctx context.Context) {
	every(ctx, storeWatchInterval, func() bool {
		err := n.db.Failed()
		if err == nil {
			return true
		}
		n.log.Error("the store failed: this node can keep nothing new and must leave the ring so that its successors take over its ranges", "err", err)
		n.cancelCrawl()
		n.failed <- err
		return false
	})
}

// every calls fn each interval until ctx is done or fn returns false.
func every(ctx context.Context, interval time.Duration, fn func() bool) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !fn() {
			return
		}
	}
}

// unparkInterval is how often hosts the crawler parked (because the node
// did not own them at that moment: no lease yet, a range in transit) are
// offered again.
const unparkInterval = 250 * time.Millisecond

// unparkLoop gives the crawler back the parked hosts the node owns now.
func (n *Node) unparkLoop(ctx context.Context) {
	every(ctx, unparkInterval, func() bool {
		if err := n.crawler.Resume(n.pos.Owns); err != nil {
			n.log.Warn("resuming parked hosts failed", "err", err)
		}
		return true
	})
}

// neighbourInterval is how often the set of ring neighbours whose
// connections are protected is brought up to date.
const neighbourInterval = time.Second

// protectNeighbours keeps the connections to the ring's neighbours
// (predecessor, successors, fingers) safe from the connection manager's
// trimming, so that strangers opening connections cannot cut the node off
// the ring.
func (n *Node) protectNeighbours(ctx context.Context) {
	t := time.NewTicker(neighbourInterval)
	defer t.Stop()
	self := n.host.ID()
	for {
		seen := map[peer.ID]bool{self: true}
		var ids []peer.ID
		for _, pos := range n.pos {
			st := pos.ring.State()
			for _, p := range append(append([]ring.Peer{st.Predecessor}, st.Successors...), st.Fingers...) {
				if id, err := p2p.MachineOf(p); err == nil && !seen[id] {
					seen[id] = true
					ids = append(ids, id)
				}
			}
		}
		n.neighbours.Set(ids)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// join links the node into the ring through the first bootstrap peer that
// answers, or creates a new ring when there are none.
func (n *Node) join(ctx context.Context, bootstrap []peer.AddrInfo) error {
	if err := n.joinFirst(ctx, bootstrap); err != nil {
		return err
	}
	return n.joinSiblings(ctx)
}

// joinSiblings joins positions 1 and up through position 0, which is a
// member already: their lookups start in process and go on from there.
func (n *Node) joinSiblings(ctx context.Context) error {
	for _, p := range n.pos[1:] {
		if err := n.joinThrough(ctx, p.ring, n.ring.Self()); err != nil {
			return fmt.Errorf("position %d: %w", p.index, err)
		}
	}
	return nil
}

// joinFirst links position 0 into the ring through the first bootstrap
// peer that answers, or creates a new ring when there are none.
func (n *Node) joinFirst(ctx context.Context, bootstrap []peer.AddrInfo) error {
	if len(bootstrap) == 0 {
		n.ring.Create()
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.JoinTimeout)
	defer cancel()
	var errs []error
	for _, b := range bootstrap {
		if b.ID == n.host.ID() {
			continue
		}
		if err := n.host.Connect(ctx, b); err != nil {
			errs = append(errs, fmt.Errorf("connect %s: %w", b.ID, err))
			continue
		}
		if err := n.joinThrough(ctx, n.ring, p2p.RingPeer(b.ID)); err != nil {
			errs = append(errs, fmt.Errorf("join through %s: %w", b.ID, err))
			continue
		}
		return nil
	}
	if len(errs) == 0 {
		n.ring.Create()
		return nil
	}
	return fmt.Errorf("%w: %w", ErrNoBootstrap, errors.Join(errs...))
}

// Joining through a bootstrap peer that answers is tried up to
// joinAttempts times, joinRetry apart (within Config.JoinTimeout): the
// join's first exchange with a peer behind NAT rides on a relayed
// connection, and fails if the hole punch that makes it direct takes
// longer than a ring call may; the next attempt finds it direct.
const (
	joinAttempts = 5
	joinRetry    = time.Second
)

// joinThrough joins r to the ring through the member b, retrying a
// failed join.
func (n *Node) joinThrough(ctx context.Context, r *ring.Node, b ring.Peer) error {
	for attempt := 1; ; attempt++ {
		err := r.Join(ctx, b)
		if err == nil || attempt == joinAttempts || errors.Is(err, ring.ErrIDTaken) {
			return err
		}
		n.log.Info("join failed, retrying", "through", b.Addr, "position", r.Self().Addr, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(joinRetry):
		}
	}
}

// ErrNoBootstrap is Start's error when no bootstrap peer could be joined
// through.
var ErrNoBootstrap = errors.New("no bootstrap peer reachable")

// found hears of a member the discovery DHT found. A node that is alone on
// its ring (it started without bootstrap peers, or lost every neighbour)
// joins through it, so swarms started apart grow together.
func (n *Node) found(ctx context.Context, p peer.AddrInfo) {
	if !n.pos.machineAlone() {
		return
	}
	for _, pos := range n.pos {
		if err := pos.ring.Join(ctx, p2p.RingPeer(p.ID)); err != nil {
			n.log.Debug("join discovered member", "peer", p2p.ShortID(p.ID), "position", pos.index, "err", err)
			return
		}
	}
	n.log.Info("joined discovered member", "peer", p2p.ShortID(p.ID))
}

// alone reports whether r is the only member of its ring.
func alone(r *ring.Node) bool {
	self := r.Self()
	for _, s := range r.Successors() {
		if s != self {
			return false
		}
	}
	return true
}

// Addrs returns the node's full multiaddrs (with /p2p/<id>).
func (n *Node) Addrs() []string { return p2p.FullAddrs(n.host) }

// ID returns the node's peer ID.
func (n *Node) ID() peer.ID { return n.host.ID() }

// Host returns the node's libp2p host.
func (n *Node) Host() host.Host { return n.host }

// Ring returns the node's ring member.
func (n *Node) Ring() *ring.Node { return n.ring }

// Positions returns the ring members of the node's positions
// (Config.VNodes), position 0 (Ring) first.
func (n *Node) Positions() []*ring.Node {
	out := make([]*ring.Node, len(n.pos))
	for i, p := range n.pos {
		out[i] = p.ring
	}
	return out
}

// Owns reports whether key lies on the ring arc of one of the node's
// positions: the node is the key's owner on its ring view. Whether it
// may work on the key now (its claim) is the shard layer's lease.
func (n *Node) Owns(key ring.ID) bool { return n.pos.arc(uint64(key)).ring.Owns(key) }

// APIAddr returns HOST:PORT of the HTTP API, once started.
func (n *Node) APIAddr() string { return n.apiAddr }

func (n *Node) writeInfoFiles() error {
	addrs := strings.Join(n.Addrs(), "\n") + "\n"
	if err := writeFileAtomic(filepath.Join(n.cfg.DataDir, AddrsFile), []byte(addrs)); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(n.cfg.DataDir, APIFile), []byte(n.apiAddr+"\n"))
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Close leaves the ring gracefully, stops every loop and closes the host
// and the store. It is safe to call more than once.
func (n *Node) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.close(true) })
	return n.closeErr
}

// Halt stops the node like Close but without leaving the ring: nothing is
// handed off and the outbox is not drained, everything stays in the store
// for a restart. It is the stop of a whole swarm (the demo's), where every
// successor is stopping too and a departure would only push ranges around
// until the last node had nobody to give them to. Close and Halt stop the
// node once: whichever comes first.
func (n *Node) Halt() error {
	n.closeOnce.Do(func() { n.closeErr = n.close(false) })
	return n.closeErr
}

func (n *Node) close(leave bool) error {
	var errs []error
	// Stop fetching for other owners: the batches in progress end and
	// are answered before the crawler they use stops.
	n.streams.Unhandle(protocol.FetchID)
	n.streams.Unhandle(protocol.GetID)
	n.streams.Unhandle(protocol.CaptureID)
	if n.cancel != nil {
		// Stop fetching, then stop claim maintenance, then (Close, not
		// Halt) hand every claimed range to the successor as the node
		// leaves the ring.
		n.cancelCrawl()
		n.crawlWG.Wait()
		n.cancelShard()
		n.shardWG.Wait()
		if leave {
			// Deliver the links still in the outbox while the ring
			// routes, then report what is settled; the rest stays
			// pending at the replicas and is fetched again by the next
			// owner, which loses nothing.
			n.drainOutbox(outboxDrainTimeout)
			n.progress.flushFinished()
			leaveCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			// A stabilize still under way could notify the successor
			// after the leave notice and make it take this node back.
			n.cancelRing()
			n.ringWG.Wait()
			for _, p := range n.pos {
				if err := p.ring.Leave(leaveCtx); err != nil {
					n.log.Warn("graceful ring leave incomplete", "position", p.index, "err", err)
				}
			}
			// Gone from the ring, the node answers no ring call: a peer
			// it left alone must not join through it (discovery still
			// finds it) only to lose it a moment later and find itself
			// isolated instead of alone.
			n.streams.Unhandle(protocol.RingID)
			for _, p := range n.pos {
				if err := p.shard.Leave(leaveCtx); err != nil {
					n.log.Warn("graceful leave incomplete", "position", p.index, "err", err)
				}
			}
			cancel()
		} else {
			n.progress.flushFinished()
			n.log.Info("stopping without leaving the ring: the swarm is stopping")
		}
		n.cancel()
	}
	if n.api != nil {
		shutCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = n.api.Shutdown(shutCtx)
		cancel()
	}
	n.wg.Wait()
	n.ringWG.Wait()
	if n.disc != nil {
		if err := n.disc.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := n.host.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close host: %w", err))
	}
	// No request handler may touch the store once it is closed.
	n.streams.Close()
	if err := n.archive.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close warc: %w", err))
	}
	if err := n.db.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close store: %w", err))
	}
	return errors.Join(errs...)
}

// outboxDrainTimeout bounds how long a stopping node waits for its router
// to deliver the links still in its outbox.
const outboxDrainTimeout = 5 * time.Second

// drainOutbox waits until the outbox is empty, at most timeout: links a
// leaving node delivers are links whose pages need not be fetched again by
// the next owner.
func (n *Node) drainOutbox(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for n.outbox.Pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(25 * time.Millisecond)
	}
	if p := n.outbox.Pending(); p > 0 {
		n.log.Info("leaving with undelivered links; they stay in the outbox for a restart", "tasks", p)
	}
}

// Idle reports whether the node has nothing queued, nothing in flight and
// no undelivered links.
func (n *Node) Idle() bool {
	return n.crawler.Idle() && n.outbox.Pending() == 0 && n.Settled()
}

// Settled reports whether every position of the node claims the whole
// range the ring gives it, with nothing still being handed off.
func (n *Node) Settled() bool {
	for _, p := range n.pos {
		if !p.settled() {
			return false
		}
	}
	return true
}

// settled reports whether the position claims the whole range the ring
// gives it, with nothing still being handed off.
func (p *position) settled() bool {
	st := p.shard.Stats()
	if len(st.Releasing) > 0 {
		return false
	}
	pred := p.ring.Predecessor()
	if pred.IsZero() {
		return alone(p.ring) && len(st.Claims) > 0
	}
	return covers(st.Claims, pred.ID, p.ring.Self().ID)
}

// covers reports whether the claims together hold every key of the arc
// (from, to], walking the arc clockwise from claim to claim.
func covers(claims []shard.Claim, from, to ring.ID) bool {
	for i := 0; i <= len(claims); i++ {
		next := false
		for _, c := range claims {
			if c.Range.From == c.Range.To {
				return true // the whole ring
			}
			if !c.Range.Contains(from + 1) {
				continue
			}
			// The claim holds the next key; it covers the rest of the arc
			// when the arc's end lies inside it.
			if c.Range.Contains(to) && (to-from) <= (c.Range.To-from) {
				return true
			}
			from, next = c.Range.To, true
			break
		}
		if !next {
			return false
		}
	}
	return false
}
