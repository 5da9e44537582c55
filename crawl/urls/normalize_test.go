package urls

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	base, _ := url.Parse("http://example.com/dir/page.html?q=1")
	tests := []struct {
		name string
		base *url.URL
		ref  string
		want string
	}{
		{"absolute unchanged", nil, "http://example.com/a", "http://example.com/a"},
		{"lowercase scheme and host", nil, "HTTP://Example.COM/Path", "http://example.com/Path"},
		{"https kept", nil, "https://example.com/", "https://example.com/"},
		{"default http port removed", nil, "http://example.com:80/a", "http://example.com/a"},
		{"default https port removed", nil, "https://example.com:443/a", "https://example.com/a"},
		{"other port kept", nil, "http://example.com:8080/a", "http://example.com:8080/a"},
		{"https port 80 kept", nil, "https://example.com:80/", "https://example.com:80/"},
		{"port leading zeros", nil, "http://example.com:0080/", "http://example.com/"},
		{"empty port", nil, "http://example.com:/a", "http://example.com/a"},
		{"fragment removed", nil, "http://example.com/a#top", "http://example.com/a"},
		{"fragment only ref", base, "#top", "http://example.com/dir/page.html?q=1"},
		{"empty path", nil, "http://example.com", "http://example.com/"},
		{"empty path with query", nil, "http://example.com?a=1", "http://example.com/?a=1"},
		{"dot segments", nil, "http://example.com/a/./b/../c", "http://example.com/a/c"},
		{"dot segments above root", nil, "http://example.com/../../a", "http://example.com/a"},
		{"trailing dot segment", nil, "http://example.com/a/b/..", "http://example.com/a/"},
		{"encoded dot segments", nil, "http://example.com/a/%2e%2E/b", "http://example.com/b"},
		{"duplicate slashes", nil, "http://example.com//a///b", "http://example.com/a/b"},
		{"relative", base, "other.html", "http://example.com/dir/other.html"},
		{"relative up", base, "../up.html", "http://example.com/up.html"},
		{"root relative", base, "/root", "http://example.com/root"},
		{"scheme relative", base, "//Other.example/x", "http://other.example/x"},
		{"query only ref", base, "?b=2", "http://example.com/dir/page.html?b=2"},
		{"unreserved decoded", nil, "http://example.com/%7Euser/%41%2d", "http://example.com/~user/A-"},
		{"hex uppercased", nil, "http://example.com/a%2fb%3a", "http://example.com/a%2Fb%3A"},
		{"reserved stays encoded", nil, "http://example.com/a%2Fb?x=%26", "http://example.com/a%2Fb?x=%26"},
		{"space escaped", nil, "http://example.com/a b", "http://example.com/a%20b"},
		{"non-ascii path escaped", nil, "http://example.com/ä", "http://example.com/%C3%A4"},
		{"stray percent", nil, "http://example.com/100%", "http://example.com/100%25"},
		{"stray percent in query", nil, "http://example.com/?p=50%off", "http://example.com/?p=50%25off"},
		{"utm removed", nil, "http://example.com/?utm_source=x&a=1&UTM_Medium=y", "http://example.com/?a=1"},
		{"click ids removed", nil, "http://example.com/?gclid=1&fbclid=2&msclkid=3&b=2", "http://example.com/?b=2"},
		{"session ids removed", nil, "http://example.com/?SessionId=1&sid=2&PHPSESSID=3&jsessionid=4&ASPSESSIONIDQQ=5&c=3", "http://example.com/?c=3"},
		{"order kept", nil, "http://example.com/?z=1&a=2&m=3", "http://example.com/?z=1&a=2&m=3"},
		{"all params removed", nil, "http://example.com/a?utm_source=x", "http://example.com/a"},
		{"empty query dropped", nil, "http://example.com/a?", "http://example.com/a"},
		{"empty params dropped", nil, "http://example.com/a?&x=1&&", "http://example.com/a?x=1"},
		{"similar names kept", nil, "http://example.com/?sidebar=1&utm=2", "http://example.com/?sidebar=1&utm=2"},
		{"encoded key removed", nil, "http://example.com/?utm%5Fsource=1&a=1", "http://example.com/?a=1"},
		{"jsessionid path param", nil, "http://example.com/cart;jsessionid=0A1B2C?x=1", "http://example.com/cart?x=1"},
		{"jsessionid mid path", nil, "http://example.com/a;JSESSIONID=1/b", "http://example.com/a/b"},
		{"other path params kept", nil, "http://example.com/a;v=1", "http://example.com/a;v=1"},
		{"userinfo dropped", nil, "http://user:pw@example.com/", "http://example.com/"},
		{"trailing dot host", nil, "http://example.com./a", "http://example.com/a"},
		{"idn to punycode", nil, "http://Bücher.example/", "http://xn--bcher-kva.example/"},
		{"idn with a trailing full stop", nil, "http://Bücher。/", "http://xn--bcher-kva/"},
		{"ipv6", nil, "http://[2001:DB8::1]:8080/", "http://[2001:db8::1]:8080/"},
		{"ipv6 default port", nil, "http://[::1]:80/", "http://[::1]/"},
		{"whitespace trimmed", base, "  \n other.html\t", "http://example.com/dir/other.html"},
		{"newline inside", nil, "http://exam\nple.com/a\tb", "http://example.com/ab"},
		{"backslash", base, "\\x\\y", "http://example.com/x/y"},
		{"backslash in query kept", nil, "http://example.com/a?b=\\", "http://example.com/a?b=%5C"},
		// As browsers resolve links (the WHATWG URL Standard).
		{"scheme without slashes", nil, "http:example.com/a", "http://example.com/a"},
		{"scheme without slashes on another scheme", base, "https:example.com/a", "https://example.com/a"},
		{"scheme without slashes on the same scheme", base, "http:other.html", "http://example.com/dir/other.html"},
		{"scheme and absolute path on the same scheme", base, "http:/x", "http://example.com/x"},
		{"four slashes on the same scheme", base, "http:////other.example/a", "http://other.example/a"},
		{"three slashes", nil, "http:///example.com/a", "http://example.com/a"},
		{"backslashes after the scheme", nil, "https:\\\\example.com\\a", "https://example.com/a"},
		{"colon first", base, ":foo", "http://example.com/dir/:foo"},
		{"ipv4 hex and octal", nil, "http://0x7f.0.00.1/", "http://127.0.0.1/"},
		{"ipv4 one number", nil, "http://3232235521/", "http://192.168.0.1/"},
		{"ipv4 three parts", nil, "http://192.168.257/", "http://192.168.1.1/"},
		{"ipv4 percent-encoded", nil, "http://%31%32%37.0.0.1/", "http://127.0.0.1/"},
		{"ipv4 trailing dot", nil, "http://127.0.0.1./", "http://127.0.0.1/"},
		{"ipv6 compressed", nil, "http://[0:0:0:0:0:0:0:1]/", "http://[::1]/"},
		{"ipv6 first longest zero run", nil, "http://[1:0:0:2:0:0:0:3]/", "http://[1:0:0:2::3]/"},
		{"ipv6 with ipv4", nil, "http://[::127.0.0.1]/", "http://[::7f00:1]/"},
		{"ipv6 mapped ipv4", nil, "http://[::ffff:1.2.3.4]/", "http://[::ffff:102:304]/"},
		{"dot segment after double slash", nil, "http://example.com/a/b//../c", "http://example.com/a/b/c"},
		{"quote in query escaped", nil, "http://example.com/it's?q='x'", "http://example.com/it's?q=%27x%27"},
		{"control character escaped", nil, "http://example.com/a\x01b?c\x7f", "http://example.com/a%01b?c%7F"},
		{"user info with at signs", nil, "http://a@b:c@d@example.com/", "http://example.com/"},
		{"punycode host", nil, "http://XN--BCHER-KVA.example/", "http://xn--bcher-kva.example/"},
		{"fullwidth host", nil, "http://ＥＸＡＭＰＬＥ．com/", "http://example.com/"},
		{"jsessionid before dot dot", nil, "http://example.com/a/b/..;jsessionid=1/c", "http://example.com/a/c"},
		{"encoded jsessionid", nil, "http://example.com/a;%6Asessionid=1/c", "http://example.com/a/c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Normalize(tt.base, tt.ref)
			if err != nil {
				t.Fatalf("Normalize(%q) error: %v", tt.ref, err)
			}
			if got != tt.want {
				t.Fatalf("Normalize(%q) = %q, want %q", tt.ref, got, tt.want)
			}
			// Normalising is idempotent: a canonical URL is its own canonical form.
			again, err := Normalize(nil, got)
			if err != nil || again != got {
				t.Fatalf("Normalize(%q) = %q, %v; not idempotent", got, again, err)
			}
		})
	}
}

func TestNormalizeErrors(t *testing.T) {
	base, _ := url.Parse("http://example.com/")
	long := "http://example.com/" + strings.Repeat("a", 2100-len("http://example.com/"))
	tests := []struct {
		name    string
		base    *url.URL
		ref     string
		is      error
		message string
	}{
		{"ftp", nil, "ftp://example.com/file", ErrUnsupportedScheme, `unsupported scheme "ftp"`},
		{"mailto", base, "mailto:a@example.com", ErrUnsupportedScheme, `unsupported scheme "mailto"`},
		{"javascript", base, "javascript:void(0)", ErrUnsupportedScheme, `unsupported scheme "javascript"`},
		{"too long", nil, long, ErrURLTooLong, "url too long (2100 > 2048 bytes)"},
		{"too long input", nil, "http://example.com/" + strings.Repeat("a", 20000), ErrURLTooLong, "url too long"},
		{"missing host", nil, "http:///", ErrMissingHost, "missing host"},
		{"missing host with user info", nil, "http://user@/path", ErrMissingHost, "missing host"},
		{"missing host before port", nil, "http://:80/", ErrMissingHost, "missing host"},
		{"scheme only", nil, "http:", ErrMissingHost, "missing host"},
		{"relative on another scheme", &url.URL{Scheme: "ftp", Host: "example.com", Path: "/"}, "a", ErrUnsupportedScheme, `unsupported scheme "ftp"`},
		{"ipv4 out of range", nil, "http://256.256.256.256/", nil, "IPv4 part 256 above 255"},
		{"ipv4 last part out of range", nil, "http://1.2.3.4294967296/", nil, "IPv4 address out of range"},
		{"ipv4 five parts", nil, "http://1.2.3.4.5/", nil, "more than four parts"},
		{"ipv4 bad octal", nil, "http://foo.09/", nil, "not an IPv4 number"},
		{"ipv4 percent-encoded out of range", nil, "http://%30%78%31%30%30%30%30%30%30%30%30/", nil, "out of range"},
		{"forbidden host character", nil, "http://a<b/", nil, "forbidden character '<'"},
		{"forbidden host character escaped", nil, "http://a%25b/", nil, "forbidden character '%'"},
		{"bad punycode", nil, "http://xn--a.example/", nil, "invalid host"},
		{"ipv6 two compressions", nil, "http://[1::2::3]/", nil, "two ::"},
		{"ipv6 unclosed", nil, "http://[::1/", nil, "unclosed"},
		{"ipv6 ipv4 leading zero", nil, "http://[::1.2.3.04]/", nil, "leading zero"},
		{"port not digits", nil, "http://example.com:8o/", nil, `invalid port "8o"`},
		{"relative without base", nil, "/a/b", ErrMissingScheme, "missing scheme"},
		{"bad port", nil, "http://example.com:99999/", nil, `invalid port "99999"`},
		{"bad host", nil, "http://exa mple.com/", nil, "forbidden character ' '"},
		{"ipv6 zone", nil, "http://[fe80::1%25en0]/", nil, "an IPv6 zone"},
		{"only dots", nil, "http://../", nil, "empty label"},
		{"colons but not IPv6", base, "//000000000000000::", nil, `invalid port ":"`},
		{"host net/url refuses", nil, "http://a{b}/", nil, "which net/url refuses"},
		{"host of two dots", nil, "http://../", nil, "empty label"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Normalize(tt.base, tt.ref)
			if err == nil {
				t.Fatalf("Normalize(%q) = %q, want error", tt.ref, got)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Errorf("error %q does not contain %q", err, tt.message)
			}
		})
	}
	// Exactly at the limit is fine.
	exact := "http://example.com/" + strings.Repeat("a", MaxURLLength-len("http://example.com/"))
	if _, err := Normalize(nil, exact); err != nil {
		t.Errorf("URL of exactly MaxURLLength bytes: %v", err)
	}
}
