package node

import (
	"fmt"
	"sync/atomic"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
)

// The node's side of the owner (route.Owner): the crawl engine's URL rules
// and scope, which the routing layer does not know.

// urlRules reads URLs as the crawl engine does (route.URLs): its normal
// form, and ring keys by the node's key mode.
type urlRules struct{ mode urls.KeyMode }

var _ route.URLs = urlRules{}

// Normalize implements route.URLs.
func (u urlRules) Normalize(raw string) (string, error) { return urls.Normalize(nil, raw) }

// Key implements route.URLs.
func (u urlRules) Key(normalized string) (uint64, error) { return urls.TaskKey(normalized, u.mode) }

// Hash implements route.URLs.
func (u urlRules) Hash(normalized string) uint64 { return urls.URLHash(normalized) }

// ownerScope judges routed URLs by the crawler's scope (route.Scope),
// with its seeds (the shard records marked seed), and counts what it
// refuses by reason.
type ownerScope struct {
	scope *crawl.Scope
	// outOfScope counts the tasks refused as out of scope, by reason
	// (indexed by crawl.ScopeReasons).
	outOfScope [len(crawl.ScopeReasons)]atomic.Int64
}

var _ route.Scope = (*ownerScope)(nil)

// scopeHints say what to change for a task refused for each reason.
var scopeHints = map[crawl.ScopeReason]string{
	crawl.NotSeedHost:      "no seed named its host (--scope seed-hosts)",
	crawl.NotSeedDomain:    "no seed named its registrable domain (--scope seed-domains)",
	crawl.Excluded:         "it matches a --scope-exclude pattern",
	crawl.NotIncluded:      "it matches no --scope-include pattern",
	crawl.UnauthorizedSeed: "a seed for a host out of scope, from a peer that may not seed at its owner (--seed-from)",
}

// Judge implements route.Scope: the patterns first; then, unless the task
// is a seed from a seeder, its host (or domain) must have been seeded. A
// task at depth 0 that is no seeder's is an unauthorised seed.
func (s *ownerScope) Judge(u string, seed bool, depth, redirects int) (string, error) {
	if r := s.scope.Patterns(u); r != crawl.InScope {
		return s.refuse(r), nil
	}
	if seed {
		return "", nil
	}
	in, err := s.scope.Seeded(u)
	switch {
	case err != nil:
		return "", err
	case in:
		return "", nil
	case depth == 0 && redirects == 0:
		return s.refuse(crawl.UnauthorizedSeed), nil
	case s.scope.Config().Mode == crawl.ScopeSeedDomains:
		return s.refuse(crawl.NotSeedDomain), nil
	default:
		return s.refuse(crawl.NotSeedHost), nil
	}
}

// refuse counts a task refused as out of scope for r and says why.
func (s *ownerScope) refuse(r crawl.ScopeReason) string {
	for i, x := range crawl.ScopeReasons {
		if x == r {
			s.outOfScope[i].Add(1)
		}
	}
	return fmt.Sprintf("out of scope (%v): %s", r, scopeHints[r])
}

// OutOfScope returns the tasks refused as out of scope so far, by reason.
func (s *ownerScope) OutOfScope() map[string]int64 {
	out := make(map[string]int64, len(crawl.ScopeReasons))
	for i, r := range crawl.ScopeReasons {
		out[r.String()] = s.outOfScope[i].Load()
	}
	return out
}
