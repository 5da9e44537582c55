package crawl

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/temoto/robotstxt"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/internal/fuzzcorpus"
)

// robotsSeeds are robots.txt files as sites write them: the synthetic
// web's (one per distinct file), RFC 9309's example, and files with what
// real ones have (comments, Sitemap and Host lines, CRLF, a byte order
// mark, misspelt keys, wildcards, percent-encoding, Crawl-delay).
func robotsSeeds(tb testing.TB) map[string][]byte {
	tb.Helper()
	w, err := synthweb.New(synthweb.Config{Seed: 1, Hosts: 4, Cases: true})
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Close()
	out := map[string][]byte{}
	seen := map[string]bool{}
	for _, h := range w.Hosts() {
		status, body := w.RobotsTxt(h)
		_, rules, _ := strings.Cut(body, "\n") // the first line names the host
		if status != 200 || len(body) > 4<<10 || seen[rules] {
			continue
		}
		seen[rules] = true
		out["synth-"+strings.SplitN(h, ".", 2)[0]] = []byte(body)
	}
	out["rfc9309-example"] = []byte("User-Agent: *\nDisallow: *.gif$\nDisallow: /example/\nAllow: /publications/\n\n" +
		"User-Agent: foobot\nDisallow:/\nAllow:/example/page.html\nAllow:/example/allowed.gif\n\n" +
		"User-Agent: barbot\nUser-Agent: bazbot\nDisallow: /example/page.html\n\nUser-Agent: quxbot\n\nEOF\n")
	out["news-site"] = []byte("\ufeff# robots.txt\r\nSitemap: https://www.example.com/sitemap.xml\r\n\r\n" +
		"User-agent: *\r\nDisallow: /search\r\nDisallow: /*?share=\r\nDisallow: /*.json$\r\nAllow: /search/about\r\n" +
		"Crawl-delay: 2.5\r\n\r\nUser-agent: GPTBot\r\nUser-agent: CCBot\r\nDisallow: /\r\n\r\nHost: www.example.com\r\n")
	out["shop"] = []byte("User-agent: *\nDisallow: /cart/\nDisallow: /checkout\nDisallow: /account/\nDisallow: /*sort=\n" +
		"Disallow: /*?*filter\nAllow: /account/login$\nDisallow: /%7Euser/\nDisallow: /caf%C3%A9/\nDisallow: /ツ\n" +
		"Useragent: swarmcrawl\nDissallow /tmp\nAllow: /tmp/ok # open\nCrawl-delay: 10\n")
	out["disallow-all"] = []byte("User-agent: *\nDisallow: /\n")
	out["empty-disallow"] = []byte("User-agent: *\nDisallow:\n\nUser-agent: swarmcrawl\nAllow: /\nDisallow: /private\n")
	return out
}

// FuzzRobots parses an arbitrary robots.txt, as a worker does with what a
// site answers, and asks about a path. It never panics; /robots.txt is
// always allowed; the Crawl-delay is within [0, maxCrawlDelay]; the rules
// are no more than the lines, ordered most specific first and allow
// first among equals; and the decision is the one a regular-expression
// reading of the rules gives (the longest matching pattern wins, allow on
// a tie). Changing CRLF to LF, or the case of the token, changes nothing,
// and the body survives packRobots and unpackRobots.
func FuzzRobots(f *testing.F) {
	seeds := robotsSeeds(f)
	for _, body := range seeds {
		f.Add(body, "/example/page.html?q=1")
	}
	fuzzcorpus.Write(f, func() map[string][]any {
		out := map[string][]any{}
		for name, body := range seeds {
			out[name] = []any{body, "/private/x.gif?print=1"}
		}
		return out
	})
	now := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, body []byte, path string) {
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		r := robotsFromResponse(200, body, "swarmcrawl", now, time.Hour, time.Minute)
		if !r.allowed("/robots.txt") {
			t.Fatal("/robots.txt disallowed")
		}
		if r.crawlDelay < 0 || r.crawlDelay > maxCrawlDelay {
			t.Fatalf("Crawl-delay %v", r.crawlDelay)
		}
		if lines := bytes.Count(body, []byte("\n")) + bytes.Count(body, []byte("\r")) + 1; len(r.rules) > lines {
			t.Fatalf("%d rules from %d lines", len(r.rules), lines)
		}
		for i := 1; i < len(r.rules); i++ {
			a, b := r.rules[i-1], r.rules[i]
			if a.length < b.length || a.length == b.length && !a.allow && b.allow {
				t.Fatalf("rules out of order: %+v before %+v", a, b)
			}
		}
		// Paths worth asking about: the input's, and each rule's parts
		// joined, so that rules match often.
		paths := []string{path}
		for _, rule := range r.rules[:min(len(r.rules), 8)] {
			p := strings.Join(rule.parts, "x")
			paths = append(paths, p, p+path[1:])
		}
		compiled := referenceRules(r.rules)
		for _, p := range paths {
			if got, want := r.allowed(p), referenceAllowed(r.rules, compiled, p); got != want {
				t.Fatalf("allowed(%q) = %v, the rules read as regular expressions say %v", p, got, want)
			}
		}
		lf := robotsFromResponse(200, bytes.ReplaceAll(body, []byte("\r\n"), []byte("\n")), "SwarmCrawl", now, time.Hour, time.Minute)
		if !slices.EqualFunc(lf.rules, r.rules, func(a, b robotsRule) bool {
			return a.allow == b.allow && a.length == b.length && a.anchored == b.anchored && slices.Equal(a.parts, b.parts)
		}) || lf.crawlDelay != r.crawlDelay {
			t.Fatalf("CRLF to LF or the token's case changed the rules")
		}
		if len(body) <= maxRobotsBytes {
			if back, err := unpackRobots(packRobots(body)); err != nil || !bytes.Equal(back, body) {
				t.Fatalf("packRobots and unpackRobots: %v", err)
			}
		}
	})
}

// referenceRules compiles rules to regular expressions, independently of
// robotsRule.match.
func referenceRules(rules []robotsRule) []*regexp.Regexp {
	out := make([]*regexp.Regexp, len(rules))
	for i, r := range rules {
		quoted := make([]string, len(r.parts))
		for j, p := range r.parts {
			quoted[j] = regexp.QuoteMeta(p)
		}
		expr := "^" + strings.Join(quoted, "(?s:.*)")
		if r.anchored {
			expr += "$"
		}
		out[i] = regexp.MustCompile(expr)
	}
	return out
}

// referenceAllowed decides for a path with the rules compiled by
// referenceRules, independently of the rules' order: the longest matching
// pattern wins, allow on a tie.
func referenceAllowed(rules []robotsRule, compiled []*regexp.Regexp, pathQuery string) bool {
	if pathQuery == "/robots.txt" {
		return true
	}
	target := robotsMatchForm(pathQuery)
	best, allow := -1, true
	for i, r := range rules {
		if !compiled[i].MatchString(target) {
			continue
		}
		if r.length > best || r.length == best && r.allow {
			best, allow = r.length, r.allow
		}
	}
	return allow
}

// FuzzRobotsTemoto compares the parser with github.com/temoto/robotstxt
// on the part of an arbitrary robots.txt where both must agree with RFC
// 9309: rfcConsistent keeps only what temoto reads as the RFC does. On
// that file, for each agent it names (and our own token), and for paths
// made from its rules and the input, both decide the same, and the
// Crawl-delay of a crawler with one Crawl-delay line is the same.
func FuzzRobotsTemoto(f *testing.F) {
	seeds := robotsSeeds(f)
	for _, body := range seeds {
		f.Add(body, "/example/page.html")
	}
	fuzzcorpus.Write(f, func() map[string][]any {
		out := map[string][]any{}
		for name, body := range seeds {
			out[name] = []any{body, "/private/a"}
		}
		return out
	})
	now := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, body []byte, path string) {
		file, groups := rfcConsistent(body)
		data, err := robotstxt.FromString(file)
		if err != nil {
			t.Fatalf("temoto refuses an RFC-consistent file: %v\n%s", err, file)
		}
		agents := map[string]bool{}
		paths := []string{"/", "/" + strings.Map(func(r rune) rune {
			if r < 0x80 && rfcPathByte[r] {
				return r
			}
			return -1
		}, strings.TrimPrefix(path, "/"))}
		for _, g := range groups {
			for _, a := range g.agents {
				agents[a] = true
			}
			for _, rule := range g.rules {
				paths = append(paths, rule.value, rule.value+"x", rule.value[:len(rule.value)-1]+"/")
			}
		}
		tokens := []string{"swarmcrawl"}
		for a := range agents {
			tokens = append(tokens, a)
		}
	tokens:
		for _, tok := range tokens {
			if tok == "*" || len(tok) < 2 {
				continue // temoto ranks a one-letter agent below "*"
			}
			for a := range agents {
				if a != "*" && a != tok && strings.HasPrefix(tok, a) && !agents[tok] {
					continue tokens // temoto matches agents by prefix
				}
			}
			r := robotsFromResponse(200, []byte(file), tok, now, time.Hour, time.Minute)
			for _, p := range paths {
				if p == "/robots.txt" {
					continue // always allowed by RFC 9309, not by temoto
				}
				if ours, theirs := r.allowed(p), data.TestAgent(p, tok); ours != theirs {
					t.Fatalf("token %s, path %s: ours %v, temoto %v\n%s", tok, p, ours, theirs, file)
				}
			}
			var delays []string
			for _, g := range chosenGroups(groups, tok) {
				delays = append(delays, g.delays...)
			}
			if len(delays) <= 1 {
				if theirs := data.FindGroup(tok).CrawlDelay; r.crawlDelay != theirs {
					t.Fatalf("token %s: Crawl-delay ours %v, temoto %v\n%s", tok, r.crawlDelay, theirs, file)
				}
			}
		}
	})
}

// rfcGroup is a group of an RFC-consistent file.
type rfcGroup struct {
	agents []string // lowercase
	rules  []struct {
		allow bool
		value string
	}
	delays []string // Crawl-delay values, as written
}

// rfcPathByte are the bytes of rule values and paths in RFC-consistent
// files: those that need no percent-encoding in a path or a query (so
// that the RFC's comparison is temoto's plain one), without the "*" and
// "$" wildcards, "%" and "#".
var rfcPathByte = func() (ok [128]bool) {
	for c := range 128 {
		ok[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~!&'()+,;=:@/?", byte(c)) >= 0
	}
	return ok
}()

var (
	rfcAgent = regexp.MustCompile(`^(\*|[A-Za-z0-9_-]+)$`)
	rfcDelay = regexp.MustCompile(`^[0-9]{1,4}(\.[0-9]{1,3})?$`)
)

// rfcConsistent returns the part of a robots.txt where temoto/robotstxt
// reads it as RFC 9309 does (see TestRobotsTemotoDisagreements for each
// way temoto differs), written out anew, and its groups. It keeps
// "key: value" lines of the four keys, spelt right; user-agents that are
// "*" or a whole product token; rules that start with "/" and hold only
// bytes that need no percent-encoding and are no wildcard, each pattern
// once in the file (the RFC breaks a tie between Allow and Disallow of the
// same pattern for Allow, temoto by file order); Crawl-delays in plain
// decimal under 10,000 s; and groups that have a user-agent and at least
// one rule (temoto drops a group without rules).
func rfcConsistent(body []byte) (string, []rfcGroup) {
	var groups []*rfcGroup
	var cur *rfcGroup
	inRecords := false
	patterns := map[string]bool{}
	lines := strings.FieldsFunc(string(body), func(r rune) bool { return r == '\n' || r == '\r' })
	for _, line := range lines {
		line, _, _ = strings.Cut(line, "#")
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.ToLower(strings.Trim(k, " \t")), strings.Trim(v, " \t")
		switch k {
		case "user-agent":
			if !rfcAgent.MatchString(v) {
				continue
			}
			if cur == nil || inRecords {
				cur = &rfcGroup{}
				groups = append(groups, cur)
				inRecords = false
			}
			cur.agents = append(cur.agents, strings.ToLower(v))
		case "allow", "disallow":
			if cur == nil || !strings.HasPrefix(v, "/") || patterns[v] || strings.IndexFunc(v, func(r rune) bool { return r >= 0x80 || !rfcPathByte[r] }) >= 0 {
				continue
			}
			patterns[v] = true
			inRecords = true
			cur.rules = append(cur.rules, struct {
				allow bool
				value string
			}{k == "allow", v})
		case "crawl-delay":
			if cur == nil || !rfcDelay.MatchString(v) {
				continue
			}
			inRecords = true
			cur.delays = append(cur.delays, v)
		}
	}
	var b strings.Builder
	var kept []rfcGroup
	for _, g := range groups {
		if len(g.rules) == 0 {
			continue
		}
		kept = append(kept, *g)
		for _, a := range g.agents {
			fmt.Fprintf(&b, "User-agent: %s\n", a)
		}
		for _, r := range g.rules {
			verb := "Disallow"
			if r.allow {
				verb = "Allow"
			}
			fmt.Fprintf(&b, "%s: %s\n", verb, r.value)
		}
		for _, d := range g.delays {
			fmt.Fprintf(&b, "Crawl-delay: %s\n", d)
		}
		b.WriteString("\n")
	}
	return b.String(), kept
}

// chosenGroups are the groups RFC 9309 applies to token: those naming it,
// or else those of "*".
func chosenGroups(groups []rfcGroup, token string) []rfcGroup {
	var named, star []rfcGroup
	for _, g := range groups {
		if slices.Contains(g.agents, token) {
			named = append(named, g)
		}
		if slices.Contains(g.agents, "*") {
			star = append(star, g)
		}
	}
	if len(named) > 0 {
		return named
	}
	return star
}
