package crawl

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/internal/fuzzcorpus"
)

// judgeHostSeeds are hosts as links write them: addresses in the
// spellings resolvers, proxies and browsers accept, special-use names and
// ordinary ones.
var judgeHostSeeds = map[string]string{
	"metadata-ip":     "169.254.169.254",
	"mapped-loopback": "::ffff:127.0.0.1",
	"ipv6-zone":       "fe80::1%eth0",
	"decimal":         "2130706433",
	"hex-parts":       "0xA9.0xFE.0xA9.0xFE",
	"octal":           "0177.0.0.1",
	"short":           "169.254.43518",
	"trailing-dot":    "127.0.0.1.",
	"too-many-parts":  "1.2.3.4.5",
	"numeric-tld":     "example.123",
	"fullwidth":       "ｌｏｃａｌｈｏｓｔ",
	"fullwidth-ip":    "１２７.０.０.１",
	"localhost":       "LOCALHOST.",
	"internal":        "metadata.google.internal",
	"single-label":    "wiki",
	"public":          "www.example.com",
	"test-tld":        "h001.synth.test",
	"idn":             "bücher.example",
}

// FuzzJudgeHost applies the address policy's rules that need no lookup
// to an arbitrary URL host, as every request does before it is sent
// (link hosts come from pages). It never panics; a host that is an
// address, in any spelling it reads as one, is judged by that address's
// reason; and the host the URL normalises to is refused whenever the host
// as written is (and a URL can hold it), so that normalising a link never
// unblocks it.
func FuzzJudgeHost(f *testing.F) {
	for _, h := range judgeHostSeeds {
		f.Add(h)
	}
	fuzzcorpus.Write(f, func() map[string][]any {
		out := map[string][]any{}
		for name, h := range judgeHostSeeds {
			out[name] = []any{h}
		}
		return out
	})
	f.Fuzz(func(t *testing.T, host string) {
		v := judgeHost(host)
		if v.addr.IsValid() && v.reason != blockedReason(v.addr) {
			t.Fatalf("judgeHost(%q): address %s with reason %q, blockedReason says %q", host, v.addr, v.reason, blockedReason(v.addr))
		}
		if v.reason == "" && (v.addr.IsValid() == (v.name != "") || v.lookup && v.name == "") {
			t.Fatalf("judgeHost(%q) = %+v", host, v)
		}
		h := strings.ToLower(strings.TrimSuffix(host, "."))
		if a, err := netip.ParseAddr(h); err == nil && v.addr != a {
			t.Fatalf("judgeHost(%q) judged %s, the host is the address %s", host, v.addr, a)
		}
		if endsInNumber(h) {
			if a, ok := parseLegacyIPv4(h); ok && v.addr != a {
				t.Fatalf("judgeHost(%q) judged %s, the host spells %s", host, v.addr, a)
			}
		}
		if v.reason == "" || strings.ContainsAny(host, "/?#@\\%[]") || strings.IndexFunc(host, func(r rune) bool { return r <= ' ' }) >= 0 {
			return // allowed, or not a host a URL can hold as written
		}
		n, err := urls.Normalize(nil, "http://"+hostForURL(host)+"/")
		if err != nil {
			return
		}
		u, err := url.Parse(n)
		if err != nil {
			t.Fatalf("%q does not parse: %v", n, err)
		}
		if nv := judgeHost(u.Hostname()); nv.reason == "" {
			t.Fatalf("judgeHost(%q) refuses (%s), judgeHost(%q) of its normal form %s allows", host, v.reason, u.Hostname(), n)
		}
	})
}

// hostForURL writes a host as a URL's authority holds it: an IPv6 address
// in brackets.
func hostForURL(h string) string {
	if strings.Contains(h, ":") {
		return "[" + h + "]"
	}
	return h
}
