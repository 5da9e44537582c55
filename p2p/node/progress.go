package node

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// finishedURLs holds the URLs the crawler finished until the links found
// on their pages are settled with their owners: a page the replicas learn
// is done while its links sit in this node's outbox would lose them if the
// node died for good, since the next owner would not fetch the page again.
type finishedURLs struct {
	links *outbox
	log   *slog.Logger

	mu   sync.Mutex
	wait []finishedURL
}

// finishedURL is a finished URL waiting for its page's links to be
// settled.
type finishedURL struct {
	rec   shard.Record
	links []uint64 // outbox entries of the page's links
}

// Add is the crawler's OnFinished: it hears that a URL needs no more fetching,
// with the URL's metadata after the fetch (nil when there was none).
func (f *finishedURLs) Add(t frontier.Task, key, urlHash uint64, meta *store.URLMeta) {
	rec := shard.Record{Key: key, Hash: urlHash, URL: t.URL, Depth: t.Depth, Redirects: t.Redirects, Done: true}
	// The URL's state after the fetch travels with the record, so that
	// whoever owns it next recrawls it on schedule, conditionally.
	if meta != nil {
		var err error
		if rec.Meta, rec.MetaVersion, err = recordState(*meta); err != nil {
			f.log.Warn("encoding a fetched URL's state failed", "url", t.URL, "err", err)
		}
	}
	links := f.links.TakeLinks(t.URL)
	f.mu.Lock()
	f.wait = append(f.wait, finishedURL{rec: rec, links: links})
	f.mu.Unlock()
}

// takeSettled returns (and forgets) the records of the finished URLs whose
// links are all settled.
func (f *finishedURLs) takeSettled() []shard.Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ready []shard.Record
	f.wait = slices.DeleteFunc(f.wait, func(d finishedURL) bool {
		if f.links.Settled(d.links) {
			ready = append(ready, d.rec)
			return true
		}
		return false
	})
	return ready
}

// progressInterval is how often finished URLs are released to the shard
// manager once their links are settled.
const progressInterval = 50 * time.Millisecond

// hostsEvery is how many progress ticks pass between two reports of the
// hosts whose robots.txt was fetched, and hostsBudget bounds the bytes of
// one report: host states ride on the heartbeat that renews the lease,
// which must stay small. Hosts past the budget are reported when their
// range is handed over; after a crash their next owner fetches robots.txt
// again.
const (
	hostsEvery  = 20
	hostsBudget = 1 << 20
)

// progress reports the crawler's progress to the shard manager, which
// replicates it asynchronously: finished URLs once their links are
// settled, and now and then the hosts whose robots.txt was fetched, so
// that the replicas hold the robots.txt of every host they may have to
// take over.
type progress struct {
	finished *finishedURLs
	shard    *shard.Manager
	crawler  *crawl.Crawler
	log      *slog.Logger
}

// Run reports progress until ctx ends.
func (p *progress) Run(ctx context.Context) {
	t := time.NewTicker(progressInterval)
	defer t.Stop()
	for tick := 1; ; tick++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.flushFinished()
		if tick%hostsEvery == 0 {
			p.flushHosts()
		}
	}
}

// flushFinished hands the shard manager every finished URL whose page's
// links are settled.
func (p *progress) flushFinished() {
	ready := p.finished.takeSettled()
	if len(ready) == 0 {
		return
	}
	if err := p.shard.Progress(ready, nil); err != nil {
		p.log.Warn("recording progress failed", "urls", len(ready), "err", err)
	}
}

// flushHosts hands the shard manager the hosts whose robots.txt was
// fetched since the last call.
func (p *progress) flushHosts() {
	hosts, err := hostStates(p.crawler.TakeFreshSnapshots())
	size := 0
	for i, h := range hosts {
		if size += len(h.Data) + len(h.Host); size > hostsBudget {
			hosts = hosts[:i]
			break
		}
	}
	if err == nil && len(hosts) > 0 {
		err = p.shard.Progress(nil, hosts)
	}
	if err != nil {
		p.log.Warn("recording host states failed", "err", err)
	}
}
