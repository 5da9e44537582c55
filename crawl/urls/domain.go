package urls

import (
	"net/netip"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// Domain returns the registrable domain of a hostname (lowercase, without
// port or brackets, as HostOf returns it): its public suffix and one label
// more, by the Public Suffix List compiled into the binary (its ICANN and
// private sections, so that foo.github.io and bar.github.io are two
// domains, and so are a.example.co.uk and b.example.co.uk). A host that
// has no label above its public suffix (co.uk, github.io, a single label
// such as localhost) and an IP address are their own domain. Hosts under a
// suffix the list does not know take its last label as the suffix:
// h001.synth.test is in synth.test.
//
// The list changes with golang.org/x/net releases, so two binaries built
// against different versions may disagree on a few hosts; KeyDomain needs
// every node of a swarm to agree.
func Domain(host string) string {
	if strings.IndexByte(host, ':') >= 0 {
		return host // IPv6
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return host
	}
	d, err := publicsuffix.EffectiveTLDPlusOne(host)
	if err != nil {
		return host
	}
	return d
}

// DomainKey is the KeyDomain task key of a hostname (without port): the
// hash of its registrable domain, so that every host of a domain has one
// owner.
func DomainKey(host string) uint64 {
	return sha64(Domain(strings.ToLower(host)))
}

// HostRingKey returns the ring key of every URL of host in mode (host key
// or domain key), and false in KeyURL mode, where a host's URLs have keys
// of their own. It is the key a host's politeness state travels under.
func HostRingKey(host string, mode KeyMode) (uint64, bool) {
	switch mode {
	case KeyHost:
		return HostKey(host), true
	case KeyDomain:
		return DomainKey(host), true
	default:
		return 0, false
	}
}
