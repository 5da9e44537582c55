package urls

import (
	"crypto/sha256"
	"encoding/binary"
	"hash/fnv"
	"testing"
)

func TestParseKeyMode(t *testing.T) {
	tests := []struct {
		in      string
		want    KeyMode
		wantErr bool
	}{
		{"host", KeyHost, false},
		{"url", KeyURL, false},
		{" URL ", KeyURL, false},
		{"Host", KeyHost, false},
		{"", 0, true},
		{"domain", KeyDomain, false},
		{"Domain", KeyDomain, false},
		{"tld", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseKeyMode(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseKeyMode(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err == nil && got.String() != map[KeyMode]string{KeyHost: "host", KeyURL: "url", KeyDomain: "domain"}[got] {
			t.Errorf("KeyMode(%d).String() = %q", got, got.String())
		}
	}
	if KeyMode(0) != KeyHost {
		t.Error("the zero KeyMode must be KeyHost, the documented default")
	}
}

func TestTaskKey(t *testing.T) {
	key := func(u string, m KeyMode) uint64 {
		t.Helper()
		k, err := TaskKey(u, m)
		if err != nil {
			t.Fatalf("TaskKey(%q, %v): %v", u, m, err)
		}
		return k
	}
	a := "http://example.com/a"
	b := "http://example.com/b?x=1"
	other := "http://other.example/a"

	// Host mode: same host, same key, whatever the path, scheme or port.
	if key(a, KeyHost) != key(b, KeyHost) {
		t.Error("host mode: URLs of one host have different keys")
	}
	if key(a, KeyHost) != key("https://example.com:8443/z", KeyHost) {
		t.Error("host mode: port or scheme changed the key")
	}
	if key(a, KeyHost) == key(other, KeyHost) {
		t.Error("host mode: different hosts share a key")
	}
	if key(a, KeyHost) != HostKey("Example.COM") {
		t.Error("HostKey disagrees with TaskKey in host mode")
	}
	// URL mode: different URLs of one host get different keys.
	if key(a, KeyURL) == key(b, KeyURL) {
		t.Error("url mode: different URLs share a key")
	}
	if key(a, KeyURL) == key(a, KeyHost) {
		t.Error("url mode key equals host mode key")
	}

	// The key is the first 8 bytes of SHA-256, big-endian: other
	// implementations (and the ring) must be able to recompute it.
	sum := sha256.Sum256([]byte("example.com"))
	if got, want := key(a, KeyHost), binary.BigEndian.Uint64(sum[:8]); got != want {
		t.Errorf("host key = %#x, want %#x", got, want)
	}
	sum = sha256.Sum256([]byte(a))
	if got, want := key(a, KeyURL), binary.BigEndian.Uint64(sum[:8]); got != want {
		t.Errorf("url key = %#x, want %#x", got, want)
	}
	// IPv6 literal: the brackets and port are not part of the host.
	if key("http://[::1]:8080/", KeyHost) != HostKey("::1") {
		t.Error("ipv6 host key includes brackets or port")
	}

	for _, bad := range []string{"", "example.com/a", "ftp://example.com/", "http:///a"} {
		if _, err := TaskKey(bad, KeyHost); err == nil {
			t.Errorf("TaskKey(%q) succeeded, want error", bad)
		}
	}
	if _, err := TaskKey(a, KeyMode(7)); err == nil {
		t.Error("TaskKey with an unknown mode succeeded")
	}
}

func TestURLHash(t *testing.T) {
	for _, u := range []string{"", "http://example.com/", "http://example.com/a?b=c"} {
		h := fnv.New64a()
		h.Write([]byte(u))
		if got, want := URLHash(u), h.Sum64(); got != want {
			t.Errorf("URLHash(%q) = %#x, want FNV-1a %#x", u, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { sinkHash = URLHash("http://example.com/some/path") }); n != 0 {
		t.Errorf("URLHash allocates %v times", n)
	}
}

func TestHostOf(t *testing.T) {
	tests := map[string]string{
		"http://example.com/a":        "example.com",
		"https://Example.com:8443/":   "example.com",
		"http://[2001:db8::1]:80/x":   "2001:db8::1",
		"http://user@example.com/":    "example.com",
		"http://example.com?x":        "example.com",
		"http://h001.synth.test/p/1?": "h001.synth.test",
	}
	for in, want := range tests {
		if got, err := HostOf(in); err != nil || got != want {
			t.Errorf("HostOf(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// sinkHash keeps the compiler from discarding a benchmarked call.
var sinkHash uint64
