package crawl

import (
	"bytes"
	"compress/flate"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
)

// robots.txt per RFC 9309 (https://www.rfc-editor.org/rfc/rfc9309).
//
// The parser and matcher are ours. github.com/temoto/robotstxt, which this
// package used before, disagrees with the RFC where it matters most (see
// robots_test.go, TestRobotsTemotoDisagreements, for each case): it matches
// user-agents by prefix and not "Name/2.0" at all, ignores a group without
// rules, anchors wildcard rules nowhere (so "Disallow: /a*b" blocks
// "/x/a/b"), ranks wildcard rules by the length of the regular expression
// it compiles them to, breaks allow/disallow ties by file order, treats "$"
// inside a pattern as an anchor, never matches "Disallow: *", splits values
// at spaces, rejects a whole file for one malformed line, does not always
// allow /robots.txt, and compares paths without percent-encoding
// normalisation. Those are its tokenizer, its grouping and its matcher:
// nothing is left worth wrapping. The tests still run temoto on every such
// case, and cross-check both parsers on random files where temoto is right.

const (
	// maxRobotsBytes caps how much of a robots.txt is read and parsed: RFC
	// 9309 §2.5 requires parsing at least 500 KiB, and Google stops there.
	maxRobotsBytes = 500 << 10
	// robotsRetryTTL is how long a robots.txt that could not be fetched (5xx,
	// network error) counts as "disallow all" before it is tried again:
	// short, so a flaky server does not lose a whole day of crawling.
	robotsRetryTTL = time.Minute
	// maxRobotsAttempts is how many times in a row robots.txt may be
	// unavailable before the host's tasks are dropped instead of kept
	// waiting; a host that is down for good must not hold its queue forever.
	maxRobotsAttempts = 3
	// maxRobotsEntries bounds the origins whose rules are cached; beyond it
	// the cache forgets origins (their robots.txt is fetched again).
	maxRobotsEntries = 100_000
	// maxCrawlDelay is the largest Crawl-delay kept from a file; the crawler
	// applies its own, smaller cap (Config.MaxCrawlDelay) on top.
	maxCrawlDelay = 24 * time.Hour
)

// robotsRules is what the crawler needs from one origin's robots.txt: the
// rules of the group chosen for our token and its Crawl-delay.
type robotsRules struct {
	allowAll    bool
	disallowAll bool
	// unavailable marks a disallowAll that stands for "could not get a
	// usable robots.txt" (5xx, 429, network error) rather than a rule: the
	// host's tasks wait for a retry instead of being dropped, up to
	// maxRobotsAttempts.
	unavailable bool
	attempt     int // consecutive unavailable results, set by robotsCache.put
	// rules of the chosen group(s), most specific first and, among rules
	// equally specific, allow first: the first match decides (RFC 9309
	// §2.2.2).
	rules      []robotsRule
	crawlDelay time.Duration
	expires    time.Time
	// sitemaps are the file's Sitemap lines (see robotsSitemaps).
	sitemaps []string

	// What was fetched, kept so that the host's next owner can use the
	// same file (see HostSnapshot): the HTTP status (0 when there was no
	// answer, which is not handed over), the body (deflated, see
	// packRobots) and when it was fetched.
	status  int
	packed  []byte
	fetched time.Time
}

// allowed reports whether the path-and-query part of a URL may be fetched.
// "/robots.txt" always may (RFC 9309 §2.2.2).
func (r *robotsRules) allowed(pathQuery string) bool {
	if pathQuery == "" {
		pathQuery = "/"
	}
	if r.allowAll || pathQuery == "/robots.txt" {
		return true
	}
	if r.disallowAll {
		return false
	}
	target := robotsMatchForm(pathQuery)
	for i := range r.rules {
		if r.rules[i].match(target) {
			return r.rules[i].allow
		}
	}
	return true
}

// robotsFromResponse turns the outcome of a robots.txt fetch into rules, as
// RFC 9309 §2.3.1 asks: 2xx is parsed; 4xx means the file is "unavailable",
// which allows everything (401 and 403 included); a server error or no
// answer at all makes it "unreachable", which disallows everything until a
// retry. 429 is treated as a server error, as Google does: the server is
// asking us to slow down, not saying there is no file. Other statuses that
// reach here (1xx, a 3xx that was not followed) count as unreachable too.
//
// status 0 stands for "no response" (network error or timeout). Only the
// first maxRobotsBytes of body are parsed.
func robotsFromResponse(status int, body []byte, token string, now time.Time, ttl, retry time.Duration) *robotsRules {
	switch {
	case status >= 200 && status < 300:
		r := parseRobots(body, token)
		r.expires = now.Add(ttl)
		return r
	case status >= 400 && status < 500 && status != 429:
		return &robotsRules{allowAll: true, expires: now.Add(ttl)}
	default:
		return &robotsRules{disallowAll: true, unavailable: true, expires: now.Add(retry)}
	}
}

// parseRobots parses a robots.txt body and keeps the rules for token.
func parseRobots(body []byte, token string) *robotsRules {
	groups := parseRobotsGroups(body)
	rules, delay := selectRobotsGroups(groups, token)
	return &robotsRules{rules: rules, crawlDelay: delay, sitemaps: robotsSitemaps(body)}
}

// robotsGroup is one group of a robots.txt: its user-agent lines and the
// records that follow them.
type robotsGroup struct {
	agents     []string // product tokens, lowercased; "*" for the global group
	rules      []robotsRule
	crawlDelay time.Duration
}

// parseRobotsGroups splits a robots.txt into groups (RFC 9309 §2.1, §2.2).
// A group is one or more user-agent lines followed by its records; it ends
// at the next user-agent line that follows a record. Blank lines, comments,
// unknown keys and Sitemap lines do not end a group. Allow, Disallow and
// Crawl-delay lines before the first user-agent belong to no group and are
// ignored (§2.2.2). Every line that parses is used (§2.3.1.5): a malformed
// line costs only itself.
func parseRobotsGroups(body []byte) []*robotsGroup {
	body = capRobots(body)
	text := strings.TrimPrefix(string(body), "\uFEFF") // a UTF-8 byte order mark
	var groups []*robotsGroup
	var cur *robotsGroup
	inRecords := false // cur has had a record: the next user-agent starts a new group
	for len(text) > 0 {
		// Lines end in LF, CRLF or a bare CR (RFC 9309 §2.2, NL); CRLF
		// counts as two line ends around an empty line, which is harmless.
		line, rest := text, ""
		if i := strings.IndexAny(text, "\r\n"); i >= 0 {
			line, rest = text[:i], text[i+1:]
		}
		text = rest
		key, value, ok := robotsRecord(line)
		if !ok {
			continue
		}
		switch key {
		case "user-agent":
			if cur == nil || inRecords {
				cur = &robotsGroup{}
				groups = append(groups, cur)
				inRecords = false
			}
			cur.agents = append(cur.agents, robotsAgent(value))
		case "allow", "disallow":
			if cur == nil {
				continue
			}
			inRecords = true
			if rule, ok := newRobotsRule(value, key == "allow"); ok {
				cur.rules = append(cur.rules, rule)
			}
		case "crawl-delay":
			// Not part of RFC 9309; treated as a member of its group, as
			// the engines that honour it do, so "User-agent: a /
			// Crawl-delay: 5 / User-agent: b / Disallow: /" gives a only
			// the delay and b only the rule.
			if cur == nil {
				continue
			}
			inRecords = true
			if d, ok := parseCrawlDelay(value); ok {
				cur.crawlDelay = max(cur.crawlDelay, d)
			}
		}
	}
	return groups
}

// capRobots returns the part of body that is parsed: at most
// maxRobotsBytes, and when body reaches that size (so was probably cut
// there) without the last, possibly partial, line. A rule cut in half
// could mean something else entirely: "Allow: /a" from "Allow: /admin-x".
func capRobots(body []byte) []byte {
	if len(body) < maxRobotsBytes {
		return body
	}
	body = body[:maxRobotsBytes]
	if i := max(strings.LastIndexByte(string(body), '\n'), strings.LastIndexByte(string(body), '\r')); i >= 0 {
		return body[:i+1]
	}
	return nil
}

// robotsKeys maps the keys we read, and the misspellings of them that
// Google's parser also accepts (RFC 9309 §2.2.4 allows such leniency), to
// their canonical names.
var robotsKeys = map[string]string{
	"user-agent": "user-agent", "useragent": "user-agent", "user agent": "user-agent",
	"allow":    "allow",
	"disallow": "disallow", "dissallow": "disallow", "dissalow": "disallow",
	"disalow": "disallow", "diasllow": "disallow", "disallaw": "disallow",
	"crawl-delay": "crawl-delay", "crawldelay": "crawl-delay", "crawl delay": "crawl-delay",
	"sitemap": "sitemap", "site-map": "sitemap",
}

// robotsRecord splits one line into its canonical key and its value, with
// the comment and surrounding whitespace removed. ok is false for blank
// lines, comments and keys we do not use. A line without a colon is read as
// "key value" when it holds exactly two words, as Google does: "Disallow
// /private" is a typo for a rule, not a line to ignore.
func robotsRecord(line string) (key, value string, ok bool) {
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	k, v, found := strings.Cut(line, ":")
	if !found {
		f := strings.Fields(line)
		if len(f) != 2 {
			return "", "", false
		}
		k, v = f[0], f[1]
	}
	key, ok = robotsKeys[strings.ToLower(strings.Trim(k, " \t"))]
	return key, strings.Trim(v, " \t"), ok
}

// robotsAgent returns the product token of a user-agent line's value,
// lowercased for the case-insensitive match RFC 9309 §2.2.1 asks for. A
// "*" (alone or followed by a space) names the global group. Otherwise the
// token is the leading run of letters, digits, "_" and "-", so
// "ExampleBot/2.1" names examplebot; RFC 9309 allows only letters, "_" and
// "-", and digits are accepted too so a crawler whose name has one is not
// ignored. A value with no such run gives "", which no crawler matches.
func robotsAgent(value string) string {
	value = strings.Trim(value, " \t")
	if value == "*" || strings.HasPrefix(value, "* ") || strings.HasPrefix(value, "*\t") {
		return "*"
	}
	end := 0
	for end < len(value) && isTokenByte(value[end]) {
		end++
	}
	return strings.ToLower(value[:end])
}

func isTokenByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// selectRobotsGroups merges the rules of every group naming token (RFC 9309
// §2.2.1: groups for the same agent are combined), or, if none does, of
// every "*" group; with neither, there are no rules. The Crawl-delay is the
// largest of the merged groups'.
func selectRobotsGroups(groups []*robotsGroup, token string) ([]robotsRule, time.Duration) {
	name := robotsAgent(token)
	pick := func(want string) []*robotsGroup {
		var out []*robotsGroup
		for _, g := range groups {
			if slices.Contains(g.agents, want) {
				out = append(out, g)
			}
		}
		return out
	}
	var chosen []*robotsGroup
	if name != "" && name != "*" {
		chosen = pick(name)
	}
	if len(chosen) == 0 {
		chosen = pick("*")
	}
	var rules []robotsRule
	var delay time.Duration
	for _, g := range chosen {
		rules = append(rules, g.rules...)
		delay = max(delay, g.crawlDelay)
	}
	// Most specific first; allow before disallow when equally specific.
	slices.SortStableFunc(rules, func(a, b robotsRule) int {
		if a.length != b.length {
			return b.length - a.length
		}
		switch {
		case a.allow && !b.allow:
			return -1
		case b.allow && !a.allow:
			return 1
		}
		return 0
	})
	return rules, delay
}

// parseCrawlDelay reads a Crawl-delay value in seconds, fractions allowed.
// Values that are not non-negative finite numbers are ignored; absurdly
// large ones are cut to maxCrawlDelay.
func parseCrawlDelay(value string) (time.Duration, bool) {
	f, err := strconv.ParseFloat(value, 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	if f >= maxCrawlDelay.Seconds() {
		return maxCrawlDelay, true
	}
	return time.Duration(f * float64(time.Second)), true
}

// robotsRule is one Allow or Disallow line, compiled for matching.
type robotsRule struct {
	allow bool
	// length is the specificity of the rule: the octets of its pattern in
	// match form, "*" and "$" included, as RFC 9309 §2.2.2 ("the match that
	// has the most octets") and Google's reference parser count it.
	length int
	// parts are the literal pieces between the pattern's "*" wildcards,
	// in match form; the first is anchored at the start of the path.
	parts []string
	// anchored is set when the pattern ends in "$": the last part must end
	// the path.
	anchored bool
}

// newRobotsRule compiles the value of an Allow or Disallow line. An empty
// value matches nothing (RFC 9309 §2.2.2) and is dropped. A value that does
// not start with "/" or "*" gets a "/" in front, as crawlers commonly do,
// rather than being a rule that can never match.
func newRobotsRule(value string, allow bool) (robotsRule, bool) {
	if value == "" {
		return robotsRule{}, false
	}
	if value[0] != '/' && value[0] != '*' {
		value = "/" + value
	}
	pattern := robotsCanonical(value)
	r := robotsRule{allow: allow, length: len(pattern)}
	// Only a final "$" anchors; elsewhere "$" is a literal character, as
	// in Google's parser ("/a$b" matches "/a$b...").
	if strings.HasSuffix(pattern, "$") {
		r.anchored = true
		pattern = pattern[:len(pattern)-1]
	}
	r.parts = strings.Split(pattern, "*")
	for i, p := range r.parts {
		r.parts[i] = literalSpecials(p)
	}
	return r, true
}

// match reports whether the rule matches a path in match form: the first
// part is a prefix of the path, the others follow in order with anything
// between them, and an anchored rule's last part ends the path. Taking
// each middle part at its leftmost occurrence is optimal for "*"-only
// patterns, so the match is linear in the path, without backtracking.
func (r *robotsRule) match(path string) bool {
	first := r.parts[0]
	if len(r.parts) == 1 {
		if r.anchored {
			return path == first
		}
		return strings.HasPrefix(path, first)
	}
	if !strings.HasPrefix(path, first) {
		return false
	}
	pos := len(first)
	last := len(r.parts) - 1
	for _, p := range r.parts[1:last] {
		i := strings.Index(path[pos:], p)
		if i < 0 {
			return false
		}
		pos += i + len(p)
	}
	tail := r.parts[last]
	if r.anchored {
		return len(path)-pos >= len(tail) && strings.HasSuffix(path, tail)
	}
	return strings.Contains(path[pos:], tail)
}

// robotsCanonical puts a path-and-query (a URL's or a rule's) in the
// percent-encoding form both sides are compared in (RFC 9309 §2.2.2): the
// form Normalize gives URLs, in which octets outside ASCII and those not
// allowed in the component are percent-encoded, escapes of unreserved
// characters are decoded ("%7E" is "~") and other escapes are uppercase.
// In the query, escaped ":", "@", "/" and "?" are decoded as well: they
// mean the same there escaped or not, and RFC 9309 Figure 4 matches
// "?baz=https://foo.bar" with "?baz=https%3A%2F%2Ffoo.bar". A rule's "*"
// and "$" are in the allowed set, so they survive as wildcards.
func robotsCanonical(s string) string {
	if urls.Plain(s) {
		return s
	}
	path, query, hasQuery := strings.Cut(s, "?")
	b := urls.AppendEscapedPath(make([]byte, 0, len(s)+8), path)
	if hasQuery {
		b = append(b, '?')
		q := urls.AppendEscapedQuery(make([]byte, 0, len(query)+8), query)
		for _, esc := range [...]struct{ from, to string }{{"%3A", ":"}, {"%40", "@"}, {"%2F", "/"}, {"%3F", "?"}} {
			q = []byte(strings.ReplaceAll(string(q), esc.from, esc.to))
		}
		b = append(b, q...)
	}
	return string(b)
}

// robotsMatchForm is the form of a URL's path-and-query that rules are
// matched against: canonical, with "%2A" and "%24" read as the literal "*"
// and "$" they stand for (RFC 9309 §2.2.3: a rule writes a literal "*" or
// "$" percent-encoded, and it matches the URL's character either way).
func robotsMatchForm(pathQuery string) string {
	return literalSpecials(robotsCanonical(pathQuery))
}

// literalSpecials decodes "%2A" and "%24" in a canonical string. Applied to
// a URL and to the literal parts of a rule, after the rule was split at its
// wildcards, it makes both sides spell a literal "*" and "$" the same way.
func literalSpecials(s string) string {
	if !strings.Contains(s, "%2") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "%2A", "*"), "%24", "$")
}

// robotsCache holds the rules of each origin (scheme://host:port) until
// they expire. Fetching is not its job: the worker holding the host's
// politeness lease fetches, so there is never more than one fetch per host.
type robotsCache struct {
	mu         sync.Mutex
	entries    map[string]*robotsRules
	sweepAt    int // sweep expired entries when the map reaches this size
	maxEntries int
}

func newRobotsCache() *robotsCache {
	return &robotsCache{entries: make(map[string]*robotsRules), sweepAt: 1024, maxEntries: maxRobotsEntries}
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

// put stores the rules of origin. An unavailable result counts the attempt:
// one more than the origin's previous result if that was unavailable too.
func (c *robotsCache) put(origin string, r *robotsRules, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.putLocked(origin, r, now)
}

func (c *robotsCache) putLocked(origin string, r *robotsRules, now time.Time) {
	if r.unavailable {
		r.attempt = 1
		if old := c.entries[origin]; old != nil && old.unavailable {
			r.attempt = old.attempt + 1
		}
	}
	c.entries[origin] = r
	if len(c.entries) < c.sweepAt {
		return
	}
	for o, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, o)
		}
	}
	// Still too many live entries: forget arbitrary ones (map order), down
	// to 90% so this does not run on every put. A forgotten origin only
	// costs a new robots.txt request.
	if len(c.entries) > c.maxEntries {
		for o := range c.entries {
			if len(c.entries) <= c.maxEntries*9/10 {
				break
			}
			if o != origin {
				delete(c.entries, o)
			}
		}
	}
	// Doubling the threshold keeps sweeps amortised constant per put.
	c.sweepAt = min(max(1024, 2*len(c.entries)), c.maxEntries+1)
}

// restore installs rules handed over by the previous owner of origin's
// host, unless the cache holds unexpired rules for origin fetched at the
// same time or later. It reports whether it installed them.
func (c *robotsCache) restore(origin string, r *robotsRules, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.entries[origin]; old != nil && now.Before(old.expires) && !old.fetched.Before(r.fetched) {
		return false
	}
	c.putLocked(origin, r, now)
	return true
}

// robotsEntry is the cached robots.txt of one origin.
type robotsEntry struct {
	origin string
	rules  *robotsRules
}

// latest returns, for every hostname want accepts, the unexpired rules
// that came from an answer (status set) and were fetched last among the
// host's origins. Cached rules are never modified, so they may be read
// without the lock.
func (c *robotsCache) latest(now time.Time, want func(host string) bool) map[string]robotsEntry {
	out := make(map[string]robotsEntry)
	c.mu.Lock()
	defer c.mu.Unlock()
	for origin, r := range c.entries {
		if r.status == 0 || !now.Before(r.expires) {
			continue
		}
		host, err := urls.HostOf(origin)
		if err != nil || !want(host) {
			continue
		}
		if old, ok := out[host]; ok && !r.fetched.After(old.rules.fetched) {
			continue
		}
		out[host] = robotsEntry{origin: origin, rules: r}
	}
	return out
}

// deflaters reuses the compressors of packRobots: a flate.Writer holds
// hundreds of KiB of tables.
var deflaters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.BestSpeed) // cannot fail for a valid level
	return w
}}

// packRobots deflates a robots.txt body for the cache: kept for every
// origin so that it can be handed to the host's next owner, it would
// otherwise cost as much memory as the rules themselves, or more.
func packRobots(body []byte) []byte {
	var buf bytes.Buffer
	w := deflaters.Get().(*flate.Writer)
	w.Reset(&buf)
	_, _ = w.Write(body) // writes to a bytes.Buffer do not fail
	_ = w.Close()
	deflaters.Put(w)
	return bytes.Clone(buf.Bytes())
}

// unpackRobots inflates a body packed by packRobots.
func unpackRobots(packed []byte) ([]byte, error) {
	r := flate.NewReader(bytes.NewReader(packed))
	defer r.Close()
	body, err := io.ReadAll(io.LimitReader(r, maxRobotsBytes+1))
	if err != nil {
		return nil, fmt.Errorf("inflate robots.txt: %w", err)
	}
	if len(body) > maxRobotsBytes {
		return nil, fmt.Errorf("robots.txt longer than %d bytes", maxRobotsBytes)
	}
	return body, nil
}
