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
	"strings"
	"sync"
	"time"

	dht "github.com/libp2p/go-libp2p-kad-dht"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
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
	// Crawl configures the fetcher and politeness.
	Crawl crawl.Config
	// Store configures the durable state.
	Store store.Options
	// WARC configures the archive of fetched pages in DataDir/warc.
	WARC warc.Options
	// Ring configures Chord maintenance.
	Ring ring.Config
	// JoinTimeout bounds joining through the bootstrap peers. Default 30s.
	JoinTimeout time.Duration
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
}

// DefaultConfig returns a node configuration with every default set;
// DataDir and Host.Listen are left for the caller.
func DefaultConfig() Config {
	return Config{
		Host:        HostConfig{NAT: true},
		APIAddr:     "127.0.0.1:0",
		Discovery:   true,
		KeyMode:     crawl.KeyHost,
		Crawl:       crawl.DefaultConfig(),
		Store:       store.DefaultOptions(),
		Ring:        ring.DefaultConfig(),
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
	db      *store.DB
	archive *warc.Writer
	crawler *crawl.Crawler
	owner   *owner
	router  *router
	dht     *dht.IpfsDHT
	started time.Time

	api     *http.Server
	apiAddr string

	cancel context.CancelFunc
	wg     sync.WaitGroup

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
	if _, err := ParseAddrInfos(cfg.Bootstrap); err != nil {
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	// The crawler keys its per-URL state by ring key: it must agree with
	// the owner on what a key is.
	cfg.Crawl.KeyMode = cfg.KeyMode
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
	n.owner = &owner{ring: n.ring, db: db, keyMode: cfg.KeyMode, maxDepth: cfg.Crawl.MaxDepth}
	n.router = newRouter(n.ring, n.owner, db, sendTasks(n.streams), cfg.KeyMode, n.log)
	n.crawler, err = crawl.New(cfg.Crawl, db, pageStore{db: db, archive: archive, mode: cfg.KeyMode}, n.router)
	if err != nil {
		_ = h.Close()
		_ = archive.Close()
		_ = db.Close()
		return nil, fmt.Errorf("new node: %w", err)
	}
	n.owner.crawler = n.crawler
	return n, nil
}

// Start joins the swarm (or starts a new one without bootstrap peers),
// begins crawling and serves the API. It returns once the node is a ring
// member.
func (n *Node) Start(ctx context.Context) error {
	n.started = time.Now()
	n.ringTr.Serve(n.ring)
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
	n.goRun("ring", func() { _ = n.ring.Run(runCtx) })
	n.goRun("crawler", func() { _ = n.crawler.Run(runCtx) })
	n.goRun("router", func() { n.router.Run(runCtx) })
	if n.dht != nil {
		n.goRun("discovery", func() { n.discover(runCtx) })
	}
	n.log.Info("node started", "ring_id", n.ring.Self().ID, "addrs", strings.Join(n.Addrs(), " "), "api", n.apiAddr)
	return nil
}

func (n *Node) goRun(name string, fn func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		fn()
		n.log.Debug("loop stopped", "loop", name)
	}()
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
	if n.cancel != nil {
		leaveCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := n.ring.Leave(leaveCtx); err != nil {
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
	return n.crawler.Idle() && n.router.Pending() == 0
}
