package route

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// Hot hosts: fetch delegation (seed 000 §5). The owner of a host with a
// long queue keeps its control plane (the politeness lease, robots.txt,
// outcomes) and hands runs of the host's pages, fetch batches, to helpers:
// the first Config.Helpers machines of the successor list of the ring
// position that owns the host, in turn (Delegator). One batch of a host is
// out at a time, whichever helper has it, and a helper starts a batch's
// first request no sooner than the gap after the host's last request as
// the owner knew it when it sent the batch (HelpRequest.SinceLast, counted
// from the batch's arrival: its transit only lengthens the real pause), so
// the host never sees two requests closer than the gap, without
// synchronised clocks. A helper fetches only for an owner that precedes
// one of its positions within Config.Helpers machines and that its epoch table says
// holds the host's key (HelperAdmission.Admit); it checks both again while the batch
// runs (HelperAdmission.Still) and answers once the links found on the batch's
// pages are settled with their owners (Helper.Serve).
//
// The package knows neither the crawl engine nor the wire: a batch's
// request and reply are the caller's types (Req, Rep), carried by a
// FetchTransport; a node's is libp2p's /swarmcrawl/fetch/1.1.0 and the
// simulator's and the tests' is MemFetchNet.

// Delegation errors.
var (
	// ErrNoHelper: no helper could be asked (none known, none
	// connected, or the helper never got the batch); nothing was fetched.
	ErrNoHelper = errors.New("route: no helper can take the batch")
	// ErrHostBusy: a batch of the same host is out already; nothing was
	// sent.
	ErrHostBusy = errors.New("route: a batch of this host is out already")
	// ErrNotHelped: the helper refused the sender, which does not precede
	// one of its positions within Config.Helpers machines.
	ErrNotHelped = errors.New("route: sender is not an owner this node helps")
	// ErrNotVouched: the helper's epoch table does not say the sender
	// holds the batch's key.
	ErrNotVouched = errors.New("route: sender does not own the key as far as this node knows")
	// ErrHelperBusy: the helper declined the batch, busier than the
	// owner (Worth) or without room for it; it fetched nothing. A
	// transport reports it as a *Busy, which carries the helper's load.
	ErrHelperBusy = errors.New("route: helper declined the batch as busy")
)

// Busy is a helper's decline of a batch (busier than the owner, or no
// room), with the load it reported; it wraps ErrHelperBusy.
// Send records the load and asks the next helper.
type Busy struct{ Load int }

// Error implements error.
func (b *Busy) Error() string { return fmt.Sprintf("%v (load %d)", ErrHelperBusy, b.Load) }

// Unwrap makes errors.Is(err, ErrHelperBusy) hold.
func (b *Busy) Unwrap() error { return ErrHelperBusy }

// HelperOf returns the helper of turn among the first h machines, other
// than self's, of self's successor list succs (nearest first): successive
// turns go round those machines. It reports false when succs names no
// other machine.
func HelperOf(self ring.Peer, succs []ring.Peer, h int, turn uint64) (ring.Peer, bool) {
	cands := helpers(self, succs, h)
	if len(cands) == 0 {
		return ring.Peer{}, false
	}
	return cands[turn%uint64(len(cands))], true
}

// helpers returns the first position of each of the first h machines other
// than self's in succs.
func helpers(self ring.Peer, succs []ring.Peer, h int) []ring.Peer {
	h = max(h, 1)
	var out []ring.Peer
	for _, p := range succs {
		if p.IsZero() || p.Machine() == self.Machine() {
			continue
		}
		if slices.ContainsFunc(out, func(q ring.Peer) bool { return q.Machine() == p.Machine() }) {
			continue
		}
		out = append(out, p)
		if len(out) == h {
			break
		}
	}
	return out
}

// FetchTransport carries fetch batches to helpers: Req is a batch, Rep a
// helper's answer. An error wrapping ErrNoHelper means the helper never
// got the batch.
type FetchTransport[Req, Rep any] interface {
	// Connected reports whether to can be asked now without dialling.
	Connected(to ring.Peer) bool
	// Fetch sends req to helper to and returns its answer.
	Fetch(ctx context.Context, to ring.Peer, req Req) (Rep, error)
}

// Delegator is the owner's side: it sends each batch of a hot host to the
// next of the owning position's helpers, one batch of a host at a time.
type Delegator[Req, Rep any] struct {
	t FetchTransport[Req, Rep]
	h int
	// successors returns the node's position that holds a ring key and
	// its successor list, nearest first.
	successors func(key uint64) (self ring.Peer, succs []ring.Peer)

	turn atomic.Uint64
	mu   sync.Mutex
	out  map[uint64]struct{} // keys with a batch out

	// Load-aware spreading over helper slots (UseSlots, Choose): slots
	// finds a key's holder, slotCount is Config.HelperSlots, loads the
	// machines' last reported loads (Report) and what was sent them
	// since.
	slots     func(ctx context.Context, key uint64) (ring.Peer, error)
	slotCount int
	loads     map[string]int
	// own, size and trim, if set (UseLoad), give Send the owner's work,
	// a batch's pages and the batch cut to its first pages, for Choose's
	// load rule.
	own  func() int
	size func(Req) int
	trim func(Req, int) Req
}

// NewDelegator returns a Delegator over t that spreads batches over h
// helpers (Config.Helpers).
func NewDelegator[Req, Rep any](t FetchTransport[Req, Rep], h int, successors func(key uint64) (ring.Peer, []ring.Peer)) *Delegator[Req, Rep] {
	return &Delegator[Req, Rep]{t: t, h: max(h, 1), successors: successors, out: make(map[uint64]struct{})}
}

// Send hands req, a batch of the host with ring key key, to the next
// connected helper of the position that holds key and returns the helper
// and its answer. It refuses (ErrHostBusy) while another batch of key is
// out: requests to one host come from one helper at a time. A helper that
// did not take the batch (unreachable, it refused the sender, or it
// declined as busier: *Busy, whose load is recorded) fetched nothing, and
// the next is asked that the loads heard let take it (Worth); when none
// took it the error wraps ErrNoHelper. Any other error means the helper
// may have fetched.
func (d *Delegator[Req, Rep]) Send(ctx context.Context, key uint64, req Req) (ring.Peer, Rep, error) {
	var zero Rep
	if err := d.Begin(key); err != nil {
		return ring.Peer{}, zero, fmt.Errorf("delegate key %016x: %w", key, err)
	}
	defer d.End(key)
	own, size := -1, 0
	d.mu.Lock()
	ownf, sizef, trimf := d.own, d.size, d.trim
	d.mu.Unlock()
	if ownf != nil {
		// The batch's pages are out of the queue own counts, and still
		// this machine's until a helper takes them.
		size = sizef(req)
		own = ownf() + size
	}
	all := d.Candidates(ctx, key)
	var cands []ring.Peer
	var worth bool
	fit := size
	if ownf == nil {
		cands, worth = d.Choose(all, own, size)
	} else {
		cands, fit, worth = d.ChooseSize(all, own, size, min(MinBatch, size))
		if worth && fit < size && trimf != nil {
			// Its first pages only: the others stay with the owner.
			req = trimf(req, fit)
		}
	}
	if len(all) > 0 && !worth {
		return ring.Peer{}, zero, fmt.Errorf("delegate key %016x: no helper less loaded than this node (%d pages): %w", key, own, ErrNoHelper)
	}
	if len(cands) == 0 {
		return ring.Peer{}, zero, fmt.Errorf("delegate key %016x: no helper on another machine: %w", key, ErrNoHelper)
	}
	var last error
	for i, p := range cands {
		if !d.t.Connected(p) {
			continue
		}
		if i > 0 && !Worth(own, d.heard(p), fit) {
			// Choose weighed the first only: a later one that this owner
			// heard is not less loaded by two batches would decline it.
			continue
		}
		rep, err := d.t.Fetch(ctx, p, req)
		var busy *Busy
		switch {
		case err == nil:
			if i > 0 {
				d.sentTo(p, fit)
			}
			return p, rep, nil
		case errors.As(err, &busy):
			// Busier than this owner by its own count: its load is heard,
			// and the next helper, less loaded as far as this owner
			// knows, is asked at once rather than the owner fetching the
			// batch itself (issue 28: the owners that kept what busy
			// helpers declined were the busiest machines).
			d.Report(p, busy.Load)
			last = fmt.Errorf("delegate key %016x to %s: %w", key, p.Addr, err)
			continue
		case errors.Is(err, ErrNoHelper) || errors.Is(err, ErrNotHelped) || errors.Is(err, ErrNotVouched):
			// This helper fetched nothing: the next may take the batch.
			last = fmt.Errorf("delegate key %016x to %s: %w", key, p.Addr, err)
			continue
		default:
			// The helper may have fetched: no other may run the batch
			// before the owner's next turn on the host.
			return p, zero, fmt.Errorf("delegate key %016x to %s: %w", key, p.Addr, err)
		}
	}
	if last != nil {
		if !errors.Is(last, ErrNoHelper) {
			last = fmt.Errorf("%w: %w", last, ErrNoHelper)
		}
		return ring.Peer{}, zero, last
	}
	return ring.Peer{}, zero, fmt.Errorf("delegate key %016x: none of %d helpers connected: %w", key, len(cands), ErrNoHelper)
}

// HelperView is what a helper knows of the ring and of the claims.
type HelperView interface {
	// Machine is this node's machine (ring.Peer.Machine).
	Machine() string
	// Predecessors returns, for each of this node's positions, its ring
	// predecessors as far as it knows them, nearest first.
	Predecessors() [][]ring.Peer
	// Vouch reports whether this node's epoch table says that owner, a
	// ring position, holds key (shard.Manager.Vouch).
	Vouch(key uint64, owner string) bool
}

// HelperAdmission is the helper's defence: whom it fetches for.
type HelperAdmission struct {
	View HelperView
	// Machines bounds how far back a sender may be: within the first
	// Machines machines, other than this one, before one of this node's
	// positions (Config.Helpers).
	Machines int
	// Slots, if set, admits beyond the predecessors: a sender that this
	// node's own lookup says holds the host's key, when one of this
	// node's positions holds one of the host's SlotCount helper slots
	// (SlotKey, Config.HelperSlots). Nil: predecessors only.
	Slots SlotView
	// SlotCount is how many helper slots a host has (Config.HelperSlots).
	SlotCount int
}

// SlotView is what a helper needs to help an owner that is not its ring
// predecessor: its own answer to "who holds this key", and which keys its
// own positions hold.
type SlotView interface {
	// Owner returns the ring position that holds key by this node's own
	// lookup (Router.Owner: cached a few seconds).
	Owner(ctx context.Context, key uint64) (ring.Peer, error)
	// Holds reports whether one of this node's positions holds ring key
	// k now.
	Holds(k uint64) bool
}

// Admit returns the position of machine from that may have this node
// fetch a batch of the host with ring key key: one that precedes one of
// this node's positions within a.Machines machines and that the epoch
// table says holds key, or (a.Slots) one that this node's own lookup
// finds holding key while this node holds one of the host's helper
// slots. A stranger, a machine further back, a member asking for a key it
// does not hold, or any sender when this node holds none of the host's
// slots, is refused (ErrNotHelped, ErrNotVouched).
func (a HelperAdmission) Admit(ctx context.Context, from string, key uint64) (owner string, err error) {
	near := false
	for _, p := range a.near() {
		if p.Machine() != from {
			continue
		}
		near = true
		if a.View.Vouch(key, p.Addr) {
			return p.Addr, nil
		}
	}
	if a.Slots != nil {
		owner, err := a.slotOwner(ctx, from, key)
		if err == nil {
			return owner, nil
		}
		if !near {
			return "", err
		}
	}
	if !near {
		return "", fmt.Errorf("fetch batch from %s: %w", from, ErrNotHelped)
	}
	return "", fmt.Errorf("fetch batch from %s for key %016x: %w", from, key, ErrNotVouched)
}

// slotOwner admits from by the slot rule: this node holds one of key's
// helper slots and its own lookup finds a position of machine from
// holding key.
func (a HelperAdmission) slotOwner(ctx context.Context, from string, key uint64) (string, error) {
	if from == "" || from == a.View.Machine() {
		return "", fmt.Errorf("fetch batch from %q: %w", from, ErrNotHelped)
	}
	if !a.holdsSlot(key) {
		return "", fmt.Errorf("fetch batch from %s for key %016x: no helper slot of the host here: %w", from, key, ErrNotHelped)
	}
	p, err := a.Slots.Owner(ctx, key)
	if err != nil {
		return "", fmt.Errorf("fetch batch from %s for key %016x: looking the owner up: %w: %w", from, key, err, ErrNotVouched)
	}
	if p.Machine() != from {
		return "", fmt.Errorf("fetch batch from %s for key %016x: held by %s: %w", from, key, p.Addr, ErrNotVouched)
	}
	return p.Addr, nil
}

// holdsSlot reports whether one of this node's positions holds one of
// key's helper slots.
func (a HelperAdmission) holdsSlot(key uint64) bool {
	for i := range max(a.SlotCount, 1) {
		if a.Slots.Holds(SlotKey(key, i)) {
			return true
		}
	}
	return false
}

// Still reports whether owner still precedes one of this node's positions
// within a.Machines machines and holds key, or (a.Slots) still holds key
// by this node's lookup while this node holds one of the host's slots: a
// batch whose owner lost that is cut short.
func (a HelperAdmission) Still(ctx context.Context, key uint64, owner string) bool {
	if slices.ContainsFunc(a.near(), func(p ring.Peer) bool { return p.Addr == owner }) && a.View.Vouch(key, owner) {
		return true
	}
	if a.Slots == nil || !a.holdsSlot(key) {
		return false
	}
	p, err := a.Slots.Owner(ctx, key)
	return err == nil && p.Addr == owner
}

// near returns the positions within a.Machines machines before one of
// this node's positions.
func (a HelperAdmission) near() []ring.Peer {
	self := a.View.Machine()
	var out []ring.Peer
	for _, preds := range a.View.Predecessors() {
		var machines []string
		for _, p := range preds {
			if p.IsZero() {
				break
			}
			m := p.Machine()
			if m == self {
				continue
			}
			if !slices.Contains(machines, m) {
				if len(machines) == max(a.Machines, 1) {
					break
				}
				machines = append(machines, m)
			}
			out = append(out, p)
		}
	}
	return out
}

// LinkTaker is what a helper needs of its outbox: the ids of the links
// found on a page it fetched, and whether they are settled.
type LinkTaker interface {
	Links
	TakeLinks(page string) []uint64
}

// Helper is the helper's side of delegation around the caller's fetch.
type Helper struct {
	Admission HelperAdmission
	Links     LinkTaker
	// Lease asks owner (a ring position's address, or a machine's:
	// the first question goes to the batch's sender before admission
	// has named its position) how much longer it holds key
	// (shard.Ownership.LeaseLeft of whichever of the machine's
	// positions holds it, over the caller's transport): the helper
	// fetches only within that (HelperLease). Required.
	Lease func(ctx context.Context, owner string, key uint64) (time.Duration, error)
	// LeaseRenew is the least of the lease left when the helper asks
	// again (default 1 s; HelperLease.RenewBefore: three quarters of the
	// owner's last answer when that is more).
	LeaseRenew time.Duration
	// WatchPoll is how often Still is checked during a batch (default
	// 50 ms); SettleMax bounds the wait for a batch's links to settle
	// (default 5 s), checked every SettlePoll (default 25 ms).
	WatchPoll, SettleMax, SettlePoll time.Duration
}

// HelpRequest is a batch as the helper sees it.
type HelpRequest struct {
	// From is the sender's machine (the transport's word, not the
	// batch's).
	From string
	// Key is the host's ring key, Pages its pages in order.
	Key   uint64
	Pages []string
	// Gap is the batch's least time between two requests; SinceLast how
	// long before the owner sent the batch the host's last request ended,
	// as the owner knew it (zero: unknown, a full gap); Received when the
	// batch arrived; Deadline when the helper must have answered.
	Gap       time.Duration
	SinceLast time.Duration
	Received  time.Time
	Deadline  time.Time
}

// FirstRequest returns when the batch's first request may start at the
// earliest: the gap less what of it had passed when the owner sent the
// batch, counted from the batch's arrival. Every owner's batch waits at
// most a full gap.
func (r HelpRequest) FirstRequest() time.Time {
	return r.Received.Add(r.Gap - min(max(r.SinceLast, 0), r.Gap))
}

// Serve admits req while it asks the sender for its lease on the key,
// waits until the batch's first request may start (FirstRequest), then
// runs fetch under a context that ends at req.Deadline, when the owner
// answers that it holds the key no more, or as soon as the sender stops
// being an owner this node helps; meanwhile it asks the owner again
// before the lease runs out. until tells fetch when the lease, as last
// confirmed, ends: fetch starts no request after it (a request running
// then goes on, as the owner's own last request does). Last it waits for
// the links found on req.Pages to be settled. It returns fetch's error or
// the refusal or ErrNoLease (before any fetch), and whether the links are
// settled.
func (h *Helper) Serve(ctx context.Context, req HelpRequest, fetch func(ctx context.Context, until func() time.Time) error) (settled bool, err error) {
	if h.Lease == nil {
		return false, fmt.Errorf("fetch batch: helper has no lease source: %w", ErrNoLease)
	}
	ctx, cancel := context.WithDeadline(ctx, req.Deadline)
	defer cancel()
	// The owner's lease is asked of the sender's machine (every position
	// of a node answers for all of them) while the admission looks the
	// key's holder up: the batch waits for the slower of the two, not
	// both. A sender refused admission was only asked a question.
	lease := &guardedLease{}
	qctx, qcancel := context.WithCancel(ctx)
	defer qcancel()
	asked := make(chan error, 1)
	go func() { asked <- h.renew(qctx, lease, req.From, req.Key) }()
	owner, err := h.Admission.Admit(ctx, req.From, req.Key)
	if err != nil {
		qcancel()
		<-asked
		return false, err
	}
	if err := <-asked; err != nil {
		return false, err
	}
	// The previous batch of this host, at another helper maybe, ended
	// at least SinceLast before its owner sent this one.
	if d := time.Until(req.FirstRequest()); d > 0 {
		if err := sleep(ctx, d); err != nil {
			return true, fmt.Errorf("fetch batch: waiting the gap: %w", err)
		}
	}
	if lease.due(time.Now(), h.leaseRenew()) {
		if err := h.renew(ctx, lease, owner, req.Key); err != nil {
			return false, err
		}
	}
	stop := h.watch(ctx, cancel, lease, req.Key, owner)
	err = fetch(ctx, lease.until)
	stop()
	return h.settle(ctx, req.Pages), err
}

// guardedLease is a HelperLease the watch renews while fetch reads it.
type guardedLease struct {
	mu sync.Mutex
	l  HelperLease
}

func (g *guardedLease) until() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.l.Until()
}

func (g *guardedLease) due(now time.Time, least time.Duration) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.l.Due(now, g.l.RenewBefore(least))
}

func (g *guardedLease) allows(now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.l.Allows(now, 0)
}

func (g *guardedLease) renew(asked time.Time, left time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.l.Renew(asked, left)
}

func (h *Helper) leaseRenew() time.Duration {
	if h.LeaseRenew > 0 {
		return h.LeaseRenew
	}
	return time.Second
}

// renew asks owner for its lease on key, no longer than the lease the
// helper holds (if any is left; else up to ctx's end), and records the
// answer counted from when it asked. It fails with ErrNoLease when the
// owner answers that it holds none, or when no lease is left and the
// owner did not answer.
func (h *Helper) renew(ctx context.Context, lease *guardedLease, owner string, key uint64) error {
	asked := time.Now()
	qctx := ctx
	if lease.allows(asked) {
		var qcancel context.CancelFunc
		qctx, qcancel = context.WithDeadline(ctx, lease.until())
		defer qcancel()
	}
	left, err := h.Lease(qctx, owner, key)
	switch {
	case err == nil && left <= 0:
		return fmt.Errorf("fetch batch for key %016x: %s answered no lease: %w", key, owner, errLeaseRefused)
	case err == nil:
		lease.renew(asked, left)
		return nil
	case lease.allows(time.Now()):
		return nil // asked again at the next watch
	default:
		return fmt.Errorf("fetch batch for key %016x: asking %s its lease: %w: %w", key, owner, err, ErrNoLease)
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// watch asks the owner for its lease again while LeaseRenew (or more,
// HelperLease.RenewBefore) is left, so that fetch may go on starting
// requests, and cancels the batch as soon as the owner answers that it
// holds the key no more or owner stops being one this node helps. An
// unanswered question cancels nothing: fetch starts no request after the
// lease it has. The returned function stops the watch and waits for it.
func (h *Helper) watch(ctx context.Context, cancel context.CancelFunc, lease *guardedLease, key uint64, owner string) (stop func()) {
	poll := h.WatchPoll
	if poll <= 0 {
		poll = 50 * time.Millisecond
	}
	wctx, quit := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(poll)
		defer tick.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
			if lease.due(time.Now(), h.leaseRenew()) {
				err := h.renew(wctx, lease, owner, key)
				if wctx.Err() != nil {
					return // stopped: the batch is over
				}
				if errors.Is(err, errLeaseRefused) {
					cancel() // the owner holds the key no more
					return
				}
			}
			if !h.Admission.Still(wctx, key, owner) {
				cancel()
				return
			}
		}
	}()
	return func() {
		quit()
		<-done
	}
}

// settle waits until the links found on pages are settled, at most
// SettleMax or until ctx ends, and reports whether they are.
func (h *Helper) settle(ctx context.Context, pages []string) bool {
	var ids []uint64
	for _, p := range pages {
		ids = append(ids, h.Links.TakeLinks(p)...)
	}
	if len(ids) == 0 {
		return true
	}
	limit, poll := h.SettleMax, h.SettlePoll
	if limit <= 0 {
		limit = 5 * time.Second
	}
	if poll <= 0 {
		poll = 25 * time.Millisecond
	}
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for !h.Links.Settled(ids) {
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
		}
	}
	return true
}
