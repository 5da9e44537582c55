package crawl

import (
	"cmp"
	"context"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// The address policy: which hosts a crawler that is not AllowPrivate
// refuses to fetch from, whether it connects itself or through a proxy.
//
// Every request's URL host is checked before anything is sent (Dialer.
// checkHost, called by the crawler's transport): an IP literal, or a name
// in a legacy IPv4 spelling ("2130706433", "0x7f.1", "127.1", which many
// resolvers and proxies read as 127.0.0.1), is judged by its address; a
// special-use name (blockedNames) is refused by name. Then:
//
//   - A direct request resolves the name through the Dialer, which
//     connects only to the public addresses of the answer (DialContext).
//   - A proxied request is resolved by the proxy, which the crawler cannot
//     see. The crawler resolves the name itself, through the same cache,
//     and refuses it when any address of the answer is blocked (the proxy
//     might pick that one). A name that does not resolve here is sent to
//     the proxy all the same, counted in DialStats.ProxyUnchecked: a
//     crawler behind a proxy often has no resolver of its own for the
//     public web (that is often why it has a proxy), and refusing
//     everything it cannot resolve would refuse the web. Names under the
//     TLDs that exist in no public DNS (test, example, invalid, onion,
//     alt) are not looked up at all: no answer here could mean anything.
//
// Against a proxy the check is best effort: the proxy resolves again, and
// a name can answer differently to it (DNS rebinding, split-horizon DNS,
// an authority that fails the crawler's lookup only). An operator who
// sends the crawl through a proxy that can reach internal networks should
// also deny private destinations at the proxy.

// addrRule is one row of the address table: a range and why it is blocked.
// A rule with embed is a translation format: an address in it is judged
// by the IPv4 address it carries, and reason prefixes that address's.
// A rule with neither reason nor embed marks a public range inside a
// wider blocked one.
type addrRule struct {
	prefix netip.Prefix
	reason string
	embed  func(a [16]byte) netip.Addr
}

// addrRules is every IANA special-purpose range (the IPv4 and IPv6
// Special-Purpose Address Registries), multicast, and the space not
// allocated for global unicast, each with the decision taken on it.
// IPv4-mapped IPv6 addresses (::ffff:0:0/96) never reach the table: they
// are unmapped first, so ::ffff:10.0.0.1 is judged as 10.0.0.1.
//
// The principle: everything in the registries is blocked, including the
// few ranges IANA marks globally reachable (protocol anycast, AS112, AMT),
// which serve DNS sinks and tunnels, never web pages; the exceptions are
// the translation formats, which are as public as the IPv4 address they
// carry.
var addrRules = sortRules([]addrRule{
	// IPv4.
	{prefix: pfx("0.0.0.0/8"), reason: "this-network"},        // RFC 791: "this network"; 0.x reaches the host itself on Linux
	{prefix: pfx("0.0.0.0/32"), reason: "unspecified"},        // RFC 1122: "this host", connects to the local machine
	{prefix: pfx("10.0.0.0/8"), reason: "private"},            // RFC 1918
	{prefix: pfx("100.64.0.0/10"), reason: "CGNAT shared"},    // RFC 6598: the carrier's network behind its NAT
	{prefix: pfx("127.0.0.0/8"), reason: "loopback"},          // RFC 1122: the crawler's own machine
	{prefix: pfx("169.254.0.0/16"), reason: "link-local"},     // RFC 3927: the local link, and 169.254.169.254, the cloud metadata service
	{prefix: pfx("172.16.0.0/12"), reason: "private"},         // RFC 1918
	{prefix: pfx("192.0.0.0/24"), reason: "IETF protocol"},    // RFC 6890: DS-Lite, NAT64 discovery, PCP/TURN anycast; no web there
	{prefix: pfx("192.0.2.0/24"), reason: "documentation"},    // RFC 5737 TEST-NET-1: never routed
	{prefix: pfx("192.31.196.0/24"), reason: "AS112"},         // RFC 7535: anycast DNS sink, no web
	{prefix: pfx("192.52.193.0/24"), reason: "AMT"},           // RFC 7450: multicast tunnel relays, no web
	{prefix: pfx("192.88.99.0/24"), reason: "6to4 relay"},     // RFC 7526: deprecated 6to4 relay anycast
	{prefix: pfx("192.168.0.0/16"), reason: "private"},        // RFC 1918
	{prefix: pfx("192.175.48.0/24"), reason: "AS112"},         // RFC 7534: anycast DNS sink, no web
	{prefix: pfx("198.18.0.0/15"), reason: "benchmarking"},    // RFC 2544: lab networks, and the fake-IP range of some proxy tools
	{prefix: pfx("198.51.100.0/24"), reason: "documentation"}, // RFC 5737 TEST-NET-2
	{prefix: pfx("203.0.113.0/24"), reason: "documentation"},  // RFC 5737 TEST-NET-3
	{prefix: pfx("224.0.0.0/4"), reason: "multicast"},         // RFC 5771: not a unicast host
	{prefix: pfx("240.0.0.0/4"), reason: "reserved"},          // RFC 1112: reserved for future use, not routed
	{prefix: pfx("255.255.255.255/32"), reason: "broadcast"},  // RFC 919: limited broadcast, the local network

	// IPv6.
	{prefix: pfx("::/0"), reason: "not global unicast"},            // RFC 4291: outside 2000::/3 everything is reserved, local or multicast
	{prefix: pfx("2000::/3")},                                      // RFC 4291: global unicast, public unless listed below
	{prefix: pfx("::/128"), reason: "unspecified"},                 // RFC 4291
	{prefix: pfx("::1/128"), reason: "loopback"},                   // RFC 4291
	{prefix: pfx("::/96"), reason: "IPv4-compatible"},              // RFC 4291: deprecated, and ::127.0.0.1 would be loopback
	{prefix: pfx("::ffff:0:0:0/96"), reason: "IPv4-translated"},    // RFC 2765: SIIT's old format, gone from RFC 6145; no public host
	{prefix: pfx("64:ff9b::/96"), reason: "NAT64", embed: low32},   // RFC 6052: the well-known NAT64 prefix reaches the IPv4 address it carries
	{prefix: pfx("64:ff9b:1::/48"), reason: "local-use NAT64"},     // RFC 8215: the operator's own translator, to wherever it maps
	{prefix: pfx("100::/64"), reason: "discard-only"},              // RFC 6666: a black hole
	{prefix: pfx("2001::/23"), reason: "IETF protocol"},            // RFC 2928: PCP/TURN/DNS-SD anycast, AMT, AS112, ORCHIDv2, DETs; no web
	{prefix: pfx("2001::/32"), reason: "Teredo"},                   // RFC 4380: a tunnel to a NATed IPv4 client, obsolete
	{prefix: pfx("2001:2::/48"), reason: "benchmarking"},           // RFC 5180
	{prefix: pfx("2001:db8::/32"), reason: "documentation"},        // RFC 3849: never routed
	{prefix: pfx("2002::/16"), reason: "6to4", embed: sixToFourV4}, // RFC 3056: reaches the IPv4 address it carries
	{prefix: pfx("2620:4f:8000::/48"), reason: "AS112"},            // RFC 7534: anycast DNS sink, no web
	{prefix: pfx("3fff::/20"), reason: "documentation"},            // RFC 9637: never routed
	{prefix: pfx("5f00::/16"), reason: "SRv6 SID"},                 // RFC 9602: segment routing identifiers, not hosts
	{prefix: pfx("fc00::/7"), reason: "private"},                   // RFC 4193: unique local addresses
	{prefix: pfx("fe80::/10"), reason: "link-local"},               // RFC 4291
	{prefix: pfx("fec0::/10"), reason: "site-local"},               // RFC 3879: deprecated, still routed inside some sites
	{prefix: pfx("ff00::/8"), reason: "multicast"},                 // RFC 4291
})

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// sortRules orders rules from the longest prefix to the shortest, so that
// the first rule that contains an address is the most specific one.
func sortRules(rules []addrRule) []addrRule {
	slices.SortStableFunc(rules, func(a, b addrRule) int { return cmp.Compare(b.prefix.Bits(), a.prefix.Bits()) })
	return rules
}

// low32 is the IPv4 address in the last 32 bits of a NAT64 address.
func low32(b [16]byte) netip.Addr { return netip.AddrFrom4([4]byte(b[12:16])) }

// sixToFourV4 is the IPv4 address in bits 16-47 of a 6to4 address.
func sixToFourV4(b [16]byte) netip.Addr { return netip.AddrFrom4([4]byte(b[2:6])) }

// blockedReason returns why a is not a public address, or "" if it is
// (see addrRules). IPv4-mapped addresses are judged as the IPv4 address,
// zones are ignored, and NAT64 and 6to4 addresses are judged by the IPv4
// address they carry: 64:ff9b::7f00:1 is "NAT64 loopback".
func blockedReason(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	if !a.IsValid() {
		return "invalid"
	}
	for _, r := range addrRules {
		if !r.prefix.Contains(a) {
			continue
		}
		if r.embed != nil {
			if inner := blockedReason(r.embed(a.As16())); inner != "" {
				return r.reason + " " + inner
			}
			return ""
		}
		return r.reason
	}
	return "" // IPv4 outside every listed range
}

// blockedNames are the names refused by name, whatever they resolve to:
// a name and every name below it.
var blockedNames = []struct{ suffix, reason string }{
	{"localhost", "loopback"},      // RFC 6761: always the local machine, and proxies resolve it to theirs
	{"localdomain", "private-use"}, // localhost.localdomain and the local machine's own domain on many systems
	{"local", "mDNS link-local"},   // RFC 6762: multicast DNS, devices on the proxy's or the node's link
	{"internal", "private-use"},    // reserved by ICANN (2024) for private networks; metadata.google.internal
	{"home.arpa", "home network"},  // RFC 8375: residential networks
	{"lan", "private-use"},         // not in the root zone; the default domain of many home routers
	{"intranet", "private-use"},    // not in the root zone; widely used inside companies
	{"corp", "private-use"},        // never delegated (ICANN name collision); widely used inside companies
	{"home", "private-use"},        // never delegated (ICANN name collision); widely used in homes
}

// unresolvableTLDs are top-level domains no public DNS answers for, so a
// lookup of their names would tell nothing: RFC 6761 reserves test,
// example and invalid, RFC 7686 onion (Tor, reached only through a Tor
// proxy) and RFC 9476 alt. They are not refused either: no public host
// lives there to aim at internal networks, and they reach something only
// where an operator set that up for them (the synthetic web of the tests
// uses *.synth.test through a proxy on loopback; /etc/hosts entries).
var unresolvableTLDs = []string{"test", "example", "invalid", "onion", "alt"}

// hostVerdict is what the address policy makes of a URL host before any
// lookup: its address when the host is one, or the name to resolve, and
// the reason it is refused, "" if it is not (yet).
type hostVerdict struct {
	name   string     // lowercase ASCII name without a trailing dot; "" for an address
	addr   netip.Addr // the address a literal (or legacy IPv4 spelling) names
	reason string     // why the host is refused outright, or ""
	lookup bool       // a name worth resolving to check its addresses
}

// judgeHost applies the policy's rules that need no lookup to a URL host
// (as url.URL.Hostname returns it: no brackets, maybe a zone).
func judgeHost(host string) hostVerdict {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if a, err := netip.ParseAddr(h); err == nil {
		return hostVerdict{addr: a, reason: blockedReason(a)}
	}
	if !isASCII([]byte(h)) {
		// The HTTP client sends the punycode form; judge that.
		if ascii, err := idna.Lookup.ToASCII(h); err == nil {
			h = strings.ToLower(ascii)
		}
	}
	if endsInNumber(h) {
		// Not a DNS name (no TLD is numeric) but an IPv4 address to
		// browsers and inet_aton, hence to many proxies.
		a, ok := parseLegacyIPv4(h)
		if !ok {
			return hostVerdict{name: h, reason: "numeric"}
		}
		return hostVerdict{addr: a, reason: blockedReason(a)}
	}
	for _, b := range blockedNames {
		if hasLabelSuffix(h, b.suffix) {
			return hostVerdict{name: h, reason: b.reason}
		}
	}
	if !strings.Contains(h, ".") {
		// No public host has a dotless name (ICANN SAC053); a resolver
		// completes one through its search domains into its own network
		// (http://metadata/, http://intranet/).
		return hostVerdict{name: h, reason: "single-label"}
	}
	tld := h[strings.LastIndexByte(h, '.')+1:]
	return hostVerdict{name: h, lookup: !slices.Contains(unresolvableTLDs, tld)}
}

// hasLabelSuffix reports whether name is suffix or a name below it.
func hasLabelSuffix(name, suffix string) bool {
	return name == suffix || strings.HasSuffix(name, "."+suffix)
}

// endsInNumber reports whether the last label of a host (a trailing empty
// label aside) is a number, decimal or 0x-hex: the WHATWG URL standard's
// test for a host that must be an IPv4 address.
func endsInNumber(h string) bool {
	h = strings.TrimSuffix(h, ".")
	last := h[strings.LastIndexByte(h, '.')+1:]
	if last == "" {
		return false
	}
	if strings.HasPrefix(last, "0x") {
		return strings.Trim(last[2:], "0123456789abcdef") == ""
	}
	return strings.Trim(last, "0123456789") == ""
}

// parseLegacyIPv4 parses an IPv4 address the way the WHATWG URL standard
// and inet_aton do: one to four parts, each decimal, 0x-hex or 0-octal,
// the last filling the remaining bytes ("127.1", "0x7f000001").
func parseLegacyIPv4(h string) (netip.Addr, bool) {
	parts := strings.Split(strings.TrimSuffix(h, "."), ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		base := 10
		switch {
		case strings.HasPrefix(p, "0x"):
			p, base = p[2:], 16
			if p == "" {
				p = "0"
			}
		case len(p) > 1 && p[0] == '0':
			p, base = p[1:], 8
		}
		n, err := strconv.ParseUint(p, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if n > 255 {
				return netip.Addr{}, false
			}
			v |= n << (8 * (3 - i))
			continue
		}
		if n >= 1<<(8*(5-len(parts))) {
			return netip.Addr{}, false
		}
		v |= n
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// checkHost applies the address policy to the host of a request, before
// anything is sent: the rules that need no lookup to every request, and,
// for a proxied one, the addresses the name resolves to here (through the
// cache, so a host resolved recently costs no lookup). Direct requests
// have their addresses checked when they are dialled. A refusal is a
// *BlockedAddressError, counted in DialStats.Blocked like a refused dial.
func (d *Dialer) checkHost(ctx context.Context, host string, proxied bool) error {
	if d.cfg.AllowPrivate {
		return nil
	}
	v := judgeHost(host)
	if v.reason != "" {
		d.blocked.Add(1)
		return &BlockedAddressError{Host: host, Addr: v.addr, Reason: v.reason}
	}
	if !proxied || !v.lookup {
		return nil
	}
	addrs, err := d.resolve(ctx, v.name)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		d.proxyUnchecked.Add(1)
		return nil
	}
	for _, a := range addrs {
		if reason := blockedReason(a); reason != "" {
			d.blocked.Add(1)
			return &BlockedAddressError{Host: host, Addr: a, Reason: reason}
		}
	}
	return nil
}
