package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	libp2pproto "github.com/libp2p/go-libp2p/core/protocol"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
	"github.com/swarmcrawl/swarmcrawl/store"
)

const testHost = "big.example"

// testBatch is a batch of n tasks on testHost, the first with metadata.
func testBatch(n int) *crawl.Batch {
	b := &crawl.Batch{Host: testHost, RingKey: urls.HostKey(testHost), Gap: 50 * time.Millisecond,
		Budget: 2 * time.Second, Wait: 3 * time.Second, SinceLast: 70 * time.Millisecond}
	for i := range n {
		t := crawl.BatchTask{Task: frontier.Task{URL: fmt.Sprintf("http://%s/p/%d", testHost, i), Depth: 3, Attempts: i % 2, Redirects: i % 3, Recrawl: i == 0}}
		if i == 0 {
			t.HasMeta = true
			t.Meta = store.URLMeta{URL: t.Task.URL, ETag: `"v1"`, LastModified: "Mon, 02 Jan 2006 15:04:05 GMT",
				Fingerprint: 0xfeed, ContentHash: 0xbeef, LastFetch: time.Unix(0, 1_700_000_000_123_456_789),
				Interval: time.Hour, Status: 200, Changes: 1, Fetches: 4} // NextCrawl: the zero time
		}
		b.Tasks = append(b.Tasks, t)
	}
	return b
}

// wire sends a message through its protobuf encoding, as the network does.
func wire[M proto.Message](t *testing.T, m M, fresh M) M {
	t.Helper()
	raw, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := proto.Unmarshal(raw, fresh); err != nil {
		t.Fatal(err)
	}
	return fresh
}

// testResult answers testBatch(3): a recrawl with new metadata, a retry
// and a dead letter.
func testResult(b *crawl.Batch) *crawl.BatchResult {
	t0, t1, t2 := b.Tasks[0].Task, b.Tasks[1].Task, b.Tasks[2].Task
	meta := store.URLMeta{URL: t0.URL, ETag: `"v2"`, ContentHash: 0xcafe, LastFetch: time.Unix(0, 1_700_000_100_000_000_001),
		NextCrawl: time.Unix(0, 1_700_003_700_000_000_001), Interval: time.Hour, Status: 200, Changes: 2, Fetches: 5}
	retry := t1
	retry.Attempts++
	recrawl := frontier.Task{URL: t0.URL, Depth: t0.Depth, Redirects: t0.Redirects, Recrawl: true}
	host, _ := urls.HostOf(t2.URL)
	return &crawl.BatchResult{
		Contacted: true, SinceLast: 30 * time.Millisecond, RetryAfter: 2 * time.Second,
		Results: []crawl.TaskResult{
			{Finished: true, Outcome: frontier.Outcome{Reschedule: &recrawl, At: meta.NextCrawl, Meta: &meta}},
			{Finished: false, Outcome: frontier.Outcome{Reschedule: &retry, At: time.Unix(0, 1_700_000_101_000_000_000)}},
			{Finished: true, Outcome: frontier.Outcome{Dead: &store.DeadLetter{URL: t2.URL, RingKey: b.RingKey,
				URLHash: urls.URLHash(t2.URL), HostKey: urls.HostKey(host), Depth: t2.Depth, Redirects: t2.Redirects,
				Attempts: 4, Kind: "http_5xx", LastError: "HTTP 503 Service Unavailable", At: time.Unix(0, 1_700_000_102_000_000_000)}}},
		},
	}
}

// A batch and a result survive the trip over the wire unchanged, zero
// times included.
func TestFetchWireRoundTrip(t *testing.T) {
	b := testBatch(3)
	got, err := decodeBatch(wire(t, encodeBatch(b), &pb.FetchBatchRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, b) {
		t.Fatalf("batch round trip:\n got %+v\nwant %+v", got, b)
	}
	if !got.Tasks[0].Meta.NextCrawl.IsZero() {
		t.Fatal("zero NextCrawl did not stay zero")
	}

	res := testResult(b)
	back, err := decodeFetchReply(b, wire(t, encodeFetchReply(res), &pb.FetchBatchReply{}))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, res) {
		t.Fatalf("result round trip:\n got %+v\nwant %+v", back, res)
	}
	// A partial answer (the helper ran out of budget) is fine too.
	res.Results = res.Results[:1]
	if back, err := decodeFetchReply(b, encodeFetchReply(res)); err != nil || len(back.Results) != 1 {
		t.Fatalf("partial result: %v, %v", back, err)
	}
}

// A malformed batch is refused before anything is fetched: too many or no
// tasks, a URL of another host, a ring key that is not the host's, a
// budget the wait does not cover, metadata of another URL.
func TestFetchBatchValidation(t *testing.T) {
	for name, mutate := range map[string]func(r *pb.FetchBatchRequest){
		"oversize": func(r *pb.FetchBatchRequest) {
			for len(r.Tasks) <= crawl.MaxDelegateTasks {
				r.Tasks = append(r.Tasks, &pb.FetchTask{Url: fmt.Sprintf("http://%s/x/%d", testHost, len(r.Tasks))})
			}
		},
		"empty":          func(r *pb.FetchBatchRequest) { r.Tasks = nil },
		"nil task":       func(r *pb.FetchBatchRequest) { r.Tasks[1] = nil },
		"other host":     func(r *pb.FetchBatchRequest) { r.Tasks[1].Url = "http://other.example/p/1" },
		"bad url":        func(r *pb.FetchBatchRequest) { r.Tasks[1].Url = "not a url" },
		"long url":       func(r *pb.FetchBatchRequest) { r.Tasks[1].Url += strings.Repeat("a", urls.MaxURLLength) },
		"wrong key":      func(r *pb.FetchBatchRequest) { r.RingKey++ },
		"no host":        func(r *pb.FetchBatchRequest) { r.Host = "" },
		"wait <= budget": func(r *pb.FetchBatchRequest) { r.WaitNs = r.BudgetNs },
		"no budget":      func(r *pb.FetchBatchRequest) { r.BudgetNs = 0 },
		"negative gap":   func(r *pb.FetchBatchRequest) { r.GapNs = -1 },
		"negative since": func(r *pb.FetchBatchRequest) { r.SinceLastNs = -1 },
		"endless wait":   func(r *pb.FetchBatchRequest) { r.WaitNs = int64(p2p.MaxFetchWait + time.Second) },
		"meta other url": func(r *pb.FetchBatchRequest) { r.Tasks[0].Meta.Url = "http://big.example/elsewhere" },
		"meta missing":   func(r *pb.FetchBatchRequest) { r.Tasks[0].Meta = nil },
		"meta negative":  func(r *pb.FetchBatchRequest) { r.Tasks[0].Meta.Fetches = -1 },
	} {
		req := encodeBatch(testBatch(3))
		mutate(req)
		if b, err := decodeBatch(req); err == nil {
			t.Errorf("%s: accepted %+v", name, b)
		}
	}
	// The largest batch allowed fits the message cap with room to spare.
	big := testBatch(crawl.MaxDelegateTasks)
	for i := range big.Tasks {
		big.Tasks[i].Task.URL = fmt.Sprintf("http://%s/%s/%d", testHost, strings.Repeat("p", urls.MaxURLLength-40), i)
		big.Tasks[i].HasMeta, big.Tasks[i].Meta = true, store.URLMeta{URL: big.Tasks[i].Task.URL, ETag: strings.Repeat("e", 200)}
	}
	if _, err := decodeBatch(encodeBatch(big)); err != nil {
		t.Fatal(err)
	}
	if size := proto.Size(encodeBatch(big)); size > protocol.MaxFetchMsgBytes/4 {
		t.Fatalf("a full batch takes %d bytes, too close to the %d cap", size, protocol.MaxFetchMsgBytes)
	}
}

// A reply that does not fit the batch is refused with a plain error (the
// owner requeues: the helper may have fetched); busy and refusals wrap
// ErrNoHelper (nothing was fetched).
func TestFetchReplyValidation(t *testing.T) {
	b := testBatch(3)
	for name, mutate := range map[string]func(r *pb.FetchBatchReply){
		"more results than tasks": func(r *pb.FetchBatchReply) { r.Results = append(r.Results, r.Results[0]) },
		"reschedule other url":    func(r *pb.FetchBatchReply) { r.Results[1].Reschedule.Url = "http://big.example/p/9" },
		"reschedule other depth":  func(r *pb.FetchBatchReply) { r.Results[1].Reschedule.Depth++ },
		"reschedule missing":      func(r *pb.FetchBatchReply) { r.Results[1].Reschedule = nil },
		"attempts jump":           func(r *pb.FetchBatchReply) { r.Results[1].Reschedule.Attempts += 5 },
		"retry not rescheduled":   func(r *pb.FetchBatchReply) { r.Results[1].HasReschedule = false },
		"terminal non-recrawl":    func(r *pb.FetchBatchReply) { r.Results[1].Finished = true },
		"dead retry":              func(r *pb.FetchBatchReply) { r.Results[1].Dead = r.Results[2].Dead },
		"dead other url":          func(r *pb.FetchBatchReply) { r.Results[2].Dead.Url = b.Tasks[0].Task.URL },
		"dead wrong key":          func(r *pb.FetchBatchReply) { r.Results[2].Dead.RingKey++ },
		"dead and rescheduled": func(r *pb.FetchBatchReply) {
			r.Results[2].HasReschedule = true
			r.Results[2].Reschedule = &pb.FetchTask{Url: b.Tasks[2].Task.URL, Depth: 3, Redirects: 2, Recrawl: true}
		},
		"meta other url":      func(r *pb.FetchBatchReply) { r.Results[0].Meta.Url = b.Tasks[1].Task.URL },
		"meta bad status":     func(r *pb.FetchBatchReply) { r.Results[0].Meta.Status = 1000 },
		"nil result":          func(r *pb.FetchBatchReply) { r.Results[0] = nil },
		"negative since":      func(r *pb.FetchBatchReply) { r.SinceLastNs = -1 },
		"negative retry":      func(r *pb.FetchBatchReply) { r.RetryAfterNs = -1 },
		"fetched, no contact": func(r *pb.FetchBatchReply) { r.Contacted = false },
		"failed":              func(r *pb.FetchBatchReply) { r.Error, r.Failed = "store broke", true },
	} {
		reply := encodeFetchReply(testResult(b))
		mutate(reply)
		res, err := decodeFetchReply(b, reply)
		if err == nil {
			t.Errorf("%s: accepted %+v", name, res)
			continue
		}
		if errors.Is(err, crawl.ErrNoHelper) {
			t.Errorf("%s: %v wraps ErrNoHelper, but the helper may have fetched", name, err)
		}
	}
	for name, reply := range map[string]*pb.FetchBatchReply{
		"busy":    {Busy: true},
		"refused": {Error: "not the owner"},
	} {
		if _, err := decodeFetchReply(b, reply); !errors.Is(err, crawl.ErrNoHelper) {
			t.Errorf("%s: %v, want ErrNoHelper", name, err)
		}
	}
}

// testHelper is a helper host serving the fetch protocol with a helper
// whose fetch function the test chooses.
type testHelper struct {
	h       host.Host
	streams *p2p.Streams
	srv     *helper
	links   *fakeLinks
	vouch   atomic.Bool
	pred    atomic.Value // string: the Addr of the ring predecessor
	calls   atomic.Int64
	lastMu  sync.Mutex
	last    *crawl.Batch
}

// fakeLinks settles the links it hands out once released.
type fakeLinks struct {
	mu       sync.Mutex
	pages    map[string][]uint64
	released bool
	taken    int
}

func (f *fakeLinks) TakeLinks(page string) []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := f.pages[page]
	delete(f.pages, page)
	f.taken += len(ids)
	return ids
}

func (f *fakeLinks) Settled(ids []uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.released || len(ids) == 0
}

func newTestHost(t *testing.T) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func newTestHelper(t *testing.T, fetch func(ctx context.Context, b *crawl.Batch) (*crawl.BatchResult, error)) *testHelper {
	t.Helper()
	th := &testHelper{h: newTestHost(t), links: &fakeLinks{pages: map[string][]uint64{}}}
	th.vouch.Store(true)
	th.pred.Store("")
	log := slog.New(slog.DiscardHandler)
	th.streams = p2p.NewStreams(th.h, 0, p2p.NoRingWork)
	th.srv = &helper{log: log,
		predecessors: func() []ring.Peer { return []ring.Peer{{Addr: th.pred.Load().(string)}} },
		vouch:        func(uint64, string) bool { return th.vouch.Load() },
		fetch: func(ctx context.Context, b *crawl.Batch) (*crawl.BatchResult, error) {
			th.calls.Add(1)
			th.lastMu.Lock()
			th.last = b
			th.lastMu.Unlock()
			return fetch(ctx, b)
		},
		links: th.links,
		// The owner's lease is not what these tests check.
		lease: func(context.Context, string, uint64) (time.Duration, error) { return time.Minute, nil }}
	p2p.NewFetchTransport(th.h, th.streams, log).Serve(th.srv.serve)
	t.Cleanup(th.streams.Close)
	return th
}

// testOwner is a delegator on its own host.
type testOwner struct {
	*delegator
	host host.Host
}

// newTestOwner returns a delegator on a fresh host connected to helpers,
// which are its successors in order; the first has it for predecessor.
func newTestOwner(t *testing.T, helpers ...*testHelper) testOwner {
	t.Helper()
	h := newTestHost(t)
	var succs []ring.Peer
	for _, th := range helpers {
		if err := h.Connect(context.Background(), th.h.Peerstore().PeerInfo(th.h.ID())); err != nil {
			t.Fatal(err)
		}
		succs = append(succs, p2p.RingPeer(th.h.ID()))
	}
	if len(helpers) > 0 {
		helpers[0].pred.Store(h.ID().String())
	}
	log := slog.New(slog.DiscardHandler)
	self := p2p.RingPeer(h.ID())
	return testOwner{newDelegator(p2p.NewFetchTransport(h, p2p.NewStreams(h, 0, p2p.NoRingWork), log), func(uint64) (ring.Peer, []ring.Peer) { return self, succs }, log), h}
}

// fetchAll answers every task of a batch with a retry.
func fetchAll(_ context.Context, b *crawl.Batch) (*crawl.BatchResult, error) {
	res := &crawl.BatchResult{Contacted: true, SinceLast: 10 * time.Millisecond}
	for _, t := range b.Tasks {
		next := t.Task
		next.Attempts++
		res.Results = append(res.Results, crawl.TaskResult{Outcome: frontier.Outcome{Reschedule: &next, At: time.Now().Add(time.Second)}})
	}
	return res, nil
}

// The owner's delegator and a helper's server over real libp2p streams:
// the owner's first successor fetches its batches with what the owner
// gives of its budget; a first successor that is busy or does not vouch
// for the owner fetched nothing, and the owner hears ErrNoHelper (it
// fetches the batch itself), as it does alone on the ring. The other
// successors are never asked.
func TestFetchDelegation(t *testing.T) {
	good := newTestHelper(t, fetchAll)
	second := newTestHelper(t, fetchAll)
	d := newTestOwner(t, good, second)
	ctx := context.Background()
	for i := range 3 {
		b := testBatch(4)
		res, err := d.Delegate(ctx, b)
		if err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		if len(res.Results) != 4 || !res.Contacted || res.Results[3].Outcome.Reschedule.Attempts != b.Tasks[3].Task.Attempts+1 {
			t.Fatalf("batch %d: result %+v", i, res)
		}
	}
	if n, other := good.calls.Load(), second.calls.Load(); n != 3 || other != 0 {
		t.Fatalf("the first successor fetched %d batches and the second %d, want 3 and 0", n, other)
	}
	good.lastMu.Lock()
	last := good.last
	good.lastMu.Unlock()
	if last.Budget != 2*time.Second || last.Wait != 3*time.Second {
		t.Fatalf("helper got budget %v, wait %v; want the owner's", last.Budget, last.Wait)
	}

	busy := newTestHelper(t, func(context.Context, *crawl.Batch) (*crawl.BatchResult, error) { return nil, crawl.ErrBusy })
	refusing := newTestHelper(t, fetchAll)
	refusing.vouch.Store(false)
	for name, first := range map[string]*testHelper{"busy": busy, "refusing": refusing} {
		d := newTestOwner(t, first, newTestHelper(t, fetchAll))
		if _, err := d.Delegate(ctx, testBatch(2)); !errors.Is(err, crawl.ErrNoHelper) {
			t.Fatalf("%s first successor: %v, want ErrNoHelper", name, err)
		}
		if d.sent.Load() != 0 || d.noHelper.Load() != 1 || d.sendFails.Load() != 0 {
			t.Fatalf("%s: delegator counters sent %d, no helper %d, fails %d", name, d.sent.Load(), d.noHelper.Load(), d.sendFails.Load())
		}
	}
	if refusing.calls.Load() != 0 || busy.srv.busy.Load() != 1 || refusing.srv.refused.Load() != 1 {
		t.Fatalf("refusing helper fetched %d batches; busy answers %d, refusals %d", refusing.calls.Load(), busy.srv.busy.Load(), refusing.srv.refused.Load())
	}

	// No successor at all (alone on the ring).
	self := p2p.RingPeer(d.host.ID())
	alone := newDelegator(d.fetch, func(uint64) (ring.Peer, []ring.Peer) { return self, []ring.Peer{self} }, d.log)
	if _, err := alone.Delegate(ctx, testBatch(1)); !errors.Is(err, crawl.ErrNoHelper) {
		t.Fatalf("alone: %v, want ErrNoHelper", err)
	}
}

// Issue 29, politeness amplification through helpers: an owner (here a
// hostile one every helper vouches for) sends the same batch of a host to
// three replicas at once. Only the helper whose ring predecessor it is
// fetches; the others refuse before any request, so the host sees one
// batch at a time whatever the owner asks. Without the predecessor check
// all three fetched side by side.
func TestFetchOneHelperPerOwner(t *testing.T) {
	var running, most atomic.Int64
	slow := func(ctx context.Context, b *crawl.Batch) (*crawl.BatchResult, error) {
		n := running.Add(1)
		for old := most.Load(); n > old && !most.CompareAndSwap(old, n); old = most.Load() {
		}
		time.Sleep(200 * time.Millisecond)
		running.Add(-1)
		return fetchAll(ctx, b)
	}
	helpers := []*testHelper{newTestHelper(t, slow), newTestHelper(t, slow), newTestHelper(t, slow)}
	owner := newTestOwner(t, helpers...)
	for _, th := range helpers[1:] {
		// Their predecessors are other nodes: a successor of the owner's
		// first successor, and a node elsewhere on the ring.
		th.pred.Store(helpers[0].h.ID().String())
	}
	var wg sync.WaitGroup
	errs := make([]error, len(helpers))
	for i, th := range helpers {
		wg.Go(func() {
			b := testBatch(3)
			_, errs[i] = owner.send(context.Background(), p2p.RingPeer(th.h.ID()), b, encodeBatch(b))
		})
	}
	wg.Wait()
	fetched := 0
	for _, th := range helpers {
		fetched += int(th.calls.Load())
	}
	if fetched != 1 || most.Load() != 1 || errs[0] != nil {
		t.Fatalf("the same batch sent to 3 helpers at once: %d fetched it, at most %d side by side (first: %v)", fetched, most.Load(), errs[0])
	}
	for i, err := range errs[1:] {
		if !errors.Is(err, crawl.ErrNoHelper) || helpers[i+1].srv.refused.Load() != 1 {
			t.Fatalf("helper %d: %v, refusals %d; want a refusal before any request", i+1, err, helpers[i+1].srv.refused.Load())
		}
	}
}

// The helper answers only once the links found on the batch's pages are
// settled, and counts that wait in SinceLast.
func TestFetchWaitsForLinks(t *testing.T) {
	var th *testHelper
	th = newTestHelper(t, func(ctx context.Context, b *crawl.Batch) (*crawl.BatchResult, error) {
		th.links.mu.Lock()
		th.links.pages[b.Tasks[0].Task.URL] = []uint64{7, 8}
		th.links.pages[b.Tasks[1].Task.URL] = []uint64{9}
		th.links.mu.Unlock()
		return fetchAll(ctx, b)
	})
	d := newTestOwner(t, th)
	const hold = 300 * time.Millisecond
	release := time.AfterFunc(hold, func() {
		th.links.mu.Lock()
		th.links.released = true
		th.links.mu.Unlock()
	})
	defer release.Stop()
	start := time.Now()
	res, err := d.Delegate(context.Background(), testBatch(2))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < hold {
		t.Fatalf("reply after %v, before the links were settled (%v)", took, hold)
	}
	if res.SinceLast < hold-50*time.Millisecond {
		t.Fatalf("SinceLast %v leaves out the %v spent settling links", res.SinceLast, hold)
	}
	th.links.mu.Lock()
	taken, left := th.links.taken, len(th.links.pages)
	th.links.mu.Unlock()
	if taken != 3 || left != 0 {
		t.Fatalf("took %d link entries, %d pages left; want 3 and 0", taken, left)
	}
}

// A reply that is not about the batch sent is a plain error: the helper
// may have fetched, so the owner must not fetch again at once as if
// nothing happened. So is a result too large to send back. A batch the
// crawler refuses (malformed) is a refusal: nothing was fetched.
func TestFetchBadHelper(t *testing.T) {
	liar := newTestHelper(t, func(ctx context.Context, b *crawl.Batch) (*crawl.BatchResult, error) {
		res, _ := fetchAll(ctx, b)
		res.Results[0].Outcome.Reschedule.URL = "http://" + testHost + "/somewhere-else"
		return res, nil
	})
	huge := newTestHelper(t, func(ctx context.Context, b *crawl.Batch) (*crawl.BatchResult, error) {
		res := &crawl.BatchResult{Contacted: true}
		for _, bt := range b.Tasks {
			m := store.URLMeta{URL: bt.Task.URL, ETag: strings.Repeat("x", 2<<20)}
			res.Results = append(res.Results, crawl.TaskResult{Finished: true, Outcome: frontier.Outcome{Meta: &m}})
		}
		return res, nil
	})
	for name, th := range map[string]*testHelper{"liar": liar, "huge": huge} {
		d := newTestOwner(t, th)
		_, err := d.Delegate(context.Background(), testBatch(3))
		if err == nil || errors.Is(err, crawl.ErrNoHelper) {
			t.Errorf("%s: %v, want a plain error", name, err)
		}
		if d.sendFails.Load() != 1 {
			t.Errorf("%s: %d send fails counted", name, d.sendFails.Load())
		}
	}
	refusing := newTestHelper(t, func(context.Context, *crawl.Batch) (*crawl.BatchResult, error) {
		return nil, errors.New("task 1: URL is not normalised")
	})
	d := newTestOwner(t, refusing)
	if _, err := d.Delegate(context.Background(), testBatch(3)); !errors.Is(err, crawl.ErrNoHelper) {
		t.Errorf("crawler refused the batch: %v, want ErrNoHelper", err)
	}
	if refusing.srv.refused.Load() != 1 || d.sendFails.Load() != 0 {
		t.Errorf("refusal counted as refused %d, send fails %d", refusing.srv.refused.Load(), d.sendFails.Load())
	}

	// A helper that never answers: the owner gives up at Wait.
	mute := newTestHost(t)
	block := make(chan struct{})
	defer close(block)
	mute.SetStreamHandler(libp2pproto.ID(protocol.FetchID), func(st network.Stream) {
		<-block
		_ = st.Reset()
	})
	d = newTestOwner(t)
	if err := d.host.Connect(context.Background(), mute.Peerstore().PeerInfo(mute.ID())); err != nil {
		t.Fatal(err)
	}
	d.delegator = newDelegator(d.fetch, func(uint64) (ring.Peer, []ring.Peer) {
		return p2p.RingPeer(d.host.ID()), []ring.Peer{p2p.RingPeer(mute.ID())}
	}, d.log)
	b := testBatch(1)
	b.Budget, b.Wait = 100*time.Millisecond, 300*time.Millisecond
	start := time.Now()
	_, err := d.Delegate(context.Background(), b)
	if err == nil || errors.Is(err, crawl.ErrNoHelper) {
		t.Fatalf("mute helper: %v, want a plain error", err)
	}
	if took := time.Since(start); took > b.Wait+time.Second {
		t.Fatalf("owner waited %v for a mute helper, Wait is %v", took, b.Wait)
	}
}

// Unhandling the protocol cancels the batches being fetched and waits for
// their handlers, which still answer; a batch arriving after that is not
// served.
func TestFetchServerClose(t *testing.T) {
	started := make(chan struct{})
	th := newTestHelper(t, func(ctx context.Context, b *crawl.Batch) (*crawl.BatchResult, error) {
		close(started)
		<-ctx.Done()
		return &crawl.BatchResult{}, nil
	})
	d := newTestOwner(t, th)
	errc := make(chan error, 1)
	go func() {
		b := testBatch(2)
		b.Budget, b.Wait = 20*time.Second, 30*time.Second
		_, err := d.Delegate(context.Background(), b)
		errc <- err
	}()
	<-started
	th.streams.Unhandle(protocol.FetchID)
	if err := <-errc; err != nil {
		t.Fatalf("batch cut short by Close: %v, want an empty result", err)
	}
	if _, err := d.Delegate(context.Background(), testBatch(1)); !errors.Is(err, crawl.ErrNoHelper) {
		t.Fatalf("after Close: %v, want ErrNoHelper (protocol no longer served)", err)
	}
}

// send is one exchange with helper p, outside the route.Delegator's
// choice (the tests pick the helper). Errors that wrap crawl.ErrNoHelper
// mean the helper did nothing with the batch (it never saw it, was busy or
// refused it); any other error means it may have made requests.
func (d *delegator) send(ctx context.Context, p ring.Peer, b *crawl.Batch, req *pb.FetchBatchRequest) (*crawl.BatchResult, error) {
	reply, err := d.fetch.Fetch(ctx, p, req, b.Wait)
	if err != nil {
		if errors.Is(err, p2p.ErrNotDelivered) {
			return nil, fmt.Errorf("%w: %w", err, crawl.ErrNoHelper)
		}
		return nil, err
	}
	res, err := decodeFetchReply(b, reply)
	if err != nil {
		return nil, fmt.Errorf("from %s: %w", p.Addr, err)
	}
	return res, nil
}
