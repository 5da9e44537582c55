package p2p

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pproto "github.com/libp2p/go-libp2p/core/protocol"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// Hot hosts: fetch delegation over /swarmcrawl/fetch/1.0.0. The owner of a
// host with a long queue keeps its control plane and hands fetch batches to
// its successor replicas (crawl.Delegator); a helper fetches a batch for an
// owner its epoch table vouches for, under the owner's gap, and answers
// once the links found on the batch's pages are settled with their owners.

// Fetch delegation tuning.
const (
	// maxFetchWait is the longest Wait a helper accepts: it bounds how long
	// a batch can hold one of its handlers.
	maxFetchWait = 10 * time.Minute
	// fetchReadTimeout bounds reading a request, and fetchWriteTimeout
	// writing a reply.
	fetchReadTimeout  = 10 * time.Second
	fetchWriteTimeout = 5 * time.Second
	// fetchReplyMargin is how long before the batch's Wait runs out,
	// counted from when the stream arrived, the helper stops and replies
	// (at most a quarter of Wait): enough for the request's and the
	// reply's transit, so no request outlives the owner's wait and the
	// reply arrives while the owner still waits.
	fetchReplyMargin = time.Second
	// settleMax bounds how long a helper waits for the links of a batch's
	// pages to be settled before it replies, polling every settlePoll.
	settleMax  = 5 * time.Second
	settlePoll = 25 * time.Millisecond
	// vouchPoll is how often a helper checks, during a batch, that its
	// sender still owns the host.
	vouchPoll = 50 * time.Millisecond
	// maxDeadErrorLen truncates a dead letter's error text on the wire.
	maxDeadErrorLen = 2048
	// maxHostLen is the longest hostname a batch may name (RFC 1035).
	maxHostLen = 255
)

// fetchDelegator implements crawl.Delegator over the fetch protocol: it
// hands a batch to one of the node's live successors, round robin.
type fetchDelegator struct {
	host    host.Host
	streams *Streams
	self    ring.Peer
	// successors returns the ring's successor list, nearest first.
	successors func() []ring.Peer
	replicas   int
	log        *slog.Logger

	next                      atomic.Uint64
	sent, noHelper, sendFails atomic.Int64
}

var _ crawl.Delegator = (*fetchDelegator)(nil)

func newFetchDelegator(h host.Host, self ring.Peer, successors func() []ring.Peer, replicas int, log *slog.Logger) *fetchDelegator {
	if replicas <= 0 {
		replicas = 2
	}
	return &fetchDelegator{host: h, streams: NewStreams(h, 0), self: self, successors: successors, replicas: replicas, log: log}
}

// helpers returns the candidate helpers: the first replicas successors,
// without self or duplicates, that the host is connected to.
func (d *fetchDelegator) helpers() []ring.Peer {
	var out []ring.Peer
	seen := map[string]bool{d.self.Addr: true}
	for _, p := range d.successors() {
		if len(out) == d.replicas {
			break
		}
		if seen[p.Addr] {
			continue
		}
		seen[p.Addr] = true
		id, err := peer.Decode(p.Addr)
		if err != nil || d.host.Network().Connectedness(id) != network.Connected {
			continue
		}
		out = append(out, p)
	}
	return out
}

// Delegate sends b to a helper and returns its outcome. The whole exchange
// ends by b.Wait. A helper that is busy or refuses the batch fetched
// nothing, so the next one is tried with what remains of the budget; when
// none takes it the error wraps crawl.ErrNoHelper.
func (d *fetchDelegator) Delegate(ctx context.Context, b *crawl.Batch) (*crawl.BatchResult, error) {
	start := time.Now()
	ctx, cancel := context.WithDeadline(ctx, start.Add(b.Wait))
	defer cancel()
	req := encodeBatch(b)
	if size := proto.Size(req); size > protocol.MaxFetchMsgBytes {
		d.noHelper.Add(1)
		return nil, fmt.Errorf("delegate %d tasks of %s: request of %d bytes exceeds %d: %w", len(b.Tasks), b.Host, size, protocol.MaxFetchMsgBytes, crawl.ErrNoHelper)
	}
	helpers := d.helpers()
	first := 0
	if len(helpers) > 0 {
		first = int(d.next.Add(1) % uint64(len(helpers)))
	}
	var refusals []error
	for i := range helpers {
		p := helpers[(first+i)%len(helpers)]
		// A later attempt gets only what is left of the budget and of
		// the wait, so the helper stops when the owner stops waiting.
		elapsed := time.Since(start)
		if elapsed >= b.Budget || ctx.Err() != nil {
			break
		}
		req.BudgetNs = int64(b.Budget - elapsed)
		req.WaitNs = int64(b.Wait - elapsed)
		res, err := d.send(ctx, p, b, req)
		if err == nil {
			d.sent.Add(1)
			return res, nil
		}
		if !errors.Is(err, crawl.ErrNoHelper) {
			d.sendFails.Add(1)
			return nil, fmt.Errorf("delegate %d tasks of %s: %w", len(b.Tasks), b.Host, err)
		}
		d.log.Debug("helper did not take the batch", "helper", p.Addr, "host", b.Host, "err", err)
		refusals = append(refusals, err)
	}
	d.noHelper.Add(1)
	if len(refusals) == 0 {
		return nil, fmt.Errorf("delegate %d tasks of %s: no live successor among %d replicas: %w", len(b.Tasks), b.Host, d.replicas, crawl.ErrNoHelper)
	}
	return nil, fmt.Errorf("delegate %d tasks of %s: %w", len(b.Tasks), b.Host, errors.Join(refusals...))
}

// send is one exchange with helper p. Errors that wrap crawl.ErrNoHelper
// mean the helper did nothing with the batch; any other error means it
// may have made requests.
func (d *fetchDelegator) send(ctx context.Context, p ring.Peer, b *crawl.Batch, req *pb.FetchBatchRequest) (*crawl.BatchResult, error) {
	id, err := peer.Decode(p.Addr)
	if err != nil {
		return nil, fmt.Errorf("helper %q: %w: %w", p.Addr, err, crawl.ErrNoHelper)
	}
	reply := &pb.FetchBatchReply{}
	if err := d.streams.CallWithin(ctx, id, protocol.FetchID, req, reply, protocol.MaxFetchMsgBytes, b.Wait); err != nil {
		if errors.Is(err, ErrNotDelivered) {
			return nil, fmt.Errorf("%w: %w", err, crawl.ErrNoHelper)
		}
		return nil, err
	}
	res, err := decodeFetchReply(b, reply)
	if err != nil {
		return nil, fmt.Errorf("from %s: %w", shortID(id), err)
	}
	return res, nil
}

// fetchServer answers the fetch protocol: it fetches batches for the
// owners its epoch table vouches for. Every handler runs under ctx and is
// waited for by Close.
type fetchServer struct {
	host host.Host
	log  *slog.Logger
	// vouch reports whether owner holds key (shard.Manager.Vouch); fetch
	// fetches a batch (crawl.Crawler.FetchBatch); links settles the links
	// found on its pages (the node's router).
	vouch func(key uint64, owner string) bool
	fetch func(ctx context.Context, b *crawl.Batch) (*crawl.BatchResult, error)
	links linkSettler

	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup

	served, refused, busy atomic.Int64
}

// linkSettler is what the fetch server needs of the router.
type linkSettler interface {
	TakeLinks(page string) []uint64
	Settled(ids []uint64) bool
}

// newFetchServer returns a server; Serve starts answering.
func newFetchServer(h host.Host, log *slog.Logger, vouch func(uint64, string) bool,
	fetch func(context.Context, *crawl.Batch) (*crawl.BatchResult, error), links linkSettler) *fetchServer {
	ctx, cancel := context.WithCancel(context.Background())
	return &fetchServer{host: h, log: log, vouch: vouch, fetch: fetch, links: links, ctx: ctx, cancel: cancel}
}

// Serve registers the protocol handler.
func (s *fetchServer) Serve() {
	s.host.SetStreamHandler(libp2pproto.ID(protocol.FetchID), s.handle)
}

// Close stops answering, cancels the batches being fetched and waits for
// their handlers to reply and return.
func (s *fetchServer) Close() {
	s.host.RemoveStreamHandler(libp2pproto.ID(protocol.FetchID))
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// enter registers a handler unless the server is closed.
func (s *fetchServer) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

func (s *fetchServer) handle(st network.Stream) {
	if !s.enter() {
		_ = st.Reset()
		return
	}
	defer s.wg.Done()
	received := time.Now()
	_ = st.SetReadDeadline(received.Add(fetchReadTimeout))
	req := &pb.FetchBatchRequest{}
	if err := protocol.ReadMsg(st, req, protocol.MaxFetchMsgBytes); err != nil {
		_ = st.Reset()
		return
	}
	reply := s.serve(st.Conn().RemotePeer(), received, req)
	if size := proto.Size(reply); size > protocol.MaxFetchMsgBytes {
		s.log.Warn("fetch reply too large; reporting the batch failed", "bytes", size)
		reply = &pb.FetchBatchReply{Error: fmt.Sprintf("reply of %d bytes exceeds %d", size, protocol.MaxFetchMsgBytes), Failed: true}
	}
	_ = st.SetWriteDeadline(time.Now().Add(fetchWriteTimeout))
	if err := protocol.WriteMsg(st, reply, protocol.MaxFetchMsgBytes); err != nil {
		_ = st.Reset()
		return
	}
	_ = st.Close()
}

// serve fetches one batch for from, received at received, and builds the
// reply.
func (s *fetchServer) serve(from peer.ID, received time.Time, req *pb.FetchBatchRequest) *pb.FetchBatchReply {
	b, err := decodeBatch(req)
	if err != nil {
		s.refused.Add(1)
		return &pb.FetchBatchReply{Error: err.Error()}
	}
	if !s.vouch(b.RingKey, from.String()) {
		s.refused.Add(1)
		s.log.Debug("fetch batch refused: sender not the owner", "from", shortID(from), "host", b.Host)
		return &pb.FetchBatchReply{Error: fmt.Sprintf("fetch batch: %s does not own %s as far as this node knows", shortID(from), b.Host)}
	}
	ctx, cancel := context.WithDeadline(s.ctx, received.Add(b.Wait-min(fetchReplyMargin, b.Wait/4)))
	defer cancel()
	stopWatch := s.watchOwner(ctx, cancel, b.RingKey, from.String())
	res, err := s.fetch(ctx, b)
	stopWatch()
	fetched := time.Now()
	// Whatever happened, the links of the batch's pages are this
	// handler's to settle: the owner never calls TakeLinks for them.
	settled := s.settle(ctx, b)
	switch {
	case errors.Is(err, crawl.ErrBusy):
		s.busy.Add(1)
		return &pb.FetchBatchReply{Busy: true}
	case err != nil:
		// FetchBatch fails only by refusing a malformed batch, before
		// any request.
		s.refused.Add(1)
		s.log.Warn("fetch batch refused by the crawler", "from", shortID(from), "host", b.Host, "err", err)
		return &pb.FetchBatchReply{Error: err.Error()}
	case res == nil:
		return &pb.FetchBatchReply{Error: "fetch batch: no result", Failed: true}
	}
	if !settled {
		// The links are in this node's durable outbox and will be
		// delivered; only if it dies for good before are they lost.
		s.log.Debug("replying before every link of the batch is settled", "host", b.Host)
	}
	s.served.Add(1)
	out := encodeFetchReply(res)
	if res.Contacted {
		// The wait for links happened after the last request.
		out.SinceLastNs = int64(res.SinceLast + time.Since(fetched))
	}
	return out
}

// watchOwner cancels a batch as soon as this node's epoch table stops
// vouching for its sender (a replica promoted itself, or learnt of a higher
// claim), so that a stale owner's batch does not run on beside the new
// owner's fetches of the same host. The returned function stops the watch
// and waits for it.
func (s *fetchServer) watchOwner(ctx context.Context, cancel context.CancelFunc, key uint64, owner string) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(vouchPoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-quit:
				return
			case <-tick.C:
			}
			if !s.vouch(key, owner) {
				s.log.Info("fetch batch cut short: sender no longer owns the host", "owner", owner)
				cancel()
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// settle waits until the links found on the pages of b's tasks are
// settled with their owners, at most settleMax or until ctx ends, and
// reports whether they are.
func (s *fetchServer) settle(ctx context.Context, b *crawl.Batch) bool {
	var ids []uint64
	for _, t := range b.Tasks {
		ids = append(ids, s.links.TakeLinks(t.Task.URL)...)
	}
	if len(ids) == 0 {
		return true
	}
	deadline := time.NewTimer(settleMax)
	defer deadline.Stop()
	tick := time.NewTicker(settlePoll)
	defer tick.Stop()
	for !s.links.Settled(ids) {
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

// encodeBatch puts a batch on the wire.
func encodeBatch(b *crawl.Batch) *pb.FetchBatchRequest {
	req := &pb.FetchBatchRequest{
		Host: b.Host, RingKey: b.RingKey,
		GapNs: int64(b.Gap), BudgetNs: int64(b.Budget), WaitNs: int64(b.Wait),
		Tasks: make([]*pb.FetchTask, len(b.Tasks)),
	}
	for i, t := range b.Tasks {
		ft := encodeFetchTask(t.Task)
		if t.HasMeta {
			ft.Meta, ft.HasMeta = encodeURLMeta(t.Meta), true
		}
		req.Tasks[i] = ft
	}
	return req
}

func encodeFetchTask(t crawl.Task) *pb.FetchTask {
	return &pb.FetchTask{Url: t.URL, Depth: uint32(t.Depth), Attempts: uint32(t.Attempts), Redirects: uint32(t.Redirects), Recrawl: t.Recrawl}
}

func decodeFetchTask(t *pb.FetchTask) crawl.Task {
	return crawl.Task{URL: t.GetUrl(), Depth: int(t.GetDepth()), Attempts: int(t.GetAttempts()), Redirects: int(t.GetRedirects()), Recrawl: t.GetRecrawl()}
}

// decodeBatch reads a batch off the wire and checks it: 1 to
// crawl.MaxDelegateTasks tasks, sane durations, and every URL on the
// batch's host, whose ring key is the batch's.
func decodeBatch(req *pb.FetchBatchRequest) (*crawl.Batch, error) {
	b := &crawl.Batch{
		Host: req.Host, RingKey: req.RingKey,
		Gap: time.Duration(req.GapNs), Budget: time.Duration(req.BudgetNs), Wait: time.Duration(req.WaitNs),
	}
	switch n := len(req.Tasks); {
	case n == 0 || n > crawl.MaxDelegateTasks:
		return nil, fmt.Errorf("fetch batch: %d tasks, want 1 to %d", n, crawl.MaxDelegateTasks)
	case b.Host == "" || len(b.Host) > maxHostLen:
		return nil, fmt.Errorf("fetch batch: bad host (%d bytes)", len(b.Host))
	case crawl.HostKey(b.Host) != b.RingKey:
		return nil, fmt.Errorf("fetch batch: ring key %s is not the key of host %s", ring.ID(b.RingKey), b.Host)
	case b.Gap < 0 || b.Budget <= 0 || b.Wait <= b.Budget || b.Wait > maxFetchWait:
		return nil, fmt.Errorf("fetch batch: gap %v, budget %v, wait %v: want gap >= 0, 0 < budget < wait <= %v", b.Gap, b.Budget, b.Wait, maxFetchWait)
	}
	b.Tasks = make([]crawl.BatchTask, len(req.Tasks))
	for i, ft := range req.Tasks {
		if ft == nil {
			return nil, fmt.Errorf("fetch batch: task %d missing", i)
		}
		t := decodeFetchTask(ft)
		if t.URL == "" || len(t.URL) > crawl.MaxURLLength {
			return nil, fmt.Errorf("fetch batch: task %d: URL of %d bytes", i, len(t.URL))
		}
		if h, err := crawl.HostOf(t.URL); err != nil || h != b.Host {
			return nil, fmt.Errorf("fetch batch: task %d: %q is not on host %s", i, truncURL(t.URL), b.Host)
		}
		bt := crawl.BatchTask{Task: t}
		if ft.HasMeta {
			m, err := decodeURLMeta(ft.Meta)
			if err != nil {
				return nil, fmt.Errorf("fetch batch: task %d: %w", i, err)
			}
			if m.URL != "" && m.URL != t.URL {
				return nil, fmt.Errorf("fetch batch: task %d: metadata of another URL", i)
			}
			bt.Meta, bt.HasMeta = m, true
		}
		b.Tasks[i] = bt
	}
	return b, nil
}

func encodeURLMeta(m store.URLMeta) *pb.UrlMeta {
	return &pb.UrlMeta{
		Url: m.URL, Etag: m.ETag, LastModified: m.LastModified,
		Fingerprint: m.Fingerprint, ContentHash: m.ContentHash,
		LastFetchNs: unixNanos(m.LastFetch), NextCrawlNs: unixNanos(m.NextCrawl),
		IntervalNs: int64(m.Interval), Status: int32(m.Status),
		Changes: int64(m.Changes), Fetches: int64(m.Fetches),
	}
}

func decodeURLMeta(m *pb.UrlMeta) (store.URLMeta, error) {
	if m == nil {
		return store.URLMeta{}, errors.New("metadata missing")
	}
	if m.Status < 0 || m.Status > 999 || m.IntervalNs < 0 || m.Changes < 0 || m.Fetches < 0 || m.Changes > m.Fetches {
		return store.URLMeta{}, fmt.Errorf("malformed metadata (status %d, interval %d, changes %d, fetches %d)", m.Status, m.IntervalNs, m.Changes, m.Fetches)
	}
	return store.URLMeta{
		URL: m.Url, ETag: m.Etag, LastModified: m.LastModified,
		Fingerprint: m.Fingerprint, ContentHash: m.ContentHash,
		LastFetch: fromUnixNanos(m.LastFetchNs), NextCrawl: fromUnixNanos(m.NextCrawlNs),
		Interval: time.Duration(m.IntervalNs), Status: int(m.Status),
		Changes: int(m.Changes), Fetches: int(m.Fetches),
	}, nil
}

// encodeFetchReply puts a helper's result on the wire.
func encodeFetchReply(res *crawl.BatchResult) *pb.FetchBatchReply {
	out := &pb.FetchBatchReply{
		Contacted: res.Contacted, SinceLastNs: int64(res.SinceLast), RetryAfterNs: int64(res.RetryAfter),
		Done: make([]*pb.FetchResult, len(res.Done)),
	}
	for i, r := range res.Done {
		fr := &pb.FetchResult{Terminal: r.Terminal}
		if o := r.Outcome.Reschedule; o != nil {
			fr.HasReschedule, fr.Reschedule, fr.AtNs = true, encodeFetchTask(*o), unixNanos(r.Outcome.At)
		}
		if d := r.Outcome.Dead; d != nil {
			fr.Dead = &pb.DeadLetter{
				Url: d.URL, RingKey: d.RingKey, UrlHash: d.URLHash, HostKey: d.HostKey,
				Depth: uint32(d.Depth), Redirects: uint32(d.Redirects), Attempts: uint32(d.Attempts),
				Kind: d.Kind, LastError: truncate(d.LastError, maxDeadErrorLen), AtNs: unixNanos(d.At),
			}
		}
		if m := r.Outcome.Meta; m != nil {
			fr.Meta, fr.HasMeta = encodeURLMeta(*m), true
		}
		out.Done[i] = fr
	}
	return out
}

// decodeFetchReply reads a helper's reply to b and checks it against b:
// no more results than tasks, each about its own task's URL, and
// consistent (a retry is rescheduled and not dead, a dead letter is
// terminal). A refusal or a busy helper wraps crawl.ErrNoHelper: nothing
// was fetched. Any other error means requests may have been made.
func decodeFetchReply(b *crawl.Batch, r *pb.FetchBatchReply) (*crawl.BatchResult, error) {
	switch {
	case r.Busy:
		return nil, fmt.Errorf("helper busy: %w", crawl.ErrNoHelper)
	case r.Error != "" && !r.Failed:
		return nil, fmt.Errorf("helper refused the batch: %s: %w", r.Error, crawl.ErrNoHelper)
	case r.Failed:
		return nil, fmt.Errorf("helper failed the batch: %s", r.Error)
	case len(r.Done) > len(b.Tasks):
		return nil, fmt.Errorf("%d results for %d tasks", len(r.Done), len(b.Tasks))
	case r.SinceLastNs < 0 || r.RetryAfterNs < 0:
		return nil, fmt.Errorf("negative durations (since last %d, retry after %d)", r.SinceLastNs, r.RetryAfterNs)
	case len(r.Done) > 0 && !r.Contacted && anyFetched(r.Done):
		return nil, errors.New("results with metadata but no request made")
	}
	res := &crawl.BatchResult{
		Contacted: r.Contacted, SinceLast: time.Duration(r.SinceLastNs), RetryAfter: time.Duration(r.RetryAfterNs),
		Done: make([]crawl.TaskResult, len(r.Done)),
	}
	for i, fr := range r.Done {
		tr, err := decodeFetchResult(b, b.Tasks[i].Task, fr)
		if err != nil {
			return nil, fmt.Errorf("result %d (%s): %w", i, truncURL(b.Tasks[i].Task.URL), err)
		}
		res.Done[i] = tr
	}
	return res, nil
}

// anyFetched reports whether some result carries new metadata, which only
// a response produces.
func anyFetched(rs []*pb.FetchResult) bool {
	for _, r := range rs {
		if r.GetHasMeta() {
			return true
		}
	}
	return false
}

func decodeFetchResult(b *crawl.Batch, t crawl.Task, fr *pb.FetchResult) (crawl.TaskResult, error) {
	if fr == nil {
		return crawl.TaskResult{}, errors.New("missing")
	}
	tr := crawl.TaskResult{Terminal: fr.Terminal}
	if fr.HasReschedule {
		if fr.Reschedule == nil {
			return tr, errors.New("reschedule missing")
		}
		next := decodeFetchTask(fr.Reschedule)
		switch {
		case next.URL != t.URL:
			return tr, fmt.Errorf("reschedules another URL %q", truncURL(next.URL))
		case next.Depth != t.Depth || next.Redirects != t.Redirects:
			return tr, fmt.Errorf("reschedule changes depth or redirects (%d/%d, task %d/%d)", next.Depth, next.Redirects, t.Depth, t.Redirects)
		case next.Attempts > t.Attempts+1:
			return tr, fmt.Errorf("reschedule after %d attempts, task had %d", next.Attempts, t.Attempts)
		case fr.Terminal && !next.Recrawl:
			return tr, errors.New("a finished task rescheduled other than as a recrawl")
		}
		tr.Outcome.Reschedule, tr.Outcome.At = &next, fromUnixNanos(fr.AtNs)
	}
	if !fr.Terminal && (tr.Outcome.Reschedule == nil || fr.Dead != nil) {
		return tr, errors.New("a retry must be rescheduled and not dead")
	}
	if d := fr.Dead; d != nil {
		host, _ := crawl.HostOf(t.URL)
		switch {
		case d.Url != t.URL:
			return tr, fmt.Errorf("dead letter of another URL %q", truncURL(d.Url))
		case d.RingKey != b.RingKey || d.UrlHash != crawl.URLHash(t.URL) || d.HostKey != crawl.HostKey(host):
			return tr, errors.New("dead letter with wrong keys")
		case tr.Outcome.Reschedule != nil:
			return tr, errors.New("both dead and rescheduled")
		case len(d.LastError) > maxDeadErrorLen || len(d.Kind) > 64:
			return tr, errors.New("dead letter text too long")
		}
		tr.Outcome.Dead = &store.DeadLetter{
			URL: d.Url, RingKey: d.RingKey, URLHash: d.UrlHash, HostKey: d.HostKey,
			Depth: int(d.Depth), Redirects: int(d.Redirects), Attempts: int(d.Attempts),
			Kind: d.Kind, LastError: d.LastError, At: fromUnixNanos(d.AtNs),
		}
	}
	if fr.HasMeta {
		m, err := decodeURLMeta(fr.Meta)
		if err != nil {
			return tr, err
		}
		if m.URL != t.URL {
			return tr, fmt.Errorf("metadata of another URL %q", truncURL(m.URL))
		}
		tr.Outcome.Meta = &m
	}
	return tr, nil
}

// unixNanos encodes a time as Unix nanoseconds, the zero time as 0.
func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromUnixNanos decodes unixNanos.
func fromUnixNanos(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

func truncURL(u string) string { return truncate(u, 120) }
