package route

import (
	"context"
	"slices"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// Verifiable acknowledgements (issue 29).
//
// An owner's "accepted" is its word alone: a dishonest one can
// acknowledge every task and drop it. With Config.Receipts the router
// believes an acknowledgement only with receipts (shard.Receipt) from
// the owner's replicas: signatures over the records of exactly the tasks
// it acknowledged (accepted or duplicate), by signers that are among the
// owner's first K successors on distinct machines as this node's own
// lookups find them (lookups of the key after the owner, then after each
// successor found, through the router's owner cache). Need of them are
// required (default 1: a replica that holds the records watches their
// progress, see shard's "Replicas watch progress", so one honest replica
// is enough to get them crawled).
//
// An acknowledgement without enough receipts counts as no acceptance:
// the router suspects the owner for SuspectFor and hands its tasks, now
// and while it is suspected, to the owner's first successor to hold as
// its replica (FallbackTransport, Owner.AcceptFor); that node watches
// them as it watches any record it holds for the owner, the owner pulls
// them at its next anti-entropy round, and the sender settles them. A
// successor that cannot hold them either hands them back, and they wait
// in the outbox as any undelivered task does.
//
// Cost: per batch, one sort and hash of the tasks' IDs, Need signature
// checks, and the owner-successor lookups the cache does not hold; per
// URL, its normal form and key, computed once.

// ReceiptCheck configures the router's check of receipts.
type ReceiptCheck struct {
	// URLs computes the tasks' record IDs as the owner does.
	URLs URLs
	// Verifier checks the signatures.
	Verifier shard.Verifier
	// Replicas is K: the signers must be among the owner's first K
	// successors on machines other than the owner's. Default 2.
	Replicas int
	// Need is how many valid receipts an acknowledgement needs (at most
	// the successors found). Default 1.
	Need int
	// SuspectFor is how long an owner whose acknowledgement lacked
	// receipts gets no tasks directly. Default 30 s.
	SuspectFor time.Duration
}

func (c ReceiptCheck) withDefaults() ReceiptCheck {
	if c.Replicas <= 0 {
		c.Replicas = 2
	}
	if c.Need <= 0 {
		c.Need = 1
	}
	if c.SuspectFor <= 0 {
		c.SuspectFor = 30 * time.Second
	}
	return c
}

// FallbackTransport is implemented by a Transport that can ask a node to
// hold tasks for owner, its predecessor whose acknowledgement was not
// vouched for (Owner.AcceptFor).
type FallbackTransport interface {
	SendFor(ctx context.Context, to, owner ring.Peer, tasks []Task) (Result, error)
}

// suspectMax bounds the owners remembered as suspect.
const suspectMax = 4096

// maxChecks bounds the receipt signatures checked for one position's part
// of a batch: what one answer could hold before batches went to machines.
const maxChecks = 16

// vouched reports whether res's receipts vouch for covered, the tasks
// owner acknowledged (its part of the batch).
func (r *Router) vouched(ctx context.Context, owner ring.Peer, covered []Task, res Result) bool {
	c := r.receipts
	if len(covered) == 0 {
		return true
	}
	ids := make([]shard.RecordID, 0, len(covered))
	for _, t := range covered {
		u, err := c.URLs.Normalize(t.URL)
		if err != nil {
			return false
		}
		key, err := c.URLs.Key(u)
		if err != nil {
			return false
		}
		ids = append(ids, shard.RecordID{Key: key, Hash: c.URLs.Hash(u)})
	}
	msg := shard.ReceiptMessage(owner.Addr, ids)
	// The owner's successors are looked up lazily, nearest first, and
	// only as far as the receipts need: usually the first one signed.
	valid, checks := 0, 0
	var seen []string
	found := 0
	for k := 1; k <= 2*c.Replicas && valid < c.Need; k++ {
		succs := r.successorsOf(ctx, owner, k)
		if len(succs) < k {
			break
		}
		found = k
		p := succs[k-1]
		for _, rc := range res.Receipts {
			if rc.Signer != p || slices.Contains(seen, p.Addr) {
				continue
			}
			if len(rc.Sig) == 0 || len(rc.Sig) > shard.MaxReceiptSig {
				continue
			}
			// An answer holds the receipts of every position the batch
			// touched, some signer's for several of them: a position's
			// part gets at most maxChecks signature checks, so that a
			// hostile owner's copies of a signer's name cost no more.
			if checks++; checks > maxChecks {
				return false
			}
			if !c.Verifier.Verify(rc.Signer, msg, rc.Sig) {
				continue
			}
			seen = append(seen, p.Addr)
			valid++
		}
	}
	if found == 0 {
		return true // nobody to vouch: a ring of one machine
	}
	return valid >= min(c.Need, found)
}

// vouchedFresh is vouched, asked once more with the owner's successors
// looked up afresh when the remembered ones do not vouch: the ring may
// have moved since.
func (r *Router) vouchedFresh(ctx context.Context, owner ring.Peer, covered []Task, res Result) bool {
	if r.vouched(ctx, owner, covered, res) {
		return true
	}
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	c, ok := r.succs[owner.Addr]
	stale := ok && now.Sub(c.found) >= succsRefresh
	if stale {
		delete(r.succs, owner.Addr)
	}
	r.mu.Unlock()
	return stale && r.vouched(ctx, owner, covered, res)
}

// A note on the signers. An owner's replicas are its first K successors
// on distinct machines, less any that refused its claims (shard's
// replicaSetLocked), whose places the next successors take: so the
// router takes receipts from the owner's first 2K successors. Fallback
// goes to the first K, each asked to hold the tasks, so that an owner and
// a dishonest first successor together still cannot drop them.

// ackedTasks returns the tasks of sent that res counts as accepted or
// duplicate: all but those handed back or rejected.
func ackedTasks(sent []Task, res Result) []Task {
	if len(res.NotOwned)+len(res.Rejected) == 0 {
		return sent
	}
	out := make(map[string]int, len(res.NotOwned)+len(res.Rejected))
	for _, t := range res.NotOwned {
		out[t.URL]++
	}
	for _, j := range res.Rejected {
		out[j.URL]++
	}
	acked := make([]Task, 0, len(sent))
	for _, t := range sent {
		if out[t.URL] > 0 {
			out[t.URL]--
			continue
		}
		acked = append(acked, t)
	}
	return acked
}

// succsTTL is how long the router remembers an owner's successors for
// checking receipts: a lookup per owner and sender per succsTTL. An
// acknowledgement the remembered successors do not vouch for makes it
// look them up again, if they were found succsRefresh ago or more, so a
// ring that moved meanwhile costs one lookup, not a refusal.
const (
	succsTTL     = 30 * time.Minute
	succsRefresh = 10 * time.Second
)

// cachedSuccs is an owner's successors as found so far.
type cachedSuccs struct {
	peers   []ring.Peer
	end     bool // the walk came round to the owner: there are no more
	found   time.Time
	expires time.Time
}

// successorsOf returns owner's first k successors on machines other than
// owner's, as this node's lookups find them, remembered for succsTTL and
// extended as far as asked.
func (r *Router) successorsOf(ctx context.Context, owner ring.Peer, k int) []ring.Peer {
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	c, ok := r.succs[owner.Addr]
	r.mu.Unlock()
	if !ok || !now.Before(c.expires) {
		c = cachedSuccs{found: now, expires: now.Add(succsTTL)}
	}
	if len(c.peers) >= k || c.end {
		return c.peers[:min(k, len(c.peers))]
	}
	machines := map[string]bool{owner.Machine(): true}
	p := owner
	for _, q := range c.peers {
		machines[q.Machine()] = true
		p = q
	}
	for step := 0; len(c.peers) < k && step < 2*k+2; step++ {
		q, err := r.lookup(ctx, p.ID+1)
		if err != nil {
			break
		}
		if q == owner || q.IsZero() {
			c.end = true
			break
		}
		if !machines[q.Machine()] {
			machines[q.Machine()] = true
			c.peers = append(c.peers, q)
		}
		p = q
	}
	r.mu.Lock()
	if len(r.succs) >= suspectMax {
		clear(r.succs)
	}
	r.succs[owner.Addr] = c
	r.mu.Unlock()
	return c.peers[:min(k, len(c.peers))]
}

// suspected reports whether owner's acknowledgements were recently not
// vouched for.
func (r *Router) suspected(owner ring.Peer) bool {
	if r.receipts == nil {
		return false
	}
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	until, ok := r.suspects[owner.Addr]
	if ok && !now.Before(until) {
		delete(r.suspects, owner.Addr)
		return false
	}
	return ok
}

// suspect notes that owner acknowledged tasks its replicas did not vouch
// for.
func (r *Router) suspect(owner ring.Peer) {
	now := r.cfg.Clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.suspects) >= suspectMax {
		clear(r.suspects)
	}
	r.suspects[owner.Addr] = now.Add(r.receipts.SuspectFor)
	delete(r.succs, owner.Addr)
}

// fallback hands tasks that owner acknowledged without receipts (or that
// go to a suspected owner) to owner's first K successors to hold for it.
// The first successor's answer settles the tasks; the others hold them
// too, so that the tasks survive a dishonest first successor (each holds
// them as the owner's n-th replica, and fetches them only if neither the
// owner nor a nearer replica did). Tasks the first refuses or cannot take
// wait for another pass.
func (r *Router) fallback(ctx context.Context, owner ring.Peer, tasks []Task) Delivery {
	ft, ok := r.send.(FallbackTransport)
	succs := r.successorsOf(ctx, owner, r.receipts.Replicas)
	if !ok || len(succs) == 0 || len(tasks) == 0 {
		return Delivery{Undelivered: tasks}
	}
	var d Delivery
	for i, to := range succs {
		var res Result
		var err error
		if r.local(to) {
			res, err = r.owner.AcceptFor(ctx, tasks, owner.Addr)
		} else {
			res, err = ft.SendFor(ctx, to, owner, tasks)
		}
		if i > 0 {
			continue // a second copy: the first answer settles
		}
		if err != nil {
			r.failed(Batch{To: to, Tasks: tasks}, err)
			return Delivery{Undelivered: tasks}
		}
		r.fallbacks.Add(int64(res.Accepted + res.Duplicates))
		r.routed.Add(int64(res.Accepted + res.Duplicates))
		d = Delivery{Accepted: res.Accepted, Duplicates: res.Duplicates, Rejected: res.Rejected, Undelivered: res.NotOwned}
		if len(res.NotOwned) > 0 {
			// The first successor does not hold the owner's range: the
			// others are no better placed.
			return d
		}
	}
	return d
}
