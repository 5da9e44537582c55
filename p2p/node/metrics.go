package node

import (
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/swarmcrawl/swarmcrawl/crawl"
)

// The node's Prometheus metrics, served at /metrics on the API address in
// the Prometheus text format. One registry per node holds the node's own
// metrics (read from its counters at each scrape), the Go runtime's and the
// process's, and libp2p's (swarm, resource manager, hole punching), which
// the host registers there (p2p.HostConfig.Metrics).

// newRegistry returns the registry a node's host and metrics use.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// metricsHandler serves the registry.
func metricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
}

// nodeCollector reads the node's counters at each scrape.
type nodeCollector struct{ n *Node }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("swarmcrawl_"+name, help, labels, nil)
}

var (
	descResponses      = desc("responses_total", "HTTP responses received, by status class (robots.txt and helpers' batches included).", "class")
	descFetched        = desc("pages_fetched_total", "Pages fetched and handed to the store.")
	descBytes          = desc("fetched_bytes_total", "Body bytes received, as sent.")
	descLatency        = desc("fetch_latency_seconds", "Time from sending a request to reading its body.")
	descErrors         = desc("errors_total", "Failed fetches and other errors, by kind.", "kind")
	descQueue          = desc("queue_tasks", "Tasks in the frontier, by state.", "state")
	descHosts          = desc("hosts", "Hosts with work, by state: ready (their turn has come, waiting for a worker) or waiting (for their politeness gap).", "state")
	descOffered        = desc("urls_offered_total", "URLs offered to this node as their owner, by outcome: accepted (new), duplicate (seen before), rejected.", "outcome")
	descSeen           = desc("seen_urls", "URLs in the seen set.")
	descLookups        = desc("lookup_hops", "Ring hops of each owner lookup.")
	descOutbox         = desc("outbox_tasks", "Discovered links waiting for delivery to their owner.")
	descDegraded       = desc("replication_degraded_writes_total", "New URLs acknowledged without every replica holding them.")
	descDegradedNow    = desc("replication_degraded", "1 while new URLs are acknowledged without every replica holding them.")
	descLeaseValid     = desc("replication_lease_valid", "1 while the first successor confirms this node's claims; the node neither fetches nor accepts without it.")
	descClaims         = desc("claimed_ranges", "Key ranges this node claims.")
	descRobotsFetched  = desc("robots_fetched_total", "robots.txt requests made.")
	descRobotsCached   = desc("robots_cached_origins", "Origins whose robots.txt rules are cached.")
	descRobotsDenied   = desc("robots_denied_total", "Tasks dropped because robots.txt disallows them.")
	descWARC           = desc("warc_bytes_total", "Compressed bytes written to WARC files.")
	descTrapPatterns   = desc("trap_patterns", "URL patterns judged spider traps.")
	descDiskFree       = desc("disk_free_bytes", "Free space of the store's disk.")
	descDelegated      = desc("delegated_tasks_total", "Tasks of hot hosts fetched by a helper for this node.")
	descHelped         = desc("helped_tasks_total", "Tasks this node fetched for other owners.")
	descSitemaps       = desc("sitemaps_total", "Sitemap files and indexes read.")
	descSitemapRecrawl = desc("sitemap_recrawls_total", "URLs recrawled because their sitemap lastmod is later than their last fetch.")
	descOutOfScope     = desc("out_of_scope_total", "URLs this node refused as their owner because they are out of the crawl's scope, by reason: not_seed_host, not_seed_domain, excluded, not_included, unauthorized_seed.", "reason")
	descScopeDropped   = desc("scope_dropped_total", "Queued tasks dropped before any request because they are out of the crawl's scope.")
	descLostRequeued   = desc("lost_captures_requeued_total", "URLs queued again because every capture of theirs was held by peers gone longer than the capture grace period.")
	descRoutePasses    = desc("route_passes_total", "Passes of the delivery loop over the outbox.")
	descRouteBatches   = desc("route_batches_total", "Task batches those passes sent, one per owning node.")
	descRouteSeconds   = desc("route_pass_seconds_total", "Time those passes took, summed.")
	descDoneUnsafe     = desc("done_marks_unreplicated", "Done marks only this node holds: waiting for their pages' links to be settled or for a heartbeat to the replicas.")
	descDoneOldest     = desc("done_marks_oldest_seconds", "How long ago the oldest done mark only this node holds was finished; 0 with none.")
	descSeedsRefused   = desc("seed_marks_refused_total", "Seed marks (of routed tasks and of records from peers) not honoured: no signature by a seeder this node accepts over the URL.")
)

func (c nodeCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c nodeCollector) Collect(ch chan<- prometheus.Metric) {
	n := c.n
	st := n.Status()
	cs := st.Crawl
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for class, v := range cs.Responses {
		counter(descResponses, v, class)
	}
	counter(descFetched, cs.Fetched)
	counter(descBytes, cs.BytesFetched)
	ch <- latencyHistogram(cs.FetchLatency)
	for kind, v := range cs.ErrorsByKind {
		counter(descErrors, v, kind)
	}
	gauge(descQueue, float64(cs.Queued), "queued")
	gauge(descQueue, float64(cs.Scheduled), "scheduled")
	gauge(descQueue, float64(cs.InFlight), "in_flight")
	gauge(descHosts, float64(cs.HostsReady), "ready")
	gauge(descHosts, float64(cs.HostsWaiting), "waiting")
	offered := n.owner.Stats()
	counter(descOffered, offered.Accepted, "accepted")
	counter(descOffered, offered.Duplicates, "duplicate")
	counter(descOffered, offered.Rejected, "rejected")
	gauge(descSeen, float64(st.Seen))
	ch <- hopsHistogram(n.router)
	gauge(descOutbox, float64(st.Outbox))
	counter(descDegraded, st.Shard.DegradedWrites)
	gauge(descDegradedNow, boolValue(st.Shard.Degraded))
	gauge(descLeaseValid, boolValue(st.Shard.LeaseValid))
	gauge(descClaims, float64(len(st.Shard.Claims)))
	counter(descRobotsFetched, cs.RobotsFetched)
	gauge(descRobotsCached, float64(cs.RobotsCached))
	counter(descRobotsDenied, cs.RobotsDenied)
	counter(descWARC, n.archive.BytesWritten())
	gauge(descTrapPatterns, float64(cs.TrapPatterns))
	gauge(descDiskFree, float64(st.Disk.FreeBytes))
	counter(descDelegated, cs.Delegated)
	counter(descHelped, cs.Helped)
	counter(descSitemaps, cs.Sitemaps)
	counter(descSitemapRecrawl, cs.SitemapRecrawls)
	for reason, v := range st.Scope.OutOfScope {
		counter(descOutOfScope, v, reason)
	}
	counter(descScopeDropped, st.Scope.Dropped)
	counter(descLostRequeued, st.LostCaptures.Requeued)
	counter(descSeedsRefused, st.Scope.SeedMarksRefused)
	counter(descRoutePasses, st.RoutePasses)
	counter(descRouteBatches, st.RouteBatches)
	ch <- prometheus.MustNewConstMetric(descRouteSeconds, prometheus.CounterValue, n.router.Stats().PassTime.Seconds())
	gauge(descDoneUnsafe, float64(int64(st.DoneMarks.WaitingLinks)+st.DoneMarks.Unsent))
	gauge(descDoneOldest, float64(st.DoneMarks.OldestMS)/1000)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// latencyHistogram turns the crawler's latency counts into a Prometheus
// histogram (cumulative buckets, seconds).
func latencyHistogram(h crawl.Histogram) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Bounds))
	var cum uint64
	for i, b := range h.Bounds {
		cum += h.Counts[i]
		buckets[b.Seconds()] = cum
	}
	return prometheus.MustNewConstHistogram(descLatency, h.Count(), h.Sum.Seconds(), buckets)
}

// hopsHistogram turns the router's hop counts into a histogram with a
// bucket per hop count.
func hopsHistogram(r *route.Router) prometheus.Metric {
	buckets := make(map[float64]uint64, route.MaxHopsCounted)
	var cum, sum uint64
	for i, n := range r.Stats().Hops {
		v := uint64(n)
		cum += v
		sum += v * uint64(i)
		if i < route.MaxHopsCounted {
			buckets[float64(i)] = cum
		}
	}
	return prometheus.MustNewConstHistogram(descLookups, cum, float64(sum), buckets)
}
