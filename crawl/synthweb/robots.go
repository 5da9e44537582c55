package synthweb

import (
	"fmt"
	"strings"
	"time"
)

// robotsKind is the shape of a host's robots.txt.
type robotsKind uint8

const (
	robotsPlain     robotsKind = iota // User-agent: * / Disallow: /private/
	robotsAgent                       // plus a swarmcrawl group disallowing only /no-swarmcrawl/
	robotsAgentBoth                   // plus a swarmcrawl group disallowing /no-swarmcrawl/ and /private/
	robotsNotFound                    // robots.txt answers 404: everything allowed
	robotsAllow                       // Disallow: /private/ with Allow: /private/open/
)

// String names the kind for diagnostics.
func (k robotsKind) String() string {
	return [...]string{"plain", "agent", "agent-both", "not-found", "allow"}[k]
}

// robotsRule is one Allow or Disallow line. The generated hosts use plain
// path prefixes; the case hosts also use "*" (any sequence of characters)
// and a final "$" (end of the path), per RFC 9309 section 2.2.3.
type robotsRule struct {
	allow bool
	path  string
}

// matches reports whether the rule's pattern matches path (path plus
// optional query, as requested). A pattern without "*" or a final "$" is a
// plain prefix.
func (r robotsRule) matches(path string) bool {
	pat := r.path
	anchored := strings.HasSuffix(pat, "$")
	if anchored {
		pat = pat[:len(pat)-1]
	}
	if !anchored && !strings.Contains(pat, "*") {
		return strings.HasPrefix(path, pat)
	}
	parts := strings.Split(pat, "*")
	if !strings.HasPrefix(path, parts[0]) {
		return false
	}
	pos := len(parts[0])
	if len(parts) == 1 { // anchored, no wildcard
		return path == pat
	}
	for i, part := range parts[1:] {
		if i == len(parts)-2 && anchored {
			return len(path)-len(part) >= pos && strings.HasSuffix(path, part)
		}
		j := strings.Index(path[pos:], part)
		if j < 0 {
			return false
		}
		pos += j + len(part)
	}
	return true
}

// robotsGroup is one group of a robots.txt: its user-agent lines and rules.
type robotsGroup struct {
	agents     []string // as written (case varies); matched case-insensitively
	rules      []robotsRule
	crawlDelay time.Duration
}

// robotsPolicy is the structured form of a host's robots.txt, from which both
// the served text and the oracle's decisions are derived.
type robotsPolicy struct {
	kind     robotsKind
	notFound bool // robots.txt answers 404
	groups   []robotsGroup
}

// text renders the policy as a robots.txt body.
func (p *robotsPolicy) text(host string) string {
	if p.notFound {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# robots.txt for %s (synthweb)\n", host)
	for i, g := range p.groups {
		if i > 0 {
			b.WriteString("\n")
		}
		for _, a := range g.agents {
			fmt.Fprintf(&b, "User-agent: %s\n", a)
		}
		for _, r := range g.rules {
			if r.allow {
				fmt.Fprintf(&b, "Allow: %s\n", r.path)
			} else {
				fmt.Fprintf(&b, "Disallow: %s\n", r.path)
			}
		}
		if g.crawlDelay > 0 {
			fmt.Fprintf(&b, "Crawl-delay: %g\n", g.crawlDelay.Seconds())
		}
	}
	return b.String()
}

// productToken reduces a robots token or User-Agent string to its lowercase
// product token: "SwarmCrawl/1.0 (+http://x)" becomes "swarmcrawl".
func productToken(token string) string {
	token = strings.TrimSpace(token)
	if i := strings.IndexAny(token, "/ \t("); i >= 0 {
		token = token[:i]
	}
	return strings.ToLower(token)
}

// applicable returns the groups that apply to token per RFC 9309: every group
// naming the token's product token (case-insensitively), merged as the RFC
// requires, else every "*" group, else none (no rules: everything allowed).
// Other groups are ignored, even when they are more restrictive.
func (p *robotsPolicy) applicable(token string) []*robotsGroup {
	tok := productToken(token)
	var named, star []*robotsGroup
	for i := range p.groups {
		g := &p.groups[i]
		isStar, isNamed := false, false
		for _, a := range g.agents {
			a = strings.ToLower(a)
			isStar = isStar || a == "*"
			isNamed = isNamed || a == tok
		}
		switch {
		case isNamed:
			named = append(named, g)
		case isStar:
			star = append(star, g)
		}
	}
	if len(named) > 0 {
		return named
	}
	return star
}

// allowed reports whether path (path plus optional query, as requested) may
// be fetched by token. The longest matching rule pattern wins; on a tie
// Allow wins; no matching rule means allowed. /robots.txt is always allowed.
func (p *robotsPolicy) allowed(token, path string) bool {
	if p.notFound || path == "/robots.txt" {
		return true
	}
	best, allow := -1, true
	for _, g := range p.applicable(token) {
		for _, r := range g.rules {
			if !r.matches(path) {
				continue
			}
			if l := len(r.path); l > best || (l == best && r.allow) {
				best, allow = l, r.allow
			}
		}
	}
	return allow
}
