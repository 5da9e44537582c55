package crawl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// dnsFake is an injected resolver: names in addrs resolve to their
// addresses, anything else to "no such host". It counts calls per name.
type dnsFake struct {
	mu    sync.Mutex
	addrs map[string][]netip.Addr
	calls map[string]int
	gate  chan struct{} // when set, each lookup waits for it to close
}

func newDNSFake() *dnsFake {
	return &dnsFake{addrs: map[string][]netip.Addr{}, calls: map[string]int{}}
}

func (f *dnsFake) set(host string, addrs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addrs[host] = nil
	for _, a := range addrs {
		f.addrs[host] = append(f.addrs[host], netip.MustParseAddr(a))
	}
}

func (f *dnsFake) Resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	f.mu.Lock()
	f.calls[host]++
	gate := f.gate
	addrs, ok := f.addrs[host]
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return addrs, nil
}

func (f *dnsFake) count(host string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[host]
}

// slotServer is a TCP server on loopback that counts concurrent
// connections. Its protocol lets a client leave without racing the count:
// the server greets with "h"; the client sends "x" when done, and the
// server stops counting the connection before it answers "a".
type slotServer struct {
	ln                net.Listener
	cur, peak, accept atomic.Int32
	wg                sync.WaitGroup
	mu                sync.Mutex
	conns             []net.Conn // closed at cleanup, so a failed test cannot hang there
}

func newSlotServer(t *testing.T) *slotServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &slotServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accept.Add(1)
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			n := s.cur.Add(1)
			for {
				p := s.peak.Load()
				if n <= p || s.peak.CompareAndSwap(p, n) {
					break
				}
			}
			s.wg.Add(1)
			go s.serve(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *slotServer) serve(c net.Conn) {
	defer s.wg.Done()
	defer c.Close()
	counted := true
	defer func() {
		if counted {
			s.cur.Add(-1)
		}
	}()
	if _, err := c.Write([]byte("h")); err != nil {
		return
	}
	b := make([]byte, 1)
	for {
		if _, err := c.Read(b); err != nil {
			return
		}
		if b[0] == 'x' && counted {
			counted = false
			s.cur.Add(-1)
			if _, err := c.Write([]byte("a")); err != nil {
				return
			}
		}
	}
}

func (s *slotServer) port() string {
	_, p, _ := net.SplitHostPort(s.ln.Addr().String())
	return p
}

// greet reads the server's greeting, the first I/O of a connection.
func greet(t *testing.T, c net.Conn) {
	t.Helper()
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil || b[0] != 'h' {
		t.Errorf("greeting: %q %v", b, err)
	}
}

// leave tells the server the connection is done, waits for its answer and
// closes the connection.
func leave(t *testing.T, c net.Conn) {
	t.Helper()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Errorf("leave: %v", err)
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil || b[0] != 'a' {
		t.Errorf("leave answer: %q %v", b, err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
}

func TestDNSCacheHitMissExpiry(t *testing.T) {
	srv := newSlotServer(t)
	fake := newDNSFake()
	fake.set("a.test", "127.0.0.1")
	clock := newFakeClock()
	d := newDialer(t, DialConfig{Resolve: fake.Resolve, Now: clock.Now, AllowPrivate: true,
		DNSTTL: 5 * time.Minute, NegativeTTL: 30 * time.Second, MaxConnsPerIP: None})
	ctx := testCtx(t)

	dial := func(host string) error {
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, srv.port()))
		if err == nil {
			greet(t, c)
			leave(t, c)
		}
		return err
	}
	steps := []struct {
		name    string
		advance time.Duration
		host    string
		lookups int // resolver calls for host so far
		fails   bool
	}{
		{"first dial looks up", 0, "a.test", 1, false},
		{"second dial hits the cache", 0, "a.test", 1, false},
		{"still fresh just before the TTL", 5*time.Minute - time.Second, "a.test", 1, false},
		{"expired after the TTL", time.Second, "a.test", 2, false},
		{"unknown name looks up", 0, "nx.test", 1, true},
		{"failure is cached", 29 * time.Second, "nx.test", 1, true},
		{"negative entry expires after the negative TTL", time.Second, "nx.test", 2, true},
		{"case and trailing dot share the entry", 0, "A.Test.", 2, false},
	}
	for _, st := range steps {
		clock.Advance(st.advance)
		err := dial(st.host)
		if st.fails {
			var dnsErr *net.DNSError
			if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
				t.Errorf("%s: err %v, want a not-found *net.DNSError", st.name, err)
			}
		} else if err != nil {
			t.Errorf("%s: %v", st.name, err)
		}
		host := strings.ToLower(strings.TrimSuffix(st.host, "."))
		if got := fake.count(host); got != st.lookups {
			t.Errorf("%s: %d lookups of %s, want %d", st.name, got, host, st.lookups)
		}
	}
	s := d.Stats()
	if s.CacheHits != 4 || s.CacheMisses != 4 || s.Lookups != 4 || s.CacheSize != 2 {
		t.Errorf("stats %+v, want 4 hits, 4 misses, 4 lookups, 2 names cached", s)
	}
}

func TestDNSLookupsCoalesced(t *testing.T) {
	srv := newSlotServer(t)
	fake := newDNSFake()
	fake.set("busy.test", "127.0.0.1")
	fake.gate = make(chan struct{})
	d := newDialer(t, DialConfig{Resolve: fake.Resolve, AllowPrivate: true, MaxConnsPerIP: None})

	const n = 20
	errs := make(chan error, n)
	for range n {
		go func() {
			c, err := d.DialContext(testCtx(t), "tcp", "busy.test:"+srv.port())
			if err == nil {
				err = c.Close()
			}
			errs <- err
		}()
	}
	// Let every dial reach the lookup before it is answered.
	waitFor(t, func() bool { return d.Stats().CacheMisses == n })
	close(fake.gate)
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := fake.count("busy.test"); got != 1 {
		t.Errorf("%d resolver calls for %d concurrent dials, want 1", got, n)
	}
	if s := d.Stats(); s.Lookups != 1 {
		t.Errorf("stats %+v, want 1 lookup", s)
	}
}

// TestDNSLookupOutlivesCaller checks that a caller giving up does not fail
// the lookup for the others waiting on it, and that its answer is cached.
func TestDNSLookupOutlivesCaller(t *testing.T) {
	srv := newSlotServer(t)
	fake := newDNSFake()
	fake.set("slow.test", "127.0.0.1")
	fake.gate = make(chan struct{})
	d := newDialer(t, DialConfig{Resolve: fake.Resolve, AllowPrivate: true, MaxConnsPerIP: None})

	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := d.DialContext(ctx, "tcp", "slow.test:"+srv.port())
		first <- err
	}()
	// The first caller starts the lookup; the second joins it.
	waitFor(t, func() bool { return d.Stats().CacheMisses == 1 })
	second := make(chan error, 1)
	go func() {
		c, err := d.DialContext(testCtx(t), "tcp", "slow.test:"+srv.port())
		if err == nil {
			err = c.Close()
		}
		second <- err
	}()
	waitFor(t, func() bool { return d.Stats().CacheMisses == 2 })
	cancel()
	select {
	case err := <-first:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled dial: %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled dial still waiting for the lookup")
	}
	close(fake.gate)
	if err := <-second; err != nil {
		t.Errorf("second dial: %v", err)
	}
	c, err := d.DialContext(testCtx(t), "tcp", "slow.test:"+srv.port())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if got := fake.count("slow.test"); got != 1 {
		t.Errorf("%d lookups, want 1 shared and then cached", got)
	}
}

func TestDNSCacheBounded(t *testing.T) {
	fake := newDNSFake()
	for i := range 5 {
		fake.set(fmt.Sprintf("h%d.test", i), "127.0.0.1")
	}
	d := newDialer(t, DialConfig{Resolve: fake.Resolve, MaxCacheEntries: 3, MaxConnsPerIP: None})
	ctx := testCtx(t)
	for i := range 5 {
		// Refused (loopback, AllowPrivate off), but only after resolving.
		if _, err := d.DialContext(ctx, "tcp", fmt.Sprintf("h%d.test:80", i)); !errors.Is(err, ErrBlockedAddress) {
			t.Fatalf("h%d: %v, want blocked", i, err)
		}
	}
	if s := d.Stats(); s.CacheSize != 3 {
		t.Errorf("%d names cached, want at most 3", s.CacheSize)
	}
	// Cached now: h2, h3, h4. Using h2 makes h3 the least recently used,
	// so h5 pushes out h3, not h2.
	fake.set("h5.test", "127.0.0.1")
	for _, h := range []string{"h2", "h5", "h2", "h3"} {
		d.DialContext(ctx, "tcp", h+".test:80")
	}
	for h, want := range map[string]int{"h2": 1, "h5": 1, "h3": 2} {
		if got := fake.count(h + ".test"); got != want {
			t.Errorf("%s looked up %d times, want %d", h, got, want)
		}
	}
}

func TestBlockedAddresses(t *testing.T) {
	tests := []struct {
		addr   string
		reason string // "" for a public address
	}{
		{"127.0.0.1", "loopback"},
		{"127.255.255.254", "loopback"},
		{"10.1.2.3", "private"},
		{"172.16.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"169.254.169.254", "link-local"}, // cloud metadata service
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "this-network"},
		{"100.64.0.1", "CGNAT shared"},
		{"100.127.255.255", "CGNAT shared"},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"255.255.255.255", "broadcast"},
		{"240.0.0.1", "reserved"},
		{"192.0.0.170", "IETF protocol"},
		{"::1", "loopback"},
		{"::", "unspecified"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"fc00::1", "private"},
		{"fd12:3456::1", "private"},
		{"ff02::1", "multicast"},
		{"ff05::2", "multicast"},
		{"fec0::1", "site-local"},
		{"::ffff:127.0.0.1", "loopback"},
		{"::ffff:10.0.0.1", "private"},
		{"::ffff:169.254.169.254", "link-local"},
		{"::ffff:100.64.1.1", "CGNAT shared"},
		{"::127.0.0.1", "IPv4-compatible"},
		{"64:ff9b::7f00:1", "NAT64 loopback"},
		{"64:ff9b::a00:1", "NAT64 private"},
		{"64:ff9b:1::1", "local-use NAT64"},
		{"2002:7f00:1::1", "6to4 loopback"},
		{"2002:c0a8:101::1", "6to4 private"},
		{"2001:db8::1", "documentation"}, // was public before the IANA registries were applied whole
		// Public addresses, including neighbours of the blocked ranges.
		{"8.8.8.8", ""},
		{"1.1.1.1", ""},
		{"100.63.255.255", ""},
		{"100.128.0.0", ""},
		{"172.15.255.255", ""},
		{"172.32.0.0", ""},
		{"192.169.0.1", ""},
		{"11.0.0.1", ""},
		{"223.255.255.255", ""},
		{"2606:4700:4700::1111", ""},
		{"::ffff:8.8.8.8", ""},
		{"64:ff9b::808:808", ""},
		{"2002:808:808::1", ""},
	}
	for _, tt := range tests {
		a := netip.MustParseAddr(tt.addr)
		if got := blockedReason(a); got != tt.reason {
			t.Errorf("blockedReason(%s) = %q, want %q", tt.addr, got, tt.reason)
		}
	}
}

func TestDialRefusesBlockedAddresses(t *testing.T) {
	srv := newSlotServer(t)
	fake := newDNSFake()
	fake.set("rebind.test", "127.0.0.1")              // a public-looking name pointing home
	fake.set("mixed-private.test", "10.0.0.1", "::1") // every address blocked
	fake.set("mapped.test", "::ffff:127.0.0.1")
	p := srv.port()
	dials := []struct {
		addr, blockedIP string
	}{
		{"rebind.test:" + p, "127.0.0.1"},
		{"mixed-private.test:" + p, "10.0.0.1"},
		{"mapped.test:" + p, "127.0.0.1"},
		{"127.0.0.1:" + p, "127.0.0.1"},
		{"[::ffff:127.0.0.1]:" + p, "127.0.0.1"},
		{"[::1]:" + p, "::1"},
		{"169.254.169.254:80", "169.254.169.254"},
	}
	d := newDialer(t, DialConfig{Resolve: fake.Resolve, ConnectTimeout: time.Second, MaxConnsPerIP: None})
	for _, tt := range dials {
		c, err := d.DialContext(testCtx(t), "tcp", tt.addr)
		if err == nil {
			c.Close()
			t.Errorf("%s: connected, want refused", tt.addr)
			continue
		}
		var be *BlockedAddressError
		if !errors.Is(err, ErrBlockedAddress) || !errors.As(err, &be) {
			t.Errorf("%s: %v, want a BlockedAddressError", tt.addr, err)
			continue
		}
		if be.Addr.String() != tt.blockedIP {
			t.Errorf("%s: blocked %s, want %s", tt.addr, be.Addr, tt.blockedIP)
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "blocked_address: ") || !strings.Contains(msg, "AllowPrivate") {
			t.Errorf("%s: message %q should name the kind and the way out", tt.addr, msg)
		}
	}
	if n := srv.accept.Load(); n != 0 {
		t.Errorf("server accepted %d connections, want none", n)
	}
	if s := d.Stats(); s.Blocked != int64(len(dials)) {
		t.Errorf("Blocked = %d, want %d", s.Blocked, len(dials))
	}

	// The refusal survives the HTTP client's wrapping, so the crawler can
	// count it under its own kind.
	client := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	_, err := client.Get("http://rebind.test:" + p + "/")
	if !errors.Is(err, ErrBlockedAddress) {
		t.Errorf("http Get: %v, want ErrBlockedAddress in the chain", err)
	}

	// AllowPrivate lets the same dials through (except the metadata
	// address, which nothing here listens on).
	open := newDialer(t, DialConfig{Resolve: fake.Resolve, AllowPrivate: true, MaxConnsPerIP: None})
	for _, tt := range dials[:5] {
		if tt.addr == "mixed-private.test:"+p {
			continue // 10.0.0.1 is not this machine
		}
		c, err := open.DialContext(testCtx(t), "tcp", tt.addr)
		if err != nil {
			t.Errorf("AllowPrivate %s: %v", tt.addr, err)
			continue
		}
		greet(t, c)
		leave(t, c)
	}
}

// TestDialTriesAddressesInOrder checks that a name's addresses are tried in
// the resolver's order, that a dead address falls through to the next, and
// that "tcp4" dials skip IPv6 addresses.
func TestDialTriesAddressesInOrder(t *testing.T) {
	srv := newSlotServer(t)
	fake := newDNSFake()
	fake.set("two.test", "127.0.0.1", "::1")
	d := newDialer(t, DialConfig{Resolve: fake.Resolve, AllowPrivate: true, MaxConnsPerIP: None})
	c, err := d.DialContext(testCtx(t), "tcp", "two.test:"+srv.port())
	if err != nil {
		t.Fatal(err)
	}
	if got := c.RemoteAddr().String(); got != "127.0.0.1:"+srv.port() {
		t.Errorf("connected to %s, want the first address", got)
	}
	greet(t, c)
	leave(t, c)

	// tcp4 only considers IPv4 addresses.
	fake.set("v6only.test", "::1")
	if _, err := d.DialContext(testCtx(t), "tcp4", "v6only.test:"+srv.port()); err == nil {
		t.Error("tcp4 dial of an IPv6-only name succeeded")
	}
	// A dead first address falls through to the next one.
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadPort := dead.Addr().(*net.TCPAddr).Port
	dead.Close()
	ln6, err := net.Listen("tcp6", fmt.Sprintf("[::1]:%d", deadPort))
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer ln6.Close()
	accepted := make(chan struct{})
	go func() {
		if c, err := ln6.Accept(); err == nil {
			c.Close()
		}
		close(accepted)
	}()
	c, err = d.DialContext(testCtx(t), "tcp", fmt.Sprintf("two.test:%d", deadPort))
	if err != nil {
		t.Fatalf("dial with a dead first address: %v", err)
	}
	if got := c.RemoteAddr().(*net.TCPAddr).IP.String(); got != "::1" {
		t.Errorf("connected to %s, want the second address ::1", got)
	}
	c.Close()
	<-accepted
}

func TestDialPerIPCap(t *testing.T) {
	for _, limit := range []int{3, None} {
		t.Run(fmt.Sprintf("MaxConnsPerIP=%d", limit), func(t *testing.T) {
			srv := newSlotServer(t)
			fake := newDNSFake()
			const hosts, workers = 12, 24
			for i := range hosts {
				fake.set(fmt.Sprintf("vhost%d.test", i), "127.0.0.1")
			}
			d := newDialer(t, DialConfig{Resolve: fake.Resolve, AllowPrivate: true, MaxConnsPerIP: limit})
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for round := range 3 {
						host := fmt.Sprintf("vhost%d.test:%s", (w+round)%hosts, srv.port())
						c, err := d.DialContext(testCtx(t), "tcp", host)
						if err != nil {
							t.Error(err)
							return
						}
						greet(t, c)
						time.Sleep(5 * time.Millisecond)
						leave(t, c)
					}
				}()
			}
			wg.Wait()
			peak := srv.peak.Load()
			switch {
			case limit > 0 && peak != int32(limit):
				t.Errorf("server saw %d concurrent connections, want exactly the cap %d", peak, limit)
			case limit < 0 && peak <= 3:
				t.Errorf("unlimited: server saw only %d concurrent connections; the capped run proves nothing", peak)
			}
			if s := d.Stats(); limit > 0 && s.Waits == 0 {
				t.Errorf("stats %+v: no dial waited", s)
			}
			d.mu.Lock()
			left := len(d.ips)
			d.mu.Unlock()
			if left != 0 {
				t.Errorf("%d per-IP entries left after every connection closed", left)
			}
		})
	}
}

func TestDialWaitHonoursContext(t *testing.T) {
	srv := newSlotServer(t)
	fake := newDNSFake()
	fake.set("a.test", "127.0.0.1")
	fake.set("b.test", "127.0.0.1")
	d := newDialer(t, DialConfig{Resolve: fake.Resolve, AllowPrivate: true, MaxConnsPerIP: 1, ReclaimIdle: None})
	held, err := d.DialContext(testCtx(t), "tcp", "a.test:"+srv.port())
	if err != nil {
		t.Fatal(err)
	}
	greet(t, held)

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	over := make(chan error, 1)
	go func() {
		_, err := d.DialContext(ctx, "tcp", "b.test:"+srv.port())
		over <- err
	}()
	select {
	case err := <-over:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("dial over the cap: %v, want the context's deadline", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("dial over the cap ignores its context")
	}
	if n := srv.accept.Load(); n != 1 {
		t.Errorf("server accepted %d connections, want 1", n)
	}

	// A dial waiting when the slot frees gets it.
	got := make(chan net.Conn, 1)
	go func() {
		c, err := d.DialContext(testCtx(t), "tcp", "b.test:"+srv.port())
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	waitFor(t, func() bool { return d.Stats().Waits == 2 })
	leave(t, held)
	select {
	case c := <-got:
		if c != nil {
			greet(t, c)
			leave(t, c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiting dial not woken by Close")
	}
}

// TestDialFailureReleasesSlot checks that a connect that fails gives its
// slot back: with a cap of 1, failing twice in a row must not wait.
func TestDialFailureReleasesSlot(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := dead.Addr().String()
	dead.Close() // nothing listens there now: connection refused
	d := newDialer(t, DialConfig{AllowPrivate: true, MaxConnsPerIP: 1})
	for i := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := d.DialContext(ctx, "tcp", addr)
		cancel()
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("dial %d: %v, want connection refused at once", i, err)
		}
	}
	if s := d.Stats(); s.Waits != 0 {
		t.Errorf("Waits = %d, want 0", s.Waits)
	}
}

func TestDialCloseIdempotent(t *testing.T) {
	srv := newSlotServer(t)
	fake := newDNSFake()
	fake.set("a.test", "127.0.0.1")
	d := newDialer(t, DialConfig{Resolve: fake.Resolve, AllowPrivate: true, MaxConnsPerIP: 2})
	c, err := d.DialContext(testCtx(t), "tcp", "a.test:"+srv.port())
	if err != nil {
		t.Fatal(err)
	}
	first := c.Close()
	second := make(chan error, 1)
	go func() { second <- c.Close() }()
	select {
	case err := <-second:
		if err != first {
			t.Errorf("second Close = %v, want the first's %v", err, first)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second Close blocks")
	}
	// One slot released, not two: two connections fit, a third waits.
	var conns []net.Conn
	for range 2 {
		c, err := d.DialContext(testCtx(t), "tcp", "a.test:"+srv.port())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if c, err := d.DialContext(ctx, "tcp", "a.test:"+srv.port()); err == nil {
		c.Close()
		t.Error("third connection opened over a cap of 2")
	}
	for _, c := range conns {
		c.Close()
	}
}

func TestDialReclaimsIdleConnections(t *testing.T) {
	srv := newSlotServer(t)
	fake := newDNSFake()
	fake.set("a.test", "127.0.0.1")
	fake.set("b.test", "127.0.0.1")
	const idle = 40 * time.Millisecond
	d := newDialer(t, DialConfig{Resolve: fake.Resolve, AllowPrivate: true, MaxConnsPerIP: 1, ReclaimIdle: idle})

	// A connection whose request awaits its answer is not reclaimed
	// within 15 × ReclaimIdle.
	busy, err := d.DialContext(testCtx(t), "tcp", "a.test:"+srv.port())
	if err != nil {
		t.Fatal(err)
	}
	greet(t, busy)
	if _, err := busy.Write([]byte("?")); err != nil { // a "request" the server never answers
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*idle)
	defer cancel()
	if c, err := d.DialContext(ctx, "tcp", "b.test:"+srv.port()); err == nil {
		c.Close()
		t.Fatal("a connection awaiting its answer was reclaimed")
	}
	// Nor is one in the middle of a long write (an upload the server is
	// slow to take), even if its last completed I/O was a read.
	sink, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := sink.Accept()
		if err == nil {
			c.Write([]byte("h")) // greet, then never read
		}
		accepted <- c
	}()
	_, sinkPort, _ := net.SplitHostPort(sink.Addr().String())
	leave(t, busy)
	writer, err := d.DialContext(testCtx(t), "tcp", "a.test:"+sinkPort)
	if err != nil {
		t.Fatal(err)
	}
	greet(t, writer)
	writeDone := make(chan error, 1)
	go func() {
		_, err := writer.Write(make([]byte, 64<<20)) // blocks: nobody reads
		writeDone <- err
	}()
	for writer.(*slotConn).writing.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(2 * idle)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*idle)
	defer cancel2()
	if c, err := d.DialContext(ctx2, "tcp", "b.test:"+srv.port()); err == nil {
		c.Close()
		t.Error("a connection in the middle of a write was reclaimed")
	}
	writer.Close()
	<-writeDone
	if c := <-accepted; c != nil {
		c.Close()
	}

	// Once the answer is read, the connection is idle, and a waiting dial
	// closes it after ReclaimIdle.
	idleConn, err := d.DialContext(testCtx(t), "tcp", "a.test:"+srv.port())
	if err != nil {
		t.Fatal(err)
	}
	greet(t, idleConn) // last I/O: a read
	start := time.Now()
	c, err := d.DialContext(testCtx(t), "tcp", "b.test:"+srv.port())
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < idle/2 {
		t.Errorf("slot taken after %v, before the idle connection was quiet for %v", el, idle)
	}
	if _, err := idleConn.Read(make([]byte, 1)); err == nil {
		t.Error("the idle connection is still open")
	}
	greet(t, c)
	leave(t, c)
	idleConn.Close()
	if s := d.Stats(); s.Reclaimed != 1 {
		t.Errorf("Reclaimed = %d, want 1", s.Reclaimed)
	}
}

// TestDialHTTPManyHostsOneIP runs real HTTP traffic with keep-alive to many
// host names on one server: requests never exceed the cap at the server,
// and idle pooled connections do not starve the other names.
func TestDialHTTPManyHostsOneIP(t *testing.T) {
	var cur, peak atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := cur.Add(1)
		defer cur.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
		fmt.Fprint(w, r.Host)
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	fake := newDNSFake()
	const hosts = 10
	for i := range hosts {
		fake.set(fmt.Sprintf("site%d.test", i), "127.0.0.1")
	}
	const limit = 2
	d := newDialer(t, DialConfig{Resolve: fake.Resolve, AllowPrivate: true, MaxConnsPerIP: limit, ReclaimIdle: 20 * time.Millisecond})
	tr := &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 4, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				host := fmt.Sprintf("site%d.test:%s", (w*3+i)%hosts, port)
				resp, err := client.Get("http://" + host + "/")
				if err != nil {
					t.Error(err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(body) != host {
					t.Errorf("body %q, want %q", body, host)
				}
			}
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > limit {
		t.Errorf("server handled %d requests at once, over the per-IP cap %d", p, limit)
	}
	if s := d.Stats(); s.Waits == 0 || s.Reclaimed == 0 {
		t.Errorf("stats %+v: want waits and reclaimed idle connections", s)
	}
}

// testCtx bounds a test's dials, so a broken wait fails instead of hanging.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFor polls cond until it holds or a few seconds pass.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// newDialer returns a Dialer for cfg, failing the test on an error.
func newDialer(t testing.TB, cfg DialConfig) *Dialer {
	t.Helper()
	d, err := NewDialer(cfg)
	if err != nil {
		t.Fatalf("NewDialer: %v", err)
	}
	return d
}
