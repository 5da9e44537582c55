// Package urls puts URLs in the one canonical form every swarmcrawl node
// agrees on, and derives from it what the swarm routes and deduplicates by:
// ring keys, host keys, URL hashes and hosts. Two nodes that normalise the
// same link get the same string, so they compute the same owner and the
// same seen-set entry without talking to each other.
//
// It depends on nothing else in swarmcrawl, so that every layer (the
// frontier, the crawler, the node) can share it.
package urls

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
)

// KeyMode chooses what a task key is computed from, and so what the ring
// assigns to one owner.
type KeyMode int

const (
	// KeyHost keys a task by its lowercase hostname (port ignored), so one
	// owner sees every URL of a host and can enforce robots.txt, the rate
	// limit and deduplication for it alone. This is the default.
	KeyHost KeyMode = iota
	// KeyURL keys a task by its full normalised URL. Load spreads evenly,
	// but politeness for a host is then split across owners.
	KeyURL
	// KeyDomain keys a task by the registrable domain of its host
	// (Domain): one owner holds every host of a domain, each host still
	// with its own politeness and robots.txt. It is what lets an owner
	// judge a crawl scoped to the seeds' domains alone.
	KeyDomain
)

// String returns the name ParseKeyMode accepts.
func (m KeyMode) String() string {
	switch m {
	case KeyHost:
		return "host"
	case KeyURL:
		return "url"
	case KeyDomain:
		return "domain"
	default:
		return fmt.Sprintf("KeyMode(%d)", int(m))
	}
}

// ParseKeyMode parses "host", "url" or "domain" (case-insensitive), as
// used in flags and config files.
func ParseKeyMode(s string) (KeyMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "host":
		return KeyHost, nil
	case "url":
		return KeyURL, nil
	case "domain":
		return KeyDomain, nil
	default:
		return 0, fmt.Errorf("unknown key mode %q (want \"host\", \"url\" or \"domain\")", s)
	}
}

// TaskKey returns the 64-bit ring key of a normalised URL: the first 8 bytes,
// big-endian, of the SHA-256 of the hostname (KeyHost), of the whole URL
// (KeyURL) or of the host's registrable domain (KeyDomain). SHA-256 rather
// than a fast hash because keys must be spread
// uniformly and be hard to aim at a chosen node.
func TaskKey(normalizedURL string, mode KeyMode) (uint64, error) {
	_, authority, _, err := splitURL(normalizedURL)
	if err != nil {
		return 0, fmt.Errorf("task key: %w", err)
	}
	switch mode {
	case KeyHost:
		return HostKey(hostname(authority)), nil
	case KeyURL:
		return sha64(normalizedURL), nil
	case KeyDomain:
		return DomainKey(hostname(authority)), nil
	default:
		return 0, fmt.Errorf("task key: unknown key mode %d", int(mode))
	}
}

// HostKey is the KeyHost task key of a hostname (without port). It lets the
// node compute a host's owner without building a URL.
func HostKey(host string) uint64 {
	return sha64(strings.ToLower(host))
}

func sha64(s string) uint64 {
	sum := sha256.Sum256([]byte(s))
	return binary.BigEndian.Uint64(sum[:8])
}

// URLHash is the 64-bit FNV-1a hash of a normalised URL, the entry kept in
// seen sets. It is written out rather than taken from hash/fnv so that
// hashing billions of URLs allocates nothing.
func URLHash(normalizedURL string) uint64 {
	const (
		offset64 = 14695981039346656037
		prime64  = 1099511628211
	)
	h := uint64(offset64)
	for i := 0; i < len(normalizedURL); i++ {
		h ^= uint64(normalizedURL[i])
		h *= prime64
	}
	return h
}

// HostOf returns the lowercase hostname of a normalised URL, without port or
// IPv6 brackets: the unit of politeness.
func HostOf(normalizedURL string) (string, error) {
	_, authority, _, err := splitURL(normalizedURL)
	if err != nil {
		return "", err
	}
	return hostname(authority), nil
}

// splitURL splits an absolute http(s) URL into scheme, authority and the
// rest (path and query) with plain string operations: normalised URLs are
// canonical, so a full url.Parse on every hot-path call would be waste.
func splitURL(u string) (scheme, authority, rest string, err error) {
	i := strings.Index(u, "://")
	if i <= 0 {
		return "", "", "", fmt.Errorf("not an absolute url: %q", Truncate(u, 80))
	}
	scheme = strings.ToLower(u[:i])
	if scheme != "http" && scheme != "https" {
		return "", "", "", fmt.Errorf("%w %q", ErrUnsupportedScheme, scheme)
	}
	authority = u[i+3:]
	if j := strings.IndexAny(authority, "/?#"); j >= 0 {
		authority, rest = authority[:j], authority[j:]
	}
	if at := strings.LastIndexByte(authority, '@'); at >= 0 {
		authority = authority[at+1:]
	}
	if hostname(authority) == "" {
		return "", "", "", ErrMissingHost
	}
	return scheme, authority, rest, nil
}

// hostname strips the port and IPv6 brackets from an authority and
// lowercases it.
func hostname(authority string) string {
	h := authority
	if strings.HasPrefix(h, "[") {
		if end := strings.IndexByte(h, ']'); end > 0 {
			h = h[1:end]
		}
	} else if c := strings.LastIndexByte(h, ':'); c >= 0 {
		h = h[:c]
	}
	for i := 0; i < len(h); i++ {
		if 'A' <= h[i] && h[i] <= 'Z' {
			return strings.ToLower(h)
		}
	}
	return h
}

// SplitOrigin splits a normalised URL into its origin (scheme://host:port),
// the unit robots.txt applies to, and its path and query, which always
// start with "/". A URL that does not split gives ("", "/").
func SplitOrigin(u string) (origin, pathQuery string) {
	scheme, authority, rest, err := splitURL(u)
	if err != nil {
		return "", "/"
	}
	if rest == "" || rest[0] != '/' {
		rest = "/" + rest
	}
	return scheme + "://" + authority, rest
}

// Truncate shortens s to n bytes and an ellipsis for an error message, so
// that a 2 KB trap URL does not flood the log.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
