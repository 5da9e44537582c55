package node

import (
	"math"
	"sync"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// Status is a node's view of itself and its neighbourhood, served as JSON
// at /status and printed by `swarmcrawl status`.
type Status struct {
	PeerID      string     `json:"peer_id"`
	RingID      string     `json:"ring_id"`
	Addrs       []string   `json:"addrs"`
	API         string     `json:"api"`
	Uptime      string     `json:"uptime"`
	Predecessor *PeerInfo  `json:"predecessor,omitempty"`
	Successors  []PeerInfo `json:"successors"`
	Fingers     int        `json:"fingers"`
	// Range is the arc of task keys this node's first position owns:
	// (From, To], the node's whole arc with one position.
	Range RangeInfo `json:"range"`
	// Positions are the node's ring positions (Config.VNodes), each with
	// its arc, position 0 first; RingShare the fraction of the ring
	// their arcs cover together.
	Positions []PositionInfo `json:"positions"`
	RingShare float64        `json:"ring_share"`
	// OwnedHosts counts the distinct ring keys of the URLs the node holds
	// in the ranges it claims: its hosts with host keys (--key host),
	// its domains with domain keys. It is counted at most every
	// ownedHostsEvery.
	OwnedHosts int64 `json:"owned_hosts"`
	// Isolated: the node had neighbours and none answers (ring.State.Isolated).
	Isolated bool `json:"isolated,omitempty"`
	// Seen counts URLs in the seen set; Pages fetched pages in the store.
	Seen  int64 `json:"seen"`
	Pages int64 `json:"pages"`
	// Outbox counts discovered links waiting for delivery to their owner.
	Outbox         int     `json:"outbox"`
	Routed         int64   `json:"routed"`
	Lookups        int64   `json:"lookups"`
	MeanLookupHops float64 `json:"mean_lookup_hops"`
	SendErrors     int64   `json:"send_errors"`
	// RoutePasses counts the delivery loop's passes over the outbox,
	// RouteBatches their batches (one per owning node), and
	// RoutePassMS is a pass's mean time in milliseconds: a fetched page's
	// done mark waits for the pass that settles its links.
	RoutePasses  int64       `json:"route_passes"`
	RouteBatches int64       `json:"route_batches"`
	RoutePassMS  float64     `json:"route_pass_ms"`
	Crawl        crawl.Stats `json:"crawl"`
	// Shard is the node's replication and ownership state.
	Shard ShardStatus `json:"shard"`
	// Delegation counts the fetches of hot hosts handed to helpers and
	// done for other owners.
	Delegation DelegationStatus `json:"delegation"`
	// Disk is the free space of the store's disk; while it is low the
	// node accepts no new URLs.
	Disk DiskStatus `json:"disk"`
	// Scope is the crawl's scope and what this node refused or dropped
	// as out of it.
	Scope ScopeStatus `json:"scope"`
	// Resources reports what the node bounds to keep its memory in hand.
	Resources ResourceStatus `json:"resources"`
	// NAT reports the node's reachability, relay reservations and hole
	// punching.
	NAT NATStatus `json:"nat"`
	// LostCaptures reports the watch over the peers holding this node's
	// captures, and the URLs fetched again because theirs were gone.
	LostCaptures LostCaptureStatus `json:"lost_captures"`
	// DoneMarks reports the done marks only this node holds so far.
	DoneMarks DoneMarkStatus `json:"done_marks"`
}

// DoneMarkStatus reports the done marks (the records of fetched URLs) this
// node holds alone: a mark waits for the links found on its page to be
// settled with their owners, then for the next heartbeat to take it to
// the replicas. Were the node killed now, the range's next owner would
// fetch those URLs again.
type DoneMarkStatus struct {
	// WaitingLinks counts the marks waiting for their pages' links;
	// Unsent the marks and host states waiting for a heartbeat or riding
	// one.
	WaitingLinks int   `json:"waiting_links"`
	Unsent       int64 `json:"unsent"`
	// OldestMS is how long ago, in milliseconds, the oldest of them was
	// finished; 0 with none.
	OldestMS int64 `json:"oldest_ms"`
}

// DiskStatus reports the free space of the disk that holds the store,
// against the threshold below which the node accepts no new URLs
// (Config.Store.MinFreeBytes, --min-free-disk).
type DiskStatus struct {
	// FreeBytes is the space the store may still use; MinFreeBytes the
	// threshold (0: the check is off).
	FreeBytes    uint64 `json:"free_bytes"`
	MinFreeBytes uint64 `json:"min_free_bytes"`
	// Low is set while FreeBytes is below MinFreeBytes: the node refuses
	// new URLs (their senders keep them and retry), and still answers
	// duplicates, crawls what it accepted and stores replicas.
	Low bool `json:"low"`
	// Refused counts new URLs refused for want of space (a URL its sender
	// retries counts again).
	Refused int64 `json:"refused"`
	// Error is why the free space could not be read; the node then
	// accepts as if the check were off.
	Error string `json:"error,omitempty"`
}

func (n *Node) diskStatus() DiskStatus {
	d := n.db.DiskSpace()
	s := DiskStatus{FreeBytes: d.Free, MinFreeBytes: d.MinFree, Low: d.Low, Refused: n.queue.diskRefused.Load()}
	if d.Err != nil {
		s.Error = d.Err.Error()
	}
	return s
}

// ScopeStatus reports the crawl's scope (--scope, --scope-include,
// --scope-exclude) and what fell outside it here.
type ScopeStatus struct {
	// Mode is any, seed-hosts or seed-domains; Include and Exclude the
	// URL patterns.
	Mode    string   `json:"mode"`
	Include []string `json:"include,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
	// OutOfScope counts the URLs this node refused as their owner, by
	// reason: not_seed_host, not_seed_domain, excluded, not_included,
	// unauthorized_seed (a seed for a host out of scope without a
	// signature of a seeder this node accepts). A URL its senders offer
	// again counts again.
	OutOfScope map[string]int64 `json:"out_of_scope"`
	// Dropped counts queued tasks dropped before any request because they
	// were out of scope (records a peer handed over, or a scope narrowed
	// since they were accepted).
	Dropped int64 `json:"dropped"`
	// SeedMarksRefused counts the seed marks (of routed tasks and of
	// records peers handed over) this node did not honour: no signature,
	// one that does not verify over the URL, or a signer it does not
	// accept. Such a URL is taken as a link, such a record stored
	// unmarked.
	SeedMarksRefused int64 `json:"seed_marks_refused"`
}

func (n *Node) scopeStatus(c crawl.Stats) ScopeStatus {
	cfg := n.crawler.Scope().Config()
	return ScopeStatus{Mode: cfg.Mode.String(), Include: cfg.Include, Exclude: cfg.Exclude,
		OutOfScope: n.scope.OutOfScope(), Dropped: c.ScopeDropped, SeedMarksRefused: n.seeds.refused.Load()}
}

// ResourceStatus reports the node's bounds on what peers hand it and on
// its own queues.
type ResourceStatus struct {
	// TasksRefused and SeedsRefused count requests refused because their
	// sender had spent its quota (it was told when to retry);
	// QuotaPeers is how many peers' quotas are remembered.
	TasksRefused int64 `json:"tasks_refused"`
	SeedsRefused int64 `json:"seeds_refused"`
	QuotaPeers   int   `json:"quota_peers"`
	// Throttled counts this node's task batches that owners refused for
	// now (its quota there was spent); they wait in the outbox.
	Throttled int64 `json:"throttled"`
	// OutboxInMemory and OutboxSpilled split the outbox: tasks held in
	// memory, and tasks beyond the memory bound waiting in the store.
	OutboxInMemory int `json:"outbox_in_memory"`
	OutboxSpilled  int `json:"outbox_spilled"`
	// LinksDeliveredLately counts links not sent to their owners again
	// because an owner settled them lately by as short a path.
	LinksDeliveredLately int64 `json:"links_delivered_lately"`
	// ProtectedPeers is how many ring neighbours' connections are kept
	// from the connection manager's trimming.
	ProtectedPeers int `json:"protected_peers"`
}

func (n *Node) resourceStatus() ResourceStatus {
	return ResourceStatus{
		TasksRefused:   n.taskQuota.refused.Load(),
		SeedsRefused:   n.seedQuota.refused.Load(),
		QuotaPeers:     n.taskQuota.remembered() + n.seedQuota.remembered(),
		Throttled:      n.router.Stats().Throttled,
		OutboxInMemory: n.outbox.InMemory(),
		OutboxSpilled:  n.outbox.Spilled(),
		ProtectedPeers: n.neighbours.Len(),

		LinksDeliveredLately: n.outbox.Dropped(),
	}
}

// DelegationStatus reports fetch delegation of hot hosts: tasks and
// batches this node handed to helpers as an owner, and did for other
// owners as a helper.
type DelegationStatus struct {
	// HotQueue is the queue length at which a host's fetches are
	// delegated; 0 when this node never delegates.
	HotQueue int `json:"hot_queue"`
	// Delegated counts tasks helpers fetched for this node, Helped tasks
	// this node fetched for other owners, DelegateFails delegated batches
	// that failed after they were sent (their tasks are fetched again).
	Delegated     int64 `json:"delegated"`
	Helped        int64 `json:"helped"`
	DelegateFails int64 `json:"delegate_fails"`
	// BatchesSent counts batches a helper took; NoHelper batches no
	// helper took (fetched locally); SendFails batches lost in transit
	// or answered with a malformed reply.
	BatchesSent int64 `json:"batches_sent"`
	NoHelper    int64 `json:"no_helper"`
	SendFails   int64 `json:"send_fails"`
	// BatchesServed counts batches fetched for other owners; Refused
	// batches refused (malformed, or from a node this one does not know as
	// the host's owner); Busy batches turned away for lack of a slot or
	// as busier than their owner; Trimmed batches taken in part, the
	// rest left to the owner as this node would have been busier than it
	// (route.WorthSize).
	BatchesServed int64 `json:"batches_served"`
	Refused       int64 `json:"refused"`
	Busy          int64 `json:"busy"`
	Trimmed       int64 `json:"trimmed"`
}

func (n *Node) delegationStatus(c crawl.Stats) DelegationStatus {
	d := DelegationStatus{Delegated: c.Delegated, Helped: c.Helped, DelegateFails: c.DelegateFails}
	if n.delegator != nil {
		d.HotQueue = n.crawlCfg.HotQueue
		d.BatchesSent = n.delegator.sent.Load()
		d.NoHelper = n.delegator.noHelper.Load()
		d.SendFails = n.delegator.sendFails.Load()
	}
	if n.helper != nil {
		d.BatchesServed = n.helper.served.Load()
		d.Refused = n.helper.refused.Load()
		d.Busy = n.helper.busy.Load()
		d.Trimmed = n.helper.trimmed.Load()
	}
	return d
}

// ShardStatus reports the key ranges a node holds as owner, with their
// epochs, and the counters of replication, failover and handoff.
type ShardStatus struct {
	Replicas int         `json:"replicas"`
	Claims   []ClaimInfo `json:"claims"`
	// Releasing are ranges being handed to their new owner.
	Releasing []ClaimInfo `json:"releasing,omitempty"`
	// LeaseValid is false while the first successor (or, when it
	// refuses, a quorum of the replicas) has not confirmed the node's
	// claims recently; the node then neither fetches nor accepts.
	LeaseValid bool `json:"lease_valid"`
	// Degraded is set while new URLs are acknowledged without every
	// replica holding them (a replica is slow or unreachable).
	Degraded       bool  `json:"degraded"`
	DegradedWrites int64 `json:"degraded_writes"`
	// StaleRejections counts this node's writes that replicas refused
	// because another node holds the range at a higher epoch.
	StaleRejections int64 `json:"stale_rejections"`
	// RejectedWrites counts writes this node refused for a stale epoch.
	RejectedWrites int64 `json:"rejected_writes"`
	Promotions     int64 `json:"promotions"`
	HandoffsOut    int64 `json:"handoffs_out"`
	HandoffsIn     int64 `json:"handoffs_in"`
	MergesIn       int64 `json:"merges_in"`
	Pulls          int64 `json:"pulls"`
	// Implausible counts claims, handoffs and merges refused because
	// their sender could not own the range in this node's view of the
	// ring; FutureEpochs the epochs refused or dropped for running more
	// than shard.Config.MaxClockSkew ahead of this node's clock. Either
	// growing steadily means a peer forges ownership, or a clock is off.
	Implausible  int64 `json:"implausible"`
	FutureEpochs int64 `json:"future_epochs"`
	// Witnessed counts handoff senders this node's view of the ring could
	// not judge and one of their successors vouched for; Rerouted the
	// ranges this node gave up without a handoff, their owner having taken
	// them over, sending their pending URLs as tasks instead.
	Witnessed int64 `json:"witnessed"`
	Rerouted  int64 `json:"rerouted"`
	// Unplaced counts this node's lookups that found a sender of claims,
	// handoffs or merges not in the ring at its own ID (a stranger
	// squatting a key, or a node whose join had not settled yet); its
	// messages are refused.
	Unplaced int64 `json:"unplaced"`
	// Issue 29's watch on owners: HeldFor counts the URLs senders gave
	// this node to hold for its predecessor because the predecessor's
	// acknowledgement came without its replicas' receipts, and
	// HeldForwarded the held URLs it pushed to that predecessor, which
	// took them; Watching the
	// hosts this node holds pending URLs of for a predecessor, and
	// WatchFetches the URLs it took over to fetch itself, their owner
	// having neither fetched nor explained them within
	// shard.Config.WatchTimeout.
	HeldFor       int64 `json:"held_for_owner"`
	HeldForwarded int64 `json:"held_forwarded"`
	Watching      int64 `json:"watching"`
	WatchFetches  int64 `json:"watch_fetches"`
}

// ClaimInfo is one claimed range: (From, To] at Epoch, held by Owner.
type ClaimInfo struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Epoch uint64 `json:"epoch"`
	Owner string `json:"owner"`
}

func claimInfos(cs []shard.Claim) []ClaimInfo {
	out := make([]ClaimInfo, 0, len(cs))
	for _, c := range cs {
		out = append(out, ClaimInfo{From: c.Range.From.String(), To: c.Range.To.String(), Epoch: c.Epoch.N, Owner: c.Epoch.Owner})
	}
	return out
}

// shardStats sums the positions' shard managers' stats: their claims
// together, the lease valid when every position's is.
func (n *Node) shardStats() shard.Stats {
	var st shard.Stats
	st.LeaseValid = true
	for _, p := range n.pos {
		s := p.shard.Stats()
		st.Claims = append(st.Claims, s.Claims...)
		st.Releasing = append(st.Releasing, s.Releasing...)
		st.LeaseValid = st.LeaseValid && s.LeaseValid
		st.Degraded = st.Degraded || s.Degraded
		st.DegradedWrites += s.DegradedWrites
		st.StaleRejections += s.StaleRejections
		st.RejectedWrites += s.RejectedWrites
		st.Promotions += s.Promotions
		st.HandoffsOut += s.HandoffsOut
		st.HandoffsIn += s.HandoffsIn
		st.MergesIn += s.MergesIn
		st.Pulls += s.Pulls
		st.Implausible += s.Implausible
		st.FutureEpochs += s.FutureEpochs
		st.Witnessed += s.Witnessed
		st.Rerouted += s.Rerouted
		st.Unplaced += s.Unplaced
		st.Watching += s.Watching
		st.WatchFetches += s.WatchFetches
		st.WatchedIn += s.WatchedIn
		st.HeldFor += s.HeldFor
		st.HeldForwarded += s.HeldForwarded
		st.Unsent += s.Unsent
		st.UnsentSince = earliest(st.UnsentSince, s.UnsentSince)
	}
	return st
}

// doneMarkStatus reports the done marks waiting in the node's progress
// queue and in its positions' shard managers (st).
func (n *Node) doneMarkStatus(st shard.Stats) DoneMarkStatus {
	ds := DoneMarkStatus{WaitingLinks: n.progressQ.Waiting(), Unsent: st.Unsent}
	if oldest := earliest(n.progressQ.Oldest(), st.UnsentSince); !oldest.IsZero() {
		ds.OldestMS = max(time.Since(oldest).Milliseconds(), 1)
	}
	return ds
}

// earliest returns the earlier of two times, zero standing for none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

func (n *Node) shardStatus(st shard.Stats) ShardStatus {
	return ShardStatus{
		Replicas:        n.shardCfg.Replicas,
		Claims:          claimInfos(st.Claims),
		Releasing:       claimInfos(st.Releasing),
		LeaseValid:      st.LeaseValid,
		Degraded:        st.Degraded,
		DegradedWrites:  st.DegradedWrites,
		StaleRejections: st.StaleRejections,
		RejectedWrites:  st.RejectedWrites,
		Promotions:      st.Promotions,
		HandoffsOut:     st.HandoffsOut,
		HandoffsIn:      st.HandoffsIn,
		MergesIn:        st.MergesIn,
		Pulls:           st.Pulls,
		Implausible:     st.Implausible,
		FutureEpochs:    st.FutureEpochs,
		HeldFor:         st.HeldFor,
		HeldForwarded:   st.HeldForwarded,
		Watching:        st.Watching,
		WatchFetches:    st.WatchFetches,
		Witnessed:       st.Witnessed,
		Rerouted:        st.Rerouted,
		Unplaced:        st.Unplaced,
	}
}

// PeerInfo names a ring neighbour and says how the node is connected to
// it.
type PeerInfo struct {
	PeerID string `json:"peer_id"`
	RingID string `json:"ring_id"`
	// Conn is direct, relayed (through a circuit relay, limited: the
	// node's own protocols wait for a direct connection) or none; empty
	// for the node itself.
	Conn string `json:"conn,omitempty"`
}

// RangeInfo is an owned arc of the ring and its share of the whole ring.
type RangeInfo struct {
	From  string  `json:"from"`
	To    string  `json:"to"`
	Share float64 `json:"share"`
}

// PositionInfo is one of the node's ring positions: its address (the
// peer ID, then /INDEX for every position but the first), its ring ID and
// the arc it owns.
type PositionInfo struct {
	Addr  string    `json:"addr"`
	Range RangeInfo `json:"range"`
}

// arcOf is the arc a ring member owns as it knows it: (predecessor,
// self], the whole ring without a predecessor.
func arcOf(st ring.State) RangeInfo {
	self := st.Self
	from := self.ID
	if !st.Predecessor.IsZero() {
		from = st.Predecessor.ID
	}
	share := 1.0
	if from != self.ID {
		share = float64(uint64(self.ID-from)) / math.Exp2(64)
	}
	return RangeInfo{From: from.String(), To: self.ID.String(), Share: share}
}

// ownedHostsEvery bounds how often Status counts the owned hosts: the
// count reads every record the node claims.
const ownedHostsEvery = 5 * time.Second

// ownedHostsCache is the last count of owned hosts.
type ownedHostsCache struct {
	mu    sync.Mutex
	at    time.Time
	count int64
}

// ownedHosts counts the distinct ring keys of the shard records in the
// node's active claims, or returns the last count if it is recent.
func (n *Node) ownedHosts(claims []shard.Claim) int64 {
	c := &n.owned
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < ownedHostsEvery {
		return c.count
	}
	var count int64
	for _, cl := range claims {
		last, first := uint64(0), true
		err := n.db.ScanShard(uint64(cl.Range.From), uint64(cl.Range.To), func(r store.ShardRecord) error {
			if first || r.Key != last {
				count++
			}
			last, first = r.Key, false
			return nil
		})
		if err != nil {
			n.log.Warn("counting owned hosts", "err", err)
			return c.count
		}
	}
	c.at, c.count = time.Now(), count
	return count
}

func peerInfo(p ring.Peer) PeerInfo { return PeerInfo{PeerID: p.Addr, RingID: p.ID.String()} }

// Status reports the node's current view.
func (n *Node) Status() Status {
	st := n.ring.State()
	self := st.Self
	rs := n.router.Stats()
	shardSt := n.shardStats()
	s := Status{
		PeerID:  n.host.ID().String(),
		RingID:  self.ID.String(),
		Addrs:   n.Addrs(),
		API:     n.apiAddr,
		Uptime:  time.Since(n.started).Round(time.Second).String(),
		Fingers: len(st.Fingers),
		Seen:    n.db.SeenCount(),
		Pages:   n.db.PageCount(),
		Outbox:  n.outbox.Pending(),
		Routed:  rs.Routed,
		Lookups: rs.Lookups,
		Crawl:   n.crawler.Stats(),
		Shard:   n.shardStatus(shardSt),
		Disk:    n.diskStatus(),
	}
	s.SendErrors = rs.SendErrors
	s.RoutePasses, s.RouteBatches = rs.Passes, rs.Batches
	if rs.Passes > 0 {
		s.RoutePassMS = float64(rs.PassTime) / float64(time.Millisecond) / float64(rs.Passes)
	}
	s.Isolated = st.Isolated
	s.Delegation = n.delegationStatus(s.Crawl)
	s.Scope = n.scopeStatus(s.Crawl)
	s.Resources = n.resourceStatus()
	s.NAT = n.natStatus()
	s.LostCaptures = n.lost.Status()
	s.DoneMarks = n.doneMarkStatus(shardSt)
	if s.Lookups > 0 {
		s.MeanLookupHops = float64(rs.LookupHops) / float64(s.Lookups)
	}
	for _, p := range st.Successors {
		pi := peerInfo(p)
		pi.Conn = n.connKind(p)
		s.Successors = append(s.Successors, pi)
	}
	if !st.Predecessor.IsZero() {
		pi := peerInfo(st.Predecessor)
		pi.Conn = n.connKind(st.Predecessor)
		s.Predecessor = &pi
	}
	s.Range = arcOf(st)
	for i, p := range n.pos {
		ps := st
		if i > 0 {
			ps = p.ring.State()
		}
		pi := PositionInfo{Addr: ps.Self.Addr, Range: arcOf(ps)}
		s.Positions = append(s.Positions, pi)
		s.RingShare += pi.Range.Share
	}
	s.RingShare = min(s.RingShare, 1)
	s.OwnedHosts = n.ownedHosts(shardSt.Claims)
	return s
}
