package frontier

import (
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// Task is one URL to crawl.
type Task struct {
	// URL is the absolute URL, already in the form urls.Normalize returns.
	URL string
	// Depth is the number of link hops from a seed (seeds have depth 0). A
	// redirect target keeps the depth of the URL that redirected.
	Depth int
	// Attempts is the number of failed fetches of the URL so far.
	Attempts int
	// Redirects is the number of redirect hops that led to the URL.
	Redirects int
	// Recrawl marks a refetch of a URL crawled before.
	Recrawl bool
}

// Priority is the queue priority of a task, smaller first: seeds 0, due
// recrawls and retries 1, discovered pages 1+depth (at most
// store.MaxPriority).
func Priority(t Task) int {
	switch {
	case t.Recrawl || t.Attempts > 0:
		return 1
	case t.Depth <= 0:
		return 0
	}
	return min(1+t.Depth, store.MaxPriority)
}

// Outcome is what became of a task taken from the frontier; Complete
// records it in one atomic write together with the task's removal from the
// queue.
type Outcome struct {
	// Reschedule, when set, goes into the schedule at At: a retry or a
	// recrawl of the task.
	Reschedule *Task
	At         time.Time
	// Dead, when set, is stored as a dead letter.
	Dead *store.DeadLetter
	// Meta, when set, is stored as the URL's metadata.
	Meta *store.URLMeta
}

// Scheduled is a task to queue once At has come.
type Scheduled struct {
	Task Task
	At   time.Time
}

// entry builds the queue entry of a task.
func (f *Frontier) entry(t Task) (store.QueueEntry, string, error) {
	host, err := urls.HostOf(t.URL)
	if err != nil {
		return store.QueueEntry{}, "", err
	}
	hostKey := urls.HostKey(host)
	ring := hostKey // the same hash in the default host-key mode
	if f.keyMode != urls.KeyHost {
		if ring, err = urls.TaskKey(t.URL, f.keyMode); err != nil {
			return store.QueueEntry{}, "", err
		}
	}
	return store.QueueEntry{
		HostKey: hostKey, RingKey: ring, URLHash: urls.URLHash(t.URL), URL: t.URL,
		Depth: t.Depth, Priority: Priority(t), Attempts: t.Attempts, Redirects: t.Redirects, Recrawl: t.Recrawl,
	}, host, nil
}

func taskOf(e *store.QueueEntry) Task {
	return Task{URL: e.URL, Depth: e.Depth, Attempts: e.Attempts, Redirects: e.Redirects, Recrawl: e.Recrawl}
}
