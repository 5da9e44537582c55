package node

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"github.com/swarmcrawl/swarmcrawl/p2p/seedsig"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// The node is the only part of the swarm that knows both the crawler's
// types and the wire messages: this file converts between them, and
// checks on the way in what only the crawler's rules can tell (a task's
// URL is on its batch's host, a result is about its own task). Bounds
// that need no such knowledge (message sizes, deadlines) are the libp2p
// side's (package p2p).

// maxDeadErrorLen truncates a dead letter's error text on the wire, and
// maxHostLen is the longest hostname a batch may name (RFC 1035).
const (
	maxDeadErrorLen = 2048
	maxHostLen      = 255
)

func encodeTasks(ts []route.Task) []*pb.Task {
	out := make([]*pb.Task, len(ts))
	for i, t := range ts {
		out[i] = &pb.Task{Url: t.URL, Depth: uint32(t.Depth), Redirects: uint32(t.Redirects)}
		if t.SeedProof != "" {
			out[i].SeedProof, _ = seedsig.Decode([]byte(t.SeedProof)) // a damaged one travels as none
		}
	}
	return out
}

// decodeTasks reads tasks off the wire. Their ring keys are left zero: an
// owner computes its own (route.Owner), and a sender that gets tasks back
// as not owned computes them again before routing them (linkRouter). A
// seed's statement that is too large is dropped: the task is then no
// seed.
func decodeTasks(ts []*pb.Task) []route.Task {
	out := make([]route.Task, len(ts))
	for i, t := range ts {
		out[i] = route.Task{URL: t.GetUrl(), Depth: int(t.GetDepth()), Redirects: int(t.GetRedirects())}
		if t.SeedProof != nil {
			proof, _ := seedsig.Encode(t.SeedProof)
			out[i].SeedProof = string(proof)
		}
	}
	return out
}

// encodeBatch puts a batch on the wire.
func encodeBatch(b *crawl.Batch) *pb.FetchBatchRequest {
	req := &pb.FetchBatchRequest{
		Host: b.Host, RingKey: b.RingKey,
		GapNs: int64(b.Gap), BudgetNs: int64(b.Budget), WaitNs: int64(b.Wait),
		SinceLastNs: int64(b.SinceLast),
		Tasks:       make([]*pb.FetchTask, len(b.Tasks)),
	}
	for i, t := range b.Tasks {
		ft := encodeFetchTask(t.Task)
		if t.HasMeta {
			m := t.Meta
			m.Outlinks = store.Outlinks{} // the helper needs the validators only
			ft.Meta, ft.HasMeta = encodeURLMeta(m), true
		}
		req.Tasks[i] = ft
	}
	return req
}

func encodeFetchTask(t frontier.Task) *pb.FetchTask {
	return &pb.FetchTask{Url: t.URL, Depth: uint32(t.Depth), Attempts: uint32(t.Attempts), Redirects: uint32(t.Redirects), Recrawl: t.Recrawl}
}

func decodeFetchTask(t *pb.FetchTask) frontier.Task {
	return frontier.Task{URL: t.GetUrl(), Depth: int(t.GetDepth()), Attempts: int(t.GetAttempts()), Redirects: int(t.GetRedirects()), Recrawl: t.GetRecrawl()}
}

// decodeBatch reads a batch off the wire and checks it: 1 to
// crawl.MaxDelegateTasks tasks, sane durations, and every URL on the
// batch's host, whose ring key is the batch's.
func decodeBatch(req *pb.FetchBatchRequest) (*crawl.Batch, error) {
	b := &crawl.Batch{
		Host: req.Host, RingKey: req.RingKey,
		Gap: time.Duration(req.GapNs), Budget: time.Duration(req.BudgetNs), Wait: time.Duration(req.WaitNs),
		SinceLast: time.Duration(req.SinceLastNs),
	}
	switch n := len(req.Tasks); {
	case n == 0 || n > crawl.MaxDelegateTasks:
		return nil, fmt.Errorf("fetch batch: %d tasks, want 1 to %d", n, crawl.MaxDelegateTasks)
	case b.Host == "" || len(b.Host) > maxHostLen:
		return nil, fmt.Errorf("fetch batch: bad host (%d bytes)", len(b.Host))
	case urls.HostKey(b.Host) != b.RingKey:
		return nil, fmt.Errorf("fetch batch: ring key %s is not the key of host %s", ring.ID(b.RingKey), b.Host)
	case b.Gap < 0 || b.Budget <= 0 || b.Wait <= b.Budget || b.Wait > p2p.MaxFetchWait:
		return nil, fmt.Errorf("fetch batch: gap %v, budget %v, wait %v: want gap >= 0, 0 < budget < wait <= %v", b.Gap, b.Budget, b.Wait, p2p.MaxFetchWait)
	case b.SinceLast < 0:
		return nil, fmt.Errorf("fetch batch: since last request %v: want >= 0", b.SinceLast)
	}
	b.Tasks = make([]crawl.BatchTask, len(req.Tasks))
	for i, ft := range req.Tasks {
		if ft == nil {
			return nil, fmt.Errorf("fetch batch: task %d missing", i)
		}
		t := decodeFetchTask(ft)
		if t.URL == "" || len(t.URL) > urls.MaxURLLength {
			return nil, fmt.Errorf("fetch batch: task %d: URL of %d bytes", i, len(t.URL))
		}
		if h, err := urls.HostOf(t.URL); err != nil || h != b.Host {
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
	out := &pb.UrlMeta{
		Url: m.URL, Etag: m.ETag, LastModified: m.LastModified,
		Fingerprint: m.Fingerprint, ContentHash: m.ContentHash,
		LastFetchNs: unixNanos(m.LastFetch), NextCrawlNs: unixNanos(m.NextCrawl),
		IntervalNs: int64(m.Interval), Status: int32(m.Status),
		Changes: int64(m.Changes), Fetches: int64(m.Fetches),
	}
	for _, c := range m.Captures[:min(len(m.Captures), store.MaxCaptures)] {
		out.Captures = append(out.Captures, &pb.Capture{Holder: c.Holder, RecordId: c.RecordID, PayloadDigest: c.Digest, FetchedNs: unixNanos(c.Time)})
	}
	if o := m.Outlinks; o.Known {
		out.Outlinks = &pb.Outlinks{Followed: o.Followed, Depth: int32(o.Depth), Links: o.Links}
		if proto.Size(out) > shard.MaxMetaBytes {
			// Too many links for a shard record: the next owner does
			// not know them, and fetches the page again should a
			// shorter path arrive.
			out.Outlinks = nil
		}
	}
	return out
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
		Outlinks: decodeOutlinks(m.Outlinks),
		Captures: decodeCaptures(m.Captures),
	}, nil
}

// decodeCaptures returns where a URL's captures are as a peer sent them:
// the first store.MaxCaptures, less any out of bounds (empty or too long
// a field, no time), which are dropped one by one: a capture that cannot
// be found is no capture.
func decodeCaptures(cs []*pb.Capture) []store.Capture {
	var out []store.Capture
	for _, c := range cs[:min(len(cs), store.MaxCaptures)] {
		if c == nil || c.FetchedNs <= 0 {
			continue
		}
		sc := store.Capture{Holder: c.Holder, RecordID: c.RecordId, Digest: c.PayloadDigest, Time: fromUnixNanos(c.FetchedNs)}
		if sc.Valid() {
			out = append(out, sc)
		}
	}
	return out
}

// decodeOutlinks returns a page's links as a peer sent them. Links that
// are out of bounds (a negative depth, more links than a page yields, an
// empty link or one longer than a URL may be) are dropped whole: the
// page's links are then unknown here, which costs a fetch at worst.
func decodeOutlinks(o *pb.Outlinks) store.Outlinks {
	if o == nil || o.Depth < 0 || len(o.Links) > crawl.DefaultConfig().MaxLinksPerPage {
		return store.Outlinks{}
	}
	for _, l := range o.Links {
		if l == "" || len(l) > urls.MaxURLLength {
			return store.Outlinks{}
		}
	}
	return store.Outlinks{Known: true, Followed: o.Followed, Depth: int(o.Depth), Links: o.Links}
}

// encodeFetchReply puts a helper's result on the wire.
func encodeFetchReply(res *crawl.BatchResult) *pb.FetchBatchReply {
	out := &pb.FetchBatchReply{
		Contacted: res.Contacted, SinceLastNs: int64(res.SinceLast), RetryAfterNs: int64(res.RetryAfter),
		Results: make([]*pb.FetchResult, len(res.Results)),
	}
	for i, r := range res.Results {
		fr := &pb.FetchResult{Finished: r.Finished}
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
		out.Results[i] = fr
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
	case len(r.Results) > len(b.Tasks):
		return nil, fmt.Errorf("%d results for %d tasks", len(r.Results), len(b.Tasks))
	case r.SinceLastNs < 0 || r.RetryAfterNs < 0:
		return nil, fmt.Errorf("negative durations (since last %d, retry after %d)", r.SinceLastNs, r.RetryAfterNs)
	case len(r.Results) > 0 && !r.Contacted && anyFetched(r.Results):
		return nil, errors.New("results with metadata but no request made")
	}
	res := &crawl.BatchResult{
		Contacted: r.Contacted, SinceLast: time.Duration(r.SinceLastNs), RetryAfter: time.Duration(r.RetryAfterNs),
		Results: make([]crawl.TaskResult, len(r.Results)),
	}
	for i, fr := range r.Results {
		tr, err := decodeFetchResult(b, b.Tasks[i].Task, fr)
		if err != nil {
			return nil, fmt.Errorf("result %d (%s): %w", i, truncURL(b.Tasks[i].Task.URL), err)
		}
		res.Results[i] = tr
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

func decodeFetchResult(b *crawl.Batch, t frontier.Task, fr *pb.FetchResult) (crawl.TaskResult, error) {
	if fr == nil {
		return crawl.TaskResult{}, errors.New("missing")
	}
	tr := crawl.TaskResult{Finished: fr.Finished}
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
		case fr.Finished && !next.Recrawl:
			return tr, errors.New("a finished task rescheduled other than as a recrawl")
		}
		tr.Outcome.Reschedule, tr.Outcome.At = &next, fromUnixNanos(fr.AtNs)
	}
	if !fr.Finished && (tr.Outcome.Reschedule == nil || fr.Dead != nil) {
		return tr, errors.New("a retry must be rescheduled and not dead")
	}
	if d := fr.Dead; d != nil {
		host, _ := urls.HostOf(t.URL)
		switch {
		case d.Url != t.URL:
			return tr, fmt.Errorf("dead letter of another URL %q", truncURL(d.Url))
		case d.RingKey != b.RingKey || d.UrlHash != urls.URLHash(t.URL) || d.HostKey != urls.HostKey(host):
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

// recordState encodes a URL's metadata as a shard record's Meta (a
// serialized UrlMeta, the form the shard layer stores and forwards) and
// MetaVersion (the fetch time); nil and 0 for a URL never fetched.
func recordState(m store.URLMeta) (meta []byte, version uint64, err error) {
	if m.LastFetch.IsZero() {
		return nil, 0, nil
	}
	meta, err = proto.Marshal(encodeURLMeta(m))
	if err != nil {
		return nil, 0, fmt.Errorf("encode state of %s: %w", truncURL(m.URL), err)
	}
	return meta, metaVersion(m), nil
}

// metaVersion is the MetaVersion recordState gives m: its fetch time, 0
// for a URL never fetched.
func metaVersion(m store.URLMeta) uint64 {
	if m.LastFetch.IsZero() {
		return 0
	}
	return uint64(m.LastFetch.UnixNano())
}

// decodeRecordState reads a shard record's Meta.
func decodeRecordState(meta []byte) (store.URLMeta, error) {
	m := &pb.UrlMeta{}
	if err := proto.Unmarshal(meta, m); err != nil {
		return store.URLMeta{}, fmt.Errorf("URL state: %w", err)
	}
	return decodeURLMeta(m)
}

// hostStates turns the crawler's host snapshots into shard host states,
// whose Data is a serialized HostPoliteness.
func hostStates(snaps []crawl.HostSnapshot) ([]shard.HostState, error) {
	out := make([]shard.HostState, 0, len(snaps))
	for _, s := range snaps {
		data, err := proto.Marshal(&pb.HostPoliteness{
			NotBeforeNs: unixNanos(s.NotBefore), RobotsOrigin: s.Origin, RobotsStatus: int32(s.RobotsStatus),
			RobotsFetchedNs: unixNanos(s.RobotsFetched), Robots: s.Robots,
		})
		if err != nil {
			return nil, fmt.Errorf("host %s: %w", s.Host, err)
		}
		out = append(out, shard.HostState{Key: s.Key, Host: s.Host, Data: data})
	}
	return out, nil
}

// decodeHostState reads a host state back into a crawler snapshot and
// checks it (crawl.HostSnapshot.Check): a peer's politeness state is used
// only when it fits together. The robots.txt body of a 2xx answer is never
// nil (an empty file allows everything); other answers carry none.
func decodeHostState(h shard.HostState) (crawl.HostSnapshot, error) {
	p := &pb.HostPoliteness{}
	if err := proto.Unmarshal(h.Data, p); err != nil {
		return crawl.HostSnapshot{}, fmt.Errorf("host state of %s: %w", h.Host, err)
	}
	s := crawl.HostSnapshot{
		Host: h.Host, Key: h.Key, NotBefore: fromUnixNanos(p.NotBeforeNs),
		Origin: p.RobotsOrigin, RobotsStatus: int(p.RobotsStatus), RobotsFetched: fromUnixNanos(p.RobotsFetchedNs),
	}
	if s.RobotsStatus >= 200 && s.RobotsStatus < 300 {
		s.Robots = p.Robots
		if s.Robots == nil {
			s.Robots = []byte{}
		}
	}
	if err := s.Check(); err != nil {
		return crawl.HostSnapshot{}, fmt.Errorf("host state: %w", err)
	}
	return s, nil
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
