package crawl

import (
	"context"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
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
// dropped); one agreeing pair and no disagreeing one make the rule active
// on the host. An active rule rewrites the host's discovered links to the
// rule's form before they reach the seen set, so the variant is never
// queued, and a variant queued before the rule was learned is dropped at
// admission, its twin reported as a link unless fetched already. A pair
// that disagrees (the same rewrite, different bodies) drops the rule and
// bars it for the host from then on, so a site where /dir/ and
// /dir/index.html differ keeps both fetched.
//
// Hints: learning each kind of rule on each host would cost a variant
// fetch per kind per host, most of what is left on small hosts. A rule
// active on dustHintHosts hosts is a hint for the others: a host takes
// hints until it shows a disagreeing pair. A hint rewrites a variant like
// a rule, and the variant is remembered (at most dustHintMemory a host).
// A host with no verdict yet sends one probe: the first variant a hint
// meets whose twin is fetched (or, once the twin of a remembered variant
// is fetched, that variant, queued again) is fetched as it is. Its pair
// decides for the host: agreeing, the host keeps taking hints; a rule's
// own pair on the host confirms it and forgets what the hint rewrote.
// Disagreeing, every variant hints rewrote on the host is queued again
// (links the seen set never held through the LinkSink, tasks it holds
// through Enqueue) and the host takes no more hints. So a page is lost to
// a wrong hint only on a host whose probe agreed and whose other variants
// of another kind are pages of their own; every dustHintVerify-th distinct
// variant a hint rewrites on a host is let through to catch that.
//
// A rule stays a guess about pages not yet fetched: one page of a host
// whose other pages all agree could still differ from its twin. To bound
// that loss every dustVerifyEvery-th distinct variant a host's rules
// rewrite is let through as it is: its fetch checks the rules again, and
// a contradiction drops them.
//
// Order: links that may be variants (a query, a trailing slash, a default
// document) are reported after a page's other links, so that a host's
// plain URLs tend to be fetched first and a variant fetched finds its
// twin fetched.
//
// Rules are per origin (scheme, host and port): www.example.com and
// example.com are different hosts that may be owned by different nodes
// (key mode "host"), and a node sees the bodies of its own hosts only, so
// cross-host twins are left to the fetch-level exact-copy check (their
// links are not followed twice) and not learned. The http and https
// origins of one name share an owner, but no rule maps one scheme onto
// the other. Hints count hosts, not
// sites: a hostile site can make a rule a hint with one host of its own,
// but a hint applies on another host only while that host's own probe
// agrees, and nothing a hint rewrote is lost when it disagrees.
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

// Limits of the rules' memory, their confirmation and their hints.
const (
	dustMaxHosts    = 50_000
	dustMaxURLs     = 4096
	dustMaxRules    = 64
	dustEvidence    = 4
	dustConfirm     = 1
	dustVerifyEvery = 32
	dustReports     = 100
	// dustHintHosts is on how many hosts a rule must be active before it
	// is a hint for other hosts.
	dustHintHosts = 1
	// dustVerifyEvery and dustHintVerify: every dustVerifyEvery-th
	// distinct variant a host's rules rewrite (dustHintVerify-th with a
	// hint) is let through, to check them on the host.
	dustHintVerify = 16
	// dustHintMemory is the most variants a host rewrites by hints before
	// its own pairs confirm the rules: they are queued again if a hint is
	// contradicted on the host. A host over it takes no more hints.
	dustHintMemory = 64
	// dustMaxRewritten is the most rewritten variants a host remembers
	// to count each once.
	dustMaxRewritten = 1024
	// dustMaxRestore bounds the variants waiting to be queued again.
	dustMaxRestore = 4096
	// dustProbeWait is how long a probe (see hostDust) has to give its
	// verdict before another is sent.
	dustProbeWait = 30 * time.Second
)

// defaultDocs are the file names servers answer a directory with.
var defaultDocs = []string{"index.html", "index.htm", "index.php", "index.asp", "index.aspx", "default.asp", "default.aspx", "default.htm", "default.html"}

// dustRules holds the learned rules of every host.
type dustRules struct {
	now func() time.Time

	pending atomic.Int32 // len(restore)+len(requeue), read without the lock

	mu       sync.Mutex
	hosts    map[string]*hostDust // by origin
	hints    map[string]int       // rule key -> hosts where it is active
	restore  []frontier.Task      // variants to report again as links
	requeue  []frontier.Task      // variants to push to the frontier again
	active   int64                // rules active now
	rewrites int64                // links rewritten, all rules
	hinted   int64                // links rewritten by hints
	dropped  int64                // rules dropped by a contradiction
	recent   []*DustRule
}

// hostDust is what the rules know of one host.
type hostDust struct {
	digests map[string]uint64   // fetched path+query -> body hash
	waiting map[string][]string // twin path+query not fetched yet -> fetched variants
	rules   map[string]*DustRule
	agreed  int  // agreeing pairs, any rule
	contra  bool // a pair disagreed: the host takes no hints
	// hintedBy holds the variants rewritten by hints, by rule key, until
	// the host's own pair confirms the rule; nHinted counts them.
	hintedBy map[string][]hintedVariant
	nHinted  int
	// rewritten holds the variants rewritten (their URL hashes), distinct
	// counts them.
	rewritten map[uint64]bool
	distinct  int64
	// probe is a variant hints rewrote on a host that has no verdict yet
	// (no pair agreed or disagreed), queued again once its twin was
	// fetched so that its fetch gives one; probeAt is when.
	probe   string
	probeAt time.Time
}

// hintedVariant is a link a hint rewrote: queued again if the hint proves
// wrong on its host. seen marks one the seen set holds already (dropped at
// admission): it goes back to the frontier, not to the LinkSink.
type hintedVariant struct {
	task frontier.Task
	twin string // the twin's path+query
	seen bool
}

func newDustRules(cfg *Config) *dustRules {
	return &dustRules{now: cfg.Clock, hosts: map[string]*hostDust{}, hints: map[string]int{}}
}

// dustTwin is one way a URL may be a variant of another.
type dustTwin struct {
	kind, name, twin string // rule kind and name, the twin's path+query
}

// looksVariant reports, without allocating, whether path+query pq may be
// a variant under some rule (see dustTwins): it has a query, a trailing
// slash past the root, or a default document for its last segment.
func looksVariant(pq string) bool {
	if strings.IndexByte(pq, '?') >= 0 || len(pq) > 1 && pq[len(pq)-1] == '/' {
		return true
	}
	last := pq[strings.LastIndexByte(pq, '/')+1:]
	for _, d := range defaultDocs {
		if strings.EqualFold(last, d) {
			return true
		}
	}
	return false
}

// pathQuery returns the path and query of a normalised absolute URL
// without allocating, "" when it has none.
func pathQuery(u string) string {
	i := strings.Index(u, "://")
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(u[i+3:], '/')
	if j < 0 {
		return ""
	}
	return u[i+3+j:]
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

// hostLocked returns the state of an origin (scheme, host and port),
// creating it.
func (d *dustRules) hostLocked(origin string) *hostDust {
	h := d.hosts[origin]
	if h == nil {
		if len(d.hosts) >= dustMaxHosts {
			for k, o := range d.hosts {
				if len(o.rules) == 0 && o.nHinted == 0 {
					delete(d.hosts, k)
				}
			}
		}
		h = &hostDust{digests: map[string]uint64{}, waiting: map[string][]string{}, rules: map[string]*DustRule{}}
		d.hosts[origin] = h
	}
	return h
}

// page takes note of the body hash of a fetched page u of host and judges
// the rules its URL bears on.
func (d *dustRules) page(u string, digest uint64) {
	host, err := urls.HostOf(u)
	pq := pathQuery(u)
	if d == nil || err != nil || digest == 0 || pq == "" {
		return
	}
	origin := u[:len(u)-len(pq)]
	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.hostLocked(origin)
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
	d.probeLocked(h, pq)
}

// probeLocked queues again, after the fetch of twin path+query pq on a
// host without a verdict, one variant of pq that hints rewrote: its fetch
// decides whether the hints hold on the host. One probe at a time, or
// another after dustProbeWait.
func (d *dustRules) probeLocked(h *hostDust, pq string) {
	if h.agreed > 0 || h.contra || h.nHinted == 0 || h.probe != "" && d.now().Sub(h.probeAt) < dustProbeWait {
		return
	}
	for key, vs := range h.hintedBy {
		for i, v := range vs {
			if v.twin != pq {
				continue
			}
			h.probe, h.probeAt = v.task.URL, d.now()
			h.hintedBy[key] = append(vs[:i:i], vs[i+1:]...)
			h.nHinted--
			d.queueAgainLocked(v)
			return
		}
	}
}

// pairLocked judges rule kind/name of host on a fetched variant and twin
// with body hashes vd and td.
func (d *dustRules) pairLocked(h *hostDust, host, origin, kind, name, variant, twin string, vd, td uint64) {
	key := kind + " " + name
	r := h.rules[key]
	if vd != td {
		// The host serves a page of its own under a variant: it takes no
		// hints from now on, and what hints rewrote is queued again.
		h.contra = true
		d.restoreLocked(h)
	}
	if r == nil {
		if len(h.rules) >= dustMaxRules {
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
			d.hints[key]--
			d.dropped++
		}
		return
	}
	r.Agree++
	h.agreed++
	if len(r.Evidence) < dustEvidence {
		r.Evidence = append(r.Evidence, DustEvidence{Variant: origin + variant, Twin: origin + twin, Digest: vd})
	}
	if !r.Active && r.Agree >= dustConfirm {
		r.Active, r.At = true, d.now()
		d.active++
		d.hints[key]++
		// The host's own pair confirms what the hint rewrote.
		h.nHinted -= len(h.hintedBy[key])
		delete(h.hintedBy, key)
		d.recent = append(d.recent, r)
		if len(d.recent) > 2*dustReports {
			d.recent = append(d.recent[:0], d.recent[len(d.recent)-dustReports:]...)
		}
	}
}

// restoreLocked queues again the variants hints rewrote on h.
func (d *dustRules) restoreLocked(h *hostDust) {
	for _, vs := range h.hintedBy {
		for _, v := range vs {
			d.queueAgainLocked(v)
		}
	}
	h.hintedBy, h.nHinted = nil, 0
}

// queueAgainLocked puts v in the list restored hands out.
func (d *dustRules) queueAgainLocked(v hintedVariant) {
	switch {
	case len(d.restore)+len(d.requeue) >= dustMaxRestore:
		return
	case v.seen:
		d.requeue = append(d.requeue, v.task)
	default:
		d.restore = append(d.restore, v.task)
	}
	d.pending.Store(int32(len(d.restore) + len(d.requeue)))
}

// restored returns, once, the variants to queue again (see
// restoreLocked and probeLocked): links new to the seen set, for the
// LinkSink, and tasks it holds already, for the frontier.
func (d *dustRules) restored() (links, tasks []frontier.Task) {
	if d == nil || d.pending.Load() == 0 {
		return nil, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	links, tasks = d.restore, d.requeue
	d.restore, d.requeue = nil, nil
	d.pending.Store(0)
	return links, tasks
}

// canonLocked applies h's rules, its own active ones and the hints it
// may take, to pq until none applies; it returns the result, the host's
// rules applied and the keys of the hints applied.
func (d *dustRules) canonLocked(h *hostDust, pq string) (string, []*DustRule, []string) {
	var used []*DustRule
	var hints []string
	takesHints := !h.contra && h.nHinted < dustHintMemory
	for range 16 {
		changed := false
		for _, t := range dustTwins(pq) {
			key := t.kind + " " + t.name
			r := h.rules[key]
			switch {
			case r != nil && r.Active:
				used = append(used, r)
			case r == nil && takesHints && d.hints[key] >= dustHintHosts:
				hints = append(hints, key)
			default:
				continue
			}
			pq, changed = t.twin, true
			break
		}
		if !changed {
			break
		}
	}
	return pq, used, hints
}

// rewriteLocked returns l rewritten to its twin under its host's rules
// and hints, ok false when none applies or the rewrite is left out to
// check the rules again (every dustVerifyEvery-th of a rule, every
// dustHintVerify-th by hints on a host).
func (d *dustRules) rewriteLocked(l frontier.Task, seen bool) (frontier.Task, bool) {
	pq := pathQuery(l.URL)
	if pq == "" || !looksVariant(pq) {
		return l, false
	}
	origin := l.URL[:len(l.URL)-len(pq)]
	h := d.hosts[origin]
	if h == nil && seen {
		// At admission the host is this node's: its first URL may be a
		// variant, rewritten by a hint.
		h = d.hostLocked(origin)
	}
	if h == nil || h.probe == l.URL {
		return l, false
	}
	c, used, hints := d.canonLocked(h, pq)
	if c == pq {
		return l, false
	}
	for _, r := range used {
		r.Rewrites++
	}
	// Every dustVerifyEvery-th variant the host's rules rewrite (every
	// dustHintVerify-th with a hint), counting each URL once, is let
	// through to check them again: a variant let through before is in
	// the seen set, and would not be fetched again.
	verify := false
	if k := urls.URLHash(l.URL); !h.rewritten[k] {
		if h.rewritten == nil || len(h.rewritten) >= dustMaxRewritten {
			// Forgetting costs at most a variant let through again,
			// which the seen set holds already.
			h.rewritten = map[uint64]bool{}
		}
		h.rewritten[k] = true
		every := int64(dustVerifyEvery)
		if len(hints) > 0 {
			every = dustHintVerify
		}
		h.distinct++
		verify = h.distinct%every == 0
	}
	if len(hints) > 0 {
		if _, fetched := h.digests[c]; fetched && h.agreed == 0 && (h.probe == "" || d.now().Sub(h.probeAt) >= dustProbeWait) {
			// No verdict on the host yet and the twin is in: this
			// variant is its probe.
			h.probe, h.probeAt, verify = l.URL, d.now(), true
		}
	}
	d.rewrites++
	if verify {
		return l, false
	}
	if len(hints) > 0 {
		if h.hintedBy == nil {
			h.hintedBy = map[string][]hintedVariant{}
		}
		h.hintedBy[hints[0]] = append(h.hintedBy[hints[0]], hintedVariant{task: l, twin: c, seen: seen})
		h.nHinted++
		d.hinted++
	}
	l.URL = l.URL[:len(l.URL)-len(pq)] + c
	return l, true
}

// rewrite rewrites links to a host with rules (or hints) to the rules'
// form and drops links that became a copy of an earlier one. It also
// orders the links that may be variants after the others (keeping their
// order otherwise), so that a host's plain URLs are fetched first and a
// variant fetched to learn a rule finds its twin fetched.
func (d *dustRules) rewrite(links []frontier.Task) []frontier.Task {
	if d == nil {
		return links
	}
	var tail [32]frontier.Task
	variants := tail[:0]
	kept := links[:0]
	d.mu.Lock()
	rules := d.active > 0
	rewritten := false
	for _, l := range links {
		if rules {
			var ok bool
			if l, ok = d.rewriteLocked(l, false); ok {
				rewritten = true
			}
		}
		if pq := pathQuery(l.URL); pq != "" && looksVariant(pq) {
			variants = append(variants, l)
		} else {
			kept = append(kept, l)
		}
	}
	d.mu.Unlock()
	kept = append(kept, variants...)
	if !rewritten {
		return kept
	}
	seen := make(map[string]bool, len(kept))
	out := kept[:0]
	for _, l := range kept {
		if !seen[l.URL] {
			seen[l.URL] = true
			out = append(out, l)
		}
	}
	return out
}

// twinOf returns t rewritten to the URL it names under its host's rules
// and hints, ok when that differs from t's: a variant queued before the
// rules were learned.
func (d *dustRules) twinOf(t frontier.Task) (twin frontier.Task, ok bool) {
	if d == nil {
		return t, false
	}
	if pq := pathQuery(t.URL); pq == "" || !looksVariant(pq) {
		return t, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.active == 0 {
		return t, false
	}
	return d.rewriteLocked(t, true)
}

// stats returns the number of active rules, of links rewritten (and of
// those by hints) and of rules dropped, and copies of the newest rules,
// by host.
func (d *dustRules) stats() (active, rewrites, hinted, dropped int64, rules []DustRule) {
	if d == nil {
		return 0, 0, 0, 0, nil
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
	return d.active, d.rewrites, d.hinted, d.dropped, rules
}

// dustVariant reports whether t's URL is a variant, under its host's DUST
// rules and hints, of another URL: one queued before the rules were
// learned. The other URL, its twin, is reported as a discovered link at
// t's depth unless it was fetched before.
func (c *Crawler) dustVariant(ctx context.Context, t frontier.Task) bool {
	twin, ok := c.dust.twinOf(t)
	if !ok {
		return false
	}
	if !c.fetchedBefore(twin) {
		c.linksReported.Add(1)
		c.links.Discovered(ctx, t, []frontier.Task{twin})
	}
	return true
}
