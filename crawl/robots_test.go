package crawl

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/temoto/robotstxt"
)

// robotsCase is a robots.txt and what it must allow and deny for a token.
type robotsCase struct {
	name    string
	body    string
	token   string // default "swarmcrawl"
	allowed []string
	denied  []string
}

func checkRobotsCases(t *testing.T, cases []robotsCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			token := tt.token
			if token == "" {
				token = "swarmcrawl"
			}
			if len(tt.allowed)+len(tt.denied) == 0 {
				t.Fatal("case checks nothing")
			}
			r := robotsFromResponse(200, []byte(tt.body), token, time.Now(), time.Hour, time.Minute)
			for _, p := range tt.allowed {
				if !r.allowed(p) {
					t.Errorf("%s denied, want allowed", p)
				}
			}
			for _, p := range tt.denied {
				if r.allowed(p) {
					t.Errorf("%s allowed, want denied", p)
				}
			}
		})
	}
}

// TestRobotsGroupSelection covers RFC 9309 §2.1, §2.2.1 and §2.2.4: which
// groups of a file apply to a crawler.
func TestRobotsGroupSelection(t *testing.T) {
	checkRobotsCases(t, []robotsCase{
		{name: "own group wins and * is ignored",
			body:    "User-agent: *\nDisallow: /all\n\nUser-agent: swarmcrawl\nDisallow: /own\n",
			allowed: []string{"/all"}, denied: []string{"/own"}},
		{name: "agent matched case-insensitively",
			body:   "User-agent: *\nDisallow: /all\n\nUser-agent: SwarmCrawl\nDisallow: /own\n",
			denied: []string{"/own"}, allowed: []string{"/all"}},
		{name: "token taken from a full User-Agent string",
			token: "SwarmCrawl/1.0 (+http://swarmcrawl.test)",
			body:  "User-agent: swarmcrawl\nDisallow: /own\n", denied: []string{"/own"}},
		{name: "agent that is a prefix of the token does not match",
			body:    "User-agent: swarm\nDisallow: /prefix\n\nUser-agent: *\nDisallow: /star\n",
			allowed: []string{"/prefix"}, denied: []string{"/star"}},
		{name: "agent the token is a prefix of does not match",
			body:    "User-agent: swarmcrawler\nDisallow: /longer\n\nUser-agent: *\nDisallow: /star\n",
			allowed: []string{"/longer"}, denied: []string{"/star"}},
		{name: "version after the product token in the file",
			body:   "User-agent: SwarmCrawl/2.1\nDisallow: /own\n\nUser-agent: *\nDisallow: /star\n",
			denied: []string{"/own"}, allowed: []string{"/star"}},
		{name: "groups for the same agent are merged",
			body:    "User-agent: swarmcrawl\nDisallow: /a\n\nUser-agent: *\nDisallow: /b\n\nUser-agent: swarmcrawl\nDisallow: /c\n",
			denied:  []string{"/a", "/c"},
			allowed: []string{"/b"}},
		{name: "* groups are merged",
			body:   "User-agent: *\nDisallow: /a\n\nUser-agent: other\nDisallow: /b\n\nUser-agent: *\nDisallow: /c\n",
			denied: []string{"/a", "/c"}, allowed: []string{"/b"}},
		{name: "several user-agent lines share one group",
			body:   "User-agent: other\nUser-agent: swarmcrawl\nDisallow: /x\n",
			denied: []string{"/x"}},
		{name: "blank lines do not end a group",
			body:   "User-agent: other\n\nUser-agent: swarmcrawl\n\nDisallow: /x\n\nDisallow: /y\n",
			denied: []string{"/x", "/y"}},
		{name: "a Sitemap line does not end a group",
			body:   "User-agent: swarmcrawl\nSitemap: https://example.com/sitemap.xml\nDisallow: /x\n",
			denied: []string{"/x"}},
		{name: "unknown keys do not end a group",
			body:   "User-agent: swarmcrawl\nNoindex: /y\nHost: example.com\nDisallow: /x\n",
			denied: []string{"/x"}, allowed: []string{"/y"}},
		{name: "a user-agent line after rules starts a new group",
			body:    "User-agent: swarmcrawl\nDisallow: /x\nUser-agent: other\nDisallow: /y\n",
			denied:  []string{"/x"},
			allowed: []string{"/y"}},
		{name: "* is the fallback",
			body:    "User-agent: other\nDisallow: /\n\nUser-agent: *\nDisallow: /x\n",
			allowed: []string{"/", "/y"}, denied: []string{"/x"}},
		{name: "* followed by text is still the global group",
			body:   "User-agent: * everyone\nDisallow: /x\n",
			denied: []string{"/x"}},
		{name: "no matching group and no * allows everything",
			body:    "User-agent: other\nDisallow: /\n",
			allowed: []string{"/", "/x"}},
		{name: "an empty group at the end allows everything",
			body:    "User-agent: *\nDisallow: /\n\nUser-agent: swarmcrawl\n",
			allowed: []string{"/", "/x"}},
		{name: "rules before any user-agent are ignored",
			body:    "Disallow: /x\nAllow: /y\nUser-agent: *\nDisallow: /y\n",
			allowed: []string{"/x"}, denied: []string{"/y"}},
		{name: "an empty user-agent starts a group nobody matches",
			body:    "User-agent: *\nDisallow: /a\nUser-agent:\nDisallow: /b\n",
			denied:  []string{"/a"},
			allowed: []string{"/b"}},
		{name: "a user-agent without token characters matches nobody",
			body:    "User-agent: *\nDisallow: /a\nUser-agent: /swarmcrawl\nDisallow: /b\n",
			denied:  []string{"/a"},
			allowed: []string{"/b"}},
		{name: "token * uses the * group",
			token: "*", body: "User-agent: other\nDisallow: /o\nUser-agent: *\nDisallow: /s\n",
			allowed: []string{"/o"}, denied: []string{"/s"}},
	})
}

// TestRobotsRFCExample is the example of RFC 9309 §5.1, for each crawler
// it names, and the longest-match example of §5.2.
func TestRobotsRFCExample(t *testing.T) {
	const body = `User-Agent: *
Disallow: *.gif$
Disallow: /example/
Allow: /publications/

User-Agent: foobot
Disallow:/
Allow:/example/page.html
Allow:/example/allowed.gif

User-Agent: barbot
User-Agent: bazbot
Disallow: /example/page.html

User-Agent: quxbot

EOF
`
	checkRobotsCases(t, []robotsCase{
		{name: "other", token: "otherbot", body: body,
			// "Allow: /publications/" is longer than "Disallow: *.gif$".
			allowed: []string{"/publications/", "/publications/x.html", "/", "/publications/a.gif"},
			denied:  []string{"/example/", "/example/x", "/a.gif", "/example/a.gif"}},
		{name: "foobot", token: "foobot", body: body,
			allowed: []string{"/example/page.html", "/example/allowed.gif"},
			denied:  []string{"/", "/publications/", "/example/other.html"}},
		{name: "barbot", token: "barbot", body: body,
			allowed: []string{"/", "/example/", "/a.gif"},
			denied:  []string{"/example/page.html"}},
		{name: "bazbot", token: "BazBot", body: body,
			allowed: []string{"/example/other.html"},
			denied:  []string{"/example/page.html"}},
		{name: "quxbot", token: "quxbot", body: body,
			allowed: []string{"/", "/example/", "/a.gif"}},
		{name: "§5.2 longest match", body: "User-agent: *\nAllow: /example/page/\nDisallow: /example/page/disallowed.gif\n",
			allowed: []string{"/example/page/", "/example/page/ok.gif"},
			denied:  []string{"/example/page/disallowed.gif"}},
	})
}

// TestRobotsMatching covers RFC 9309 §2.2.2 and §2.2.3: how Allow and
// Disallow rules apply to a path.
func TestRobotsMatching(t *testing.T) {
	ua := "User-agent: *\n"
	checkRobotsCases(t, []robotsCase{
		{name: "prefix match", body: ua + "Disallow: /help\n",
			denied:  []string{"/help", "/help.html", "/help/x", "/help?x=1"},
			allowed: []string{"/hel", "/", "/x/help"}},
		{name: "directory prefix", body: ua + "Disallow: /help/\n",
			denied: []string{"/help/", "/help/x"}, allowed: []string{"/help", "/help.html"}},
		{name: "case-sensitive paths", body: ua + "Disallow: /Private\n",
			denied: []string{"/Private/x"}, allowed: []string{"/private/x", "/PRIVATE"}},
		{name: "query is part of the path", body: ua + "Disallow: /p?x=1\n",
			denied: []string{"/p?x=1", "/p?x=1&y=2", "/p?x=10"}, allowed: []string{"/p", "/p?y=2&x=1"}},
		{name: "longest match wins, allow longer", body: ua + "Disallow: /a\nAllow: /a/b\n",
			denied: []string{"/a", "/a/c"}, allowed: []string{"/a/b", "/a/bc"}},
		{name: "longest match wins, disallow longer", body: ua + "Allow: /a\nDisallow: /a/b\n",
			denied: []string{"/a/b/c"}, allowed: []string{"/a", "/a/c"}},
		{name: "longest match wins whatever the order", body: ua + "Disallow: /a/b\nAllow: /a\n",
			denied: []string{"/a/b/c"}, allowed: []string{"/a/c"}},
		{name: "allow wins a tie", body: ua + "Disallow: /a\nAllow: /a\n",
			allowed: []string{"/a", "/ab"}},
		{name: "allow wins a tie, order reversed", body: ua + "Allow: /a\nDisallow: /a\n",
			allowed: []string{"/a"}},
		{name: "allow wins a tie at the root", body: ua + "Disallow: /\nAllow: /\n",
			allowed: []string{"/", "/x"}},
		{name: "allow wins a tie between wildcard rules", body: ua + "Disallow: /*.php\nAllow: /*.php\n",
			allowed: []string{"/a.php"}},
		{name: "empty Disallow matches nothing", body: ua + "Disallow:\n",
			allowed: []string{"/", "/x"}},
		{name: "empty Allow does not override", body: ua + "Disallow: /x\nAllow:\n",
			denied: []string{"/x"}},
		{name: "/robots.txt is always allowed", body: ua + "Disallow: /\n",
			allowed: []string{"/robots.txt"}, denied: []string{"/", "/robots.txt.bak", "/robots.txt?x"}},
		{name: "no rules allows all", body: ua,
			allowed: []string{"/", "/anything"}},
		{name: "empty path means /", body: ua + "Disallow: /$\n",
			denied: []string{"", "/"}, allowed: []string{"/a"}},
		{name: "* matches any run, / included", body: ua + "Disallow: /a/*/c\n",
			denied: []string{"/a/b/c", "/a/b/x/c", "/a//c", "/a/b/cd"}, allowed: []string{"/a/c", "/a/b", "/x/a/b/c"}},
		{name: "* does not unanchor the start", body: ua + "Disallow: /a*b\n",
			denied: []string{"/ab", "/axxb", "/a/b"}, allowed: []string{"/x/a/b", "/b"}},
		{name: "$ ends the pattern", body: ua + "Disallow: /*.gif$\n",
			denied: []string{"/a.gif", "/x/y.gif"}, allowed: []string{"/a.gif?x=1", "/a.gifs", "/a.GIF"}},
		{name: "pattern may start with * (§5.1, erratum 7995)", body: ua + "Disallow: *.gif$\n",
			denied: []string{"/a.gif", "/x/y.gif"}, allowed: []string{"/a.png"}},
		{name: "exact path with $", body: ua + "Disallow: /a$\n",
			denied: []string{"/a"}, allowed: []string{"/ab", "/a/", "/a?x"}},
		{name: "$ inside a pattern is literal", body: ua + "Disallow: /a$b\n",
			denied: []string{"/a$b", "/a$bc"}, allowed: []string{"/a", "/ab"}},
		{name: "%2A is a literal *", body: ua + "Disallow: /path/file-with-a-%2A.html\n",
			denied: []string{"/path/file-with-a-*.html", "/path/file-with-a-%2A.html"}, allowed: []string{"/path/file-with-a-x.html"}},
		{name: "%24 is a literal $", body: ua + "Disallow: /path/foo-%24\n",
			denied: []string{"/path/foo-$", "/path/foo-$x", "/path/foo-%24"}, allowed: []string{"/path/foo-", "/path/foo-x"}},
		{name: "Disallow: * blocks everything", body: ua + "Disallow: *\n",
			denied: []string{"/", "/a", "/a/b?c"}, allowed: []string{"/robots.txt"}},
		{name: "Disallow: /* blocks everything", body: ua + "Disallow: /*\n",
			denied: []string{"/", "/a"}},
		{name: "trailing * changes nothing", body: ua + "Disallow: /a*\n",
			denied: []string{"/a", "/ab"}, allowed: []string{"/b"}},
		{name: "several wildcards", body: ua + "Disallow: /*a*b*c$\n",
			denied: []string{"/abc", "/xaybzc", "/aabbcc"}, allowed: []string{"/acb", "/abcx", "/ab"}},
		{name: "anchored tail after a greedy middle", body: ua + "Disallow: /*x*x$\n",
			denied: []string{"/axbxcx", "/xx"}, allowed: []string{"/x", "/axbxc"}},
		{name: "wildcard rules ranked by pattern length", body: ua + "Allow: /page.x.y\nDisallow: /*.x.y$\n",
			allowed: []string{"/page.x.y"}, denied: []string{"/p.x.y"}},
		{name: "a longer wildcard rule beats a shorter plain one", body: ua + "Allow: /shop\nDisallow: /shop*?sort=\n",
			denied: []string{"/shop/list?sort=price"}, allowed: []string{"/shop/list"}},
		{name: "path without a leading slash", body: ua + "Disallow: private\n",
			denied: []string{"/private", "/private/x"}, allowed: []string{"/"}},
	})
}

// TestRobotsPercentEncoding covers RFC 9309 §2.2.2 (Figure 4): rules and
// URLs are compared in one percent-encoding form.
func TestRobotsPercentEncoding(t *testing.T) {
	ua := "User-agent: *\n"
	checkRobotsCases(t, []robotsCase{
		{name: "reserved characters in a query, rule plain", body: ua + "Disallow: /foo/bar?baz=https://foo.bar\n",
			denied: []string{"/foo/bar?baz=https://foo.bar", "/foo/bar?baz=https%3A%2F%2Ffoo.bar", "/foo/bar?baz=https%3a%2f%2ffoo.bar"}},
		{name: "reserved characters in a query, rule encoded", body: ua + "Disallow: /foo/bar?baz=https%3A%2F%2Ffoo.bar\n",
			denied: []string{"/foo/bar?baz=https://foo.bar", "/foo/bar?baz=https%3A%2F%2Ffoo.bar"}},
		{name: "UTF-8 in a rule", body: ua + "Disallow: /foo/bar/ツ\n",
			denied: []string{"/foo/bar/%E3%83%84", "/foo/bar/%e3%83%84", "/foo/bar/ツ"}, allowed: []string{"/foo/bar/"}},
		{name: "UTF-8 percent-encoded in a rule", body: ua + "Disallow: /foo/bar/%E3%83%84\n",
			denied: []string{"/foo/bar/%E3%83%84", "/foo/bar/ツ"}},
		{name: "unreserved escapes decoded in a rule", body: ua + "Disallow: /foo/bar/%62%61%7A\n",
			denied: []string{"/foo/bar/baz", "/foo/bar/%62az"}},
		{name: "unreserved escapes decoded in a URL", body: ua + "Disallow: /~user/\n",
			denied: []string{"/%7Euser/x", "/%7euser/x", "/~user/x"}},
		{name: "hex case normalised", body: ua + "Disallow: /a%2fb\n",
			denied: []string{"/a%2Fb", "/a%2fb"}, allowed: []string{"/a/b"}},
		{name: "escaped slash in a path is not a slash", body: ua + "Disallow: /a/b\n",
			denied: []string{"/a/b"}, allowed: []string{"/a%2Fb"}},
		{name: "non-UTF-8 byte in a rule", body: ua + "Disallow: /caf\xe9\n",
			denied: []string{"/caf%E9", "/caf\xe9"}, allowed: []string{"/caf%C3%A9"}},
		{name: "space inside a value", body: ua + "Disallow: /a b\n",
			denied: []string{"/a%20b", "/a b"}, allowed: []string{"/a", "/ab"}},
		{name: "stray percent", body: ua + "Disallow: /100%\n",
			denied: []string{"/100%25", "/100%"}, allowed: []string{"/100"}},
	})
}

// TestRobotsParsing covers the file format (RFC 9309 §2.2, §2.3.1.5): every
// line that parses is used, and a bad line costs only itself.
func TestRobotsParsing(t *testing.T) {
	checkRobotsCases(t, []robotsCase{
		{name: "keys are case-insensitive", body: "USER-AGENT: *\nDISALLOW: /x\nallow: /x/y\n",
			denied: []string{"/x"}, allowed: []string{"/x/y"}},
		{name: "whitespace around the colon is optional", body: "User-agent:*\n  Disallow :/x  \n\tDisallow\t:\t/y\t\n",
			denied: []string{"/x", "/y"}},
		{name: "comments", body: "# hello\nUser-agent: * # everyone\n# between\nDisallow: /x # not /y\nDisallow: #/z\n",
			denied: []string{"/x"}, allowed: []string{"/y", "/z", "/"}},
		{name: "CRLF line ends", body: "User-agent: *\r\nDisallow: /x\r\nDisallow: /y\r\n",
			denied: []string{"/x", "/y"}, allowed: []string{"/"}},
		{name: "CR line ends", body: "User-agent: *\rDisallow: /x\rDisallow: /y\r",
			denied: []string{"/x", "/y"}, allowed: []string{"/"}},
		{name: "mixed line ends and no final newline", body: "User-agent: other\r\nDisallow: /o\rUser-agent: *\nDisallow: /x",
			denied: []string{"/x"}, allowed: []string{"/o"}},
		{name: "byte order mark", body: "\xef\xbb\xbfUser-agent: *\nDisallow: /x\n",
			denied: []string{"/x"}},
		{name: "byte order mark before a comment", body: "\xef\xbb\xbf# c\nUser-agent: *\nDisallow: /x\n",
			denied: []string{"/x"}},
		{name: "missing colon with one value", body: "User-agent *\nDisallow /x\n",
			denied: []string{"/x"}},
		{name: "missing colon with two values is ignored", body: "User-agent: *\nDisallow /x /y\n",
			allowed: []string{"/x", "/y"}},
		{name: "misspelt keys", body: "Useragent: *\nDissallow: /x\nDisalow: /y\n",
			denied: []string{"/x", "/y"}},
		{name: "malformed lines are skipped", body: "User-agent: *\n:::\nCrawl-delay: soon\nfoo\n: /a\nDisallow: /x\n",
			denied: []string{"/x"}, allowed: []string{"/a", "/foo"}},
		{name: "binary garbage before the rules", body: "\xff\xfe\x00\x01garbage\nUser-agent: *\nDisallow: /x\n",
			denied: []string{"/x"}},
		{name: "non-UTF-8 agent names do not match", body: "User-agent: \xffswarmcrawl\nDisallow: /x\nUser-agent: *\nDisallow: /y\n",
			allowed: []string{"/x"}, denied: []string{"/y"}},
		{name: "an HTML page served as robots.txt allows all",
			body: "<!doctype html><html><body><p>Disallow: /x</p></body></html>\n", allowed: []string{"/", "/x"}},
		{name: "NUL byte inside a rule", body: "User-agent: *\nDisallow: /a\x00b\n",
			denied: []string{"/a%00b"}, allowed: []string{"/a"}},
	})
}

func TestRobotsCrawlDelay(t *testing.T) {
	tests := []struct {
		name, body, token string
		want              time.Duration
	}{
		{"seconds", "User-agent: *\nCrawl-delay: 2\n", "", 2 * time.Second},
		{"fraction", "User-agent: *\nCrawl-delay: 0.25\n", "", 250 * time.Millisecond},
		{"own group", "User-agent: *\nCrawl-delay: 9\n\nUser-agent: swarmcrawl\nCrawl-delay: 1\n", "", time.Second},
		{"* group's delay does not apply to an own group", "User-agent: *\nCrawl-delay: 9\n\nUser-agent: swarmcrawl\nDisallow: /x\n", "", 0},
		{"fallback to *", "User-agent: *\nCrawl-delay: 9\n\nUser-agent: swarmcrawl\nCrawl-delay: 1\n", "other", 9 * time.Second},
		{"largest of merged groups", "User-agent: swarmcrawl\nCrawl-delay: 5\n\nUser-agent: swarmcrawl\nCrawl-delay: 3\n", "", 5 * time.Second},
		{"largest of one group's", "User-agent: swarmcrawl\nCrawl-delay: 4\nCrawl-delay: 2\n", "", 4 * time.Second},
		{"member of its group only", "User-agent: other\nCrawl-delay: 7\nUser-agent: swarmcrawl\nDisallow: /x\n", "", 0},
		{"outside any group", "Crawl-delay: 7\nUser-agent: *\nDisallow: /x\n", "", 0},
		{"negative ignored", "User-agent: *\nCrawl-delay: -1\n", "", 0},
		{"not a number ignored", "User-agent: *\nCrawl-delay: soon\n", "", 0},
		{"NaN ignored", "User-agent: *\nCrawl-delay: NaN\n", "", 0},
		{"infinity ignored", "User-agent: *\nCrawl-delay: +Inf\n", "", 0},
		{"absurd value cut", "User-agent: *\nCrawl-delay: 1e300\n", "", maxCrawlDelay},
		{"misspelt key", "User-agent: *\nCrawldelay: 3\n", "", 3 * time.Second},
	}
	for _, tt := range tests {
		token := tt.token
		if token == "" {
			token = "swarmcrawl"
		}
		r := robotsFromResponse(200, []byte(tt.body), token, time.Now(), time.Hour, time.Minute)
		if r.crawlDelay != tt.want {
			t.Errorf("%s: crawl-delay %v, want %v", tt.name, r.crawlDelay, tt.want)
		}
	}
}

// TestRobotsSizeLimit covers RFC 9309 §2.5: the first 500 KiB are parsed,
// nothing after them is, and a line cut by the limit is dropped.
func TestRobotsSizeLimit(t *testing.T) {
	// A file whose line "Allow: /beforehand-and-more" straddles the limit,
	// cut by it to "Allow: /beforeh": a rule that, applied, would allow
	// /beforehand against the shorter "Disallow: /before".
	const straddle, cut = "Allow: /beforehand-and-more", "Allow: /beforeh"
	var b strings.Builder
	b.WriteString("User-agent: *\nDisallow: /before\n")
	for b.Len() < maxRobotsBytes-200 {
		b.WriteString("# padding padding padding padding padding padding padding\n")
	}
	b.WriteString(strings.Repeat("#", maxRobotsBytes-len(cut)-b.Len()-1) + "\n")
	b.WriteString(straddle + "\nDisallow: /after\n")
	body := []byte(b.String())
	if i := strings.Index(string(body), straddle); i != maxRobotsBytes-len(cut) {
		t.Fatalf("the straddling line starts at %d, want %d", i, maxRobotsBytes-len(cut))
	}
	for _, tt := range []struct {
		name string
		body []byte
	}{
		{"whole file", body},
		{"file cut by the fetcher at the limit", body[:maxRobotsBytes]},
	} {
		r := robotsFromResponse(200, tt.body, "swarmcrawl", time.Now(), time.Hour, time.Minute)
		if r.allowed("/before") {
			t.Errorf("%s: a rule before the limit is not applied", tt.name)
		}
		if !r.allowed("/after") {
			t.Errorf("%s: a rule after the limit is applied", tt.name)
		}
		// The cut line must be dropped, not half-applied.
		if r.allowed("/beforehand") {
			t.Errorf("%s: the line cut by the limit was applied", tt.name)
		}
	}

	// A rule whose line ends exactly at the limit applies.
	const last = "Disallow: /last\n"
	head := "User-agent: *\n"
	exact := head + strings.Repeat("#", maxRobotsBytes-len(head)-len(last)-1) + "\n" + last
	if len(exact) != maxRobotsBytes {
		t.Fatalf("file is %d bytes, want exactly the limit", len(exact))
	}
	r := robotsFromResponse(200, []byte(exact+"Disallow: /more\n"), "swarmcrawl", time.Now(), time.Hour, time.Minute)
	if r.allowed("/last") {
		t.Error("the last complete line before the limit is not applied")
	}
	if !r.allowed("/more") {
		t.Error("a line after the limit is applied")
	}
}

// TestRobotsTemotoDisagreements pins each case where
// github.com/temoto/robotstxt, which this package used to parse robots.txt,
// disagrees with RFC 9309: our answer must be the RFC's, and temoto's is
// checked too, so that a temoto release that fixes a case shows up here.
func TestRobotsTemotoDisagreements(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		token string
		path  string
		want  bool // RFC 9309: allowed
	}{
		{"agent matched by prefix", "User-agent: swarm\nDisallow: /x\n", "swarmcrawl", "/x", true},
		{"agent with a version not matched", "User-agent: SwarmCrawl/2.0\nDisallow: /x\n", "swarmcrawl", "/x", false},
		{"wildcard rule not anchored at the start", "User-agent: *\nDisallow: /a*b\n", "swarmcrawl", "/x/a/b", true},
		{"tie broken by file order", "User-agent: *\nDisallow: /a\nAllow: /a\n", "swarmcrawl", "/a", true},
		{"tie at the root broken by file order", "User-agent: *\nDisallow: /\nAllow: /\n", "swarmcrawl", "/a", true},
		{"wildcard rule ranked by its regexp's length", "User-agent: *\nAllow: /page.x.y\nDisallow: /*.x.y$\n", "swarmcrawl", "/page.x.y", true},
		{"$ inside a pattern anchors", "User-agent: *\nDisallow: /a$b\n", "swarmcrawl", "/a$b", false},
		{"Disallow: * matches nothing", "User-agent: *\nDisallow: *\n", "swarmcrawl", "/a", false},
		{"value split at a space", "User-agent: *\nDisallow: /a b\n", "swarmcrawl", "/a", true},
		{"rule before any user-agent rejects the file", "Disallow: /y\nUser-agent: *\nDisallow: /x\n", "swarmcrawl", "/x", false},
		{"bad Crawl-delay rejects the file", "User-agent: *\nCrawl-delay: soon\nDisallow: /x\n", "swarmcrawl", "/x", false},
		{"UTF-8 rule not percent-encoded", "User-agent: *\nDisallow: /ツ\n", "swarmcrawl", "/%E3%83%84", false},
		{"non-UTF-8 byte not percent-encoded", "User-agent: *\nDisallow: /caf\xe9\n", "swarmcrawl", "/caf%E9", false},
		{"unreserved escape not decoded", "User-agent: *\nDisallow: /%7euser\n", "swarmcrawl", "/~user", false},
		{"%2A not a literal *", "User-agent: *\nDisallow: /p%2Ab\n", "swarmcrawl", "/p*b", false},
		{"/robots.txt not implicitly allowed", "User-agent: *\nDisallow: /\n", "swarmcrawl", "/robots.txt", true},
		{"group without rules ignored", "User-agent: *\nDisallow: /\n\nUser-agent: swarmcrawl\n", "swarmcrawl", "/x", true},
	}
	for _, tt := range tests {
		r := robotsFromResponse(200, []byte(tt.body), tt.token, time.Now(), time.Hour, time.Minute)
		if got := r.allowed(tt.path); got != tt.want {
			t.Errorf("%s: ours allowed(%s) = %v, RFC 9309 says %v", tt.name, tt.path, got, tt.want)
		}
		data, err := robotstxt.FromString(tt.body)
		if err != nil {
			continue // temoto refuses the whole file: a disagreement
		}
		if data.TestAgent(tt.path, tt.token) == tt.want {
			t.Errorf("%s: temoto now agrees with RFC 9309; update the notes in robots.go", tt.name)
		}
	}
}

// TestRobotsAgreesWithTemotoOnPlainFiles cross-checks the parser against
// temoto on random files in the subset where temoto follows the RFC: plain
// prefix rules of distinct lengths, whole-word agents, every group with at
// least one rule, groups merged.
func TestRobotsAgreesWithTemotoOnPlainFiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	agents := []string{"alpha", "beta", "gamma", "*"}
	tokens := []string{"alpha", "beta", "gamma", "delta"}
	word := func(n int) string {
		b := []byte{'/'}
		for range n {
			b = append(b, "ab/c"[rng.IntN(4)])
		}
		return string(b)
	}
	decisions, denied := 0, 0
	for file := range 300 {
		// One rule path per length, so no two rules can tie.
		var paths []string
		for n := 1; n <= 8; n++ {
			paths = append(paths, word(n))
		}
		rng.Shuffle(len(paths), func(i, j int) { paths[i], paths[j] = paths[j], paths[i] })
		var b strings.Builder
		for range 1 + rng.IntN(4) {
			if len(paths) == 0 {
				break
			}
			for range 1 + rng.IntN(2) {
				fmt.Fprintf(&b, "User-agent: %s\n", agents[rng.IntN(len(agents))])
			}
			for range 1 + rng.IntN(3) {
				if len(paths) == 0 {
					break
				}
				verb := "Disallow"
				if rng.IntN(2) == 0 {
					verb = "Allow"
				}
				fmt.Fprintf(&b, "%s: %s\n", verb, paths[0])
				paths = paths[1:]
			}
			b.WriteString("\n")
		}
		body := b.String()
		data, err := robotstxt.FromString(body)
		if err != nil {
			t.Fatalf("file %d: temoto: %v\n%s", file, err, body)
		}
		for _, tok := range tokens {
			r := robotsFromResponse(200, []byte(body), tok, time.Now(), time.Hour, time.Minute)
			for range 20 {
				p := word(1 + rng.IntN(10))
				ours, theirs := r.allowed(p), data.TestAgent(p, tok)
				decisions++
				if !ours {
					denied++
				}
				if ours != theirs {
					t.Fatalf("file %d token %s path %s: ours %v, temoto %v\n%s", file, tok, p, ours, theirs, body)
				}
			}
		}
	}
	if denied == 0 || denied == decisions {
		t.Errorf("%d of %d decisions denied: the cross-check is trivial", denied, decisions)
	}
}

// TestRobotsFromResponse covers RFC 9309 §2.3.1: what each fetch outcome
// means, and how long it is trusted (§2.4: the caller passes 24h).
func TestRobotsFromResponse(t *testing.T) {
	now := time.Now()
	const ttl, retry = 24 * time.Hour, time.Minute
	body := []byte("User-agent: *\nDisallow: /private/\nAllow: /private/open/\nDisallow: /*.pdf$\n")
	tests := []struct {
		name        string
		status      int
		body        []byte
		allowed     []string
		denied      []string
		unavailable bool
		expires     time.Duration
	}{
		{"200 parsed", 200, body, []string{"/", "/private/open/x", "/a.pdf?x"}, []string{"/private/x", "/a.pdf"}, false, ttl},
		{"203 parsed", 203, body, []string{"/"}, []string{"/private/x"}, false, ttl},
		{"200 empty", 200, nil, []string{"/", "/private/"}, nil, false, ttl},
		{"400 allows all", 400, body, []string{"/", "/private/x"}, nil, false, ttl},
		{"401 allows all", 401, nil, []string{"/private/x"}, nil, false, ttl},
		{"403 allows all", 403, nil, []string{"/private/x"}, nil, false, ttl},
		{"404 allows all", 404, nil, []string{"/", "/private/x"}, nil, false, ttl},
		{"410 allows all", 410, nil, []string{"/private/x"}, nil, false, ttl},
		{"429 disallows all", 429, nil, nil, []string{"/"}, true, retry},
		{"500 disallows all", 500, body, nil, []string{"/", "/public"}, true, retry},
		{"503 disallows all", 503, nil, nil, []string{"/"}, true, retry},
		{"599 disallows all", 599, nil, nil, []string{"/"}, true, retry},
		{"network error or timeout", 0, nil, nil, []string{"/"}, true, retry},
		{"3xx not followed", 300, nil, nil, []string{"/"}, true, retry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := robotsFromResponse(tt.status, tt.body, "swarmcrawl", now, ttl, retry)
			for _, p := range tt.allowed {
				if !r.allowed(p) {
					t.Errorf("%s disallowed, want allowed", p)
				}
			}
			for _, p := range tt.denied {
				if r.allowed(p) {
					t.Errorf("%s allowed, want disallowed", p)
				}
			}
			if !r.allowed("/robots.txt") {
				t.Error("/robots.txt disallowed")
			}
			if r.unavailable != tt.unavailable {
				t.Errorf("unavailable = %v, want %v", r.unavailable, tt.unavailable)
			}
			if got := r.expires.Sub(now); got != tt.expires {
				t.Errorf("expires after %v, want %v", got, tt.expires)
			}
		})
	}
}

func TestRobotsCache(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := newRobotsCache()
	down := func() *robotsRules { return robotsFromResponse(503, nil, "x", now, time.Hour, time.Minute) }
	c.put("http://a", down(), now)
	c.put("http://a", down(), now)
	if r := c.get("http://a", now); r == nil || r.attempt != 2 {
		t.Fatalf("attempt after two failures: %+v", r)
	}
	c.put("http://a", robotsFromResponse(200, nil, "x", now, time.Hour, time.Minute), now)
	c.put("http://a", down(), now)
	if r := c.get("http://a", now); r.attempt != 1 {
		t.Errorf("attempt after a success and a failure = %d, want 1", r.attempt)
	}
	if c.get("http://a", now.Add(time.Minute)) != nil {
		t.Error("entry served after it expired")
	}
	if c.get("http://b", now) != nil {
		t.Error("unknown origin served")
	}

	// Bounded: live entries beyond the cap are forgotten, the newest kept.
	c = newRobotsCache()
	c.maxEntries, c.sweepAt = 100, 50
	for i := range 1000 {
		o := fmt.Sprintf("http://h%d", i)
		c.put(o, robotsFromResponse(404, nil, "x", now, time.Hour, time.Minute), now)
		if c.get(o, now) == nil {
			t.Fatalf("%s forgotten as it was put", o)
		}
	}
	if n := len(c.entries); n > 100 {
		t.Errorf("%d entries cached, want at most 100", n)
	}
}

func TestRobotsNotFoundAllows(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, "ok")
	})
	rec := newRecorder()
	c := newTestCrawler(t, testConfig(), rec, rec)
	c.Enqueue(frontier.Task{URL: srv.URL + "/a"}, frontier.Task{URL: srv.URL + "/b"})
	crawlUntilIdle(t, c, 5*time.Second)

	if got := rec.pageURLs(); len(got) != 2 {
		t.Fatalf("pages %q, want /a and /b", got)
	}
	log := srv.log()
	if log[0].path != "/robots.txt" {
		t.Errorf("first request %s, want /robots.txt before any page", log[0].path)
	}
	if n := srv.count("/robots.txt"); n != 1 {
		t.Errorf("robots.txt fetched %d times, want once per origin", n)
	}
	if s := c.Stats(); s.RobotsFetched != 1 || s.RobotsDenied != 0 || s.Errors != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestRobotsServerErrorDisallows(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.Error(w, "oops", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "page")
	})
	rec := newRecorder()
	c := newTestCrawler(t, testConfig(), rec, rec)
	c.robotsRetry = 30 * time.Millisecond
	c.Enqueue(frontier.Task{URL: srv.URL + "/a"}, frontier.Task{URL: srv.URL + "/b"})
	crawlUntilIdle(t, c, 5*time.Second)

	for _, h := range srv.log() {
		if h.path != "/robots.txt" {
			t.Errorf("%s fetched although robots.txt answered 500", h.path)
		}
	}
	// Retried after the short TTL, then the tasks are given up.
	if n := srv.count("/robots.txt"); n != maxRobotsAttempts {
		t.Errorf("robots.txt fetched %d times, want %d attempts", n, maxRobotsAttempts)
	}
	s := c.Stats()
	if s.RobotsDenied != 2 || s.Fetched != 0 || s.ErrorsByKind["http_5xx"] != maxRobotsAttempts {
		t.Errorf("stats %+v, want 2 denied, 0 fetched, %d http_5xx", s, maxRobotsAttempts)
	}
}

// TestRobotsOutageRecovers checks that a passing robots.txt outage delays
// the host's tasks instead of dropping them.
func TestRobotsOutageRecovers(t *testing.T) {
	var robotsCalls atomic.Int32
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			if robotsCalls.Add(1) == 1 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprint(w, "User-agent: *\nDisallow: /private\n")
			return
		}
		fmt.Fprint(w, "page")
	})
	rec := newRecorder()
	c := newTestCrawler(t, testConfig(), rec, rec)
	c.robotsRetry = 30 * time.Millisecond
	c.Enqueue(frontier.Task{URL: srv.URL + "/a"}, frontier.Task{URL: srv.URL + "/private"})
	crawlUntilIdle(t, c, 5*time.Second)

	if rec.page(srv.URL+"/a") == nil {
		t.Error("/a not fetched after robots.txt recovered")
	}
	if srv.count("/private") != 0 {
		t.Error("/private fetched against robots.txt")
	}
	if n := srv.count("/robots.txt"); n != 2 {
		t.Errorf("robots.txt fetched %d times, want 2", n)
	}
}

func TestRobotsGroupsAndCrawlDelay(t *testing.T) {
	const robots = `User-agent: *
Disallow: /everyone-else

User-agent: ExampleBot
Disallow: /private
Allow: /private/open
Crawl-delay: 0.15
`
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, robots)
			return
		}
		fmt.Fprint(w, "page")
	})
	rec := newRecorder()
	c := newTestCrawler(t, testConfig(), rec, rec) // Delay 10ms: the Crawl-delay must win
	for _, p := range []string{"/private/x", "/everyone-else", "/public", "/private/open/y", "/private"} {
		c.Enqueue(frontier.Task{URL: srv.URL + p})
	}
	crawlUntilIdle(t, c, 5*time.Second)

	for _, p := range []string{"/private/x", "/private"} {
		if srv.count(p) != 0 {
			t.Errorf("%s fetched although our group disallows it", p)
		}
	}
	// Our own group applies, so the "*" rules do not.
	for _, p := range []string{"/everyone-else", "/public", "/private/open/y"} {
		if srv.count(p) != 1 {
			t.Errorf("%s fetched %d times, want 1", p, srv.count(p))
		}
	}
	if s := c.Stats(); s.RobotsDenied != 2 {
		t.Errorf("RobotsDenied = %d, want 2", s.RobotsDenied)
	}
	log := srv.log()
	if len(log) != 4 {
		t.Fatalf("%d requests, want robots.txt + 3 pages", len(log))
	}
	for i, g := range gaps(log) {
		if g < 150*time.Millisecond {
			t.Errorf("gap before %s is %v, want at least the 150ms Crawl-delay", log[i+1].path, g)
		}
	}
	for _, h := range log {
		if !strings.HasPrefix(h.ua, "ExampleBot/1.0") {
			t.Errorf("User-Agent %q", h.ua)
		}
	}
}

func TestRobotsTTL(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "User-agent: *\nDisallow:\n")
	})
	var offset atomic.Int64 // the clock runs with real time, shifted by offset
	cfg := testConfig()
	cfg.Clock = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	c := newTestCrawler(t, cfg, nil, nil)

	c.Enqueue(frontier.Task{URL: srv.URL + "/1"})
	crawlUntilIdle(t, c, 5*time.Second)
	c.Enqueue(frontier.Task{URL: srv.URL + "/2"})
	crawlUntilIdle(t, c, 5*time.Second)
	if n := srv.count("/robots.txt"); n != 1 {
		t.Fatalf("robots.txt fetched %d times within its TTL, want 1", n)
	}
	offset.Store(int64(25 * time.Hour))
	c.Enqueue(frontier.Task{URL: srv.URL + "/3"})
	crawlUntilIdle(t, c, 5*time.Second)
	if n := srv.count("/robots.txt"); n != 2 {
		t.Fatalf("robots.txt fetched %d times after its TTL, want 2", n)
	}
}

func TestRobotsRedirectFollowed(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			http.Redirect(w, r, "/real-robots.txt", http.StatusMovedPermanently)
		case "/real-robots.txt":
			fmt.Fprint(w, "User-agent: *\nDisallow: /x\n")
		default:
			fmt.Fprint(w, "page")
		}
	})
	c := newTestCrawler(t, testConfig(), nil, nil)
	c.Enqueue(frontier.Task{URL: srv.URL + "/x"}, frontier.Task{URL: srv.URL + "/y"})
	crawlUntilIdle(t, c, 5*time.Second)
	if srv.count("/x") != 0 || srv.count("/y") != 1 {
		t.Errorf("requests %v: want /y only, per the redirected robots.txt", srv.log())
	}
	if s := c.Stats(); s.RobotsFetched != 2 || s.RobotsDenied != 1 {
		t.Errorf("stats %+v, want 2 robots requests (one redirect) and 1 denied", s)
	}
}

// TestRobotsRedirectLimit checks RFC 9309 §2.3.1.2 through the crawler:
// five redirects are followed and the file they lead to applies; a sixth
// makes robots.txt unavailable, which allows everything.
func TestRobotsRedirectLimit(t *testing.T) {
	for _, tt := range []struct {
		redirects int
		xFetched  bool
	}{{5, false}, {6, true}} {
		t.Run(fmt.Sprintf("%d redirects", tt.redirects), func(t *testing.T) {
			srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
				var hop int
				switch {
				case r.URL.Path == "/robots.txt":
					hop = 0
				case strings.HasPrefix(r.URL.Path, "/r"):
					fmt.Sscanf(r.URL.Path, "/r%d", &hop)
				default:
					fmt.Fprint(w, "page")
					return
				}
				if hop < tt.redirects {
					http.Redirect(w, r, fmt.Sprintf("/r%d", hop+1), http.StatusFound)
					return
				}
				fmt.Fprint(w, "User-agent: *\nDisallow: /x\n")
			})
			c := newTestCrawler(t, testConfig(), nil, nil)
			c.Enqueue(frontier.Task{URL: srv.URL + "/x"}, frontier.Task{URL: srv.URL + "/y"})
			crawlUntilIdle(t, c, 5*time.Second)
			if got := srv.count("/x") == 1; got != tt.xFetched {
				t.Errorf("/x fetched: %v, want %v (requests %v)", got, tt.xFetched, srv.log())
			}
			if srv.count("/y") != 1 {
				t.Errorf("/y fetched %d times, want 1", srv.count("/y"))
			}
		})
	}
}

// TestRobotsOversized checks RFC 9309 §2.5 through the crawler: a robots.txt
// larger than 500 KiB is parsed up to the limit only.
func TestRobotsOversized(t *testing.T) {
	var b strings.Builder
	b.WriteString("User-agent: *\nDisallow: /before\n")
	for b.Len() < maxRobotsBytes+1000 {
		b.WriteString("# padding padding padding padding padding padding padding\n")
	}
	b.WriteString("Disallow: /after\n")
	robots := b.String()
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, robots)
			return
		}
		fmt.Fprint(w, "page")
	})
	c := newTestCrawler(t, testConfig(), nil, nil)
	c.Enqueue(frontier.Task{URL: srv.URL + "/before"}, frontier.Task{URL: srv.URL + "/after"})
	crawlUntilIdle(t, c, 5*time.Second)
	if srv.count("/before") != 0 {
		t.Error("/before fetched against a rule within the first 500 KiB")
	}
	if srv.count("/after") != 1 {
		t.Error("/after not fetched: a rule past 500 KiB was applied")
	}
}

// TestRobotsAgreesWithSynthweb cross-checks the parser against the
// synthetic web's own robots evaluator, written independently, on every
// host's robots.txt (the case hosts included: wildcards, merged groups,
// an oversized file) and every page.
func TestRobotsAgreesWithSynthweb(t *testing.T) {
	w, err := synthweb.New(synthweb.Config{Seed: 7, Hosts: 60, CrawlDelayHosts: 6, Cases: true})
	if err != nil {
		t.Fatal(err)
	}
	probes := []string{"/", "/private", "/private/", "/private/x", "/private/open/1", "/secret/x", "/late/x",
		"/p/1", "/p/1?a=b", "/a.pdf", "/a.pdf?x", "/no-swarmcrawl/1", "/calendar/2026/01", "/PRIVATE/1", "/robots.txt"}
	pathsOf := map[string][]string{}
	for _, u := range w.Pages() {
		origin, pq := urls.SplitOrigin(u)
		pathsOf[origin] = append(pathsOf[origin], pq)
	}
	tokens := []string{"swarmcrawl", "SwarmCrawl/1.0 (+http://swarmcrawl.test)", "otherbot", "badbot", "examplebot"}
	decisions, denied := 0, 0
	for _, host := range w.Hosts() {
		status, body := w.RobotsTxt(host)
		origin := "http://" + host
		for _, tok := range tokens {
			r := robotsFromResponse(status, []byte(body), tok, time.Now(), time.Hour, time.Minute)
			if status == 200 && r.crawlDelay != w.CrawlDelay(host) {
				t.Errorf("%s token %q: crawl-delay %v, synthweb %v", host, tok, r.crawlDelay, w.CrawlDelay(host))
			}
			for _, pq := range append(pathsOf[origin], probes...) {
				ours, theirs := r.allowed(pq), w.Allowed(tok, origin+pq)
				decisions++
				if !ours {
					denied++
				}
				if ours != theirs {
					t.Errorf("%s%s token %q: ours %v, synthweb %v\n%.2000s", host, pq, tok, ours, theirs, body)
				}
			}
		}
	}
	t.Logf("%d decisions, %d denied", decisions, denied)
	if denied == 0 || denied == decisions {
		t.Errorf("%d of %d decisions denied: the cross-check is trivial", denied, decisions)
	}
}
