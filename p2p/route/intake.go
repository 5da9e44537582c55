package route

import (
	"errors"
	"fmt"
	"math"
	"sync"
)

// Admission is one URL offered to an owner's Intake: its ring key and
// seen-set hash, the task to queue, and whether it is a seed that a
// client allowed to seed submitted (its shard record is then marked seed,
// which brings its host into a scoped crawl's scope; Task.SeedProof is
// then the seeder's signed statement that travels with the record).
type Admission struct {
	Key, Hash uint64
	Task      Task
	Seed      bool
}

// SeenSet is the owner's record of the URLs it has taken.
type SeenSet interface {
	// SeenDepth returns the smallest depth the URL was taken at, and
	// whether it was taken at all.
	SeenDepth(key, hash uint64) (depth int, seen bool, err error)
	// IsSeed reports whether the URL's record is marked seed.
	IsSeed(key, hash uint64) (bool, error)
}

// Queue is where admitted URLs go: the owner's crawl queue.
type Queue interface {
	// Room returns an error when n new URLs cannot be taken now (the
	// store's disk is low, say); the sender keeps them.
	Room(n int) error
	// Queue queues the URLs for the crawl, then marks them seen, in that
	// order: the other order loses a URL to a crash in between, since a
	// sender's retry would find it seen.
	Queue(fresh []Admission) error
}

// Intake is the one way into an owner's crawl queue for routed URLs. Its
// admissions run one at a time: between checking the seen set and marking
// it, a concurrent admission of the same URL must not slip through.
// Whoever rebuilds the queue from shard records (a range taken over) runs
// under the same lock (Exclusive).
type Intake struct {
	mu    sync.Mutex
	seen  SeenSet
	queue Queue
	// shorter says whether a URL found again by a shorter path is
	// admitted again: only under a depth limit.
	shorter bool
}

// NoDepthLimit is the depth limit of a crawl that follows links however
// deep they go (the simulator's).
const NoDepthLimit = math.MaxInt32

// NewIntake returns the intake over an owner's seen set and crawl queue,
// for a crawl that follows links down to maxDepth (NoDepthLimit: all).
func NewIntake(seen SeenSet, queue Queue, maxDepth int) *Intake {
	return &Intake{seen: seen, queue: queue, shorter: maxDepth < NoDepthLimit}
}

// Exclusive runs fn with no admission under way.
func (in *Intake) Exclusive(fn func() error) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	return fn()
}

// Admit queues the URLs offered that the seen set has not seen, or has
// seen only at a greater depth, once replicate has stored them with the
// replicas. A URL found again by a shorter path is queued again so that
// the crawler follows its links from there: that is what makes every page
// within the depth limit reachable however the crawl meets it first.
// Without a depth limit no link was ever left out for its depth, and a
// shorter path is a duplicate like any other (queuing it again would
// fetch it again on a node that did not fetch it first). So is
// a seed whose record is not marked seed yet (the URL was reached first by
// a link): its record must be marked. Admit returns the admitted URLs and
// the number of duplicates; when Room or replicate fails nothing is
// queued and the error is returned with the admitted URLs, which the
// caller hands back to the sender; when replicate returns a
// *PartlyStored error, the admitted URLs it does not name are queued, and
// the error is returned with all of them.
func (in *Intake) Admit(offered []Admission, replicate func(fresh []Admission) error) (fresh []Admission, duplicates int, err error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	inBatch := make(map[[2]uint64]int, len(offered)) // index in fresh
	for _, a := range offered {
		id := [2]uint64{a.Key, a.Hash}
		if j, ok := inBatch[id]; ok {
			duplicates++
			seed, proof := fresh[j].Seed, fresh[j].Task.SeedProof
			if !seed && a.Seed {
				seed, proof = true, a.Task.SeedProof
			}
			if a.Task.Depth < fresh[j].Task.Depth {
				fresh[j] = a
			}
			fresh[j].Seed, fresh[j].Task.SeedProof = seed, proof
			continue
		}
		depth, seen, err := in.seen.SeenDepth(a.Key, a.Hash)
		if err != nil {
			return nil, duplicates, fmt.Errorf("accept %s: %w", a.Task.URL, err)
		}
		if seen && (depth <= a.Task.Depth || !in.shorter) {
			marked := true
			if a.Seed {
				if marked, err = in.seen.IsSeed(a.Key, a.Hash); err != nil {
					return nil, duplicates, fmt.Errorf("accept %s: %w", a.Task.URL, err)
				}
			}
			if marked {
				duplicates++
				continue
			}
		}
		inBatch[id] = len(fresh)
		fresh = append(fresh, a)
	}
	if len(fresh) == 0 {
		return nil, duplicates, nil
	}
	if err := in.queue.Room(len(fresh)); err != nil {
		return fresh, duplicates, err
	}
	if err := replicate(fresh); err != nil {
		var part *PartlyStored
		if !errors.As(err, &part) {
			return fresh, duplicates, err
		}
		// Stored and replicated in part: that part is queued, as a
		// whole batch would be.
		failed := make(map[[2]uint64]bool, len(part.Failed))
		for _, id := range part.Failed {
			failed[[2]uint64{id.Key, id.Hash}] = true
		}
		var taken []Admission
		for _, a := range fresh {
			if !failed[[2]uint64{a.Key, a.Hash}] {
				taken = append(taken, a)
			}
		}
		if len(taken) > 0 {
			if qerr := in.queue.Queue(taken); qerr != nil {
				return fresh, duplicates, qerr
			}
		}
		return fresh, duplicates, err
	}
	if err := in.queue.Queue(fresh); err != nil {
		return fresh, duplicates, err
	}
	return fresh, duplicates, nil
}
