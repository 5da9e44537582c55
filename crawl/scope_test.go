package crawl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// seedMap is a SeedIndex in memory: seed URLs by ring key.
type seedMap struct {
	mode  urls.KeyMode
	seeds map[uint64][]string
	reads int
	err   error
}

func newSeedMap(mode urls.KeyMode, seeds ...string) *seedMap {
	m := &seedMap{mode: mode, seeds: map[uint64][]string{}}
	for _, s := range seeds {
		u, err := urls.Normalize(nil, s)
		if err != nil {
			panic(err)
		}
		k, err := urls.TaskKey(u, mode)
		if err != nil {
			panic(err)
		}
		m.seeds[k] = append(m.seeds[k], u)
	}
	return m
}

func (m *seedMap) SeedURLs(key uint64, fn func(string) bool) error {
	m.reads++
	if m.err != nil {
		return m.err
	}
	for _, u := range m.seeds[key] {
		if !fn(u) {
			break
		}
	}
	return nil
}

func TestParseScopeMode(t *testing.T) {
	for _, m := range []ScopeMode{ScopeAny, ScopeSeedHosts, ScopeSeedDomains} {
		got, err := ParseScopeMode(" " + strings.ToUpper(m.String()) + " ")
		if err != nil || got != m {
			t.Errorf("ParseScopeMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseScopeMode("seed-host"); err == nil {
		t.Error("ParseScopeMode took seed-host")
	}
	if ScopeMode(0) != ScopeAny || !(ScopeConfig{}).Any() {
		t.Error("the zero scope must be any, the default")
	}
}

// judge checks every URL of cases (raw, normalised here) against s.
func judge(t *testing.T, s *Scope, cases map[string]ScopeReason) {
	t.Helper()
	for raw, want := range cases {
		u, err := urls.Normalize(nil, raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		got, err := s.Check(u)
		if err != nil || got != want {
			t.Errorf("%s (%s): %v, %v; want %v", raw, u, got, err, want)
		}
	}
}

// With seed-hosts a seed brings its host into scope and nothing else:
// not another port's or scheme's twin (ports are ignored), but not the
// www. host, a subdomain or the parent either; IP hosts, IPv6 literals
// and IDNs (compared in punycode, as normalised) work the same.
func TestScopeSeedHosts(t *testing.T) {
	for _, mode := range []urls.KeyMode{urls.KeyHost, urls.KeyDomain} {
		seeds := newSeedMap(mode, "http://example.com/", "http://192.0.2.1:8080/start", "http://[2001:db8::1]/",
			"http://Bücher.example/", "https://blog.example.co.uk/")
		s, err := NewScope(ScopeConfig{Mode: ScopeSeedHosts}, mode, seeds)
		if err != nil {
			t.Fatal(err)
		}
		judge(t, s, map[string]ScopeReason{
			"http://example.com/any/page?q=1":     InScope,
			"https://EXAMPLE.com:8443/x":          InScope,
			"http://example.com./x":               InScope,
			"http://www.example.com/":             NotSeedHost,
			"http://example.org/":                 NotSeedHost,
			"http://192.0.2.1/":                   InScope,
			"http://192.0.2.2:8080/start":         NotSeedHost,
			"http://[2001:db8::1]:81/a":           InScope,
			"http://[2001:db8::2]/":               NotSeedHost,
			"http://bücher.example/a":             InScope,
			"http://xn--bcher-kva.example/b":      InScope,
			"http://blog.example.co.uk/post":      InScope,
			"http://example.co.uk/":               NotSeedHost,
			"http://other.blog.example.co.uk/":    NotSeedHost,
			"http://not-example.com/example.com/": NotSeedHost,
		})
	}
}

// With seed-domains a seed brings its registrable domain into scope, by
// the Public Suffix List: every host of example.co.uk for a seed on
// www.example.co.uk, but not co.uk or another domain under it; a private
// suffix (github.io) separates its users; an IP address is its own
// domain.
func TestScopeSeedDomains(t *testing.T) {
	seeds := newSeedMap(urls.KeyDomain, "http://www.example.co.uk/", "https://foo.github.io/", "http://192.0.2.1/", "http://h1.synth.test/")
	s, err := NewScope(ScopeConfig{Mode: ScopeSeedDomains}, urls.KeyDomain, seeds)
	if err != nil {
		t.Fatal(err)
	}
	judge(t, s, map[string]ScopeReason{
		"http://www.example.co.uk/a":   InScope,
		"http://example.co.uk/":        InScope,
		"http://a.b.example.co.uk:81/": InScope,
		"http://other.co.uk/":          NotSeedDomain,
		"http://co.uk/":                NotSeedDomain,
		"http://example.com/":          NotSeedDomain,
		"http://foo.github.io/x":       InScope,
		"http://x.foo.github.io/":      InScope,
		"http://bar.github.io/":        NotSeedDomain,
		"http://github.io/":            NotSeedDomain,
		"http://192.0.2.1:8080/":       InScope,
		"http://192.0.2.2/":            NotSeedDomain,
		"http://h2.synth.test/":        InScope, // unknown suffix: synth.test is the domain
		"http://h2.other.test/":        NotSeedDomain,
	})
}

// Include and exclude patterns match anywhere in the normalised URL;
// exclude wins over include, and include, when given, is required on top
// of the seed rule.
func TestScopePatterns(t *testing.T) {
	cfg := ScopeConfig{
		Include: []string{`^https?://[^/]+/docs/`, `^http://example\.com/(a|b){1,3}$`},
		Exclude: []string{`\.pdf$`, `(?i)/PRIVATE/`},
	}
	s, err := NewScope(cfg, urls.KeyURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	judge(t, s, map[string]ScopeReason{
		"http://example.com/docs/intro":        InScope,
		"http://other.org/docs/":               InScope,
		"http://example.com/docs/manual.pdf":   Excluded,
		"http://example.com/docs/private/x":    Excluded,
		"http://example.com/ab":                InScope,
		"http://example.com/abab":              NotIncluded,
		"http://example.com/blog/":             NotIncluded,
		"http://example.com/blog/private/a":    Excluded, // exclude wins
		"HTTP://Example.COM:80/docs/x#section": InScope,  // judged normalised
	})
	cfg.Mode = ScopeSeedHosts
	s, err = NewScope(cfg, urls.KeyHost, newSeedMap(urls.KeyHost, "http://example.com/"))
	if err != nil {
		t.Fatal(err)
	}
	judge(t, s, map[string]ScopeReason{
		"http://example.com/docs/a":     InScope,
		"http://other.org/docs/a":       NotSeedHost, // include is in addition to the seed rule
		"http://example.com/blog/":      NotIncluded,
		"http://other.org/docs/a.pdf":   Excluded,
		"http://example.com/docs/a.pdf": Excluded,
	})
}

// Seeded names are remembered (records are never deleted); a store that
// cannot be read is an error, not a verdict.
func TestScopeSeedLookups(t *testing.T) {
	seeds := newSeedMap(urls.KeyHost, "http://a.test/")
	s, err := NewScope(ScopeConfig{Mode: ScopeSeedHosts}, urls.KeyHost, seeds)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if r, err := s.Check("http://a.test/x"); r != InScope || err != nil {
			t.Fatalf("seed host: %v, %v", r, err)
		}
	}
	if seeds.reads != 1 {
		t.Errorf("%d index reads for one seeded host, want 1", seeds.reads)
	}
	seeds.err = errors.New("disk on fire")
	if _, err := s.Check("http://b.test/"); err == nil {
		t.Error("a failed index read judged a URL")
	}
	if r, err := s.Check("http://a.test/y"); r != InScope || err != nil {
		t.Errorf("a host known seeded: %v, %v", r, err)
	}
}

// A configuration whose seed rule the key mode cannot judge is refused,
// and so are bad patterns, each named.
func TestScopeConfigRefused(t *testing.T) {
	long := strings.Repeat("a", MaxScopePatternBytes+1)
	many := make([]string, MaxScopePatterns+1)
	for i := range many {
		many[i] = fmt.Sprintf("p%d", i)
	}
	for _, c := range []struct {
		cfg  ScopeConfig
		mode urls.KeyMode
		want string
	}{
		{ScopeConfig{Mode: ScopeSeedHosts}, urls.KeyURL, "needs host or domain keys"},
		{ScopeConfig{Mode: ScopeSeedDomains}, urls.KeyHost, "needs domain keys"},
		{ScopeConfig{Mode: ScopeSeedDomains}, urls.KeyURL, "needs domain keys"},
		{ScopeConfig{Mode: ScopeMode(9)}, urls.KeyHost, "unknown"},
		{ScopeConfig{Include: []string{"ok", "(unclosed"}}, urls.KeyHost, `include: pattern "(unclosed"`},
		{ScopeConfig{Exclude: []string{""}}, urls.KeyHost, "exclude: an empty pattern"},
		{ScopeConfig{Exclude: []string{long}}, urls.KeyHost, "exclude: pattern"},
		{ScopeConfig{Include: many}, urls.KeyHost, "65 patterns, at most 64"},
		{ScopeConfig{Include: []string{`a{1001}`}}, urls.KeyHost, "invalid repeat count"},
	} {
		_, err := NewScope(c.cfg, c.mode, newSeedMap(c.mode))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v with %v keys: %v, want an error with %q", c.cfg, c.mode, err, c.want)
		}
		cfg := testConfig()
		cfg.KeyMode, cfg.Scope = c.mode, c.cfg
		if _, err := New(cfg, openStore(t), nil, nil); err == nil {
			t.Errorf("New took scope %+v with %v keys", c.cfg, c.mode)
		}
	}
	for _, mode := range []urls.KeyMode{urls.KeyHost, urls.KeyDomain} {
		if _, err := NewScope(ScopeConfig{Mode: ScopeSeedHosts}, mode, newSeedMap(mode)); err != nil {
			t.Errorf("seed-hosts with %v keys: %v", mode, err)
		}
	}
}

// scopeWeb is a proxy that answers every request itself with a page and
// logs it, so that a crawler can reach any host name.
type scopeWeb struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []string // host + path
}

func newScopeWeb(t *testing.T) *scopeWeb {
	p := &scopeWeb{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.reqs = append(p.reqs, r.Host+r.URL.Path)
		p.mu.Unlock()
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<p>a page</p>")
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *scopeWeb) proxy() func(*http.Request) (*url.URL, error) {
	u, _ := url.Parse(p.URL)
	return http.ProxyURL(u)
}

func (p *scopeWeb) log() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.reqs)
}

// hosts counts the requests the proxy saw by host.
func (p *scopeWeb) hosts() map[string]int {
	out := map[string]int{}
	for _, r := range p.log() {
		host, _, _ := strings.Cut(r, "/")
		out[host]++
	}
	return out
}

// seedRecord stores the shard record of an authorized seed, as an owner
// does when it accepts one.
func seedRecord(t *testing.T, db *store.DB, mode urls.KeyMode, u string) {
	t.Helper()
	key, err := urls.TaskKey(u, mode)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutShardRecords([]store.ShardRecord{{Key: key, URLHash: urls.URLHash(u), URL: u, Seed: true}}); err != nil {
		t.Fatal(err)
	}
}

// TestScopeDropsQueuedTasks: whatever reaches the queue (here Enqueue
// straight, as records a peer handed over or a scope narrowed since
// would), a task out of scope is dropped before any request, robots.txt
// included, and finished (its record done); the seed host is crawled.
func TestScopeDropsQueuedTasks(t *testing.T) {
	px := newScopeWeb(t)
	cfg := testConfig()
	cfg.Proxy = px.proxy()
	cfg.Scope = ScopeConfig{Mode: ScopeSeedHosts, Exclude: []string{`/private/`}}
	var mu sync.Mutex
	var finished []string
	cfg.OnFinished = func(t frontier.Task, _, _ uint64, _ *store.URLMeta) {
		mu.Lock()
		finished = append(finished, t.URL)
		mu.Unlock()
	}
	db := openStore(t)
	seedRecord(t, db, urls.KeyHost, "http://in.test/")
	c, err := New(cfg, db, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"http://out.test/", "http://out.test/a", "http://www.in.test/", "http://in.test/private/x"}
	var tasks []frontier.Task
	for _, u := range append([]string{"http://in.test/", "http://in.test/a"}, out...) {
		tasks = append(tasks, frontier.Task{URL: u, Depth: 1})
	}
	c.Enqueue(tasks...)
	crawlUntilIdle(t, c, 10*time.Second)
	hosts := px.hosts()
	if len(hosts) != 1 || hosts["in.test"] != 3 {
		t.Errorf("requests by host %v, want in.test's robots.txt and 2 pages only", hosts)
	}
	for _, r := range px.log() {
		if strings.Contains(r, "/private/") {
			t.Errorf("excluded URL requested: %s", r)
		}
	}
	if got := c.Stats().ScopeDropped; got != int64(len(out)) {
		t.Errorf("ScopeDropped %d, want %d", got, len(out))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, u := range out {
		if !slices.Contains(finished, u) {
			t.Errorf("%s dropped for scope but not finished", u)
		}
	}
}

// TestFetchBatchRefusesOutOfScope: a helper judges a batch by its own
// scope and its copy of the seeds: a batch for a host no seed named is
// refused before any request, whoever sent it; one for a seed host is
// fetched.
func TestFetchBatchRefusesOutOfScope(t *testing.T) {
	px := newScopeWeb(t)
	cfg := testConfig()
	cfg.Proxy = px.proxy()
	cfg.Scope = ScopeConfig{Mode: ScopeSeedHosts}
	db := openStore(t)
	seedRecord(t, db, urls.KeyHost, "http://in.test/")
	c, err := New(cfg, db, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	batch := func(host string) *Batch {
		b := &Batch{Host: host, Budget: 3 * time.Second, Wait: 10 * time.Second}
		for i := range 3 {
			b.Tasks = append(b.Tasks, BatchTask{Task: frontier.Task{URL: fmt.Sprintf("http://%s/p/%d", host, i), Depth: 1}})
		}
		return b
	}
	if _, err := c.FetchBatch(context.Background(), batch("victim.test")); err == nil || !strings.Contains(err.Error(), "not_seed_host") {
		t.Errorf("a batch for a host out of scope: %v, want a refusal", err)
	}
	if n := len(px.log()); n != 0 {
		t.Fatalf("%d requests for a refused batch", n)
	}
	res, err := c.FetchBatch(context.Background(), batch("in.test"))
	if err != nil || len(res.Results) != 3 {
		t.Fatalf("a batch for the seed host: %+v, %v", res, err)
	}
	if hosts := px.hosts(); len(hosts) != 1 || hosts["in.test"] != 4 {
		t.Errorf("requests by host %v, want in.test's robots.txt and 3 pages", hosts)
	}
}
