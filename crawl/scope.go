package crawl

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
)

// A crawl's scope says which URLs it may fetch at all: every host
// (ScopeAny, the default), the hosts its seeds named (ScopeSeedHosts), or
// the registrable domains its seeds named (ScopeSeedDomains); and, on top
// of that, include and exclude patterns on the URL. The owner of a URL
// judges it when the URL arrives, before it enters the seen set (the node
// does that), and the crawler judges every task again before it is
// fetched (admit.go) and before it fetches a batch for another owner
// (fetchbatch.go), so that nothing out of scope is fetched whatever filled
// the queue.
//
// The seeds a scope is judged by are the shard records marked seed
// (store.ShardRecord.Seed), which the store indexes by ring key
// (SeedIndex): they travel, are replicated and survive exactly as the
// records do. With host keys a host's seeds are under its own ring key;
// with domain keys (urls.KeyDomain) a domain's seeds, of all its hosts,
// are under the domain's key, which is what lets one owner judge a whole
// domain. With URL keys no owner holds a host's seeds, so the seed rules
// need host or domain keys.

// ScopeMode says which hosts a crawl may reach.
type ScopeMode int

const (
	// ScopeAny lets a crawl reach every host: the default.
	ScopeAny ScopeMode = iota
	// ScopeSeedHosts limits a crawl to the hosts its seeds named (ports
	// ignored): a link to another host is not followed, not even
	// www.example.com from example.com.
	ScopeSeedHosts
	// ScopeSeedDomains limits a crawl to the registrable domains
	// (urls.Domain) its seeds named: a seed on www.example.co.uk lets the
	// crawl reach every host of example.co.uk. It needs urls.KeyDomain.
	ScopeSeedDomains
)

// String returns the name ParseScopeMode accepts.
func (m ScopeMode) String() string {
	switch m {
	case ScopeAny:
		return "any"
	case ScopeSeedHosts:
		return "seed-hosts"
	case ScopeSeedDomains:
		return "seed-domains"
	default:
		return fmt.Sprintf("ScopeMode(%d)", int(m))
	}
}

// ParseScopeMode parses "any", "seed-hosts" or "seed-domains"
// (case-insensitive), as flags and config files write them.
func ParseScopeMode(s string) (ScopeMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "any":
		return ScopeAny, nil
	case "seed-hosts":
		return ScopeSeedHosts, nil
	case "seed-domains":
		return ScopeSeedDomains, nil
	default:
		return 0, fmt.Errorf("unknown scope %q (want any, seed-hosts or seed-domains)", s)
	}
}

// Bounds on a scope's patterns. Go's regular expressions match in time
// linear in the URL, whatever the pattern; these keep the automaton, and
// so the cost per URL, small.
const (
	MaxScopePatterns     = 64
	MaxScopePatternBytes = 1024
)

// ScopeConfig is a crawl's scope. The zero value is ScopeAny with no
// patterns: everything is in scope.
type ScopeConfig struct {
	// Mode is the host rule.
	Mode ScopeMode
	// Include, when not empty, are regular expressions (Go syntax,
	// RE2) of which a URL must match at least one, in addition to Mode's
	// rule. A pattern matches anywhere in the normalised URL (lowercase
	// scheme and host, punycode, no default port, no fragment): anchor it
	// with ^ and $ to match the whole URL.
	Include []string
	// Exclude are regular expressions a URL must match none of. Exclude
	// wins over Include.
	Exclude []string
}

// Any reports whether the scope lets every URL through.
func (c ScopeConfig) Any() bool {
	return c.Mode == ScopeAny && len(c.Include) == 0 && len(c.Exclude) == 0
}

// validate reports the first problem with c for a crawler of key mode m.
func (c ScopeConfig) validate(m urls.KeyMode) error {
	switch c.Mode {
	case ScopeAny:
	case ScopeSeedHosts:
		if _, ok := urls.HostRingKey("x", m); !ok {
			return fmt.Errorf("scope %v needs host or domain keys, not %v keys: no owner holds every URL of a host", c.Mode, m)
		}
	case ScopeSeedDomains:
		if m != urls.KeyDomain {
			return fmt.Errorf("scope %v needs domain keys, not %v keys: one owner must hold every host of a domain", c.Mode, m)
		}
	default:
		return fmt.Errorf("unknown %v", c.Mode)
	}
	if _, err := CompileScopePatterns(c.Include); err != nil {
		return fmt.Errorf("scope include: %w", err)
	}
	if _, err := CompileScopePatterns(c.Exclude); err != nil {
		return fmt.Errorf("scope exclude: %w", err)
	}
	return nil
}

// CompileScopePatterns compiles patterns into one regular expression that
// matches where any of them does (nil for none), and names the first bad
// pattern: one that does not compile, is empty or longer than
// MaxScopePatternBytes, or one too many.
func CompileScopePatterns(patterns []string) (*regexp.Regexp, error) {
	if len(patterns) == 0 {
		return nil, nil
	}
	if len(patterns) > MaxScopePatterns {
		return nil, fmt.Errorf("%d patterns, at most %d", len(patterns), MaxScopePatterns)
	}
	var all strings.Builder
	for i, p := range patterns {
		switch {
		case p == "":
			return nil, errors.New("an empty pattern (it would match every URL)")
		case len(p) > MaxScopePatternBytes:
			return nil, fmt.Errorf("pattern %q: %d bytes, at most %d", urls.Truncate(p, 40), len(p), MaxScopePatternBytes)
		}
		if _, err := regexp.Compile(p); err != nil {
			return nil, fmt.Errorf("pattern %q: %w", p, err)
		}
		if i > 0 {
			all.WriteByte('|')
		}
		all.WriteString("(?:" + p + ")")
	}
	re, err := regexp.Compile(all.String())
	if err != nil {
		return nil, fmt.Errorf("patterns together: %w", err)
	}
	return re, nil
}

// ScopeReason says why a URL is out of scope, or that it is not.
type ScopeReason int

const (
	// InScope: the URL may be crawled.
	InScope ScopeReason = iota
	// NotSeedHost: ScopeSeedHosts, and no seed named the URL's host.
	NotSeedHost
	// NotSeedDomain: ScopeSeedDomains, and no seed named the URL's
	// registrable domain.
	NotSeedDomain
	// Excluded: the URL matches an exclude pattern.
	Excluded
	// NotIncluded: there are include patterns and the URL matches none.
	NotIncluded
	// UnauthorizedSeed: a seed (a task at depth 0 that no redirect led
	// to) from a sender that may not seed at its owner, for a URL that the
	// seed would have brought into scope. The node judges this one: the
	// crawler knows no senders.
	UnauthorizedSeed
)

// ScopeReasons are the reasons a URL is out of scope, in order.
var ScopeReasons = [...]ScopeReason{NotSeedHost, NotSeedDomain, Excluded, NotIncluded, UnauthorizedSeed}

// String returns the reason's name in status and metrics: not_seed_host,
// not_seed_domain, excluded, not_included, unauthorized_seed.
func (r ScopeReason) String() string {
	switch r {
	case InScope:
		return "in_scope"
	case NotSeedHost:
		return "not_seed_host"
	case NotSeedDomain:
		return "not_seed_domain"
	case Excluded:
		return "excluded"
	case NotIncluded:
		return "not_included"
	case UnauthorizedSeed:
		return "unauthorized_seed"
	default:
		return fmt.Sprintf("ScopeReason(%d)", int(r))
	}
}

// SeedIndex lists the seeds stored under a ring key: the URLs of the shard
// records marked seed (store.DB.SeedURLs).
type SeedIndex interface {
	SeedURLs(ringKey uint64, fn func(url string) bool) error
}

// scopeCacheMax bounds the names a Scope remembers as seeded.
const scopeCacheMax = 1 << 16

// Scope judges URLs against a ScopeConfig and the stored seeds. It is
// safe for concurrent use.
type Scope struct {
	cfg              ScopeConfig
	keyMode          urls.KeyMode
	include, exclude *regexp.Regexp
	seeds            SeedIndex

	// seeded remembers the hosts or domains found seeded: records are
	// never deleted, so a name once seeded stays so.
	mu     sync.Mutex
	seeded map[string]struct{}
}

// NewScope returns the scope cfg describes for a crawler of key mode
// keyMode, whose seeds are in seeds. It refuses a configuration whose
// seed rule the key mode cannot judge, and bad patterns.
func NewScope(cfg ScopeConfig, keyMode urls.KeyMode, seeds SeedIndex) (*Scope, error) {
	if err := cfg.validate(keyMode); err != nil {
		return nil, err
	}
	s := &Scope{cfg: cfg, keyMode: keyMode, seeds: seeds, seeded: map[string]struct{}{}}
	s.include, _ = CompileScopePatterns(cfg.Include)
	s.exclude, _ = CompileScopePatterns(cfg.Exclude)
	if cfg.Mode != ScopeAny && seeds == nil {
		return nil, fmt.Errorf("scope %v needs the stored seeds", cfg.Mode)
	}
	return s, nil
}

// Config returns the scope's configuration.
func (s *Scope) Config() ScopeConfig { return s.cfg }

// Any reports whether everything is in scope.
func (s *Scope) Any() bool { return s.cfg.Any() }

// Patterns judges the normalised URL u by the include and exclude
// patterns alone: Excluded, NotIncluded or InScope.
func (s *Scope) Patterns(u string) ScopeReason {
	switch {
	case s.exclude != nil && s.exclude.MatchString(u):
		return Excluded
	case s.include != nil && !s.include.MatchString(u):
		return NotIncluded
	}
	return InScope
}

// Check judges the normalised URL u: the patterns, then whether a stored
// seed named its host (ScopeSeedHosts) or its registrable domain
// (ScopeSeedDomains). The error is the store's: the URL could not be
// judged.
func (s *Scope) Check(u string) (ScopeReason, error) {
	if r := s.Patterns(u); r != InScope {
		return r, nil
	}
	if s.cfg.Mode == ScopeAny {
		return InScope, nil
	}
	ok, err := s.Seeded(u)
	switch {
	case err != nil:
		return InScope, err
	case ok:
		return InScope, nil
	case s.cfg.Mode == ScopeSeedDomains:
		return NotSeedDomain, nil
	default:
		return NotSeedHost, nil
	}
}

// Seeded reports whether a stored seed brought u's host into scope: named
// the host (ScopeSeedHosts) or its registrable domain (ScopeSeedDomains).
// With ScopeAny it is always true.
func (s *Scope) Seeded(u string) (bool, error) {
	if s.cfg.Mode == ScopeAny {
		return true, nil
	}
	host, err := urls.HostOf(u)
	if err != nil {
		return false, nil
	}
	key, _ := urls.HostRingKey(host, s.keyMode)
	name, nameOf := host, func(h string) string { return h }
	if s.cfg.Mode == ScopeSeedDomains {
		name, nameOf = urls.Domain(host), urls.Domain
	}
	s.mu.Lock()
	_, known := s.seeded[name]
	s.mu.Unlock()
	if known {
		return true, nil
	}
	found := false
	err = s.seeds.SeedURLs(key, func(seed string) bool {
		h, err := urls.HostOf(seed)
		found = err == nil && nameOf(h) == name
		return !found
	})
	if err != nil {
		return false, fmt.Errorf("scope of %s: %w", urls.Truncate(u, 80), err)
	}
	if found {
		s.mu.Lock()
		if len(s.seeded) >= scopeCacheMax {
			clear(s.seeded)
		}
		s.seeded[name] = struct{}{}
		s.mu.Unlock()
	}
	return found, nil
}
