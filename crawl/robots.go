package crawl

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/temoto/robotstxt"
)

const (
	// maxRobotsBytes caps how much of a robots.txt is read and parsed; RFC
	// 9309 requires parsing at least 500 KiB, and Google stops there too.
	maxRobotsBytes = 500 << 10
	// robotsRetryTTL is how long a robots.txt that could not be fetched (5xx,
	// network error) counts as "disallow all" before it is tried again:
	// short, so a flaky server does not lose a whole day of crawling.
	robotsRetryTTL = time.Minute
	// maxRobotsAttempts is how many times in a row robots.txt may be
	// unavailable before the host's tasks are dropped instead of kept
	// waiting; a host that is down for good must not hold its queue forever.
	maxRobotsAttempts = 3
)

// robotsRules is what the crawler needs from one origin's robots.txt: the
// rule group chosen for our token and its Crawl-delay.
type robotsRules struct {
	allowAll    bool
	disallowAll bool
	// unavailable marks a disallowAll that stands for "could not get a
	// usable robots.txt" (5xx, 429, network error, unparsable) rather than a
	// rule: the host's tasks wait for a retry instead of being dropped, up to
	// maxRobotsAttempts.
	unavailable bool
	attempt     int // consecutive unavailable results, set by robotsCache.put
	group       *robotstxt.Group
	crawlDelay  time.Duration
	expires     time.Time
}

// allowed reports whether the path-and-query part of a URL may be fetched.
func (r *robotsRules) allowed(pathQuery string) bool {
	switch {
	case r.allowAll:
		return true
	case r.disallowAll:
		return false
	}
	if pathQuery == "" {
		pathQuery = "/"
	}
	return r.group.Test(pathQuery)
}

// robotsFromResponse turns the outcome of a robots.txt fetch into rules, as
// RFC 9309 and Google do: 2xx is parsed, 4xx means there is no robots.txt
// (allow all), and a server error or no answer at all means "stay away for
// now" (disallow all, retried after robotsRetryTTL). 429 is treated as a
// server error: the server is asking us to slow down, not saying "no file".
//
// status 0 stands for "no response" (network error).
func robotsFromResponse(status int, body []byte, token string, now time.Time, ttl, retry time.Duration) *robotsRules {
	switch {
	case status >= 200 && status < 300:
		r := parseRobots(body, token)
		r.expires = now.Add(ttl)
		if r.unavailable {
			r.expires = now.Add(retry)
		}
		return r
	case status >= 400 && status < 500 && status != 429:
		return &robotsRules{allowAll: true, expires: now.Add(ttl)}
	default:
		return &robotsRules{disallowAll: true, unavailable: true, expires: now.Add(retry)}
	}
}

// parseRobots parses a robots.txt body and picks the group for token.
func parseRobots(body []byte, token string) *robotsRules {
	data, err := robotstxt.FromBytes(cleanRobots(body))
	if err != nil {
		return &robotsRules{disallowAll: true, unavailable: true}
	}
	g := chooseGroup(data, token)
	return &robotsRules{group: g, crawlDelay: g.CrawlDelay}
}

// chooseGroup returns the group whose user-agent equals token
// (case-insensitively), else the "*" group, as RFC 9309 specifies.
//
// robotstxt.FindGroup matches by prefix instead ("examplebot" would pick a
// group for "example"), and Group.Agent is never filled in, so an exact
// match is recognised by comparison: FindGroup(token) is the exact group
// exactly when dropping the token's last byte finds a different one, since
// no group key can be both longer than the shortened token and a prefix of it.
func chooseGroup(data *robotstxt.RobotsData, token string) *robotstxt.Group {
	token = strings.ToLower(token)
	if token != "" && token != "*" {
		g := data.FindGroup(token)
		if g != data.FindGroup(token[:len(token)-1]) {
			return g
		}
	}
	return data.FindGroup("*")
}

// cleanRobots prepares a robots.txt for temoto/robotstxt. That parser
// rejects a whole file for one bad line, where RFC 9309 asks parsers to skip
// such lines, so rules before the first User-agent and Crawl-delay values
// that are not non-negative numbers are dropped. And rule paths get the same
// percent-encoding normalisation as our URLs, so "Disallow: /%7euser" still
// matches the normalised "/~user".
func cleanRobots(body []byte) []byte {
	out := make([]byte, 0, len(body)+64)
	// Old Mac files end lines with a bare CR.
	text := strings.ReplaceAll(strings.ReplaceAll(string(body), "\r\n", "\n"), "\r", "\n")
	seenAgent := false
	for _, line := range strings.Split(text, "\n") {
		content, _, _ := strings.Cut(line, "#")
		key, val, ok := strings.Cut(content, ":")
		key = strings.ToLower(strings.TrimSpace(key))
		val = strings.TrimSpace(val)
		if ok {
			switch key {
			case "user-agent", "useragent":
				seenAgent = true
			case "allow", "disallow":
				if !seenAgent {
					continue
				}
				out = append(out, key...)
				out = append(out, ": "...)
				out = appendEscapes(out, val, &queryAllowed)
				out = append(out, '\n')
				continue
			case "crawl-delay", "crawldelay":
				if !seenAgent {
					continue
				}
				if d, err := strconv.ParseFloat(val, 64); err != nil || d < 0 || d > 1e9 {
					continue
				}
			}
		}
		out = append(out, line...)
		out = append(out, '\n')
	}
	return out
}

// robotsCache holds the rules of each origin (scheme://host:port) until
// they expire. Fetching is not its job: the worker holding the host's
// politeness lease fetches, so there is never more than one fetch per host.
type robotsCache struct {
	mu      sync.Mutex
	entries map[string]*robotsRules
	sweepAt int // sweep expired entries when the map reaches this size
}

func newRobotsCache() *robotsCache {
	return &robotsCache{entries: make(map[string]*robotsRules), sweepAt: 1024}
}

// get returns the unexpired rules for origin, or nil.
func (c *robotsCache) get(origin string, now time.Time) *robotsRules {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.entries[origin]
	if r == nil || !now.Before(r.expires) {
		return nil
	}
	return r
}

func (c *robotsCache) put(origin string, r *robotsRules, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.unavailable {
		r.attempt = 1
		if old := c.entries[origin]; old != nil && old.unavailable {
			r.attempt = old.attempt + 1
		}
	}
	c.entries[origin] = r
	if len(c.entries) >= c.sweepAt {
		for o, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, o)
			}
		}
		// Doubling the threshold keeps sweeps amortised constant per put.
		c.sweepAt = max(1024, 2*len(c.entries))
	}
}
