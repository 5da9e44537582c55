package crawl

import (
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
)

// DUST rules (issue 31, "different URLs with similar text"): a site serves
// one page under several URLs that normalisation cannot know to be equal —
// a default document (/dir/ and /dir/index.html, index.php, default.aspx),
// a trailing slash (/a and /a/), a parameter that changes nothing (?ref=,
// ?sort=). The crawler learns such equivalences per host from what it
// fetched: a URL and its variant whose bodies hash the same are evidence
// for a rule (the variant's default document, slash or parameter is
// dropped); dustConfirm agreeing pairs and no disagreeing one make the
// rule active. An active rule rewrites the host's discovered links to the
// rule's form before they reach the seen set, so the variant is never
// queued, and a variant queued before the rule was learned is dropped at
// admission when its twin was fetched. A pair that disagrees (the same
// rewrite, different bodies) drops the rule and bars it for the host from
// then on, so a site where /dir/ and /dir/index.html differ keeps both
// fetched.
//
// A rule stays a guess about pages not yet fetched: one page of a host
// whose other pages all agree could still differ from its twin. To bound
// that loss every dustVerifyEvery-th rewrite of a rule lets the variant
// through as it is: its fetch checks the rule again, and a contradiction
// drops it. Rules are per host: www.example.com and example.com, or the
// http and https origins of one name, are different hosts that may be
// owned by different nodes, and a node sees the bodies of its own hosts
// only, so cross-host twins are left to the fetch-level exact-copy check
// (their links are not followed twice) and not learned.
//
// Memory is bounded: at most dustMaxURLs digests and dustMaxRules rules per
// host and dustMaxHosts hosts; a host over its digest bound stops learning
// new pairs, a hostile host cannot grow the state further.

// DustRule is an equivalence of URLs learned for one host.
type DustRule struct {
	Host     string         `json:"host"`              // the host
	Kind     string         `json:"kind"`              // "default-doc", "slash" or "param"
	Name     string         `json:"name"`              // the default document, "/" or the parameter's name
	Active   bool           `json:"active"`            // applied to the host's links
	Agree    int            `json:"agree"`             // fetched pairs with the same body
	Evidence []DustEvidence `json:"evidence"`          // the first pairs (at most dustEvidence)
	At       time.Time      `json:"at"`                // when it became active, or was seen first
	Rewrites int64          `json:"rewrites"`          // links rewritten by it
	Dropped  string         `json:"dropped,omitempty"` // why it was dropped: a contradicting pair
}

// DustEvidence is a fetched pair of URLs whose bodies hash the same.
type DustEvidence struct {
	Variant string `json:"variant"` // the variant URL
	Twin    string `json:"twin"`    // the URL the rule rewrites it to
	Digest  uint64 `json:"digest"`  // the hash of both bodies
}

// Limits of the rules' memory and their confirmation.
const (
	dustMaxHosts    = 50_000
	dustMaxURLs     = 4096
	dustMaxRules    = 64
	dustEvidence    = 4
	dustConfirm     = 2
	dustVerifyEvery = 32
	dustReports     = 100
)

// defaultDocs are the file names servers answer a directory with.
var defaultDocs = []string{"index.html", "index.htm", "index.php", "index.asp", "index.aspx", "default.asp", "default.aspx", "default.htm", "default.html"}

// dustRules holds the learned rules of every host.
type dustRules struct {
	now func() time.Time

	mu       sync.Mutex
	hosts    map[string]*hostDust
	active   int64 // rules active now
	rewrites int64 // links rewritten, all rules
	dropped  int64 // rules dropped by a contradiction
	recent   []*DustRule
}

// hostDust is what the rules know of one host.
type hostDust struct {
	digests map[string]uint64   // fetched path+query -> body hash
	waiting map[string][]string // twin path+query not fetched yet -> fetched variants
	rules   map[string]*DustRule
}

func newDustRules(cfg *Config) *dustRules {
	return &dustRules{now: cfg.Clock, hosts: map[string]*hostDust{}}
}

// dustTwin is one way a URL may be a variant of another.
type dustTwin struct {
	kind, name, twin string // rule kind and name, the twin's path+query
}

// dustTwins lists the twins path+query pq would have under each rule.
func dustTwins(pq string) []dustTwin {
	var out []dustTwin
	path, query, hasQuery := strings.Cut(pq, "?")
	withQuery := func(p string) string {
		if hasQuery {
			return p + "?" + query
		}
		return p
	}
	if i := strings.LastIndexByte(path, '/'); i >= 0 && i < len(path)-1 {
		last := strings.ToLower(path[i+1:])
		for _, d := range defaultDocs {
			if last == d {
				out = append(out, dustTwin{"default-doc", d, withQuery(path[:i+1])})
			}
		}
	}
	if len(path) > 1 && strings.HasSuffix(path, "/") && !strings.HasSuffix(path, "//") {
		out = append(out, dustTwin{"slash", "/", withQuery(strings.TrimSuffix(path, "/"))})
	}
	if hasQuery && query != "" {
		params := strings.Split(query, "&")
		for i, kv := range params {
			k, _, _ := strings.Cut(kv, "=")
			if k == "" || len(k) > 64 {
				continue
			}
			rest := append(append([]string{}, params[:i]...), params[i+1:]...)
			t := path
			if len(rest) > 0 {
				t += "?" + strings.Join(rest, "&")
			}
			out = append(out, dustTwin{"param", k, t})
		}
	}
	return out
}

// hostLocked returns the state of host, creating it.
func (d *dustRules) hostLocked(host string) *hostDust {
	h := d.hosts[host]
	if h == nil {
		if len(d.hosts) >= dustMaxHosts {
			for k, o := range d.hosts {
				if len(o.rules) == 0 {
					delete(d.hosts, k)
				}
			}
		}
		h = &hostDust{digests: map[string]uint64{}, waiting: map[string][]string{}, rules: map[string]*DustRule{}}
		d.hosts[host] = h
	}
	return h
}

// page takes note of the body hash of a fetched page u of host and judges
// the rules its URL bears on.
func (d *dustRules) page(u string, digest uint64) {
	host, err := urls.HostOf(u)
	if d == nil || err != nil || digest == 0 {
		return
	}
	origin, pq := urls.SplitOrigin(u)
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.hostLocked(host)
	if _, known := h.digests[pq]; !known && len(h.digests) >= dustMaxURLs {
		return
	}
	h.digests[pq] = digest
	for _, t := range dustTwins(pq) {
		if td, ok := h.digests[t.twin]; ok {
			d.pairLocked(h, host, origin, t.kind, t.name, pq, t.twin, digest, td)
		} else if len(h.waiting) < dustMaxURLs && len(h.waiting[t.twin]) < 8 {
			h.waiting[t.twin] = append(h.waiting[t.twin], pq)
		}
	}
	for _, v := range h.waiting[pq] {
		for _, t := range dustTwins(v) {
			if t.twin == pq {
				d.pairLocked(h, host, origin, t.kind, t.name, v, pq, h.digests[v], digest)
			}
		}
	}
	delete(h.waiting, pq)
}

// pairLocked judges rule kind/name of host on a fetched variant and twin
// with body hashes vd and td.
func (d *dustRules) pairLocked(h *hostDust, host, origin, kind, name, variant, twin string, vd, td uint64) {
	key := kind + " " + name
	r := h.rules[key]
	if r == nil {
		if len(h.rules) >= dustMaxRules || vd != td {
			return
		}
		r = &DustRule{Host: host, Kind: kind, Name: name, At: d.now()}
		h.rules[key] = r
	}
	if r.Dropped != "" {
		return
	}
	if vd != td {
		r.Dropped = origin + variant + " and " + origin + twin + " differ"
		if r.Active {
			r.Active = false
			d.active--
		}
		d.dropped++
		return
	}
	r.Agree++
	if len(r.Evidence) < dustEvidence {
		r.Evidence = append(r.Evidence, DustEvidence{Variant: origin + variant, Twin: origin + twin, Digest: vd})
	}
	if !r.Active && r.Agree >= dustConfirm {
		r.Active, r.At = true, d.now()
		d.active++
		d.recent = append(d.recent, r)
		if len(d.recent) > 2*dustReports {
			d.recent = append(d.recent[:0], d.recent[len(d.recent)-dustReports:]...)
		}
	}
}

// canonLocked applies h's active rules to pq until none applies; it
// returns the result and the rules applied.
func canonLocked(h *hostDust, pq string) (string, []*DustRule) {
	var used []*DustRule
	for range 16 {
		changed := false
		for _, t := range dustTwins(pq) {
			if r := h.rules[t.kind+" "+t.name]; r != nil && r.Active {
				pq, changed = t.twin, true
				used = append(used, r)
				break
			}
		}
		if !changed {
			break
		}
	}
	return pq, used
}

// rewrite rewrites links to a host with active rules to the rules' form
// (leaving every dustVerifyEvery-th rewrite of a rule as it is, to check
// the rule again) and drops links that became a copy of an earlier one.
func (d *dustRules) rewrite(links []frontier.Task) []frontier.Task {
	if d == nil {
		return links
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.active == 0 {
		return links
	}
	kept := links[:0]
	var seen map[string]bool
	for _, l := range links {
		host, err := urls.HostOf(l.URL)
		h := d.hosts[host]
		if err == nil && h != nil {
			origin, pq := urls.SplitOrigin(l.URL)
			if c, used := canonLocked(h, pq); c != pq {
				verify := false
				for _, r := range used {
					r.Rewrites++
					verify = verify || r.Rewrites%dustVerifyEvery == 0
				}
				d.rewrites++
				if !verify {
					l.URL = origin + c
				}
			}
		}
		if seen == nil {
			seen = make(map[string]bool, len(links))
		}
		if seen[l.URL] {
			continue
		}
		seen[l.URL] = true
		kept = append(kept, l)
	}
	return kept
}

// twinOf returns the URL u names under its host's active rules, ok when
// that differs from u: a variant queued before the rules were learned.
func (d *dustRules) twinOf(u string) (twin string, ok bool) {
	if d == nil {
		return "", false
	}
	host, err := urls.HostOf(u)
	if err != nil {
		return "", false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.hosts[host]
	if h == nil || d.active == 0 {
		return "", false
	}
	origin, pq := urls.SplitOrigin(u)
	c, _ := canonLocked(h, pq)
	if c == pq {
		return "", false
	}
	return origin + c, true
}

// stats returns the number of active rules, of links rewritten and of
// rules dropped, and copies of the newest rules, by host.
func (d *dustRules) stats() (active, rewrites, dropped int64, rules []DustRule) {
	if d == nil {
		return 0, 0, 0, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	from := max(0, len(d.recent)-dustReports)
	for _, r := range d.recent[from:] {
		c := *r
		c.Evidence = append([]DustEvidence(nil), r.Evidence...)
		rules = append(rules, c)
	}
	sort.Slice(rules, func(i, j int) bool {
		if rules[i].Host != rules[j].Host {
			return rules[i].Host < rules[j].Host
		}
		return rules[i].Kind+rules[i].Name < rules[j].Kind+rules[j].Name
	})
	return d.active, d.rewrites, d.dropped, rules
}

// dustCopy reports whether t's URL is a variant, under its host's DUST
// rules, of a URL fetched before: a copy queued before the rule was
// learned.
func (c *Crawler) dustCopy(t frontier.Task) bool {
	twin, ok := c.dust.twinOf(t.URL)
	return ok && c.fetchedBefore(frontier.Task{URL: twin})
}
