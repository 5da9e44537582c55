package urls

import "testing"

// TestDomain checks registrable domains on the Public Suffix List's edge
// cases: multi-label suffixes, private suffixes, a host that is a suffix,
// IP addresses, IDNs in punycode, suffixes the list does not know.
func TestDomain(t *testing.T) {
	for _, c := range []struct{ host, want string }{
		{"example.com", "example.com"},
		{"www.example.com", "example.com"},
		{"a.b.c.example.com", "example.com"},
		{"www.example.co.uk", "example.co.uk"},
		{"example.co.uk", "example.co.uk"},
		{"co.uk", "co.uk"},                 // a public suffix is its own domain
		{"uk", "uk"},                       // so is a lone label
		{"localhost", "localhost"},         // and a name of no suffix
		{"foo.github.io", "foo.github.io"}, // private section: each user's own
		{"a.b.foo.github.io", "foo.github.io"},
		{"github.io", "github.io"},
		{"a.b.c.kawasaki.jp", "b.c.kawasaki.jp"}, // a wildcard rule
		{"city.kawasaki.jp", "city.kawasaki.jp"}, // and its exception
		{"h001.synth.test", "synth.test"},        // unknown suffix: its last label
		{"www.xn--p1ai", "www.xn--p1ai"},         // an IDN suffix (.рф), punycode
		{"shop.xn--80ak6aa92e.com", "xn--80ak6aa92e.com"},
		{"192.0.2.1", "192.0.2.1"}, // an IP address is its own domain
		{"10.1.2.3", "10.1.2.3"},
		{"2001:db8::1", "2001:db8::1"},
		{"::1", "::1"},
	} {
		if got := Domain(c.host); got != c.want {
			t.Errorf("Domain(%q) = %q, want %q", c.host, got, c.want)
		}
	}
}

// TestDomainKey checks that every host of a domain has one key in domain
// mode, that the key is the hash of the domain, and that hosts of other
// domains get other keys; HostRingKey names the key a host's state
// travels under in each mode.
func TestDomainKey(t *testing.T) {
	key := func(u string) uint64 {
		t.Helper()
		k, err := TaskKey(u, KeyDomain)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	a := key("http://www.example.co.uk/a")
	for _, u := range []string{"https://example.co.uk/", "http://blog.example.co.uk:8080/x?y=1", "http://A.B.Example.CO.UK/"} {
		if key(u) != a {
			t.Errorf("%s: another key than www.example.co.uk in domain mode", u)
		}
	}
	if a != HostKey("example.co.uk") {
		t.Error("the domain key is not the hash of the domain")
	}
	for _, u := range []string{"http://other.co.uk/", "http://example.com/", "http://foo.github.io/"} {
		if key(u) == a {
			t.Errorf("%s shares example.co.uk's domain key", u)
		}
	}
	if key("http://foo.github.io/") == key("http://bar.github.io/") {
		t.Error("two github.io users share a domain key")
	}
	if DomainKey("WWW.Example.co.uk") != a {
		t.Error("DomainKey is case-sensitive")
	}
	for _, c := range []struct {
		mode KeyMode
		want uint64
		ok   bool
	}{
		{KeyHost, HostKey("www.example.co.uk"), true},
		{KeyDomain, a, true},
		{KeyURL, 0, false},
	} {
		if got, ok := HostRingKey("www.example.co.uk", c.mode); got != c.want || ok != c.ok {
			t.Errorf("HostRingKey in %v mode = %x, %v; want %x, %v", c.mode, got, ok, c.want, c.ok)
		}
	}
}
