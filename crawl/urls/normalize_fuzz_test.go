package urls

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/internal/fuzzcorpus"
)

// normalizeSeeds are links as pages write them, each with the page it is
// on ("" for a link that must be absolute: a seed, a redirect's Location
// resolved already, a URL from a peer).
var normalizeSeeds = map[string][2]string{
	"absolute":              {"", "http://example.com/a"},
	"case-and-port":         {"", "HTTP://Example.COM:80/Path"},
	"https-port-80":         {"", "https://example.com:80/"},
	"relative":              {"http://example.com/dir/page.html?q=1", "../up.html"},
	"fragment-only":         {"http://example.com/dir/page.html?q=1", "#top"},
	"query-only":            {"http://example.com/dir/page.html?q=1", "?b=2"},
	"scheme-relative":       {"https://example.com/", "//Other.example/x"},
	"dot-segments-encoded":  {"", "http://example.com/a/%2e%2E/b/./c/../d"},
	"escapes":               {"", "http://example.com/%7Euser/a%2fb%3a/100%?p=50%off"},
	"trackers":              {"", "http://example.com/?utm_source=x&a=1&UTM_Medium=y&gclid=1&SessionId=2&utm%5Fsource=1&b="},
	"jsessionid":            {"", "http://example.com/cart;jsessionid=0A1B2C/x;v=1?x=1"},
	"userinfo-trailing-dot": {"", "http://user:pw@example.com./a"},
	"idn":                   {"", "http://Bücher.example/ä?ö=1"},
	"idn-full-stop":         {"", "http://bücher。/"},
	"ipv6":                  {"", "http://[2001:DB8::1]:8080/"},
	"ipv6-zone":             {"", "http://[fe80::1%25en0]/"},
	"whitespace":            {"http://example.com/dir/", "  \n exa\tmple.html?a=b c\t"},
	"backslashes":           {"http://example.com/dir/", "\\x\\y?b=\\"},
	"mailto":                {"http://example.com/", "mailto:a@example.com"},
	"missing-host":          {"", "http:///path"},
	"bad-port":              {"", "http://example.com:99999/"},
	"long":                  {"", "http://example.com/" + strings.Repeat("a/", 1020)},
	"ipv4-number-forms":     {"", "http://0x7f.1/"},
	"ipv4-percent-encoded":  {"", "http://%30x7f.%31/"},
	"ipv6-with-ipv4":        {"", "http://[::ffff:1.2.3.4]/"},
	"scheme-no-slashes":     {"", "https:\\\\example.com\\a"},
	"same-scheme-relative":  {"http://example.com/dir/page", "http:other?x='y'"},
	"dots-after-slashes":    {"", "http://example.com/a//../b/..;jsessionid=1/c"},
	"forbidden-host":        {"", "http://a<b/"},
}

// FuzzNormalize normalises a reference (ref) against a page (base, itself
// normalised first; "" for none), as the crawler does with every link,
// redirect and seed, and the node with every URL a peer sends. It must
// not panic, and a URL it returns is canonical: http or https, at most
// MaxURLLength bytes of printable ASCII, no fragment or user info, its
// own normal form (Normalize is idempotent, also against any base), and
// parseable by net/url into the same host that HostOf, SplitOrigin and the
// ring keys derive from it.
func FuzzNormalize(f *testing.F) {
	for _, s := range normalizeSeeds {
		f.Add(s[0], s[1])
	}
	fuzzcorpus.Write(f, func() map[string][]any {
		out := map[string][]any{}
		for name, s := range normalizeSeeds {
			out[name] = []any{s[0], s[1]}
		}
		return out
	})
	f.Fuzz(func(t *testing.T, baseRef, ref string) {
		var base *url.URL
		if baseRef != "" {
			b, err := Normalize(nil, baseRef)
			if err != nil {
				return
			}
			if base, err = url.Parse(b); err != nil {
				t.Fatalf("normalised base %q does not parse: %v", b, err)
			}
		}
		n, err := Normalize(base, ref)
		if err != nil {
			return
		}
		checkNormal(t, n)
		if again, err := Normalize(nil, n); err != nil || again != n {
			t.Fatalf("Normalize(%q) = %q, %v: not idempotent (from %q on %q)", n, again, err, ref, baseRef)
		}
		if base != nil {
			if again, err := Normalize(base, n); err != nil || again != n {
				t.Fatalf("Normalize(%q) against %s = %q, %v", n, base, again, err)
			}
		}
		self, err := url.Parse(n)
		if err != nil {
			t.Fatalf("%q does not parse: %v", n, err)
		}
		if again, err := Normalize(self, ""); err != nil || again != n {
			t.Fatalf("the empty reference on %q normalises to %q, %v", n, again, err)
		}
	})
}

// checkNormal fails unless n has the properties of a normalised URL.
func checkNormal(t *testing.T, n string) {
	t.Helper()
	if len(n) > MaxURLLength {
		t.Fatalf("%d bytes normalised: %q", len(n), Truncate(n, 100))
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; c <= ' ' || c >= 0x7f || c == '#' || c == '\\' {
			t.Fatalf("byte %q at %d in %q", c, i, n)
		}
	}
	u, err := url.Parse(n)
	switch {
	case err != nil:
		t.Fatalf("%q does not parse: %v", n, err)
	case u.Scheme != "http" && u.Scheme != "https" || !strings.HasPrefix(n, u.Scheme+"://"):
		t.Fatalf("%q: scheme %q", n, u.Scheme)
	case u.User != nil || u.Opaque != "" || u.Fragment != "" || u.Host == "" || u.Hostname() == "":
		t.Fatalf("%q: user %v, opaque %q, fragment %q, host %q", n, u.User, u.Opaque, u.Fragment, u.Host)
	case u.Port() == "80" && u.Scheme == "http" || u.Port() == "443" && u.Scheme == "https":
		t.Fatalf("%q: default port kept", n)
	case strings.Contains(u.EscapedPath(), "//") || !strings.HasPrefix(u.EscapedPath(), "/"):
		t.Fatalf("%q: path %q", n, u.EscapedPath())
	}
	for _, seg := range strings.Split(u.EscapedPath(), "/") {
		if seg == "." || seg == ".." {
			t.Fatalf("%q: dot segment left", n)
		}
	}
	host, err := HostOf(n)
	if err != nil || host != strings.ToLower(u.Hostname()) || host != u.Hostname() {
		t.Fatalf("HostOf(%q) = %q, %v; net/url says %q", n, host, err, u.Hostname())
	}
	if k, err := TaskKey(n, KeyHost); err != nil || k != HostKey(host) {
		t.Fatalf("TaskKey(%q, host) = %x, %v; HostKey(%q) = %x", n, k, err, host, HostKey(host))
	}
	if k, err := TaskKey(n, KeyURL); err != nil || k != sha64(n) {
		t.Fatalf("TaskKey(%q, url) = %x, %v", n, k, err)
	}
	// The registrable domain is the host or a dot-suffix of it, its own
	// domain, and what the domain key hashes.
	d := Domain(host)
	if d == "" || d != host && !strings.HasSuffix(host, "."+d) || Domain(d) != d {
		t.Fatalf("Domain(%q) = %q, whose domain is %q", host, d, Domain(d))
	}
	if k, err := TaskKey(n, KeyDomain); err != nil || k != DomainKey(host) || k != HostKey(d) {
		t.Fatalf("TaskKey(%q, domain) = %x, %v; DomainKey %x, HostKey(%q) %x", n, k, err, DomainKey(host), d, HostKey(d))
	}
	origin, pathQuery := SplitOrigin(n)
	if origin+pathQuery != n || origin != fmt.Sprintf("%s://%s", u.Scheme, u.Host) || !strings.HasPrefix(pathQuery, "/") {
		t.Fatalf("SplitOrigin(%q) = %q, %q", n, origin, pathQuery)
	}
}
