package node

import (
	"context"
	"log/slog"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// finishedURLs is the crawler's OnFinished: it makes the done record of
// each URL the crawler finished and hands it to the routing layer's
// Progress with the outbox entries of the links found on its page, which
// holds it until they are settled with their owners.
type finishedURLs struct {
	links    *outbox
	progress *route.Progress
	log      *slog.Logger
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
	f.progress.Finished(rec, f.links.TakeLinks(t.URL))
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
	finished *route.Progress
	shard    progressSink
	crawler  *crawl.Crawler
	log      *slog.Logger
}

// progressSink takes the crawler's progress for the replicas: the
// positions' shard managers (shard.Manager.ProgressSince).
type progressSink interface {
	ProgressSince(recs []shard.Record, hosts []shard.HostState, since time.Time) error
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
	ready, since := p.finished.TakeSettled()
	if len(ready) == 0 {
		return
	}
	if err := p.shard.ProgressSince(ready, nil, since); err != nil {
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
		err = p.shard.ProgressSince(nil, hosts, time.Now())
	}
	if err != nil {
		p.log.Warn("recording host states failed", "err", err)
	}
}
