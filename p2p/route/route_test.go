package route

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// drain runs rounds with fetches until every outbox and queue is empty,
// or fails after max rounds.
func (c *cluster) drain(t *testing.T, max int) {
	t.Helper()
	for i := 0; i < max; i++ {
		c.round(50)
		if c.outboxes() == 0 && c.queued() == 0 {
			// A few more rounds let progress reach the replicas.
			c.rounds(10)
			return
		}
	}
	t.Fatalf("not drained after %d rounds: %d tasks in outboxes, %d queued", max, c.outboxes(), c.queued())
}

func (c *cluster) queued() int {
	k := 0
	for _, n := range c.live() {
		n.q.mu.Lock()
		k += len(n.q.queue)
		n.q.mu.Unlock()
	}
	return k
}

// TestRouteEveryURLOnce: on a healthy ring every URL handed to any node
// reaches the one owner of its host, is accepted once, replicated, and
// fetched once; a URL sent again is a duplicate everywhere.
func TestRouteEveryURLOnce(t *testing.T) {
	c := newCluster(t, 1, 8)
	tasks := testTasks(60, 600)
	c.seed(tasks)
	c.seed(tasks) // every URL twice, from two random nodes
	c.drain(t, 200)
	owners := map[uint64]string{}
	for _, tk := range tasks {
		acc := c.accepted[tk.URL]
		if len(acc) != 1 {
			t.Errorf("%s accepted %d times (%v), want once", tk.URL, len(acc), acc)
			continue
		}
		if o, ok := owners[tk.Key]; ok && o != acc[0] {
			t.Errorf("host of %s has two owners: %s and %s", tk.URL, o, acc[0])
		}
		owners[tk.Key] = acc[0]
		if c.fetched[tk.URL] != 1 {
			t.Errorf("%s fetched %d times, want once", tk.URL, c.fetched[tk.URL])
		}
	}
	c.checkHeld("healthy", tasks)
	c.seed(tasks)
	c.drain(t, 100)
	for _, tk := range tasks {
		if n := len(c.accepted[tk.URL]); n != 1 {
			t.Errorf("%s accepted %d times after being sent again", tk.URL, n)
		}
	}
}

// TestRouteUnderFaults runs the routing layer through fault schedules on
// the in-memory networks and checks its invariants: after every round,
// every URL an owner accepted is held by a live node (until fetched, and
// after: the done mark); once the faults end and the ring converges,
// every URL is fetched, and no URL sent again is accepted by a second
// owner.
func TestRouteUnderFaults(t *testing.T) {
	for _, tc := range []struct {
		name     string
		schedule func(c *cluster, round int)
	}{
		{"drops", func(c *cluster, round int) {
			switch round {
			case 0:
				c.rnet.SetDropRate(0.2)
			case 60:
				c.rnet.SetDropRate(0)
			}
		}},
		{"crashes", func(c *cluster, round int) {
			switch round {
			case 5:
				c.crash(c.nodes[3])
			case 40:
				c.crash(c.nodes[6])
			}
		}},
		{"partition", func(c *cluster, round int) {
			switch round {
			case 3:
				var a, b []string
				for i, n := range c.nodes {
					if i%3 == 0 {
						a = append(a, n.peer.Addr)
					} else {
						b = append(b, n.peer.Addr)
					}
				}
				c.rnet.Partition(a, b)
			case 30:
				c.rnet.Heal()
			}
		}},
		{"delay and join", func(c *cluster, round int) {
			switch round {
			case 2:
				c.add("late1")
			case 10:
				c.add("late2")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 7, 8)
			tasks := testTasks(40, 400)
			c.seed(tasks[:200])
			for r := range 80 {
				tc.schedule(c, r)
				if r == 10 {
					c.seed(tasks[200:])
				}
				c.round(5)
				c.checkHeld(fmt.Sprintf("round %d", r), tasks)
			}
			c.drain(t, 400)
			missed := 0
			for _, tk := range tasks {
				if c.fetched[tk.URL] == 0 {
					missed++
				}
			}
			if missed > 0 {
				t.Errorf("%d of %d URLs never fetched", missed, len(tasks))
			}
			c.rounds(settleRounds)
			// After convergence one owner holds each host: sending every
			// URL again, twice, takes each at most once in all, and
			// the second time not at all.
			again := 0
			for pass := range 2 {
				before := map[string]int{}
				for _, tk := range tasks {
					before[tk.URL] = len(c.accepted[tk.URL])
				}
				c.seed(tasks)
				c.seed(tasks)
				c.drain(t, 200)
				for _, tk := range tasks {
					n := len(c.accepted[tk.URL]) - before[tk.URL]
					if n > 1 || (pass == 1 && n > 0) {
						t.Errorf("pass %d after convergence: %s accepted %d more times (%v)", pass, tk.URL, n, c.accepted[tk.URL])
					}
					if pass == 0 && n > 0 {
						again++
					}
				}
			}
			// Where the faults split the ring, a URL fetched on the side
			// that loses its range comes back as new to the side that
			// keeps it (issue 28: a rerouted range loses its done marks).
			t.Logf("%s: %d of %d URLs taken again after convergence", tc.name, again, len(tasks))
			c.checkHeld("converged", tasks)
		})
	}
}

// settleRounds lets the swarm reconcile after the faults (digests
// compared every SyncInterval) before URLs are sent again.
var settleRounds = 150

// stubRing answers every lookup with one owner.
type stubRing struct {
	self, owner ring.Peer
	lookups     int
}

func (r *stubRing) Self() ring.Peer { return r.self }
func (r *stubRing) Lookup(context.Context, ring.ID) (ring.Peer, int, error) {
	r.lookups++
	return r.owner, 3, nil
}

// stubTransport answers every send with err, or accepts everything.
type stubTransport struct {
	err   error
	sends int
}

func (s *stubTransport) Send(_ context.Context, _ ring.Peer, ts []Task) (Result, error) {
	s.sends++
	if s.err != nil {
		return Result{}, s.err
	}
	return Result{Accepted: len(ts)}, nil
}

type laterErr struct{}

func (laterErr) Error() string             { return "over quota" }
func (laterErr) RetryAfter() time.Duration { return time.Second }

// TestRouterFailures: a batch that does not reach its owner comes back
// whole; the owner's cached lookup is dropped after a failure, kept after
// a refusal for now (the owner is still the owner); batches are split at
// MaxBatch.
func TestRouterFailures(t *testing.T) {
	self := ring.Peer{ID: 1, Addr: "self"}
	other := ring.Peer{ID: 2, Addr: "other"}
	tasks := testTasks(1, 25)
	for _, tc := range []struct {
		name        string
		err         error
		lookupsThen int // lookups after two passes
	}{
		{"unreachable", errors.New("connection refused"), 2},
		{"retry later", fmt.Errorf("owner: %w", laterErr{}), 1},
		{"delivered", nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &stubRing{self: self, owner: other}
			tr := &stubTransport{err: tc.err}
			rt := NewRouter(r, nil, tr, Config{MaxBatch: 10})
			d := rt.Route(context.Background(), tasks, false)
			if tc.err != nil && len(d.Undelivered) != len(tasks) {
				t.Fatalf("%d of %d tasks came back", len(d.Undelivered), len(tasks))
			}
			if tc.err == nil && (d.Accepted != len(tasks) || len(d.Undelivered) != 0) {
				t.Fatalf("delivery %+v", d)
			}
			if tr.sends != 3 {
				t.Errorf("%d batches sent for 25 tasks at 10 a batch, want 3", tr.sends)
			}
			rt.Route(context.Background(), tasks, false)
			if r.lookups != tc.lookupsThen {
				t.Errorf("%d lookups after two passes, want %d", r.lookups, tc.lookupsThen)
			}
		})
	}
}

// TestOwnerRefuses: an owner reads every task again: a malformed URL, a
// depth beyond the crawl's and a negative redirect count are rejected for
// good, a key it does not own is handed back, a URL out of scope is
// rejected with the scope's reason, and nothing of these reaches the
// seen set; a full disk hands the new URLs back with an error.
func TestOwnerRefuses(t *testing.T) {
	c := newCluster(t, 3, 1)
	n := c.nodes[0]
	ok, _ := NewTask(testURLs{}, "http://a.test/x", 1, 0)
	res, err := n.owner.Accept(context.Background(), []Task{
		{URL: "ftp://a.test/"}, {URL: "http://a.test/deep", Depth: 11}, {URL: "http://a.test/r", Redirects: -1}, ok,
	}, false, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rejected) != 3 || res.Accepted != 1 {
		t.Fatalf("result %+v, want 3 rejected and 1 accepted", res)
	}
	// Out of scope.
	scoped := NewOwner(n.m, n.m, NewIntake(n.q, n.q, 10), testURLs{}, scopeFunc(func(u string) string {
		if u == "http://b.test/no" {
			return "excluded"
		}
		return ""
	}), 10)
	res, err = scoped.Accept(context.Background(), []Task{{URL: "http://b.test/no", Depth: 1}, {URL: "http://b.test/yes", Depth: 1}}, false, false)
	if err != nil || res.Accepted != 1 || len(res.Rejected) != 1 || res.Rejected[0].Reason != "excluded" {
		t.Fatalf("scoped: %+v %v", res, err)
	}
	if _, seen, _ := n.q.SeenDepth(sum64("b.test"), sum64("http://b.test/no")); seen {
		t.Error("a URL out of scope reached the seen set")
	}
	// No room.
	n.q.refused = true
	res, err = n.owner.Accept(context.Background(), []Task{{URL: "http://c.test/1", Depth: 1}}, false, false)
	if err == nil || res.Accepted != 0 {
		t.Fatalf("with no room: %+v %v", res, err)
	}
	n.q.refused = false
	res, err = n.owner.Accept(context.Background(), []Task{{URL: "http://c.test/1", Depth: 1}}, false, false)
	if err != nil || res.Accepted != 1 {
		t.Fatalf("the URL refused for room was not taken later: %+v %v", res, err)
	}
}

type scopeFunc func(string) string

func (f scopeFunc) Judge(u string, _ bool, _, _ int) (string, error) { return f(u), nil }

// TestOwnerHandsBackNotOwned: a node that holds no claim on a key hands
// its tasks back untouched, and the sender routes them again.
func TestOwnerHandsBackNotOwned(t *testing.T) {
	c := newCluster(t, 5, 3)
	n := c.nodes[0]
	var foreign Task
	for _, tk := range testTasks(50, 50) {
		if !n.m.Owns(tk.Key) {
			foreign = tk
			break
		}
	}
	res, err := n.owner.Accept(context.Background(), []Task{foreign}, false, false)
	if err != nil || len(res.NotOwned) != 1 || res.NotOwned[0] != foreign {
		t.Fatalf("result %+v %v, want the task handed back", res, err)
	}
	if len(c.accepted[foreign.URL]) != 0 {
		t.Fatal("a node accepted a key it does not own")
	}
}

// TestIntakeShorterPath: under a depth limit a URL found again by a
// shorter path is admitted again (its links may have been left out for
// their depth); without one it is a duplicate, which a node that did not
// fetch the page would otherwise fetch again.
func TestIntakeShorterPath(t *testing.T) {
	for _, tc := range []struct {
		maxDepth int
		again    int
	}{{10, 1}, {NoDepthLimit, 0}} {
		c := newCluster(t, 9, 1)
		n := c.nodes[0]
		in := NewIntake(n.q, n.q, tc.maxDepth)
		o := NewOwner(n.m, n.m, in, testURLs{}, nil, tc.maxDepth)
		for _, depth := range []int{5, 3} {
			if _, err := o.Accept(context.Background(), []Task{{URL: "http://a.test/x", Depth: depth}}, false, false); err != nil {
				t.Fatal(err)
			}
		}
		if got := int(o.Stats().Accepted) - 1; got != tc.again {
			t.Errorf("depth limit %d: admitted again %d times, want %d", tc.maxDepth, got, tc.again)
		}
	}
}

// TestRouterTakesItsPositionsAsSelf: a node with several ring positions
// ("n00", "n00/3") that share one Owner (Config.Local) owns the keys of
// all of them; a batch the lookup names another of its positions for is
// its own owner's to take, not sent over the transport (which cannot
// reach its own machine), and a position of another machine ("n01/3")
// is sent to.
func TestRouterTakesItsPositionsAsSelf(t *testing.T) {
	c := newCluster(t, 1, 1)
	n := c.nodes[0]
	tasks := testTasks(3, 6)
	for _, tk := range tasks {
		if !n.m.Owns(tk.Key) {
			t.Fatalf("a one-node cluster does not own %s", tk.URL)
		}
	}
	r := &stubRing{self: n.peer, owner: ring.Peer{ID: n.peer.ID + 9, Addr: n.peer.Addr + "/3"}}
	tr := &stubTransport{err: errors.New("dial to self attempted")}
	local := Config{Local: func(p ring.Peer) bool { return p.Machine() == n.peer.Machine() }}
	d := NewRouter(r, n.owner, tr, local).Route(context.Background(), tasks, false)
	if tr.sends != 0 || d.Accepted != len(tasks) {
		t.Fatalf("batch for another position of this node: %d sends, delivery %+v; want 0 sends, %d accepted", tr.sends, d, len(tasks))
	}
	r.owner = ring.Peer{ID: n.peer.ID + 9, Addr: "n01/3"}
	tr.err = nil
	if d := NewRouter(r, n.owner, tr, local).Route(context.Background(), tasks, false); tr.sends != 1 || d.Accepted != len(tasks) {
		t.Fatalf("batch for another machine's position: %d sends, delivery %+v; want 1 send", tr.sends, d)
	}
}

// slowTransport accepts every batch after advancing the clock by took, as
// a round trip to the owner would take.
type slowTransport struct {
	clock *ring.FakeClock
	took  time.Duration
}

func (s slowTransport) Send(_ context.Context, _ ring.Peer, ts []Task) (Result, error) {
	s.clock.Advance(s.took)
	return Result{Accepted: len(ts)}, nil
}

// TestRouterCountsPasses: the router's stats say how many passes it made,
// how many batches they sent and how long they took (status route_passes,
// route_batches, route_pass_ms): what a done mark waits for.
func TestRouterCountsPasses(t *testing.T) {
	clock := ring.NewFakeClock(time.Unix(1_700_000_000, 0))
	r := &stubRing{self: ring.Peer{ID: 1, Addr: "self"}, owner: ring.Peer{ID: 2, Addr: "other"}}
	rt := NewRouter(r, nil, slowTransport{clock: clock, took: 40 * time.Millisecond}, Config{MaxBatch: 10, Clock: clock})
	rt.Route(context.Background(), testTasks(1, 25), false)
	rt.Route(context.Background(), testTasks(100, 5), false)
	st := rt.Stats()
	if st.Passes != 2 || st.Batches != 4 || st.PassTime != 160*time.Millisecond {
		t.Errorf("passes %d, batches %d, time %v; want 2 passes of 4 batches in all, 160ms", st.Passes, st.Batches, st.PassTime)
	}
}
