package route

import (
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// Task is one URL on its way to its owner. Key is the URL's ring key,
// computed once by whoever made the task (URLs.Key); an owner computes its
// own from the URL and never trusts a sender's. SeedProof, on a seed
// (depth 0, no redirect), is its seeder's signed statement (package
// p2p/seedsig, opaque here): the owner marks the URL a seed only if its
// SeedPolicy honours it.
type Task struct {
	URL       string
	Key       uint64
	Depth     int    // links followed from a seed
	Redirects int    // redirects followed to reach the URL
	SeedProof string // comparable, like the rest of a task
	// Owner is the ring position the sender's lookup found for Key, set
	// by Router.Plan: a batch goes to a machine and may carry tasks of
	// several of its positions, and each position's receipts vouch for
	// its own. It does not travel on the wire.
	Owner ring.Peer
}

// URLs is how the layer reads a URL: the crawl engine's normal form and
// ring keys (crawl/urls in a node, the graph's own in the simulator).
type URLs interface {
	// Normalize returns the canonical form of a URL a peer sent, or why
	// it is not a URL the crawl can take.
	Normalize(raw string) (string, error)
	// Key returns the ring key of a normalised URL.
	Key(normalized string) (uint64, error)
	// Hash returns the seen-set hash of a normalised URL.
	Hash(normalized string) uint64
}

// NewTask returns the task for url (normalised) with its ring key.
func NewTask(u URLs, url string, depth, redirects int) (Task, error) {
	key, err := u.Key(url)
	if err != nil {
		return Task{}, err
	}
	return Task{URL: url, Key: key, Depth: depth, Redirects: redirects}, nil
}

// Result tells a sender what owners did with its tasks: every task ends
// in exactly one of its four parts.
type Result struct {
	Accepted   int    // new URLs queued by their owner
	Duplicates int    // already in the owner's seen set
	NotOwned   []Task // handed back: the owner does not hold the key now, the sender must look again
	Rejected   []Rejection
	// Receipts are the owner's replicas' signatures over the accepted and
	// duplicate tasks' records (shard.ReceiptMessage): what the sender
	// checks before it counts them as accepted (Config.Receipts).
	Receipts []shard.Receipt
}

// Rejection is a task refused for good, with the reason.
type Rejection struct {
	URL, Reason string
}

// Count returns the number of tasks r accounts for.
func (r Result) Count() int {
	return r.Accepted + r.Duplicates + len(r.NotOwned) + len(r.Rejected)
}
