package node

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// The outbox holds at most its memory bound of tasks in memory: beyond
// it, tasks wait in the store and are read back, in order, as the ones in
// memory are delivered. Every task is delivered exactly once, a page's
// links count as unsettled while some of them wait in the store, and a
// restart finds what is left, within the bound again.
func TestOutboxSpillsBeyondMemory(t *testing.T) {
	const bound, pages, perPage = 10, 10, 10
	db, err := store.Open(filepath.Join(t.TempDir(), "store"), store.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	log := slog.New(slog.DiscardHandler)
	o := newOutbox(db, log, bound)
	var order []string
	for p := range pages {
		page := frontier.Task{URL: fmt.Sprintf("http://page%d.test/", p)}
		var links []frontier.Task
		for l := range perPage {
			u := fmt.Sprintf("http://link%d-%d.test/", p, l)
			links = append(links, frontier.Task{URL: u, Depth: 1})
			order = append(order, u)
		}
		o.Discovered(context.Background(), page, links)
	}
	if o.InMemory() > bound || o.Pending() != pages*perPage || o.Spilled() != pages*perPage-bound {
		t.Fatalf("in memory %d (bound %d), pending %d, spilled %d", o.InMemory(), bound, o.Pending(), o.Spilled())
	}
	lastPage := o.TakeLinks("http://page9.test/")
	if len(lastPage) != perPage || o.Settled(lastPage) {
		t.Fatalf("links of the last page (all in the store): %d entries, settled %v", len(lastPage), o.Settled(lastPage))
	}

	delivered := map[string]int{}
	var got []string
	deliver := func(o *outbox, passes int) {
		for i := 0; i < passes && o.Pending() > 0; i++ {
			due, _ := o.takeDue(7)
			if o.InMemory() > bound {
				t.Fatalf("%d tasks in memory, bound %d", o.InMemory(), bound)
			}
			for _, p := range due {
				delivered[p.task.URL]++
				got = append(got, p.task.URL)
			}
			o.settle(due, nil)
		}
	}
	// Half, then a crash: a new outbox on the same store takes over.
	deliver(o, 7)
	o2 := newOutbox(db, log, bound)
	if n, err := o2.Load(); err != nil || n != pages*perPage-len(got) || o2.InMemory() > bound {
		t.Fatalf("restart: loaded %d (%v), want %d; %d in memory, bound %d", n, err, pages*perPage-len(got), o2.InMemory(), bound)
	}
	deliver(o2, 1000)
	if o2.Pending() != 0 {
		t.Fatalf("%d tasks never delivered", o2.Pending())
	}
	for i, u := range order {
		if delivered[u] != 1 {
			t.Errorf("%s delivered %d times", u, delivered[u])
		}
		if i < len(got) && got[i] != u {
			t.Fatalf("delivery %d is %s, want %s: order lost", i, got[i], u)
		}
	}
	if !o2.Settled(lastPage) {
		t.Error("the last page's links are not settled after delivery")
	}
	left := 0
	if err := db.ScanOutbox(func(store.OutboxEntry) error { left++; return nil }); err != nil || left != 0 {
		t.Fatalf("%d entries left in the store (%v)", left, err)
	}
}

// A link an owner settled lately is not delivered again by as long or a
// longer path; a shorter path, a link handed back undelivered and a new
// link are.
func TestOutboxDropsLinksDeliveredLately(t *testing.T) {
	o := newTestOutbox(t)
	page := frontier.Task{URL: "http://a.test/"}
	deliver := func(undelivered ...frontier.Task) []string {
		due, _ := o.takeDue(100)
		var got []string
		for _, p := range due {
			got = append(got, fmt.Sprintf("%s@%d/%d", p.task.URL, p.task.Depth, p.task.Redirects))
		}
		o.settle(due, undelivered)
		return got
	}
	nav := frontier.Task{URL: "http://a.test/nav", Depth: 2}
	busy := frontier.Task{URL: "http://a.test/busy", Depth: 2}
	o.Discovered(context.Background(), page, []frontier.Task{nav, busy})
	if got := deliver(busy); len(got) != 2 {
		t.Fatalf("first delivery: %v", got)
	}
	// nav was settled; busy was handed back and is still pending.
	o.Discovered(context.Background(), page, []frontier.Task{
		nav,                                    // same path: dropped
		{URL: nav.URL, Depth: 3},               // longer: dropped
		{URL: nav.URL, Depth: 2, Redirects: 1}, // as deep, more redirects: dropped
		busy,                                   // never settled: kept
		{URL: "http://a.test/new", Depth: 3},   // new: kept
	})
	if o.Dropped() != 3 {
		t.Errorf("dropped %d links, want 3", o.Dropped())
	}
	got := deliver()
	// (The busy link handed back waits for its backoff.)
	want := []string{"http://a.test/busy@2/0", "http://a.test/new@3/0"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("second delivery %v, want %v", got, want)
	}
	o.Discovered(context.Background(), page, []frontier.Task{{URL: nav.URL, Depth: 1}}) // shorter: kept
	if got := deliver(); fmt.Sprint(got) != "[http://a.test/nav@1/0]" {
		t.Errorf("shorter path: delivered %v", got)
	}
	o.Discovered(context.Background(), page, []frontier.Task{nav}) // now longer than 1
	if got := deliver(); len(got) != 0 {
		t.Errorf("after the shorter path, depth 2 delivered again: %v", got)
	}
}

// recentLinks forgets the oldest generation, not the URLs linked lately.
func TestRecentLinksBounded(t *testing.T) {
	r := newRecentLinks(4)
	task := func(i int) pending {
		return pending{task: frontier.Task{URL: fmt.Sprintf("http://a.test/%d", i), Depth: 1}}
	}
	for i := range 12 {
		r.settled([]pending{task(i)})
	}
	if n := r.ranks.Len(); n > 8 {
		t.Errorf("%d URLs remembered, bound 8", n)
	}
	kept := r.filter([]frontier.Task{task(0).task, task(11).task})
	if len(kept) != 1 || kept[0].URL != "http://a.test/0" {
		t.Errorf("kept %v: want the oldest only", kept)
	}
}

// A link an owner refused (out of its scope, say) is not remembered: an
// owner whose scope widens takes it when it comes again. Dropping leaves
// the crawler's slice of links as it was.
func TestOutboxRemembersNoRefusedLinks(t *testing.T) {
	o := newTestOutbox(t)
	page := frontier.Task{URL: "http://a.test/"}
	in, out := frontier.Task{URL: "http://a.test/in", Depth: 1}, frontier.Task{URL: "http://b.test/out", Depth: 1}
	o.Discovered(context.Background(), page, []frontier.Task{in, out})
	due, _ := o.takeDue(100)
	o.settle(due, nil, out.URL)
	links := []frontier.Task{in, out}
	o.Discovered(context.Background(), page, links)
	if links[0] != in || links[1] != out {
		t.Errorf("Discovered changed the caller's links: %v", links)
	}
	due, _ = o.takeDue(100)
	if len(due) != 1 || due[0].task != out {
		t.Errorf("after refusing %s: delivered %v, want it alone", out.URL, due)
	}
}

// newTestOutbox returns an outbox of 100 tasks in memory on a new store.
func newTestOutbox(t *testing.T) *outbox {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "store"), store.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return newOutbox(db, slog.New(slog.DiscardHandler), 100)
}

// A seed waiting in the outbox keeps its signed statement across a
// restart: the outbox stores it with the task and holds it again when it
// reads the task back (in memory, or spilled), so that the seed reaches
// its owner signed. A link's entry carries none.
func TestOutboxKeepsSeedStatements(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	db, err := store.Open(dir, store.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	o := newOutbox(db, log, 1)
	o.proofs = &seedProofs{}
	seeds := []string{"http://a.test/", "http://b.test/"}
	for _, u := range seeds {
		o.proofs.put(u, "statement of "+u)
	}
	o.Add([]frontier.Task{{URL: seeds[0]}, {URL: "http://a.test/x", Depth: 1}, {URL: seeds[1]}}, 1, time.Now())
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = store.Open(dir, store.DefaultOptions()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	o = newOutbox(db, log, 1) // one in memory, two spilled
	o.proofs = &seedProofs{}
	if n, err := o.Load(); err != nil || n != 3 {
		t.Fatalf("loaded %d tasks, %v; want 3", n, err)
	}
	for o.Pending() > 0 {
		due, _ := o.takeDue(1)
		o.settle(due, nil)
	}
	for _, u := range seeds {
		if got := o.proofs.get(u); got != "statement of "+u {
			t.Errorf("after a restart the seed %s has statement %q", u, got)
		}
	}
	if got := o.proofs.get("http://a.test/x"); got != "" {
		t.Errorf("the link has statement %q", got)
	}
}
