package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// nodeOptions are the options of `swarmcrawl node`, shared with the config file.
type nodeOptions struct {
	data, api, userAgent, keyMode, logLevel, config string
	logFormat                                       string
	swarmKey, allowPeers, seedFrom, cpuProfile      string
	reachability, scope                             string
	listen, bootstrap, relays                       listFlag
	scopeInclude, scopeExclude                      patternFlag
	delay, maxCrawlDelay, timeout                   time.Duration
	minRecrawl, maxRecrawl, dnsTTL, retryBase       time.Duration
	failureTimeout, reservationTimeout              time.Duration
	captureGrace                                    time.Duration
	ringWork                                        int
	workers, maxDepth, maxRetries, maxPagesPerHost  int
	maxConnsPerIP, replicas, hotQueue, vnodes       int
	maxBody, warcMaxBytes                           int64
	minFreeDisk                                     sizeFlag
	nat, discovery, allowPrivate, sitemaps          bool
	sitemapGuess, relayService, resourceMetrics     bool
}

// register defines the flags; every default is read from the node's
// default configuration, so that it is written once.
func (o *nodeOptions) register(fs *flag.FlagSet) {
	nd := node.DefaultConfig()
	def := nd.Crawl
	fs.StringVar(&o.data, "data", "", "data directory: identity key, store, addrs and api files (required)")
	fs.Var(&o.listen, "listen", "multiaddrs to listen on, comma-separated (default "+strings.Join(nd.Host.Listen, ",")+")")
	fs.Var(&o.bootstrap, "bootstrap", "full multiaddrs (/ip4/.../tcp/.../p2p/<id>) of swarm members to join through; empty starts a new swarm")
	fs.Var(&o.relays, "relay", "static circuit-relay peers (full multiaddrs) for nodes behind NAT: the node reserves a slot on them once it is private and advertises the relayed addresses")
	fs.StringVar(&o.reachability, "reachability", nd.Host.Reachability.String(), "auto (AutoNAT decides), private (behind NAT: reserve on the --relay peers at once, and exit if none grants a reservation) or public")
	fs.DurationVar(&o.reservationTimeout, "reservation-timeout", nd.ReservationTimeout, "with --reachability private: how long to wait at start for a relay reservation before giving up")
	fs.BoolVar(&o.resourceMetrics, "resource-metrics", false, "feed libp2p's resource-manager metrics (libp2p_rcmgr_*) on /metrics; its reporter costs CPU on every stream and connection event")
	fs.BoolVar(&o.relayService, "relay-service", false, "serve circuit-relay reservations to peers behind NAT (a publicly reachable node; implies --reachability public unless given)")
	fs.StringVar(&o.api, "api", nd.APIAddr, "HOST:PORT of the HTTP status API")
	fs.DurationVar(&o.delay, "delay", def.Delay, "minimum time between two requests to one host (a larger robots.txt Crawl-delay wins; 0 = no pause)")
	fs.DurationVar(&o.maxCrawlDelay, "max-crawl-delay", def.MaxCrawlDelay, "cap on a robots.txt Crawl-delay (0 = Crawl-delay is ignored)")
	fs.StringVar(&o.userAgent, "user-agent", def.UserAgent, "User-Agent sent on every request; its first product token is matched against robots.txt")
	fs.IntVar(&o.workers, "workers", def.Workers, "concurrent fetches across hosts")
	fs.IntVar(&o.maxDepth, "max-depth", def.MaxDepth, "links further than this from a seed are not followed (0 = seeds only)")
	fs.DurationVar(&o.timeout, "timeout", def.Timeout, "total time allowed for one request, body included")
	fs.Int64Var(&o.maxBody, "max-body", def.MaxBodyBytes, "bytes of a response body kept; longer bodies are truncated and flagged")
	fs.DurationVar(&o.minRecrawl, "min-recrawl", def.MinRecrawl, "shortest recrawl interval (pages that change often)")
	fs.DurationVar(&o.maxRecrawl, "max-recrawl", def.MaxRecrawl, "longest recrawl interval (pages that never change; 0 = never recrawl)")
	fs.IntVar(&o.maxRetries, "max-retries", def.MaxRetries, "retries of a failed fetch (timeouts, connection errors, 429, 5xx) before it goes to the dead-letter queue (0 = none)")
	fs.DurationVar(&o.retryBase, "retry-base", def.RetryBase, "first retry delay; each retry doubles it, with jitter")
	fs.IntVar(&o.maxPagesPerHost, "max-pages-per-host", def.MaxPagesPerHost, "page budget per host, a guard against traps (0 = unlimited)")
	fs.BoolVar(&o.allowPrivate, "allow-private", false, "allow fetches from loopback and private addresses (off: the crawler cannot be aimed at internal networks)")
	fs.IntVar(&o.maxConnsPerIP, "max-conns-per-ip", def.Dial.MaxConnsPerIP, "concurrent connections to one IP address across all its hostnames (0 = unlimited)")
	fs.DurationVar(&o.dnsTTL, "dns-ttl", def.Dial.DNSTTL, "how long resolved addresses are cached")
	fs.Int64Var(&o.warcMaxBytes, "warc-max-bytes", nd.WARC.MaxFileBytes, "WARC files are rotated past this size")
	o.minFreeDisk = sizeFlag(nd.Store.MinFreeBytes)
	fs.Var(&o.minFreeDisk, "min-free-disk", "`size` of the free space on the data dir's disk below which the node accepts no new URLs (e.g. 500MiB, 2GB; 0 = no check)")
	fs.IntVar(&o.replicas, "replicas", nd.Shard.Replicas, "successors that hold a copy of each range this node owns (K); new URLs are acknowledged once they hold them")
	fs.IntVar(&o.vnodes, "vnodes", nd.VNodes, fmt.Sprintf("ring positions (virtual nodes) this node holds, 1 to %d: more spread the swarm's hosts more evenly over its nodes (16, placed by the ring's arcs at the first start: the busiest of 8 nodes owns a median 1.27x the mean, against 2.6x with 1), for about 1.5x the ring and shard maintenance messages and more CPU; 1 where many nodes share a machine (docs/operations.md, \"Virtual nodes\")", node.MaxVNodes))
	fs.IntVar(&o.hotQueue, "hot-queue", def.HotQueue, "queued URLs of one host at which its owner hands the host's fetches, in batches and under its own rate limit, to less loaded nodes (its helper slots' holders; 0 = never; host keys only)")
	fs.DurationVar(&o.failureTimeout, "failure-timeout", nd.Shard.FailureTimeout, "silence from an owner after which its first successor takes its range over")
	fs.DurationVar(&o.captureGrace, "capture-grace", nd.CaptureGrace, "how long a peer holding captures (the WARC records of pages it fetched) must be gone, out of the ring and unreachable, before the owners of those pages fetch them again (0 = never)")
	fs.IntVar(&o.ringWork, "ring-work", nd.RingWork.Bits(), "bits of proof of work each member's identity carries, the same on every node of a swarm: the node creates its identity with it (about 2^bits key generations, once per data dir) and refuses as members peers without it (0 = none)")
	fs.StringVar(&o.keyMode, "key", def.KeyMode.String(), "crawl task key, the same on every node: host (one owner per host), domain (one owner per registrable domain; needed by --scope seed-domains) or url (one owner per URL)")
	fs.StringVar(&o.scope, "scope", def.Scope.Mode.String(), "which hosts the crawl may reach: any, seed-hosts (the hosts seeds named) or seed-domains (their registrable domains; needs --key domain); judged by each URL's owner")
	fs.Var(&o.scopeInclude, "scope-include", "`regexp` (Go syntax) a URL must match to be crawled, besides --scope; repeat for more (a URL matching any is in)")
	fs.Var(&o.scopeExclude, "scope-exclude", "`regexp` (Go syntax) of URLs never crawled; repeat for more; wins over --scope-include")
	fs.BoolVar(&o.nat, "nat", !nd.Host.DisableNAT, "NAT traversal: port mapping, AutoNAT service, hole punching")
	fs.BoolVar(&o.discovery, "discovery", !nd.DisableDiscovery, "find swarm members through the Kademlia DHT")
	fs.BoolVar(&o.sitemaps, "sitemaps", !def.IgnoreSitemaps, "queue the sitemaps a host's robots.txt names and the URLs they list")
	fs.BoolVar(&o.sitemapGuess, "sitemap-guess", def.GuessSitemap, "also try a host's /sitemap.xml when its robots.txt names no sitemap (one more request per host)")
	fs.StringVar(&o.swarmKey, "swarm-key", "", "pre-shared key file (`swarmcrawl swarm-key`) of a private swarm: peers without it cannot connect; TCP and WebSocket only")
	fs.StringVar(&o.allowPeers, "allow-peers", "", "admit only these peer IDs (comma-separated, or @FILE with one a line), once authenticated; list bootstrap peers, relays and seed clients too")
	fs.StringVar(&o.seedFrom, "seed-from", "", "peer IDs (comma-separated, or @FILE) that may submit seeds besides clients on this machine (over loopback) and --allow-peers members, and whose signed seeds (seed --identity) this node honours from any member; any: every peer")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "text", "text (key=value) or json: one log record a line on stderr")
	fs.StringVar(&o.cpuProfile, "cpu-profile", "", "write a Go CPU profile of the node to `file` until it stops (for go tool pprof)")
	fs.StringVar(&o.config, "config", "", "YAML `file` of these options (name: value; `swarmcrawl config` prints one); flags override it")
}

func runNode(args []string, stdout, stderr io.Writer) error {
	_, o, err := parseNodeOptions("node", args, stderr)
	if err != nil {
		return err
	}
	cfg, err := o.nodeConfig(stderr)
	if err != nil {
		return err
	}
	n, err := node.New(cfg)
	if errors.Is(err, store.ErrCorrupt) {
		return fmt.Errorf("the store in %s is damaged, not starting (%w); run `swarmcrawl repair --data %s` to recover what can be recovered and see what was lost", o.data, err, o.data)
	}
	if err != nil {
		return err
	}
	if o.cpuProfile != "" {
		stopProfile, err := startCPUProfile(o.cpuProfile)
		if err != nil {
			_ = n.Close()
			return err
		}
		defer stopProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := n.Start(ctx); err != nil {
		_ = n.Close()
		if errors.Is(err, node.ErrNoBootstrap) && o.swarmKey == "" {
			return fmt.Errorf("%w (if the swarm is private, give its key with --swarm-key)", err)
		}
		return err
	}
	for _, a := range n.Addrs() {
		fmt.Fprintf(stdout, "listening: %s\n", a)
	}
	select {
	case <-ctx.Done():
		fmt.Fprintln(stderr, "swarmcrawl node: leaving the ring")
		return n.Close()
	case err := <-n.Failed():
		// Fail-stop: a node that can store nothing leaves at once, so that
		// its successors take its ranges over.
		fmt.Fprintln(stderr, "swarmcrawl node: the store failed; leaving the ring")
		return errors.Join(fmt.Errorf("stopped: %w; free or replace the disk of %s and start the node again (`swarmcrawl repair --data %s` if it does not open)", err, o.data, o.data), n.Close())
	}
}

func (o *nodeOptions) nodeConfig(stderr io.Writer) (node.Config, error) {
	if o.data == "" {
		return node.Config{}, usageErr("--data is required")
	}
	log, err := newLogger(stderr, o.logLevel, o.logFormat)
	if err != nil {
		return node.Config{}, err
	}
	mode, err := urls.ParseKeyMode(o.keyMode)
	if err != nil {
		return node.Config{}, usageErr("--key: %v", err)
	}
	scope, err := o.scopeConfig(mode)
	if err != nil {
		return node.Config{}, err
	}
	if _, err := p2p.ParseAddrInfos(o.bootstrap); err != nil {
		return node.Config{}, usageErr("--bootstrap: %v", err)
	}
	if _, err := p2p.ParseAddrInfos(o.relays); err != nil {
		return node.Config{}, usageErr("--relay: %v", err)
	}
	reach, err := p2p.ParseReachability(o.reachability)
	if err != nil {
		return node.Config{}, usageErr("--reachability: %v", err)
	}
	if o.relayService && reach == p2p.ReachabilityPrivate {
		return node.Config{}, usageErr("--relay-service needs a publicly reachable node, not --reachability private")
	}
	if reach == p2p.ReachabilityPrivate && len(o.relays) == 0 {
		return node.Config{}, usageErr("--reachability private needs --relay: behind NAT, no peer can connect to a node without a relay")
	}
	if err := o.checkCounts(); err != nil {
		return node.Config{}, err
	}
	cfg := node.DefaultConfig()
	if err := o.admission(&cfg); err != nil {
		return node.Config{}, err
	}
	if o.vnodes < 1 || o.vnodes > node.MaxVNodes {
		return node.Config{}, usageErr(fmt.Sprintf("--vnodes must be between 1 and %d", node.MaxVNodes))
	}
	if o.replicas < 1 || o.replicas > 7 {
		return node.Config{}, usageErr("--replicas must be between 1 and 7 (the successor list holds 8 peers)")
	}
	if o.failureTimeout < 100*time.Millisecond {
		return node.Config{}, usageErr("--failure-timeout must be at least 100ms")
	}
	if o.ringWork < 0 || o.ringWork > 32 {
		return node.Config{}, usageErr("--ring-work must be between 0 (none) and 32 bits")
	}
	cfg.RingWork = p2p.RingWork(o.ringWork)
	if o.ringWork == 0 {
		cfg.RingWork = p2p.NoRingWork
	}
	cfg.DataDir = o.data
	cfg.Shard.Replicas = o.replicas
	cfg.VNodes = o.vnodes
	cfg.Shard.FailureTimeout = o.failureTimeout
	cfg.CaptureGrace = zeroIsNone(o.captureGrace)
	if len(o.listen) > 0 {
		cfg.Host.Listen = o.listen
	}
	cfg.Host.DisableNAT = !o.nat
	cfg.Host.Relays = o.relays
	cfg.Host.Reachability = reach
	cfg.Host.RelayService = o.relayService
	cfg.Host.ResourceMetrics = o.resourceMetrics
	cfg.ReservationTimeout = o.reservationTimeout
	cfg.Bootstrap = o.bootstrap
	cfg.APIAddr = o.api
	cfg.DisableDiscovery = !o.discovery
	// A flag's 0 means "off" where its help says so; in the
	// configuration a zero field means the default and None means off.
	cfg.Crawl.KeyMode = mode
	cfg.Crawl.Scope = scope
	cfg.Crawl.HotQueue = zeroIsNone(o.hotQueue)
	cfg.Crawl.Delay = zeroIsNone(o.delay)
	cfg.Crawl.MaxCrawlDelay = zeroIsNone(o.maxCrawlDelay)
	cfg.Crawl.UserAgent = o.userAgent
	cfg.Crawl.Workers = o.workers
	cfg.Crawl.MaxDepth = zeroIsNone(o.maxDepth)
	cfg.Crawl.Timeout = o.timeout
	cfg.Crawl.MaxBodyBytes = o.maxBody
	cfg.Crawl.MinRecrawl = o.minRecrawl
	cfg.Crawl.MaxRecrawl = zeroIsNone(o.maxRecrawl)
	cfg.Crawl.MaxRetries = zeroIsNone(o.maxRetries)
	cfg.Crawl.RetryBase = o.retryBase
	cfg.Crawl.MaxPagesPerHost = zeroIsNone(o.maxPagesPerHost)
	cfg.Crawl.IgnoreSitemaps = !o.sitemaps
	cfg.Crawl.GuessSitemap = o.sitemapGuess
	cfg.Crawl.Dial.AllowPrivate = o.allowPrivate
	cfg.Crawl.Dial.MaxConnsPerIP = zeroIsNone(o.maxConnsPerIP)
	cfg.Crawl.Dial.DNSTTL = o.dnsTTL
	cfg.WARC.MaxFileBytes = o.warcMaxBytes
	cfg.Store.MinFreeBytes = int64(o.minFreeDisk)
	if o.minFreeDisk == 0 {
		cfg.Store.MinFreeBytes = -1 // the store's "never low"
	}
	cfg.Logger = log
	return cfg, nil
}

// scopeConfig reads --scope, --scope-include and --scope-exclude, and
// refuses a seed rule the key mode cannot judge.
func (o *nodeOptions) scopeConfig(mode urls.KeyMode) (crawl.ScopeConfig, error) {
	m, err := crawl.ParseScopeMode(o.scope)
	if err != nil {
		return crawl.ScopeConfig{}, usageErr("--scope: %v", err)
	}
	if _, err := crawl.CompileScopePatterns(o.scopeInclude); err != nil {
		return crawl.ScopeConfig{}, usageErr("--scope-include: %v", err)
	}
	if _, err := crawl.CompileScopePatterns(o.scopeExclude); err != nil {
		return crawl.ScopeConfig{}, usageErr("--scope-exclude: %v", err)
	}
	switch {
	case m == crawl.ScopeSeedHosts && mode == urls.KeyURL:
		return crawl.ScopeConfig{}, usageErr("--scope seed-hosts needs --key host or --key domain: with --key url no node holds all the URLs of a host, so none can judge it")
	case m == crawl.ScopeSeedDomains && mode != urls.KeyDomain:
		return crawl.ScopeConfig{}, usageErr("--scope seed-domains needs --key domain (on every node of the swarm): the owner of a URL must hold every host of its domain to judge it")
	}
	return crawl.ScopeConfig{Mode: m, Include: o.scopeInclude, Exclude: o.scopeExclude}, nil
}

// zeroIsNone maps a flag's 0, which its help documents as "off", to
// crawl.None: in a configuration a zero field means the default.
func zeroIsNone[T ~int | ~int64](v T) T {
	if v == 0 {
		return crawl.None
	}
	return v
}

// checkCounts refuses flag values no configuration means: negative counts
// and durations, and zero where the help names no meaning for it (a zero
// field would silently mean the default).
func (o *nodeOptions) checkCounts() error {
	for _, f := range []struct {
		name string
		v    int64
		zero bool // 0 is a documented choice
	}{
		{"delay", int64(o.delay), true},
		{"max-crawl-delay", int64(o.maxCrawlDelay), true},
		{"workers", int64(o.workers), false},
		{"max-depth", int64(o.maxDepth), true},
		{"timeout", int64(o.timeout), false},
		{"max-body", o.maxBody, false},
		{"min-recrawl", int64(o.minRecrawl), false},
		{"max-recrawl", int64(o.maxRecrawl), true},
		{"max-retries", int64(o.maxRetries), true},
		{"retry-base", int64(o.retryBase), false},
		{"max-pages-per-host", int64(o.maxPagesPerHost), true},
		{"max-conns-per-ip", int64(o.maxConnsPerIP), true},
		{"dns-ttl", int64(o.dnsTTL), false},
		{"warc-max-bytes", o.warcMaxBytes, false},
		{"min-free-disk", int64(o.minFreeDisk), true},
		{"hot-queue", int64(o.hotQueue), true},
		{"reservation-timeout", int64(o.reservationTimeout), false},
		{"capture-grace", int64(o.captureGrace), true},
	} {
		switch {
		case f.v < 0:
			return usageErr("--%s must not be negative", f.name)
		case f.v == 0 && !f.zero:
			return usageErr("--%s must be positive", f.name)
		}
	}
	return nil
}

// admission sets who may connect and who may seed: the swarm key, the
// allowlist, the seeders.
func (o *nodeOptions) admission(cfg *node.Config) error {
	if o.swarmKey != "" {
		psk, err := p2p.LoadSwarmKey(o.swarmKey)
		if err != nil {
			return usageErr("--swarm-key: %v", err)
		}
		cfg.Host.SwarmKey = psk
	}
	if o.allowPeers != "" {
		ids, err := p2p.ParsePeerList(o.allowPeers)
		if err != nil {
			return usageErr("--allow-peers: %v", err)
		}
		cfg.Host.AllowPeers = ids
	}
	switch o.seedFrom {
	case "":
	case "any":
		cfg.SeedFromAnyone = true
	default:
		ids, err := p2p.ParsePeerList(o.seedFrom)
		if err != nil {
			return usageErr("--seed-from: %v", err)
		}
		cfg.SeedFrom = ids
	}
	return nil
}

// startCPUProfile starts a CPU profile written to path and returns the
// function that stops it and closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
