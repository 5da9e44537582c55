package crawl

// Moving key ranges between nodes. The node decides what it owns; the
// crawler offers the hooks: an ownership gate before every request
// (Config.Owns), a callback for every task that reaches its end
// (Config.OnFinished), ReleaseRange to stop work on a range and clear its
// queue, HostSnapshot to carry a host's politeness state and robots.txt to
// its next owner (Snapshots, ReleaseRange, Restore), Resume to pick up
// parked hosts again, and Crawled to tell whether a URL was already
// crawled here.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// owns reports whether Config.Owns lets the crawler contact t's host for t.
func (c *Crawler) owns(t frontier.Task) bool {
	if c.cfg.Owns == nil {
		return true
	}
	ringKey, _ := c.keys(t.URL)
	return c.cfg.Owns(ringKey)
}

// ReleaseRange stops all work on tasks whose ring key satisfies in: no new task
// of them is handed out, and ReleaseRange waits (bounded by ctx) until none is
// in flight, fetch and processing included. It then deletes their queue
// and schedule entries from the store and the frontier's memory and
// returns the hosts' snapshots (NotBefore = the time the next request
// would have been allowed), for hosts with a NotBefore still ahead or a
// cached robots.txt. In host-key mode "in" is evaluated per host key; in
// URL-key mode per task's ring key (entries scanned and filtered), and the
// snapshots are those of the hosts that had entries released.
//
// in is called with the frontier's lock held: it must be quick and must
// not call the Crawler. Tasks of the range that are enqueued while ReleaseRange
// runs may survive it (the ownership gate, Config.Owns, keeps them from
// being fetched). When ctx ends first ReleaseRange returns its error and
// changes nothing. Host and robots.txt state stays in memory (it expires
// on its own), so a range released and taken back keeps its politeness.
func (c *Crawler) ReleaseRange(ctx context.Context, in func(ringKey uint64) bool) ([]HostSnapshot, error) {
	fc := c.frontier.Fence(in)
	defer fc.Lift() // after the snapshots: they show the range as it was dropped
	if err := fc.Wait(ctx); err != nil {
		return nil, fmt.Errorf("crawl: release: %w", err)
	}
	hosts, err := fc.Drop()
	if err != nil {
		return nil, fmt.Errorf("crawl: release: %w", err)
	}
	want := func(host string) bool { return hosts[host] }
	if _, perHost := urls.HostRingKey(probeHost, c.cfg.KeyMode); perHost {
		want = func(host string) bool { return hosts[host] || in(c.hostKey(host)) }
	}
	return c.snapshots(hosts, want, true), nil
}

// probeHost is any host name: HostRingKey of it says whether a key mode
// gives every URL of a host one ring key.
const probeHost = "x"

// hostKey is the key a host's politeness state travels under
// (HostSnapshot.Key): the ring key of all its URLs with host or domain
// keys, its host key with URL keys.
func (c *Crawler) hostKey(host string) uint64 {
	if k, ok := urls.HostRingKey(host, c.cfg.KeyMode); ok {
		return k
	}
	return urls.HostKey(host)
}

// Snapshots returns the current snapshots of hosts whose key (see
// HostSnapshot.Key) satisfies in: those the crawler has in memory with a
// NotBefore still ahead or a cached robots.txt. It reads no store.
func (c *Crawler) Snapshots(in func(key uint64) bool) []HostSnapshot {
	want := func(host string) bool { return in(c.hostKey(host)) }
	hosts := c.frontier.HostsWhere(func(uint64) bool { return true })
	for h := range hosts {
		if !want(h) {
			delete(hosts, h)
		}
	}
	return c.snapshots(hosts, want, false)
}

// snapshots builds the snapshots of hosts, and of the hosts whose robots.txt
// is cached and want accepts, leaving out those with nothing to hand over.
// readStore looks up the durable Retry-After of hosts not in memory.
func (c *Crawler) snapshots(hosts map[string]bool, want func(host string) bool, readStore bool) []HostSnapshot {
	now := c.now()
	robots := c.robots.latest(now, want)
	names := make([]string, 0, len(hosts)+len(robots))
	for h := range hosts {
		names = append(names, h)
	}
	for h := range robots {
		if !hosts[h] {
			names = append(names, h)
		}
	}
	sort.Strings(names)
	notBefore := c.frontier.NotBefore(names, readStore)
	var out []HostSnapshot
	for _, host := range names {
		s := HostSnapshot{Host: host, Key: c.hostKey(host), NotBefore: notBefore[host]}
		if e, ok := robots[host]; ok {
			s.Origin, s.RobotsStatus, s.RobotsFetched = e.origin, e.rules.status, e.rules.fetched
			if e.rules.packed != nil {
				body, err := unpackRobots(e.rules.packed)
				if err != nil {
					c.countError("other") // cannot happen: packed here
					s.Origin, s.RobotsStatus, s.RobotsFetched = "", 0, time.Time{}
				} else {
					s.Robots = body
				}
			}
		}
		if s.RobotsStatus == 0 && !s.NotBefore.After(now) {
			continue // nothing to hand over
		}
		if s.Check() != nil {
			continue // an odd host name: not worth shipping
		}
		out = append(out, s)
	}
	return out
}

// Restore installs snapshots from a previous owner: a host's next request
// waits until NotBefore (kept durably, like a Retry-After), and its
// robots.txt is used from the snapshot (respecting Config.RobotsTTL from
// RobotsFetched) instead of fetched again, unless this crawler has a
// robots.txt for the origin fetched at the same time or later. Invalid
// snapshots are skipped and counted as errors of kind "other". Clocks of
// nodes differ: a RobotsFetched ahead of this crawler's clock counts as
// now, and a NotBefore is capped at the longest wait the crawler itself
// would impose (MaxRetryAfter, or the delay after a request if longer).
func (c *Crawler) Restore(hosts []HostSnapshot) {
	now := c.now()
	latest := now.Add(max(c.cfg.MaxRetryAfter, c.frontier.Gap(c.cfg.MaxCrawlDelay)))
	valid := make([]frontier.HostNotBefore, 0, len(hosts))
	for _, s := range hosts {
		if s.Check() != nil {
			c.countError("other")
			continue
		}
		if s.RobotsFetched.After(now) {
			s.RobotsFetched = now
		}
		if s.NotBefore.After(latest) {
			s.NotBefore = latest
		}
		valid = append(valid, frontier.HostNotBefore{Host: s.Host, NotBefore: s.NotBefore})
		c.restoreRobots(s, now)
	}
	if err := c.frontier.Restore(valid); err != nil {
		c.countError("store")
	}
}

// restoreRobots caches the robots.txt of a checked snapshot (whose
// RobotsFetched is not ahead of now), unless it has expired or this
// crawler has one for the origin fetched at the same time or later.
func (c *Crawler) restoreRobots(s HostSnapshot, now time.Time) {
	if s.RobotsStatus == 0 {
		return
	}
	r := robotsFromResponse(s.RobotsStatus, s.Robots, c.token, s.RobotsFetched, c.cfg.RobotsTTL, c.robotsRetry)
	r.status, r.fetched = s.RobotsStatus, s.RobotsFetched
	if s.RobotsStatus >= 200 && s.RobotsStatus < 300 {
		r.packed = packRobots(s.Robots)
	}
	if now.Before(r.expires) {
		c.robots.restore(s.Origin, r, now)
	}
}

// Resume brings back the hosts Config.Owns parked whose key satisfies in,
// reloading their queues from the store, and schedules every host with a
// queue in the store that the frontier does not have in memory (one whose
// state could not be read when a task of its fell due, say). In URL-key mode
// every parked host comes back (its entries have many ring keys); Owns
// parks again those that are still not owned, without a request. Its cost
// grows with the number of parked hosts, not of queued ones: in is called
// once per parked host, and the store is not scanned.
func (c *Crawler) Resume(in func(ringKey uint64) bool) error {
	if err := c.frontier.Resume(in); err != nil {
		return fmt.Errorf("crawl: resume: %w", err)
	}
	return nil
}

// Crawled reports whether the store has a record of the URL (ring key, URL
// hash) being crawled here: its metadata (written when a fetch completes),
// a page record (written by the node's PageSink) or a dead letter. The
// node fetched it, or gave up on it. A URL dropped without a request
// (robots.txt, budget, trap) leaves no record and is not Crawled. Each
// check is a point lookup in the store.
func (c *Crawler) Crawled(ringKey, urlHash uint64) (bool, error) {
	if _, ok, err := c.db.URLMeta(ringKey, urlHash); err != nil {
		return false, fmt.Errorf("crawl: fetched: %w", err)
	} else if ok {
		return true, nil
	}
	if _, err := c.db.Page(ringKey, urlHash); err == nil {
		return true, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return false, fmt.Errorf("crawl: fetched: %w", err)
	}
	dead, err := c.isDead(ringKey, urlHash)
	if err != nil {
		return false, fmt.Errorf("crawl: fetched: %w", err)
	}
	return dead, nil
}

// isDead reports whether the store holds a dead letter for the URL.
func (c *Crawler) isDead(ringKey, urlHash uint64) (bool, error) {
	_, ok, err := c.db.DeadLetter(ringKey, urlHash)
	if err != nil {
		return false, fmt.Errorf("dead letter: %w", err)
	}
	return ok, nil
}

// Adopted is a URL another node fetched, with its metadata after that
// fetch: what a new owner needs to recrawl it on schedule, conditionally.
type Adopted struct {
	Task frontier.Task
	Meta store.URLMeta
}

// Adopt takes over URLs a previous owner fetched. Each one's metadata is
// stored unless the local copy is as recent, and, with recrawling on, its
// recrawl is scheduled at the newer copy's NextCrawl, all in one write. A
// zero Meta adopts whatever this node knows of the URL itself.
// Call it on a range with no schedule of its own (after ReleaseRange, as
// Activate does), or the URL is scheduled twice; the second copy is
// dropped when it comes up (see Lease.TakenTwice).
func (c *Crawler) Adopt(adopted []Adopted) error {
	var meta []store.URLMetaRecord
	var recrawls []frontier.Scheduled
	for _, a := range adopted {
		if _, err := urls.HostOf(a.Task.URL); err != nil {
			continue
		}
		ringKey, urlHash := c.keys(a.Task.URL)
		m := a.Meta
		m.URL = a.Task.URL
		local, ok := c.urlMeta(ringKey, urlHash)
		switch {
		case ok && !local.LastFetch.Before(m.LastFetch):
			m = local
		case m.LastFetch.IsZero():
			continue // never fetched: nothing to adopt
		default:
			meta = append(meta, store.URLMetaRecord{RingKey: ringKey, URLHash: urlHash, Meta: m})
		}
		if c.cfg.MaxRecrawl <= 0 || m.NextCrawl.IsZero() {
			continue
		}
		t := frontier.Task{URL: a.Task.URL, Depth: a.Task.Depth, Redirects: a.Task.Redirects, Recrawl: true}
		recrawls = append(recrawls, frontier.Scheduled{Task: t, At: m.NextCrawl})
	}
	if err := c.frontier.Adopt(meta, recrawls); err != nil {
		return fmt.Errorf("adopt %d urls: %w", len(adopted), err)
	}
	return nil
}

// noteFreshRobots remembers that host's robots.txt was just fetched.
func (c *Crawler) noteFreshRobots(host string) {
	c.freshMu.Lock()
	defer c.freshMu.Unlock()
	if c.freshRobots == nil {
		c.freshRobots = map[string]bool{}
	}
	c.freshRobots[host] = true
}

// TakeFreshSnapshots returns the snapshots of the hosts whose robots.txt
// was fetched since the last call, and forgets them: what a node sends its
// replicas so that whoever takes a host over after a crash reuses its
// robots.txt (and waits out its politeness clock) instead of asking again.
func (c *Crawler) TakeFreshSnapshots() []HostSnapshot {
	c.freshMu.Lock()
	hosts := c.freshRobots
	c.freshRobots = nil
	c.freshMu.Unlock()
	if len(hosts) == 0 {
		return nil
	}
	return c.snapshots(hosts, func(host string) bool { return hosts[host] }, false)
}
