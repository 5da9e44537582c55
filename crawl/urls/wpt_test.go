package urls

import (
	"encoding/json"
	"net/url"
	"os"
	"strings"
	"testing"
)

// wptCase is one case of the web-platform-tests URL data: input parsed
// against base (nil: none) gives href, or fails.
type wptCase struct {
	Input   string  `json:"input"`
	Base    *string `json:"base"`
	Href    string  `json:"href"`
	Failure bool    `json:"failure"`
}

// wptExceptions are the cases of testdata/wpt/urltestdata.json where the
// crawler deliberately parts from the URL Standard, by input and base
// ("" for none), each with its reason; docs/architecture.md ("Resolving
// links") lists the same. A case here must still part from the standard,
// or the test fails: the table cannot go stale.
var wptExceptions = map[[2]string]string{
	{"http://./", ""}:       exceptionDots,
	{"http://../", ""}:      exceptionDots,
	{"http://foo.09..", ""}: exceptionDots,
	{"http://!\"$&'()*+,-.;=_`{}~/", ""}: "a host with \"`\", \"{\" or \"}\" is refused: net/url, " +
		"which the crawler and the node parse URLs with, refuses them in a host, and no DNS name holds them",
}

// exceptionDots is why the crawler refuses a host ending in more than one
// dot, or of dots only.
const exceptionDots = "a host is written without its trailing dot (example.com. is example.com); " +
	"one that still ends in a dot or is left empty has an empty label no DNS name has, and is refused"

// loadWPT returns the cases of the WHATWG URL web-platform-tests data that
// concern the crawler: those whose input is an http or https URL, and the
// relative references on an http(s) base.
func loadWPT(t *testing.T) []wptCase {
	t.Helper()
	data, err := os.ReadFile("testdata/wpt/urltestdata.json")
	if err != nil {
		t.Fatal(err)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	var cases []wptCase
	for _, r := range raw {
		if len(r) > 0 && r[0] == '"' {
			continue // a comment
		}
		var c wptCase
		if err := json.Unmarshal(r, &c); err != nil {
			t.Fatal(err)
		}
		s := wptScheme(c.Input)
		base := ""
		if c.Base != nil {
			base = wptScheme(*c.Base)
		}
		if s == "http" || s == "https" || s == "" && (base == "http" || base == "https") {
			cases = append(cases, c)
		}
	}
	return cases
}

// wptScheme is the scheme of a URL string as the standard's scheme state
// finds it (lowercase), or "" when the string is a relative reference.
func wptScheme(s string) string {
	s = strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
	s = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(s)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return strings.ToLower(s[:i])
		default:
			return ""
		}
	}
	return ""
}

// TestWHATWGURLs resolves every http(s) case of the URL Standard's
// web-platform-tests data as the crawler resolves a link on a page at the
// case's base, and wants the standard's answer: a valid URL in the form
// crawlerForm gives its href (the crawler's documented normalisations), an
// invalid one refused.
func TestWHATWGURLs(t *testing.T) {
	cases := loadWPT(t)
	var agree, refusedValid, wrong, acceptedInvalid, excepted int
	for _, c := range cases {
		var base *url.URL
		if c.Base != nil && (wptScheme(*c.Base) == "http" || wptScheme(*c.Base) == "https") {
			// The crawler resolves links on a page against the page's
			// normalised URL.
			n, err := Normalize(nil, *c.Base)
			if err != nil {
				t.Fatalf("base %q: %v", *c.Base, err)
			}
			if base, err = url.Parse(n); err != nil {
				t.Fatalf("base %q normalised to %q: %v", *c.Base, n, err)
			}
		}
		got, err := Normalize(base, c.Input)
		var problem string
		switch {
		case c.Failure && err == nil:
			acceptedInvalid++
			problem = "accepted an invalid URL as " + got
		case c.Failure:
			agree++
		case err != nil:
			refusedValid++
			problem = "refused a valid URL: " + err.Error()
		case got != crawlerForm(c.Href):
			wrong++
			problem = "got " + got
		default:
			agree++
		}
		key := [2]string{c.Input, ""}
		if c.Base != nil {
			key[1] = *c.Base
		}
		reason, isException := wptExceptions[key]
		switch {
		case isException && problem == "":
			t.Errorf("input %q base %q: listed as an exception (%s), but agrees with the standard", c.Input, key[1], reason)
		case isException:
			excepted++
		case problem != "":
			want := "failure"
			if !c.Failure {
				want = crawlerForm(c.Href)
			}
			t.Errorf("input %q base %q: %s; want %s", c.Input, key[1], problem, want)
		}
	}
	t.Logf("%d cases: %d agree, %d valid refused, %d resolved otherwise, %d invalid accepted; %d of the disagreements are listed exceptions",
		len(cases), agree, refusedValid, wrong, acceptedInvalid, excepted)
}

// crawlerForm applies to a URL the standard serialised (href) the
// normalisations the crawler documents (Normalize's doc comment and
// docs/architecture.md), written independently of Normalize: no user
// info, no fragment, no default port, one trailing dot of the host
// dropped, the path and query percent-encoding in RFC 3986 form (escapes
// of unreserved characters decoded, other escapes in uppercase hex, a
// stray "%" as "%25", bytes outside the component's RFC 3986 set escaped,
// and "'" escaped in the query as well), ";jsessionid=" path parameters
// dropped, runs of "/" collapsed, empty and tracking or session query
// parameters dropped, an empty query dropped.
func crawlerForm(href string) string {
	scheme, rest, _ := strings.Cut(href, "://")
	rest, _, _ = strings.Cut(rest, "#")
	authority, pathQuery := rest, ""
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		authority, pathQuery = rest[:i], rest[i:]
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = authority[i+1:]
	}
	host, port := authority, ""
	if i := strings.LastIndexByte(authority, ':'); i >= 0 && !strings.HasSuffix(authority, "]") {
		host, port = authority[:i], authority[i+1:]
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		port = ""
	}
	path, query, hasQuery := strings.Cut(pathQuery, "?")

	path = wptEscapes(path, false)
	var segs []string
	for _, s := range strings.Split(path, "/") {
		if i := strings.Index(strings.ToLower(s), ";jsessionid="); i >= 0 {
			s = s[:i]
		}
		segs = append(segs, s)
	}
	path = strings.Join(segs, "/")
	for strings.Contains(path, "//") {
		path = strings.ReplaceAll(path, "//", "/")
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}

	var params []string
	if hasQuery {
		for _, p := range strings.Split(query, "&") {
			if p == "" {
				continue
			}
			k, _, _ := strings.Cut(p, "=")
			if dk, err := url.QueryUnescape(k); err == nil {
				k = dk
			}
			k = strings.ToLower(k)
			switch {
			case strings.HasPrefix(k, "utm_"), strings.HasPrefix(k, "aspsessionid"):
				continue
			case k == "gclid", k == "fbclid", k == "msclkid", k == "sessionid", k == "sid", k == "phpsessid", k == "jsessionid":
				continue
			}
			params = append(params, wptEscapes(p, true))
		}
	}
	out := scheme + "://" + host
	if port != "" {
		out += ":" + port
	}
	out += path
	if len(params) > 0 {
		out += "?" + strings.Join(params, "&")
	}
	return out
}

// wptEscapes puts the percent-encoding of a path or query in the form
// crawlerForm documents.
func wptEscapes(s string, query bool) string {
	const unreservedChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
	allowed := unreservedChars + "!$&()*+,;=:@/"
	if query {
		allowed += "?"
	} else {
		allowed += "'"
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) && strings.IndexByte("0123456789abcdefABCDEF", s[i+1]) >= 0 && strings.IndexByte("0123456789abcdefABCDEF", s[i+2]) >= 0 {
			v, _ := url.PathUnescape(s[i : i+3])
			if strings.Contains(unreservedChars, v) {
				b.WriteString(v)
			} else {
				b.WriteString(strings.ToUpper(s[i : i+3]))
			}
			i += 2
			continue
		}
		if strings.IndexByte(allowed, c) >= 0 {
			b.WriteByte(c)
		} else {
			b.WriteString("%" + strings.ToUpper(string("0123456789abcdef"[c>>4])+string("0123456789abcdef"[c&15])))
		}
	}
	return b.String()
}
