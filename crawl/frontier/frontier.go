// Package frontier is the durable politeness scheduler of one crawler: the
// two-tier frontier of seed 001 (priority front queues, per-host back
// queues with a minimum interval), kept in the store so that memory stays
// flat however long the queues grow and a node killed with SIGKILL serves
// its in-flight tasks again when it restarts.
//
// Work leaves the frontier as a Lease on one host (Next, TryNext): at most
// one per host, and only once the host's politeness delay has passed. The
// lease records what its holder did (tasks kept, budget reserved, requests
// made, Retry-After, a deferral, a refusal by the ownership gate), and its
// End puts back whatever was not settled and sets the host's next turn
// from it: one exit, whatever path the holder took.
//
// The frontier knows hosts, ring keys and the store; it knows nothing of
// HTTP, robots.txt or the ring. Key ranges move between nodes through
// Fence (stop and drop a range), Resume, Restore and Adopt.
package frontier

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// hostBufLen is how many head entries of a host's queue are kept in memory.
// Memory is this times the number of hosts with work, whatever the length
// of their queues; a larger buffer only saves disk reads.
const hostBufLen = 8

// promoteBatch is how many due entries of the schedule are moved into the
// queue in one write.
const promoteBatch = 1024

// Frontier is the durable politeness scheduler of one node. Its queues live
// in the store (see store/queue.go): a back queue per host ordered by
// (priority, sequence), and a schedule of delayed tasks (retries, recrawls)
// ordered by due time. Only a few head entries and the politeness state of
// each host with work are kept in memory, so memory stays flat however long
// the queues grow.
//
// Priority is the front tier: within a host, seeds (depth 0) are served
// first, then recrawls and retries that are due, then discovered pages,
// shallower first (see Priority). Across hosts, a host is ready once its
// next-allowed time has passed; among ready hosts a seed goes first, then a
// host with a backlog (see hostQueue.tier), then the one whose head has the
// best priority, ties in the order the hosts became ready.
//
// A host has at most one request in flight: Next hands out a Lease only on
// a host that is not leased and whose next-allowed time is at most
// Config.LeaseAhead away, the lease says when its first request may start
// (NotBefore), and the host stays leased until Lease.End. End sets the
// next-allowed time from the moment the last request under the lease was
// answered, so the gap the server sees between answering one request and
// receiving the next is never shorter than the delay, however long the
// request took; the holder prepares its next request during that gap.
//
// A task handed out stays in the store until Complete records what became
// of it (fetched, dropped, rescheduled, dead-lettered), so a node that
// crashes serves its in-flight tasks again when it restarts on the same
// store. Delayed tasks move from the schedule into their host's queue when
// they are due. Which hosts the run that ended last contacted, and when, is
// not kept: on a store an earlier run wrote to, no host is contacted
// before its gap has passed since the frontier was made (the delay, or the
// host's Crawl-delay as the host's durable state or its lease knows it),
// in case that run's last request to it was under way when it ended.
type Frontier struct {
	db            *store.DB
	delay         time.Duration // 0 for None
	maxCrawlDelay time.Duration // 0 for None
	leaseAhead    time.Duration // 0 for None
	now           func() time.Time
	keyMode       urls.KeyMode
	budget        int64 // per-host page budget, 0 = unlimited
	// reopened is when this run started on a store an earlier run wrote
	// to, which may have contacted any host right up to then; zero on a
	// store this run created. No host is leased before its gap has passed
	// since (see hostLocked and Lease.NotBefore).
	reopened time.Time

	mu        sync.Mutex
	hosts     map[string]*hostQueue
	waiting   hostHeap // idle hosts with work, by next-allowed time
	ready     hostHeap // idle hosts whose time has come, by tier and head priority
	changed   chan struct{}
	seq       uint64 // heap tie-breaker: equal keys are served in arrival order
	counts    store.QueueCounts
	taken     int // entries handed out and not yet completed or put back
	inFlight  int // leased hosts
	nextDue   time.Time
	ops       int // operations since the last sweep of idle hosts
	storeErrs int // failed reads of the store, see StoreErrors

	// parked are the hosts whose hostQueue.parked is set, by name: all
	// Resume has to look at. orphans are the hosts (name to host key)
	// whose queue may be in the store while they are not in memory:
	// loading a host's state failed when a scheduled task of its moved
	// into the queue, or a range drop in URL-key mode kept entries of a
	// host not in memory. Resume brings them into memory.
	parked  map[string]*hostQueue
	orphans map[string]uint64

	// fences are the ring key sets of the range releases in progress: no
	// entry whose ring key one of them holds is handed out. fenceCh is
	// closed (and replaced) whenever a task or lease ends while there are
	// fences, to wake the releases waiting for their tasks in flight.
	fences  []*Fence
	fenceCh chan struct{}
}

// hostQueue is the in-memory part of one host's back queue and its
// politeness state.
type hostQueue struct {
	host string
	key  uint64
	// buf holds the first entries of the host's queue in the store, minus
	// those taken, in order; more is set when the store may hold entries
	// beyond them.
	buf   []store.QueueEntry
	more  bool
	taken []store.QueueEntry // handed out, still in the store
	// readTo, when readKnown is set, is where the last read of the head
	// ended: every entry of the store in neither buf nor taken sorts after
	// it, so the next read starts there instead of stepping over the
	// deletion markers of every entry completed before (see
	// store.QueueHeadAfter). Whatever could break that clears readKnown.
	readTo    store.QueueEntry
	readKnown bool
	// lease is the host's lease while one is out (busy is then set).
	lease *Lease

	nextAllowed time.Time
	busy        bool
	seq         uint64
	// contacted is set once a lease on the host made a request (its
	// robots.txt, first of all). Among hosts whose head is a seed, a
	// contacted one goes first: its robots.txt is in, and its first page
	// follows at once instead of behind every seeded host still waiting
	// for robots.txt (issue 31: the largest host's first page request came
	// 1.8 s after seeding on the 1,000-host web).
	contacted bool
	index     int // position in its heap, -1 when in none
	heap      *hostHeap

	state      store.HostState // budget and Retry-After, persisted
	stateDirty bool

	// parked is set when the ownership gate refused one of the host's
	// tasks (Lease.Park): the host stays out of the heaps, its queue in the
	// store, until Resume or a Push brings it back; Frontier.parked lists
	// it meanwhile (see setParkedLocked). held is set while a Fence holds
	// its head task; lifting the fence brings it back.
	parked, held bool

	// hot caches Lease.Backlog's answer for the host until hotUntil:
	// counting a long queue in the store on every lease would cost more
	// than the answer changes.
	hot      bool
	hotUntil time.Time
}

func (q *hostQueue) hasWork() bool { return len(q.buf) > 0 || q.more }

// forgetHead drops the in-memory head: the next read takes it from the
// start of the host's queue in the store, which may hold entries the
// memory never saw.
func (q *hostQueue) forgetHead() {
	q.buf, q.more, q.readKnown = nil, true, false
}

// New returns the frontier kept in db, resuming the queues stored there:
// tasks that were in flight when the last process stopped are queued again.
// A zero cfg field takes its default (see Config). While the frontier is
// in use, nothing else may remove entries from db's queue (a second
// frontier included): it removes the tasks it handed out as known to be
// there (store.QueueUpdate.RemoveKnown), so an entry removed behind its
// back would be counted out twice.
func New(db *store.DB, cfg Config) (*Frontier, error) {
	if db == nil {
		return nil, errors.New("frontier: nil store")
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("frontier config: %w", err)
	}
	f := &Frontier{
		db:            db,
		delay:         off(cfg.Delay),
		maxCrawlDelay: off(cfg.MaxCrawlDelay),
		leaseAhead:    off(cfg.LeaseAhead),
		now:           cfg.Clock,
		keyMode:       cfg.KeyMode,
		budget:        int64(max(cfg.MaxPagesPerHost, 0)),
		hosts:         make(map[string]*hostQueue),
		parked:        make(map[string]*hostQueue),
		orphans:       make(map[string]uint64),
		changed:       make(chan struct{}),
		fenceCh:       make(chan struct{}),
	}
	f.waiting.less = func(a, b *hostQueue) bool {
		if !a.nextAllowed.Equal(b.nextAllowed) {
			return a.nextAllowed.Before(b.nextAllowed)
		}
		return a.seq < b.seq
	}
	f.ready.less = func(a, b *hostQueue) bool {
		if ta, tb := a.tier(), b.tier(); ta != tb {
			return ta < tb
		}
		if a.buf[0].Priority != b.buf[0].Priority {
			return a.buf[0].Priority < b.buf[0].Priority
		}
		if a.tier() == 0 && a.contacted != b.contacted {
			return a.contacted
		}
		return a.seq < b.seq
	}
	if !db.Created() {
		f.reopened = f.now()
	}
	if err := f.load(); err != nil {
		return nil, err
	}
	return f, nil
}

// load rebuilds the in-memory state from the store.
func (f *Frontier) load() error {
	counts, err := f.db.QueueCounts()
	if err != nil {
		return fmt.Errorf("frontier: %w", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts = counts
	err = f.db.QueueHosts(func(head store.QueueEntry) error {
		host, err := urls.HostOf(head.URL)
		if err != nil {
			return fmt.Errorf("frontier: queued url %q: %w", urls.Truncate(head.URL, 80), err)
		}
		q, err := f.hostLocked(host, head.HostKey)
		if err != nil {
			return err
		}
		q.buf = append(q.buf, head)
		q.more = true
		f.scheduleLocked(q)
		return nil
	})
	if err != nil {
		return fmt.Errorf("frontier: resume queue: %w", err)
	}
	return f.refreshDueLocked()
}

// hostLocked returns the queue of host, creating it (and loading its
// durable state) when it is not in memory.
func (f *Frontier) hostLocked(host string, key uint64) (*hostQueue, error) {
	if q := f.hosts[host]; q != nil {
		return q, nil
	}
	st, _, err := f.db.Host(key)
	if err != nil {
		return nil, fmt.Errorf("frontier: host %s: %w", host, err)
	}
	st.HostKey, st.Host = key, host
	next := st.NotBefore
	if !f.reopened.IsZero() {
		next = latest(next, f.reopened.Add(f.Gap(st.CrawlDelay)))
	}
	q := &hostQueue{host: host, key: key, index: -1, state: st, nextAllowed: next}
	f.hosts[host] = q
	return q, nil
}

// refreshDueLocked reads the due time of the earliest scheduled entry.
func (f *Frontier) refreshDueLocked() error {
	due, ok, err := f.db.NextDue()
	if err != nil {
		return fmt.Errorf("frontier: %w", err)
	}
	f.nextDue = time.Time{}
	if ok {
		f.nextDue = due
	}
	return nil
}

// Gap is the pause the frontier enforces after a request to a host whose
// robots.txt asks for crawlDelay: the larger of the frontier's delay and
// crawlDelay capped at the maximum.
func (f *Frontier) Gap(crawlDelay time.Duration) time.Duration {
	return max(f.delay, min(crawlDelay, f.maxCrawlDelay))
}

// broadcastLocked wakes every waiting Next so each re-evaluates the heaps.
func (f *Frontier) broadcastLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// maybeSweepLocked forgets idle hosts whose delay has passed, so the map
// does not grow with every host ever crawled. Sweeping once per len(hosts)
// operations keeps the cost amortised constant.
func (f *Frontier) maybeSweepLocked() {
	f.ops++
	if f.ops < len(f.hosts) || f.ops < 1024 {
		return
	}
	f.ops = 0
	now := f.now()
	for h, q := range f.hosts {
		if !q.busy && !q.hasWork() && len(q.taken) == 0 && !q.stateDirty && !q.nextAllowed.After(now) {
			delete(f.hosts, h)
		}
	}
}

// StoreErrors returns how many reads of the store failed while choosing
// tasks. Such a failure delays a host or a due task by a second; it loses
// nothing, since every task stays in the store.
func (f *Frontier) StoreErrors() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.storeErrs
}

// Len returns the number of queued tasks, not counting those handed out.
func (f *Frontier) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return max(0, int(f.counts.Queued)-f.taken)
}

// Counts returns the sizes of the durable tables, in-flight tasks included
// in Queued.
func (f *Frontier) Counts() store.QueueCounts {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts
}

// Idle reports whether nothing is queued or handed out and no retry is
// waiting in the schedule; recrawls that are not yet due do not count.
func (f *Frontier) Idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.counts.Queued > 0 || f.counts.Retrying > 0 {
		return false
	}
	return f.nextDue.IsZero() || f.nextDue.After(f.now())
}

// InFlight returns the number of leased hosts, which is the number of
// requests in progress.
func (f *Frontier) InFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inFlight
}

// HostStates returns how many hosts are ready for a request now (waiting
// for a worker) and how many wait for their politeness gap or a
// Retry-After.
func (f *Frontier) HostStates() (ready, waiting int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	ready = len(f.ready.items)
	for _, q := range f.waiting.items {
		if q.nextAllowed.After(now) {
			waiting++
		} else {
			ready++ // its turn has come; Next moves it when a worker asks
		}
	}
	return ready, waiting
}

// Hosts returns the number of hosts with queued or in-flight tasks.
func (f *Frontier) Hosts() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, q := range f.hosts {
		if q.busy || q.hasWork() || len(q.taken) > 0 {
			n++
		}
	}
	return n
}

// HostLoad is one host with work, as TopHosts reports it.
type HostLoad struct {
	Host    string `json:"host"`
	Fetched int64  `json:"fetched"` // pages fetched (its budget count)
	// Queued is how many tasks the frontier holds in memory for it;
	// More is set when the store holds more.
	Queued int  `json:"queued"`
	More   bool `json:"more"`
	// Hot is set when its queue was last found long enough to hand its
	// fetches out (see Lease.Backlog); Busy while a request is out.
	Hot  bool `json:"hot"`
	Busy bool `json:"busy"`
}

// TopHosts returns up to n hosts with work, the ones with the most pages
// fetched first.
func (f *Frontier) TopHosts(n int) []HostLoad {
	f.mu.Lock()
	out := make([]HostLoad, 0, len(f.hosts))
	for _, q := range f.hosts {
		if !q.busy && !q.hasWork() {
			continue
		}
		out = append(out, HostLoad{Host: q.host, Fetched: q.state.Fetched, Queued: len(q.buf), More: q.more, Hot: q.hot, Busy: q.busy})
	}
	f.mu.Unlock()
	slices.SortFunc(out, func(a, b HostLoad) int {
		if a.Fetched != b.Fetched {
			return cmp.Compare(b.Fetched, a.Fetched)
		}
		return strings.Compare(a.Host, b.Host)
	})
	return out[:min(n, len(out))]
}

// tier is a ready host's rank across hosts, before its head's priority: a
// seed first (it shows how much a host holds), then a host with a backlog
// (more queued than its in-memory head), then the rest. Under load, when
// more hosts are ready than there are workers, a host with a backlog is the
// one politeness makes the crawl wait for: every turn it waits for a
// worker is added to the crawl's end, while a host with a few pages left
// is done long before whichever way it is served. Within a tier, the head's
// priority decides (shallower first), then arrival.
func (q *hostQueue) tier() int {
	switch {
	case q.buf[0].Priority == 0:
		return 0
	case q.more:
		return 1
	}
	return 2
}
