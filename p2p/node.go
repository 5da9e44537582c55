package p2p

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
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
)

// Config configures a swarm node.
type Config struct {
	// DataDir holds the identity key, the store and the addrs/api files. Required.
	DataDir string
	// Host configures libp2p: listen addresses, NAT, relays.
	Host HostConfig
	// Bootstrap are full multiaddrs of swarm members to join through. Empty
	// starts a new swarm.
	Bootstrap []string
	// APIAddr is where the HTTP status API listens. Default "127.0.0.1:0".
	APIAddr string
	// Discovery runs the Kademlia DHT to find swarm members beyond the
	// bootstrap list. Default true.
	Discovery bool
	// KeyMode chooses the crawl task key: per host (default) or per URL.
	KeyMode crawl.KeyMode
	// HotQueue is the number of queued tasks of one host at which its
	// owner hands the host's fetches, in batches, to its successor
	// replicas (crawl.Config.HotQueue); 0 never delegates. Only with host
	// keys. Default 200. Crawl.HotQueue and Crawl.Delegate are set from it.
	HotQueue int
	// Crawl configures the fetcher and politeness.
	Crawl crawl.Config
	// Store configures the durable state.
	Store store.Options
	// WARC configures the archive of fetched pages in DataDir/warc.
	WARC warc.Options
	// Ring configures Chord maintenance.
	Ring ring.Config
	// Shard configures replication, failure detection and handoff.
	Shard shard.Config
	// JoinTimeout bounds joining through the bootstrap peers. Default 30s.
	JoinTimeout time.Duration
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
}

// DefaultHotQueue is the default Config.HotQueue.
const DefaultHotQueue = 200

// DefaultConfig returns a node configuration with every default set;
// DataDir and Host.Listen are left for the caller.
func DefaultConfig() Config {
	return Config{
		Host:        HostConfig{NAT: true},
		APIAddr:     "127.0.0.1:0",
		Discovery:   true,
		KeyMode:     crawl.KeyHost,
		HotQueue:    DefaultHotQueue,
		Crawl:       crawl.DefaultConfig(),
		Store:       store.DefaultOptions(),
		Ring:        ring.DefaultConfig(),
		Shard:       shard.Config{Replicas: 2, FailureTimeout: 5 * time.Second, TickInterval: 50 * time.Millisecond},
		JoinTimeout: 30 * time.Second,
	}
}

// Node is one swarm peer: a libp2p host, a ring member, the owner of an
// arc of task keys and a crawler of its own queue.
type Node struct {
	cfg     Config
	log     *slog.Logger
	host    host.Host
	streams *Streams
	ringTr  *RingTransport
	ring    *ring.Node
	shardTr *ShardTransport
	shard   *shard.Manager
	db      *store.DB
	archive *warc.Writer
	crawler *crawl.Crawler
	owner   *owner
	router  *router
	// delegator hands hot hosts' fetch batches to helpers (nil: never);
	// fetchSrv fetches batches for other owners (nil with URL keys).
	delegator *fetchDelegator
	fetchSrv  *fetchServer
	dht       *dht.IpfsDHT
	started   time.Time

	api     *http.Server
	apiAddr string

	// Loops stop in three stages on Close: the crawler first (no fetch
	// after the node starts leaving), then the shard manager (no claim
	// changes while handing ranges off), then everything else.
	cancelCrawl context.CancelFunc
	crawlWG     sync.WaitGroup
	cancelShard context.CancelFunc
	shardWG     sync.WaitGroup
	cancel      context.CancelFunc
	wg          sync.WaitGroup

	// doneWait holds finished URLs until their links are settled (onDone).
	doneMu   sync.Mutex
	doneWait []doneItem

	closeOnce sync.Once
	closeErr  error
}

// New opens the node's store and identity and starts listening. It does not
// join the swarm: Start does.
func New(cfg Config) (*Node, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("new node: data dir is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.JoinTimeout <= 0 {
		cfg.JoinTimeout = 30 * time.Second
	}
	if cfg.HotQueue < 0 {
		return nil, fmt.Errorf("new node: negative HotQueue %d", cfg.HotQueue)
	}
	if _, err := ParseAddrInfos(cfg.Bootstrap); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	// The crawler keys its per-URL state by ring key: it must agree with
	// the owner on what a key is.
	cfg.Crawl.KeyMode = cfg.KeyMode
	// The ring must notice a silent neighbour well within the failure
	// timeout: a paused process keeps its connections open, so every ring
	// RPC to it runs into this timeout before the ring moves on.
	if ft := shardFailureTimeout(cfg.Shard); cfg.Ring.RPCTimeout == 0 || cfg.Ring.RPCTimeout > ft/2 {
		cfg.Ring.RPCTimeout = min(ring.DefaultConfig().RPCTimeout, ft/2)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("new node: %w", err)
	}
	key, err := LoadOrCreateIdentity(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("new node: %w", err)
	}
	db, err := store.Open(filepath.Join(cfg.DataDir, "store"), cfg.Store)
	if err != nil {
		return nil, fmt.Errorf("new node: %w", err)
	}
	archive, err := warc.NewWriter(filepath.Join(cfg.DataDir, WARCDir), cfg.WARC)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("new node: %w", err)
	}
	h, err := NewHost(key, cfg.Host)
	if err != nil {
		_ = archive.Close()
		_ = db.Close()
		return nil, err
	}
	n := &Node{cfg: cfg, log: cfg.Logger.With("node", shortID(h.ID())), host: h, db: db, archive: archive}
	n.streams = NewStreams(h, 0)
	n.ringTr = NewRingTransport(h, n.streams)
	n.ring = ring.NewNode(RingPeer(h.ID()), n.ringTr, cfg.Ring)
	n.owner = &owner{db: db, keyMode: cfg.KeyMode, maxDepth: cfg.Crawl.MaxDepth}
	n.router = newRouter(n.ring, n.owner, db, sendTasks(n.streams), cfg.KeyMode, n.log)
	// The crawler fetches only what the shard manager says this node owns
	// right now, and reports every finished URL so replicas learn it.
	crawlCfg := cfg.Crawl
	crawlCfg.Owns = func(key uint64) bool { return n.shard.Owns(key) }
	crawlCfg.OnDone = n.onDone
	// Hot hosts are delegated only with host keys: with URL keys a host's
	// URLs are spread over the ring already.
	crawlCfg.HotQueue, crawlCfg.Delegate = 0, nil
	if cfg.KeyMode == crawl.KeyHost && cfg.HotQueue > 0 {
		n.delegator = newFetchDelegator(h, n.ring.Self(), n.ring.Successors, cfg.Shard.Replicas, n.log)
		crawlCfg.HotQueue, crawlCfg.Delegate = cfg.HotQueue, n.delegator
		// A batch must not outlive the owner's lease: an owner cut off
		// from its replicas stops before they promote, and so must the
		// batches it handed out.
		crawlCfg.DelegateBudget = shardLease(cfg.Shard)
	}
	fail := func(err error) (*Node, error) {
		_ = h.Close()
		_ = archive.Close()
		_ = db.Close()
		return nil, fmt.Errorf("new node: %w", err)
	}
	n.crawler, err = crawl.New(crawlCfg, db, pageStore{db: db, archive: archive, mode: cfg.KeyMode}, n.router)
	if err != nil {
		return fail(err)
	}
	n.owner.crawler = n.crawler
	n.shardTr = NewShardTransport(n.streams)
	shardCfg := cfg.Shard
	if shardCfg.Clock == nil {
		shardCfg.Clock = cfg.Ring.Clock
	}
	if shardCfg.Logger == nil {
		shardCfg.Logger = n.log
	}
	app := &shardApp{owner: n.owner, db: db, crawler: n.crawler, log: n.log}
	n.shard, err = shard.New(n.ring, n.shardTr, shardStorage{db: db}, app, shardCfg)
	if err != nil {
		return fail(err)
	}
	n.owner.shard = n.shard
	if cfg.KeyMode == crawl.KeyHost {
		n.fetchSrv = newFetchServer(h, n.log, n.shard.Vouch, n.crawler.FetchBatch, n.router)
	}
	return n, nil
}

// Start joins the swarm (or starts a new one without bootstrap peers),
// begins crawling and serves the API. It returns once the node is a ring
// member.
func (n *Node) Start(ctx context.Context) error {
	n.started = time.Now()
	n.ringTr.Serve(n.ring)
	n.shardTr.Serve(n.shard)
	serveTasks(n.streams, n.owner)
	n.serveSeeds()

	bootstrap, _ := ParseAddrInfos(n.cfg.Bootstrap)
	if n.cfg.Discovery {
		d, err := NewDiscoveryDHT(ctx, n.host, bootstrap)
		if err != nil {
			return fmt.Errorf("start: %w", err)
		}
		n.dht = d
	}
	if err := n.join(ctx, bootstrap); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	if loaded, err := n.router.Load(); err != nil {
		return fmt.Errorf("start: %w", err)
	} else if loaded > 0 {
		n.log.Info("resuming undelivered links", "tasks", loaded)
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
	if n.fetchSrv != nil {
		n.fetchSrv.Serve()
	}
	n.goRun("ring", func() { _ = n.ring.Run(runCtx) })
	goRunIn(&n.shardWG, n.log, "shard", func() { _ = n.shard.Run(shardCtx) })
	goRunIn(&n.crawlWG, n.log, "crawler", func() { _ = n.crawler.Run(crawlCtx) })
	goRunIn(&n.crawlWG, n.log, "unpark", func() { n.unparkLoop(crawlCtx) })
	n.goRun("router", func() { n.router.Run(runCtx) })
	n.goRun("progress", func() { n.progressLoop(runCtx) })
	if n.dht != nil {
		n.goRun("discovery", func() { n.discover(runCtx) })
	}
	n.log.Info("node started", "ring_id", n.ring.Self().ID, "addrs", strings.Join(n.Addrs(), " "), "api", n.apiAddr)
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

// unparkInterval is how often hosts the crawler parked (because the node
// did not own them at that moment: no lease yet, a range in transit) are
// offered again.
const unparkInterval = 250 * time.Millisecond

// unparkLoop gives the crawler back the parked hosts the node owns now.
func (n *Node) unparkLoop(ctx context.Context) {
	t := time.NewTicker(unparkInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := n.crawler.Resume(n.shard.Owns); err != nil {
			n.log.Warn("resuming parked hosts failed", "err", err)
		}
	}
}

// onDone hears that a URL needs no more fetching. The replicas learn it
// only once the links found on the page are settled with their owners: a
// page marked done while its links sit in this node's outbox would lose
// them if the node died for good, since the next owner would not fetch the
// page again.
func (n *Node) onDone(t crawl.Task, key, urlHash uint64, meta *store.URLMeta) {
	rec := shard.Record{Key: key, Hash: urlHash, URL: t.URL, Depth: t.Depth, Redirects: t.Redirects, Done: true}
	// The URL's state after the fetch travels with the record, so that
	// whoever owns it next recrawls it on schedule, conditionally.
	if meta != nil {
		var err error
		if rec.Meta, rec.MetaVersion, err = recordState(*meta); err != nil {
			n.log.Warn("encoding a fetched URL's state failed", "url", t.URL, "err", err)
		}
	}
	links := n.router.TakeLinks(t.URL)
	n.doneMu.Lock()
	n.doneWait = append(n.doneWait, doneItem{rec: rec, links: links})
	n.doneMu.Unlock()
}

// doneItem is a finished URL waiting for its page's links to be settled.
type doneItem struct {
	rec   shard.Record
	links []uint64 // outbox entries of the page's links
}

// progressInterval is how often finished URLs are released to the shard
// manager once their links are settled.
const progressInterval = 50 * time.Millisecond

// hostsEvery is how many progress ticks pass between two reports of the
// hosts whose robots.txt was fetched, and hostsBudget bounds the bytes of
// one report: host states ride on the heartbeat that renews the lease,
// which must stay small. Hosts past the budget are reported when their
// range is handed over; after a crash their next owner fetches robots.txt
// again.
const (
	hostsEvery  = 20
	hostsBudget = 1 << 20
)

// progressLoop reports finished URLs to the shard manager, and now and
// then the hosts whose robots.txt was fetched, so that the replicas hold
// the robots.txt of every host they may have to take over.
func (n *Node) progressLoop(ctx context.Context) {
	t := time.NewTicker(progressInterval)
	defer t.Stop()
	for tick := 1; ; tick++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n.flushProgress()
		if tick%hostsEvery == 0 {
			n.flushHosts()
		}
	}
}

// flushHosts hands the shard manager the hosts whose robots.txt was
// fetched since the last call.
func (n *Node) flushHosts() {
	hosts, err := hostStates(n.crawler.TakeFreshSnapshots())
	size := 0
	for i, h := range hosts {
		if size += len(h.Data) + len(h.Host); size > hostsBudget {
			hosts = hosts[:i]
			break
		}
	}
	if err == nil && len(hosts) > 0 {
		err = n.shard.Progress(nil, hosts)
	}
	if err != nil {
		n.log.Warn("recording host states failed", "err", err)
	}
}

// flushProgress hands the shard manager every finished URL whose page's
// links are settled.
func (n *Node) flushProgress() {
	n.doneMu.Lock()
	var ready []shard.Record
	n.doneWait = slices.DeleteFunc(n.doneWait, func(d doneItem) bool {
		if n.router.Settled(d.links) {
			ready = append(ready, d.rec)
			return true
		}
		return false
	})
	n.doneMu.Unlock()
	if len(ready) == 0 {
		return
	}
	if err := n.shard.Progress(ready, nil); err != nil {
		n.log.Warn("recording progress failed", "urls", len(ready), "err", err)
	}
}

// join links the node into the ring through the first bootstrap peer that
// answers, or creates a new ring when there are none.
func (n *Node) join(ctx context.Context, bootstrap []peer.AddrInfo) error {
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
		if err := n.ring.Join(ctx, RingPeer(b.ID)); err != nil {
			errs = append(errs, fmt.Errorf("join through %s: %w", b.ID, err))
			continue
		}
		return nil
	}
	if len(errs) == 0 {
		n.ring.Create()
		return nil
	}
	return fmt.Errorf("no bootstrap peer reachable: %w", errors.Join(errs...))
}

// Seed routes seed URLs to their owners, as the seed protocol does for
// remote clients.
func (n *Node) Seed(ctx context.Context, urls []string) SeedResult {
	var res SeedResult
	tasks := make([]crawl.Task, 0, len(urls))
	for _, raw := range urls {
		u, err := crawl.Normalize(nil, strings.TrimSpace(raw))
		if err != nil {
			res.Rejected = append(res.Rejected, Rejection{URL: raw, Reason: err.Error()})
			continue
		}
		tasks = append(tasks, crawl.Task{URL: u})
	}
	// A few quick passes absorb owners that moved or answered slowly;
	// whatever is left goes to the outbox and is retried until delivered.
	for attempt := 0; attempt < 3 && len(tasks) > 0; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(backoff(attempt)):
			}
		}
		r := n.router.Route(ctx, tasks)
		res.Accepted += r.accepted
		res.Duplicates += r.duplicates
		for _, rj := range r.rejected {
			res.Rejected = append(res.Rejected, Rejection{URL: rj.url, Reason: rj.reason})
		}
		tasks = r.undelivered
		if ctx.Err() != nil {
			break
		}
	}
	res.Pending = len(tasks)
	n.router.Defer(tasks, 1)
	return res
}

func (n *Node) serveSeeds() {
	n.streams.Handle(protocol.SeedID, protocol.MaxSeedMsgBytes,
		func() proto.Message { return &pb.SeedRequest{} },
		func(ctx context.Context, from peer.ID, m proto.Message) proto.Message {
			req := m.(*pb.SeedRequest)
			if len(req.Urls) > protocol.MaxSeedURLs {
				return &pb.SeedResponse{Error: fmt.Sprintf("%d seeds exceed the limit of %d per request", len(req.Urls), protocol.MaxSeedURLs)}
			}
			res := n.Seed(ctx, req.Urls)
			n.log.Info("seeds submitted", "from", shortID(from), "accepted", res.Accepted, "duplicates", res.Duplicates, "pending", res.Pending, "rejected", len(res.Rejected))
			out := &pb.SeedResponse{Accepted: uint32(res.Accepted), Duplicates: uint32(res.Duplicates), Pending: uint32(res.Pending)}
			for _, r := range res.Rejected {
				out.Rejected = append(out.Rejected, &pb.Rejection{Url: r.URL, Reason: r.Reason})
			}
			return out
		})
}

// Addrs returns the node's full multiaddrs (with /p2p/<id>).
func (n *Node) Addrs() []string { return FullAddrs(n.host) }

// ID returns the node's peer ID.
func (n *Node) ID() peer.ID { return n.host.ID() }

// Host returns the node's libp2p host.
func (n *Node) Host() host.Host { return n.host }

// Ring returns the node's ring member.
func (n *Node) Ring() *ring.Node { return n.ring }

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

func (n *Node) startAPI() error {
	if n.cfg.APIAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", n.cfg.APIAddr)
	if err != nil {
		return fmt.Errorf("api listen %s: %w", n.cfg.APIAddr, err)
	}
	n.apiAddr = ln.Addr().String()
	n.api = &http.Server{Handler: n.apiHandler(), ReadHeaderTimeout: 5 * time.Second}
	n.goRun("api", func() {
		if err := n.api.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("api stopped", "err", err)
		}
	})
	return nil
}

// Close leaves the ring gracefully, stops every loop and closes the host
// and the store. It is safe to call more than once.
func (n *Node) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.close() })
	return n.closeErr
}

func (n *Node) close() error {
	var errs []error
	// Stop fetching for other owners: the batches in progress end and
	// are answered before the crawler they use stops.
	if n.fetchSrv != nil {
		n.fetchSrv.Close()
	}
	if n.cancel != nil {
		// Stop fetching, then stop claim maintenance, then hand every
		// claimed range to the successor as the node leaves the ring.
		n.cancelCrawl()
		n.crawlWG.Wait()
		n.cancelShard()
		n.shardWG.Wait()
		// Deliver the links still in the outbox while the ring routes,
		// then report what is settled; the rest stays pending at the
		// replicas and is fetched again by the next owner, which loses
		// nothing.
		n.drainOutbox(outboxDrainTimeout)
		n.flushProgress()
		leaveCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := n.ring.Leave(leaveCtx); err != nil {
			n.log.Warn("graceful ring leave incomplete", "err", err)
		}
		if err := n.shard.Leave(leaveCtx); err != nil {
			n.log.Warn("graceful leave incomplete", "err", err)
		}
		cancel()
		n.cancel()
	}
	if n.api != nil {
		shutCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = n.api.Shutdown(shutCtx)
		cancel()
	}
	n.wg.Wait()
	if n.dht != nil {
		if err := n.dht.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close dht: %w", err))
		}
	}
	if err := n.host.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close host: %w", err))
	}
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

// drainOutbox waits until the router's outbox is empty, at most timeout:
// links a leaving node delivers are links whose pages need not be fetched
// again by the next owner.
func (n *Node) drainOutbox(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for n.router.Pending() > 0 && time.Now().Before(deadline) {
		time.Sleep(25 * time.Millisecond)
	}
	if p := n.router.Pending(); p > 0 {
		n.log.Info("leaving with undelivered links; they stay in the outbox for a restart", "tasks", p)
	}
}

// pageStore archives every fetch in the node's WARC files (request,
// response and extracted text) and keeps a small record of it in the store,
// keyed like the seen set so a key range's records move with it. Bodies
// live only in the WARC files.
type pageStore struct {
	db      *store.DB
	archive *warc.Writer
	mode    crawl.KeyMode
}

func (s pageStore) StorePage(_ context.Context, p *crawl.Page) error {
	key, err := crawl.TaskKey(p.Task.URL, s.mode)
	if err != nil {
		return fmt.Errorf("store page %s: %w", p.Task.URL, err)
	}
	if err := s.archive.WriteExchange(p.WARCExchange()); err != nil {
		return fmt.Errorf("archive %s: %w", p.Task.URL, err)
	}
	return s.db.PutPage(&store.Page{
		Key: key, URLHash: crawl.URLHash(p.Task.URL), URL: p.Task.URL, FinalURL: p.FinalURL,
		Status: p.Status, ContentType: p.ContentType, Header: p.Header, FetchedAt: p.FetchedAt,
		Duration: p.Duration, Depth: p.Task.Depth, Links: len(p.Links),
	})
}

// Idle reports whether the node has nothing queued, nothing in flight and
// no undelivered links.
func (n *Node) Idle() bool {
	return n.crawler.Idle() && n.router.Pending() == 0 && n.Settled()
}

// Settled reports whether the node claims the whole range the ring gives
// it, with nothing still being handed off.
func (n *Node) Settled() bool {
	st := n.shard.Stats()
	if len(st.Releasing) > 0 {
		return false
	}
	pred := n.ring.Predecessor()
	if pred.IsZero() {
		return alone(n.ring) && len(st.Claims) > 0
	}
	return covers(st.Claims, pred.ID, n.ring.Self().ID)
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

// shardLease is the ownership lease the shard manager uses for cfg: its
// Lease, or half its failure timeout.
func shardLease(cfg shard.Config) time.Duration {
	if cfg.Lease > 0 {
		return cfg.Lease
	}
	return shardFailureTimeout(cfg) / 2
}

// shardFailureTimeout is the failure timeout the shard manager uses for
// cfg.
func shardFailureTimeout(cfg shard.Config) time.Duration {
	if cfg.FailureTimeout > 0 {
		return cfg.FailureTimeout
	}
	return shard.DefaultFailureTimeout
}
