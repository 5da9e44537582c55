package frontier

import (
	"errors"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
)

// None, set on a Config field that documents it, turns off what the field
// sets, where "off" is a choice distinct from the default: a zero field
// always means the default.
const None = -1

// Config configures a Frontier. Every field has a default that a zero
// value stands for; start from a zero Config or from DefaultConfig.
type Config struct {
	// Delay is the least time between the moment a host answered one
	// request (its response headers arrived; for a request that got no
	// response, the moment it failed) and the start of the next (default
	// 1s). A larger robots.txt Crawl-delay wins. None (any negative
	// value): no pause at all, for benchmarks and tests.
	Delay time.Duration
	// LeaseAhead is how long before a host's next allowed request the
	// frontier may lease it (default 5ms), so that the holder does what
	// comes before a request (robots.txt rules, the URL's metadata, the
	// ownership check) during the gap and sends at its end (see
	// Lease.NotBefore) instead of after it. None (any negative value):
	// hosts are leased only once their next request is allowed.
	LeaseAhead time.Duration
	// MaxCrawlDelay caps the robots.txt Crawl-delay honoured (default 1m),
	// so one robots.txt cannot park a host for hours. None (any negative
	// value): Crawl-delay is not honoured, only Delay.
	MaxCrawlDelay time.Duration
	// MaxPagesPerHost is the page budget of a host (default 100,000): once
	// that many distinct pages of a host were reserved (see Lease.Reserve),
	// its other tasks are dropped. Recrawls do not count. The default
	// leaves all but the largest sites whole, and bounds what a spider
	// trap (an endless calendar, generated URLs) can cost: at the default
	// delay, about a day of its host's politeness slot and 100,000 page
	// records. None (any negative value): no budget.
	MaxPagesPerHost int
	// KeyMode is how ring keys are computed for the per-URL tables of the
	// store (default urls.KeyHost); it must be the node's.
	KeyMode urls.KeyMode
	// Clock returns the current time (default time.Now). It decides when
	// hosts are ready and tasks due; Next still waits on real timers, so
	// it must advance with real time there. Deterministic tests drive
	// TryNext with a fake one.
	Clock func() time.Time
}

// DefaultConfig returns the configuration of a polite crawler: one
// request per host and second at most, a Crawl-delay honoured up to a
// minute, 100,000 pages per host, host keys.
func DefaultConfig() Config {
	return Config{
		Delay:           time.Second,
		LeaseAhead:      5 * time.Millisecond,
		MaxCrawlDelay:   time.Minute,
		MaxPagesPerHost: 100_000,
		KeyMode:         urls.KeyHost,
		Clock:           time.Now,
	}
}

// withDefaults returns c with every zero field set from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Delay == 0 {
		c.Delay = d.Delay
	}
	if c.LeaseAhead == 0 {
		c.LeaseAhead = d.LeaseAhead
	}
	if c.MaxCrawlDelay == 0 {
		c.MaxCrawlDelay = d.MaxCrawlDelay
	}
	if c.MaxPagesPerHost == 0 {
		c.MaxPagesPerHost = d.MaxPagesPerHost
	}
	if c.Clock == nil {
		c.Clock = d.Clock
	}
	// KeyMode's zero is KeyHost, the default.
	return c
}

// validate reports the first problem with c as one readable line.
func (c *Config) validate() error {
	if c.KeyMode != urls.KeyHost && c.KeyMode != urls.KeyURL && c.KeyMode != urls.KeyDomain {
		return errors.New("unknown " + c.KeyMode.String())
	}
	return nil
}

// off returns 0 for None (any negative value) and d otherwise: what the
// frontier works with once defaults are in.
func off(d time.Duration) time.Duration { return max(d, 0) }
