package crawl

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestAddressTable checks every range of the IANA special-purpose
// registries, its edges, and public neighbours, against the decision
// addrRules records for it.
func TestAddressTable(t *testing.T) {
	tests := []struct {
		addr   string
		reason string // "" for a public address
	}{
		// IPv4.
		{"0.255.255.255", "this-network"},
		{"0.0.0.0", "unspecified"},
		{"1.0.0.0", ""},
		{"10.0.0.0", "private"},
		{"10.255.255.255", "private"},
		{"9.255.255.255", ""},
		{"100.64.0.0", "CGNAT shared"},
		{"127.0.0.0", "loopback"},
		{"169.254.0.0", "link-local"},
		{"169.254.169.254", "link-local"},
		{"169.254.255.255", "link-local"},
		{"169.253.255.255", ""},
		{"169.255.0.0", ""},
		{"172.16.0.0", "private"},
		{"192.0.0.0", "IETF protocol"},
		{"192.0.0.9", "IETF protocol"}, // PCP anycast, globally reachable but no web
		{"192.0.0.255", "IETF protocol"},
		{"192.0.1.0", ""},
		{"192.0.2.0", "documentation"},
		{"192.0.2.255", "documentation"},
		{"192.31.196.1", "AS112"},
		{"192.52.193.1", "AMT"},
		{"192.88.99.1", "6to4 relay"},
		{"192.168.0.0", "private"},
		{"192.175.48.1", "AS112"},
		{"198.18.0.0", "benchmarking"},
		{"198.19.255.255", "benchmarking"},
		{"198.17.255.255", ""},
		{"198.20.0.0", ""},
		{"198.51.100.1", "documentation"},
		{"203.0.113.1", "documentation"},
		{"203.0.114.0", ""},
		{"224.0.0.0", "multicast"},
		{"239.255.255.255", "multicast"},
		{"240.0.0.0", "reserved"},
		{"255.255.255.254", "reserved"},
		{"255.255.255.255", "broadcast"},
		{"93.184.215.14", ""},

		// IPv6.
		{"::", "unspecified"},
		{"::1", "loopback"},
		{"::2", "IPv4-compatible"},
		{"::a00:1", "IPv4-compatible"},
		{"::ffff:0:a00:1", "IPv4-translated"},
		{"::ffff:10.0.0.1", "private"}, // IPv4-mapped: judged as the IPv4 address
		{"::ffff:169.254.169.254", "link-local"},
		{"::ffff:c0a8:101", "private"},
		{"::ffff:93.184.215.14", ""},
		{"64:ff9b::a9fe:a9fe", "NAT64 link-local"}, // the metadata service through NAT64
		{"64:ff9b::a00:1", "NAT64 private"},
		{"64:ff9b::c0a8:101", "NAT64 private"},
		{"64:ff9b::7f00:1", "NAT64 loopback"},
		{"64:ff9b::5db8:d70e", ""},
		{"64:ff9b:1::5db8:d70e", "local-use NAT64"},
		{"100::1", "discard-only"},
		{"100:0:0:1::1", "not global unicast"},
		{"2001::1", "Teredo"},
		{"2001:1::1", "IETF protocol"},
		{"2001:2::1", "benchmarking"},
		{"2001:3::1", "IETF protocol"},
		{"2001:4:112::1", "IETF protocol"},
		{"2001:20::1", "IETF protocol"},
		{"2001:1ff:ffff::1", "IETF protocol"},
		{"2001:200::1", ""},
		{"2001:db8::1", "documentation"},
		{"2001:db8:ffff::1", "documentation"},
		{"2002:a9fe:a9fe::1", "6to4 link-local"},
		{"2002:a00:1::1", "6to4 private"},
		{"2002:5db8:d70e::1", ""},
		{"2620:4f:8000::1", "AS112"},
		{"2620:4f:8001::1", ""},
		{"3fff::1", "documentation"},
		{"3fff:fff:ffff::1", "documentation"},
		{"3fff:1000::1", ""},
		{"5f00::1", "SRv6 SID"},
		{"fc00::1", "private"},
		{"fdff:ffff::1", "private"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"febf::1", "link-local"},
		{"fec0::1", "site-local"},
		{"ff02::1", "multicast"},
		{"1::1", "not global unicast"},
		{"4000::1", "not global unicast"},
		{"e000::1", "not global unicast"},
		{"2606:4700:4700::1111", ""},
		{"2a00:1450:4001::1", ""},
		{"3ffe::1", ""},
	}
	for _, tt := range tests {
		if got := blockedReason(netip.MustParseAddr(tt.addr)); got != tt.reason {
			t.Errorf("blockedReason(%s) = %q, want %q", tt.addr, got, tt.reason)
		}
	}
	if got := blockedReason(netip.Addr{}); got != "invalid" {
		t.Errorf("blockedReason(zero Addr) = %q, want invalid", got)
	}
}

// TestJudgeHost checks the rules that need no lookup: IP literals in every
// spelling a resolver or proxy accepts, and special-use names.
func TestJudgeHost(t *testing.T) {
	tests := []struct {
		host   string
		reason string // "" when not refused outright
		addr   string // the address judged, if the host is one
		lookup bool   // worth resolving when proxied
	}{
		{"169.254.169.254", "link-local", "169.254.169.254", false},
		{"::ffff:127.0.0.1", "loopback", "::ffff:127.0.0.1", false},
		{"93.184.215.14", "", "93.184.215.14", false},
		// Legacy IPv4 spellings, read as addresses by inet_aton and browsers.
		{"2130706433", "loopback", "127.0.0.1", false},
		{"0x7f.1", "loopback", "127.0.0.1", false},
		{"0x7f000001", "loopback", "127.0.0.1", false},
		{"0177.0.0.1", "loopback", "127.0.0.1", false},
		{"127.1", "loopback", "127.0.0.1", false},
		{"127.0.0.1.", "loopback", "127.0.0.1", false},
		{"0xA9.0xFE.0xA9.0xFE", "link-local", "169.254.169.254", false},
		{"3232235777", "private", "192.168.1.1", false},
		{"169.254.43518", "link-local", "169.254.169.254", false},
		{"1572394766", "", "93.184.215.14", false},
		{"1.2.3.4.5", "numeric", "", false},
		{"256.1.1.1", "numeric", "", false},
		{"08.1.1.1", "numeric", "", false},
		{"example.123", "numeric", "", false},
		{"4294967296", "numeric", "", false},
		// Special-use names.
		{"localhost", "loopback", "", false},
		{"LOCALHOST.", "loopback", "", false},
		{"app.localhost", "loopback", "", false},
		{"ｌｏｃａｌｈｏｓｔ", "loopback", "", false}, // fullwidth: the HTTP client sends "localhost"
		{"localhost.localdomain", "private-use", "", false},
		{"printer.local", "mDNS link-local", "", false},
		{"metadata.google.internal", "private-use", "", false},
		{"router.home.arpa", "home network", "", false},
		{"nas.lan", "private-use", "", false},
		{"wiki.intranet", "private-use", "", false},
		{"dc.corp", "private-use", "", false},
		{"box.home", "private-use", "", false},
		{"metadata", "single-label", "", false},
		{"intranet", "private-use", "", false},
		{"wiki", "single-label", "", false},
		// Ordinary names: resolved when proxied, except where no public
		// DNS answers.
		{"example.com", "", "", true},
		{"localhost.example.com", "", "", true},
		{"notlocalhost.com", "", "", true},
		{"local.example.org", "", "", true},
		{"home.arpa.example.net", "", "", true},
		{"h001.synth.test", "", "", false},
		{"elsewhere.invalid", "", "", false},
		{"www.example", "", "", false},
		{"duckduckgogg42xjoc72x3sjasowoarfbgcmvfimaftt6twagswzczad.onion", "", "", false},
		{"name.alt", "", "", false},
	}
	for _, tt := range tests {
		v := judgeHost(tt.host)
		var addr string
		if v.addr.IsValid() {
			addr = v.addr.String()
		}
		if v.reason != tt.reason || addr != tt.addr || v.lookup != tt.lookup {
			t.Errorf("judgeHost(%q) = reason %q, addr %q, lookup %v; want %q, %q, %v",
				tt.host, v.reason, addr, v.lookup, tt.reason, tt.addr, tt.lookup)
		}
	}
}

// TestCheckHost checks the policy a request meets before it is sent:
// proxied requests have their names resolved here (through the cache) and
// refused when any address is blocked; direct ones leave the addresses to
// the dial; a name that does not resolve here goes to the proxy, counted.
func TestCheckHost(t *testing.T) {
	fake := newDNSFake()
	fake.set("rebind.example.com", "127.0.0.1")
	fake.set("metadata.example.com", "169.254.169.254")
	fake.set("mixed.example.com", "93.184.215.14", "10.0.0.1")
	fake.set("nat64.example.com", "64:ff9b::a9fe:a9fe")
	fake.set("public.example.com", "93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c")
	d := newDialer(t, DialConfig{Resolve: fake.Resolve})
	ctx := testCtx(t)
	tests := []struct {
		host    string
		proxied bool
		blocked string // the BlockedAddressError's Addr, or "name" for a name refused as such; "" when allowed
	}{
		{"169.254.169.254", true, "169.254.169.254"},
		{"169.254.169.254", false, "169.254.169.254"},
		{"::ffff:169.254.169.254", true, "::ffff:169.254.169.254"},
		{"2130706433", true, "127.0.0.1"},
		{"localhost", true, "name"},
		{"metadata.google.internal", false, "name"},
		{"metadata", true, "name"},
		{"rebind.example.com", true, "127.0.0.1"},
		{"metadata.example.com", true, "169.254.169.254"},
		{"mixed.example.com", true, "10.0.0.1"}, // the proxy might pick the private one
		{"nat64.example.com", true, "64:ff9b::a9fe:a9fe"},
		{"public.example.com", true, ""},
		{"nx.example.com", true, ""}, // does not resolve here: the proxy decides, counted
		{"h001.synth.test", true, ""},
		// Direct: the Dialer judges the addresses when it connects (and
		// connects to the public ones only).
		{"rebind.example.com", false, ""},
		{"mixed.example.com", false, ""},
	}
	blocked := int64(0)
	for _, tt := range tests {
		err := d.checkHost(ctx, tt.host, tt.proxied)
		var be *BlockedAddressError
		switch {
		case tt.blocked == "" && err != nil:
			t.Errorf("%s (proxied %v): %v, want allowed", tt.host, tt.proxied, err)
		case tt.blocked == "":
		case !errors.As(err, &be) || !errors.Is(err, ErrBlockedAddress):
			t.Errorf("%s (proxied %v): %v, want a BlockedAddressError", tt.host, tt.proxied, err)
		case tt.blocked == "name" && be.Addr.IsValid(), tt.blocked != "name" && be.Addr.String() != tt.blocked:
			t.Errorf("%s (proxied %v): blocked %v, want %s", tt.host, tt.proxied, be.Addr, tt.blocked)
		case !strings.HasPrefix(err.Error(), "blocked_address: ") || !strings.Contains(err.Error(), "AllowPrivate"):
			t.Errorf("%s: message %q should name the kind and the way out", tt.host, err)
		default:
			blocked++
		}
	}
	s := d.Stats()
	if s.Blocked != blocked || s.ProxyUnchecked != 1 {
		t.Errorf("Blocked %d, ProxyUnchecked %d; want %d and 1", s.Blocked, s.ProxyUnchecked, blocked)
	}
	if n := fake.count("h001.synth.test"); n != 0 {
		t.Errorf("h001.synth.test looked up %d times, want never", n)
	}

	// A host resolved recently costs no lookup, however many requests.
	for range 20 {
		if err := d.checkHost(ctx, "public.example.com", true); err != nil {
			t.Fatal(err)
		}
	}
	if n := fake.count("public.example.com"); n != 1 {
		t.Errorf("public.example.com looked up %d times for 21 requests, want 1", n)
	}

	// AllowPrivate lets everything through, without a lookup.
	open := newDialer(t, DialConfig{Resolve: fake.Resolve, AllowPrivate: true})
	for _, tt := range tests {
		if err := open.checkHost(ctx, tt.host, tt.proxied); err != nil {
			t.Errorf("AllowPrivate %s: %v", tt.host, err)
		}
	}
	if s := open.Stats(); s.Lookups != 0 || s.Blocked != 0 {
		t.Errorf("AllowPrivate stats %+v, want no lookup and nothing blocked", s)
	}
}

// proxyLog is an HTTP proxy stand-in that records the absolute URL of
// every request it receives and answers it with handler.
type proxyLog struct {
	*httptest.Server
	mu   sync.Mutex
	urls []string
}

func newProxyLog(t *testing.T, handler func(w http.ResponseWriter, r *http.Request)) *proxyLog {
	t.Helper()
	p := &proxyLog{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.urls = append(p.urls, r.URL.String())
		p.mu.Unlock()
		handler(w, r)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *proxyLog) hosts() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var hosts []string
	for _, u := range p.urls {
		if pu, err := url.Parse(u); err == nil && !slices.Contains(hosts, pu.Host) {
			hosts = append(hosts, pu.Host)
		}
	}
	slices.Sort(hosts)
	return hosts
}

// TestProxiedRequestsBlocked crawls through an HTTP proxy: a request for
// a non-public target, by address, by special-use name, by a name that
// resolves to one here, or as the target of a redirect, fails before
// anything reaches the proxy, is counted as "blocked_address" like a
// refused direct dial, and AllowPrivate lets it through.
func TestProxiedRequestsBlocked(t *testing.T) {
	const metadata = "http://169.254.169.254/latest/meta-data/"
	hostile := []string{
		metadata,
		"http://[::ffff:a9fe:a9fe]/latest/meta-data/",
		"http://[64:ff9b::a9fe:a9fe]/latest/meta-data/",
		"http://2130706433/admin",
		"http://127.1/admin",
		"http://localhost/admin",
		"http://metadata.google.internal/computeMetadata/v1/",
		"http://metadata/computeMetadata/v1/",
		"http://printer.local/",
		"http://rebind.example.com/",
	}
	fake := newDNSFake()
	fake.set("rebind.example.com", "127.0.0.1")
	fake.set("public.example.com", "93.184.215.14")
	proxy := newProxyLog(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/robots.txt":
			http.NotFound(w, r)
		case r.URL.Host == "public.example.com" && r.URL.Path == "/":
			http.Redirect(w, r, metadata+"iam/", http.StatusFound)
		default:
			fmt.Fprint(w, "<html><body>ok</body></html>")
		}
	})
	proxyURL, _ := url.Parse(proxy.URL)
	crawl := func(allowPrivate bool) Stats {
		cfg := testConfig()
		cfg.Proxy = http.ProxyURL(proxyURL)
		cfg.Dial = DialConfig{Resolve: fake.Resolve, AllowPrivate: allowPrivate}
		ring := &ringStandIn{seen: map[uint64]int{}, inScope: func(string) bool { return true }}
		c := newTestCrawler(t, cfg, nil, ring)
		c.robotsRetry = 10 * time.Millisecond
		ring.c = c
		ring.seed(append(slices.Clone(hostile), "http://public.example.com/", "http://nx.example.com/", "http://h001.synth.test/"))
		crawlUntilIdle(t, c, 10*time.Second)
		return c.Stats()
	}

	s := crawl(false)
	want := []string{"h001.synth.test", "nx.example.com", "public.example.com"}
	if got := proxy.hosts(); !slices.Equal(got, want) {
		t.Errorf("the proxy was asked for %v, want only %v", got, want)
	}
	if s.ErrorsByKind["blocked_address"] == 0 || s.ErrorsByKind["blocked_address"] != s.Dial.Blocked {
		t.Errorf("stats %+v: want blocked_address errors, each counted by the Dialer too", s)
	}
	if s.Redirects != 1 {
		t.Errorf("%d redirects reported, want the one to the metadata service (refused as a task of its own)", s.Redirects)
	}
	// nx.example.com does not resolve here: its robots.txt and its page
	// went to the proxy unchecked. public.example.com was resolved once
	// for its two requests.
	if s.Dial.ProxyUnchecked != 2 || fake.count("public.example.com") != 1 || fake.count("h001.synth.test") != 0 {
		t.Errorf("ProxyUnchecked %d, lookups of public.example.com %d and of h001.synth.test %d; want 2, 1 and 0",
			s.Dial.ProxyUnchecked, fake.count("public.example.com"), fake.count("h001.synth.test"))
	}

	// AllowPrivate: the proxy gets every one of them (the literal 2130706433
	// included, which only the proxy's resolver makes sense of).
	s = crawl(true)
	if got := proxy.hosts(); len(got) != len(want)+len(hostile) {
		t.Errorf("AllowPrivate: the proxy was asked for %v, want all %d hosts", got, len(want)+len(hostile))
	}
	if s.ErrorsByKind["blocked_address"] != 0 {
		t.Errorf("AllowPrivate: stats %+v, want nothing blocked", s)
	}
}
