package crawl

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DialConfig configures a Dialer. A zero field means its default (see
// DefaultDialConfig); MaxConnsPerIP and ReclaimIdle take None for "off".
type DialConfig struct {
	// DNSTTL is how long a successful lookup is reused (default 5m). Go's
	// resolver does not report record TTLs, so one TTL applies to all.
	DNSTTL time.Duration
	// NegativeTTL is how long a failed lookup is remembered (default 30s):
	// short, so a name that starts to resolve is picked up soon, but long
	// enough that a dead name is not looked up once per queued URL.
	NegativeTTL time.Duration
	// ConnectTimeout bounds each TCP connect attempt and each DNS lookup
	// (default 10s). The caller's context bounds the whole dial as well.
	ConnectTimeout time.Duration
	// MaxConnsPerIP caps the concurrent connections to one IP address
	// across all host names that resolve to it, so a thousand virtual hosts
	// on one server are not fetched a thousand at a time. A dial over the
	// cap waits for a slot. Default 4; None: unlimited.
	MaxConnsPerIP int
	// ReclaimIdle is how long a connection must have been quiet, its last
	// I/O a read, before a dial waiting for its IP's slot closes it (default
	// 2s; None: never). An HTTP client keeps finished connections open
	// for reuse, and without this those idle connections would hold every
	// slot of a shared server until the client's idle timeout. A connection
	// whose last I/O was a write, typically a request awaiting its answer,
	// is only reclaimed after 15 times as long, and one in the middle of a
	// write never is; one stalled mid-response for ReclaimIdle may be, but
	// only while another dial waits.
	ReclaimIdle time.Duration
	// MaxCacheEntries bounds the number of host names cached (default
	// 100,000); the least recently used name is dropped first.
	MaxCacheEntries int
	// Resolve looks up the addresses of a host name (default
	// net.DefaultResolver.LookupNetIP with network "ip"). Tests inject it.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// AllowPrivate permits requests to loopback, private (RFC 1918, RFC
	// 4193), link-local (the cloud metadata service), CGNAT and every other
	// special-purpose address, and to special-use names such as localhost
	// and *.internal, direct or through a proxy (see addrpolicy.go). It is
	// off by default, so that a crawler fed hostile links or hostile DNS
	// answers is never a weapon against internal networks.
	AllowPrivate bool
	// Now is the clock for cache expiry (default time.Now).
	Now func() time.Time
}

// writeReclaimFactor stretches ReclaimIdle for connections whose last I/O
// was a write: a request awaiting its answer is reclaimed only when it has
// waited longer than any sensible fetch timeout (30s by default).
const writeReclaimFactor = 15

// DefaultDialConfig returns the configuration a crawler on the public web
// should use, what a zero DialConfig means: 5 minute DNS cache, 30 second
// negative cache, 10 second connect timeout, at most 4 connections per IP,
// private addresses refused.
func DefaultDialConfig() DialConfig {
	return DialConfig{
		DNSTTL:          5 * time.Minute,
		NegativeTTL:     30 * time.Second,
		ConnectTimeout:  10 * time.Second,
		MaxConnsPerIP:   4,
		ReclaimIdle:     2 * time.Second,
		MaxCacheEntries: 100_000,
		Resolve:         lookupNetIP,
		Now:             time.Now,
	}
}

// lookupNetIP is the default DialConfig.Resolve: the system's resolver.
func lookupNetIP(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// withDefaults returns c with every zero field set from DefaultDialConfig.
func (c DialConfig) withDefaults() DialConfig {
	d := DefaultDialConfig()
	c.DNSTTL = orDefault(c.DNSTTL, d.DNSTTL)
	c.NegativeTTL = orDefault(c.NegativeTTL, d.NegativeTTL)
	c.ConnectTimeout = orDefault(c.ConnectTimeout, d.ConnectTimeout)
	c.MaxConnsPerIP = orDefault(c.MaxConnsPerIP, d.MaxConnsPerIP)
	c.ReclaimIdle = orDefault(c.ReclaimIdle, d.ReclaimIdle)
	c.MaxCacheEntries = orDefault(c.MaxCacheEntries, d.MaxCacheEntries)
	if c.Resolve == nil {
		c.Resolve = d.Resolve
	}
	if c.Now == nil {
		c.Now = d.Now
	}
	return c
}

// validate reports the first problem with c, defaults filled in.
func (c *DialConfig) validate() error {
	switch {
	case c.DNSTTL < 0:
		return fmt.Errorf("DNSTTL is negative (%v)", c.DNSTTL)
	case c.NegativeTTL < 0:
		return fmt.Errorf("NegativeTTL is negative (%v)", c.NegativeTTL)
	case c.ConnectTimeout < 0:
		return fmt.Errorf("ConnectTimeout is negative (%v)", c.ConnectTimeout)
	case c.MaxCacheEntries < 0:
		return fmt.Errorf("MaxCacheEntries is negative (%d)", c.MaxCacheEntries)
	}
	return nil
}

// DialStats counts what a Dialer did since it was created.
type DialStats struct {
	CacheHits   int64 `json:"cache_hits"`   // lookups answered from the cache, failures included
	CacheMisses int64 `json:"cache_misses"` // dials that had to wait for a lookup
	Lookups     int64 `json:"lookups"`      // lookups sent to the resolver (concurrent misses share one)
	Blocked     int64 `json:"blocked"`      // requests and dials refused by the address policy (see AllowPrivate)
	Waits       int64 `json:"waits"`        // dials that waited for a per-IP slot
	Reclaimed   int64 `json:"reclaimed"`    // idle connections closed to free a slot for a waiting dial
	CacheSize   int   `json:"cache_size"`   // host names in the cache now
	// ProxyUnchecked counts proxied requests sent although their name did
	// not resolve here, so that its addresses could not be checked; the
	// proxy resolves it again and may reach it.
	ProxyUnchecked int64 `json:"proxy_unchecked"`
}

// ErrBlockedAddress matches (with errors.Is) every request and dial the
// address policy refuses because the target is not public. Its text is the
// error kind the crawler counts such failures under.
var ErrBlockedAddress = errors.New("blocked_address")

// BlockedAddressError is the error of a request or dial refused because
// its host is not public: a special-use name, or a name that resolved only
// to (or, for a proxied request, also to) addresses that are not public,
// or an address that is not.
type BlockedAddressError struct {
	Host   string     // the host as requested or dialled: a name or an IP literal
	Addr   netip.Addr // the first refused address; invalid when the name itself was refused
	Reason string     // what kind of address or name it is, such as "loopback"
}

// Error says what was refused and how to allow it.
func (e *BlockedAddressError) Error() string {
	var what string
	switch {
	case !e.Addr.IsValid():
		what = fmt.Sprintf("refusing to connect to %s (%s name", e.Host, e.Reason)
	case e.Host == e.Addr.String():
		what = fmt.Sprintf("refusing to connect to %s (%s address", e.Host, e.Reason)
	default:
		what = fmt.Sprintf("refusing to connect to %s: it resolves to %s (%s address", e.Host, e.Addr, e.Reason)
	}
	return fmt.Sprintf("%v: %s; set AllowPrivate to crawl non-public networks)", ErrBlockedAddress, what)
}

// Is makes errors.Is(err, ErrBlockedAddress) hold.
func (e *BlockedAddressError) Is(target error) bool { return target == ErrBlockedAddress }

// Dialer opens TCP connections for the crawler's HTTP client. It caches DNS
// answers, refuses non-public addresses (checked after resolution, so a
// public name that resolves to 127.0.0.1 is refused too), and caps the
// connections per IP address. Use DialContext as http.Transport.DialContext.
// A Dialer is safe for concurrent use and starts no long-lived goroutines.
type Dialer struct {
	cfg   DialConfig
	epoch time.Time // base of the connections' activity clock

	mu       sync.Mutex
	cache    map[string]*list.Element // host -> *dnsEntry, in lru
	lru      *list.List               // most recently used first
	inflight map[string]*lookupCall
	ips      map[netip.Addr]*ipSlots

	hits, misses, lookups, blocked, waits, reclaimed atomic.Int64
	proxyUnchecked                                   atomic.Int64
}

// dnsEntry is a cached lookup: addresses or the error.
type dnsEntry struct {
	host    string
	addrs   []netip.Addr
	err     error
	expires time.Time
}

// lookupCall is one lookup in progress, shared by all who need its answer.
type lookupCall struct {
	done  chan struct{}
	addrs []netip.Addr
	err   error
}

// ipSlots is the per-IP connection cap: a token in slots per open
// connection, and the open connections themselves so idle ones can be
// reclaimed. refs counts holders and waiters; at zero the entry is dropped,
// so the map only holds IPs in use.
type ipSlots struct {
	slots chan struct{}
	refs  int
	conns map[*slotConn]struct{}
}

// NewDialer returns a Dialer for cfg, whose zero fields take their
// defaults (see DialConfig); it refuses a negative value where a field
// takes no None.
func NewDialer(cfg DialConfig) (*Dialer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("dial config: %w", err)
	}
	return &Dialer{
		cfg:      cfg,
		epoch:    time.Now(),
		cache:    make(map[string]*list.Element),
		lru:      list.New(),
		inflight: make(map[string]*lookupCall),
		ips:      make(map[netip.Addr]*ipSlots),
	}, nil
}

// Stats returns the Dialer's counters.
func (d *Dialer) Stats() DialStats {
	d.mu.Lock()
	size := len(d.cache)
	d.mu.Unlock()
	return DialStats{
		CacheHits:   d.hits.Load(),
		CacheMisses: d.misses.Load(),
		Lookups:     d.lookups.Load(),
		Blocked:     d.blocked.Load(),
		Waits:       d.waits.Load(),
		Reclaimed:   d.reclaimed.Load(),
		CacheSize:   size,

		ProxyUnchecked: d.proxyUnchecked.Load(),
	}
}

// DialContext connects to address ("host:port") over network ("tcp",
// "tcp4" or "tcp6"). It resolves the host through the cache, drops
// addresses that are not public unless AllowPrivate, waits for a slot of
// the IP (honouring ctx), and tries the remaining addresses in order. The
// slot is held until the returned connection is closed.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", address, err)
	}
	port, err := parsePort(network, portStr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", address, err)
	}
	var addrs []netip.Addr
	if ip, perr := netip.ParseAddr(host); perr == nil {
		addrs = []netip.Addr{ip}
	} else if addrs, err = d.resolve(ctx, host); err != nil {
		return nil, err
	}
	addrs = forNetwork(network, addrs)
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no " + network + " address", Name: host, IsNotFound: true}
	}
	if !d.cfg.AllowPrivate {
		public := make([]netip.Addr, 0, len(addrs))
		var refused *BlockedAddressError
		for _, a := range addrs {
			if reason := blockedReason(a); reason != "" {
				if refused == nil {
					refused = &BlockedAddressError{Host: host, Addr: a, Reason: reason}
				}
				continue
			}
			public = append(public, a)
		}
		if len(public) == 0 {
			d.blocked.Add(1)
			return nil, refused
		}
		addrs = public
	}
	var lastErr error
	for _, ip := range addrs {
		c, err := d.dialIP(ctx, network, ip, port)
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		lastErr = err
	}
	return nil, lastErr
}

// parsePort accepts a decimal port or a service name.
func parsePort(network, s string) (uint16, error) {
	if n, err := strconv.ParseUint(s, 10, 16); err == nil {
		return uint16(n), nil
	}
	n, err := net.LookupPort(network, s)
	if err != nil {
		return 0, fmt.Errorf("bad port %q: %w", s, err)
	}
	return uint16(n), nil
}

// forNetwork keeps the addresses network can reach: IPv4 only for "tcp4",
// IPv6 only for "tcp6", all otherwise. Addresses are unmapped, so an
// IPv4-mapped IPv6 address counts (and is checked) as the IPv4 one.
func forNetwork(network string, addrs []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap()
		switch {
		case !a.IsValid():
		case strings.HasSuffix(network, "4") && !a.Is4():
		case strings.HasSuffix(network, "6") && !a.Is6():
		default:
			out = append(out, a)
		}
	}
	return out
}

// resolve returns host's addresses from the cache, or looks them up. Every
// caller that misses while a lookup of the same host is in flight waits for
// that lookup instead of starting its own. The lookup does not belong to the
// first caller, so one caller giving up does not fail the others.
func (d *Dialer) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if host == "" {
		return nil, &net.DNSError{Err: "empty host name", IsNotFound: true}
	}
	now := d.cfg.Now()
	d.mu.Lock()
	if el := d.cache[host]; el != nil {
		e := el.Value.(*dnsEntry)
		if now.Before(e.expires) {
			d.lru.MoveToFront(el)
			d.mu.Unlock()
			d.hits.Add(1)
			return e.addrs, e.err
		}
	}
	d.misses.Add(1)
	call := d.inflight[host]
	if call == nil {
		call = &lookupCall{done: make(chan struct{})}
		d.inflight[host] = call
		d.lookups.Add(1)
		go d.lookup(context.WithoutCancel(ctx), host, call)
	}
	d.mu.Unlock()

	select {
	case <-call.done:
		return call.addrs, call.err
	case <-ctx.Done():
		return nil, fmt.Errorf("resolve %s: %w", host, ctx.Err())
	}
}

// lookup runs one resolver query, caches its outcome and wakes its waiters.
func (d *Dialer) lookup(ctx context.Context, host string, call *lookupCall) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.ConnectTimeout)
	defer cancel()
	addrs, err := d.cfg.Resolve(ctx, host)
	valid := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if a.IsValid() {
			valid = append(valid, a.Unmap())
		}
	}
	switch {
	case err != nil:
		var dnsErr *net.DNSError
		if !errors.As(err, &dnsErr) {
			// Keep the kind recognisable as a DNS failure to the caller.
			err = &net.DNSError{Err: err.Error(), Name: host, UnwrapErr: err,
				IsTimeout: errors.Is(err, context.DeadlineExceeded)}
		}
		valid = nil
	case len(valid) == 0:
		err = &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	ttl := d.cfg.DNSTTL
	if err != nil {
		ttl = d.cfg.NegativeTTL
	}
	call.addrs, call.err = valid, err

	d.mu.Lock()
	d.store(&dnsEntry{host: host, addrs: valid, err: err, expires: d.cfg.Now().Add(ttl)})
	delete(d.inflight, host)
	d.mu.Unlock()
	close(call.done)
}

// store puts e in the cache, dropping the least recently used names beyond
// MaxCacheEntries. d.mu must be held.
func (d *Dialer) store(e *dnsEntry) {
	if el := d.cache[e.host]; el != nil {
		el.Value = e
		d.lru.MoveToFront(el)
		return
	}
	d.cache[e.host] = d.lru.PushFront(e)
	for len(d.cache) > d.cfg.MaxCacheEntries {
		oldest := d.lru.Back()
		d.lru.Remove(oldest)
		delete(d.cache, oldest.Value.(*dnsEntry).host)
	}
}

// dialIP connects to ip:port under the IP's connection cap.
func (d *Dialer) dialIP(ctx context.Context, network string, ip netip.Addr, port uint16) (net.Conn, error) {
	nd := net.Dialer{Timeout: d.cfg.ConnectTimeout, KeepAlive: 30 * time.Second}
	target := netip.AddrPortFrom(ip, port).String()
	if d.cfg.MaxConnsPerIP <= 0 {
		return nd.DialContext(ctx, network, target)
	}
	s, err := d.acquire(ctx, ip)
	if err != nil {
		return nil, err
	}
	c, err := nd.DialContext(ctx, network, target)
	if err != nil {
		d.freeSlot(ip, s, nil)
		return nil, err
	}
	sc := &slotConn{Conn: c, d: d, ip: ip, slots: s}
	sc.touch(false)
	d.mu.Lock()
	s.conns[sc] = struct{}{}
	d.mu.Unlock()
	return sc, nil
}

// acquire takes one of ip's connection slots, waiting while all are held.
// While it waits it closes connections of the IP that are idle (see
// DialConfig.ReclaimIdle), since those hold slots no request needs.
func (d *Dialer) acquire(ctx context.Context, ip netip.Addr) (*ipSlots, error) {
	d.mu.Lock()
	s := d.ips[ip]
	if s == nil {
		s = &ipSlots{slots: make(chan struct{}, d.cfg.MaxConnsPerIP), conns: make(map[*slotConn]struct{})}
		d.ips[ip] = s
	}
	s.refs++
	d.mu.Unlock()

	select {
	case s.slots <- struct{}{}:
		return s, nil
	default:
	}
	d.waits.Add(1)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		retry := d.reclaim(s)
		if retry <= 0 {
			retry = time.Hour // nothing can become reclaimable: wait for a Close
		}
		timer.Reset(retry)
		select {
		case s.slots <- struct{}{}:
			return s, nil
		case <-ctx.Done():
			d.unref(ip, s)
			return nil, fmt.Errorf("wait for a connection slot of %s: %w", ip, ctx.Err())
		case <-timer.C:
		}
	}
}

// reclaim closes the longest-idle connection in s that may be reclaimed now,
// if any, and returns how long until the next one may be (0: none can).
func (d *Dialer) reclaim(s *ipSlots) time.Duration {
	if d.cfg.ReclaimIdle < 0 {
		return 0
	}
	now := d.clock()
	var victim *slotConn
	var victimIdle time.Duration
	var next time.Duration
	d.mu.Lock()
	for c := range s.conns {
		if c.closing.Load() {
			continue
		}
		if c.writing.Load() > 0 {
			// A write in progress is activity, however long it blocks.
			if next == 0 || d.cfg.ReclaimIdle < next {
				next = d.cfg.ReclaimIdle
			}
			continue
		}
		limit := d.cfg.ReclaimIdle
		if c.lastWrite.Load() {
			limit *= writeReclaimFactor
		}
		idle := time.Duration(now - c.lastActive.Load())
		if idle >= limit {
			if victim == nil || idle > victimIdle {
				victim, victimIdle = c, idle
			}
		} else if wait := limit - idle; next == 0 || wait < next {
			next = wait
		}
	}
	if victim != nil {
		victim.closing.Store(true)
	}
	d.mu.Unlock()
	if victim != nil {
		d.reclaimed.Add(1)
		victim.Close()
		// The slot may go to another waiter; look again soon.
		return time.Millisecond
	}
	return next
}

// freeSlot gives back the slot of a connection (c may be nil for a dial
// that failed).
func (d *Dialer) freeSlot(ip netip.Addr, s *ipSlots, c *slotConn) {
	if c != nil {
		d.mu.Lock()
		delete(s.conns, c)
		d.mu.Unlock()
	}
	<-s.slots
	d.unref(ip, s)
}

// unref drops one holder or waiter of s, and s itself when none is left.
func (d *Dialer) unref(ip netip.Addr, s *ipSlots) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s.refs--
	if s.refs == 0 && d.ips[ip] == s {
		delete(d.ips, ip)
	}
}

// clock is the monotonic time for connection activity, in nanoseconds.
func (d *Dialer) clock() int64 { return int64(time.Since(d.epoch)) }

// slotConn is a connection holding a per-IP slot until it is closed. It
// notes when it was last active and whether that was a write, which tells
// an idle pooled connection (last I/O a read of the previous response) from
// one whose request awaits an answer.
type slotConn struct {
	net.Conn
	d     *Dialer
	ip    netip.Addr
	slots *ipSlots

	lastActive atomic.Int64 // Dialer.clock of the last I/O
	lastWrite  atomic.Bool  // the last I/O was (or is) a write
	writing    atomic.Int32 // writes in progress
	closing    atomic.Bool  // picked for reclaim or closed
	closeOnce  sync.Once
	closeErr   error
}

func (c *slotConn) touch(write bool) {
	c.lastActive.Store(c.d.clock())
	c.lastWrite.Store(write)
}

// Read reads from the connection and notes the activity.
func (c *slotConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.touch(false)
	}
	return n, err
}

// Write writes to the connection and notes the activity; a write in
// progress protects the connection from being reclaimed.
func (c *slotConn) Write(b []byte) (int, error) {
	c.writing.Add(1)
	c.touch(true)
	n, err := c.Conn.Write(b)
	c.touch(true)
	c.writing.Add(-1)
	return n, err
}

// Close closes the connection and frees its slot; later calls return
// the first call's error.
func (c *slotConn) Close() error {
	c.closeOnce.Do(func() {
		c.closing.Store(true)
		c.closeErr = c.Conn.Close()
		c.d.freeSlot(c.ip, c.slots, c)
	})
	return c.closeErr
}
