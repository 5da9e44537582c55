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

// robotsRule is one Allow or Disallow line: a plain path prefix (no
// wildcards, no "$").
type robotsRule struct {
	allow bool
	path  string
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

// group returns the group that applies to token per RFC 9309: the group
// naming the token's product token (case-insensitively), else the "*" group,
// else nil (no rules: everything allowed). Other groups are ignored, even
// when they are more restrictive.
func (p *robotsPolicy) group(token string) *robotsGroup {
	tok := productToken(token)
	var star *robotsGroup
	for i := range p.groups {
		g := &p.groups[i]
		for _, a := range g.agents {
			a = strings.ToLower(a)
			if a == "*" {
				if star == nil {
					star = g
				}
			} else if a == tok {
				return g
			}
		}
	}
	return star
}

// allowed reports whether path (path plus optional query, as requested) may
// be fetched by token. The longest matching rule wins; on a tie Allow wins;
// no matching rule means allowed. /robots.txt is always allowed.
func (p *robotsPolicy) allowed(token, path string) bool {
	if p.notFound || path == "/robots.txt" {
		return true
	}
	g := p.group(token)
	if g == nil {
		return true
	}
	best, allow := -1, true
	for _, r := range g.rules {
		if !strings.HasPrefix(path, r.path) {
			continue
		}
		if l := len(r.path); l > best || (l == best && r.allow) {
			best, allow = l, r.allow
		}
	}
	return allow
}
