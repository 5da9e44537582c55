package node

import (
	"errors"
	"fmt"
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/internal/fuzzcorpus"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// The node's conversions of wire messages into crawl and store types are
// the last decoding of what a peer sends before the crawler acts on it:
// each accepts only what its checks document, and what it accepts encodes
// back (encodeBatch, encodeFetchReply, hostStates, recordState,
// encodeTasks) to a message that decodes to the same value.

var fuzzFetched = time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)

// fuzzMeta is the metadata of a URL fetched three times.
func fuzzMeta(u string) store.URLMeta {
	return store.URLMeta{
		URL: u, ETag: `"e1"`, LastModified: "Fri, 02 Jan 2026 15:04:05 GMT",
		Fingerprint: 0x0123456789abcdef, ContentHash: 0xfedcba9876543210,
		LastFetch: fuzzFetched, NextCrawl: fuzzFetched.Add(24 * time.Hour), Interval: 24 * time.Hour,
		Status: 200, Changes: 1, Fetches: 3,
	}
}

// checkMeta fails unless m is metadata a node may use (docs/protocol.md,
// UrlMeta).
func checkMeta(t *testing.T, what string, m store.URLMeta) {
	t.Helper()
	if m.Status < 0 || m.Status > 999 || m.Interval < 0 || m.Changes < 0 || m.Fetches < 0 || m.Changes > m.Fetches {
		t.Fatalf("%s: malformed metadata accepted: %+v", what, m)
	}
}

// fuzzBatch is the batch a FuzzDecodeFetchReply input answers: n tasks of
// a.test, the first fetched before, the last a retry.
func fuzzBatch(n int) *crawl.Batch {
	b := &crawl.Batch{Host: "a.test", RingKey: urls.HostKey("a.test"), Gap: time.Second, Budget: 10 * time.Second, Wait: 30 * time.Second}
	for i := range n {
		u := fmt.Sprintf("http://a.test/p%d?q=%d", i, i)
		bt := crawl.BatchTask{Task: frontier.Task{URL: u, Depth: i + 1, Attempts: i % 2, Redirects: i / 2, Recrawl: i == 0}}
		if i == 0 {
			bt.Meta, bt.HasMeta = fuzzMeta(u), true
		}
		b.Tasks = append(b.Tasks, bt)
	}
	return b
}

// FuzzDecodeFetchBatch decodes arbitrary bytes as a fetch batch, as a
// helper does before fetching anything for an owner. An accepted batch
// has 1 to MaxDelegateTasks tasks, a lowercase host of 1 to 255 bytes
// whose host key is the batch's ring key, a gap of at least 0 and
// 0 < budget < wait <= MaxFetchWait, every URL of 1 to MaxURLLength bytes
// on that host, and metadata that is valid and about its own task.
func FuzzDecodeFetchBatch(f *testing.F) {
	samples := map[string]*crawl.Batch{"three-tasks": fuzzBatch(3), "one-task": fuzzBatch(1), "full": fuzzBatch(crawl.MaxDelegateTasks)}
	for _, name := range []string{"three-tasks", "one-task"} {
		b, err := proto.Marshal(encodeBatch(samples[name]))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	fuzzcorpus.Write(f, func() map[string][]any {
		seeds := map[string][]any{}
		for name, b := range samples {
			seeds[name] = []any{marshal(f, encodeBatch(b))}
		}
		other := encodeBatch(fuzzBatch(2))
		other.Tasks[1].Url = "http://b.test/"
		seeds["task-on-another-host"] = []any{marshal(f, other)}
		return seeds
	})
	f.Fuzz(func(t *testing.T, body []byte) {
		var req pb.FetchBatchRequest
		if proto.Unmarshal(body, &req) != nil {
			return
		}
		b, err := decodeBatch(&req)
		if err != nil {
			return
		}
		switch {
		case len(b.Tasks) == 0 || len(b.Tasks) > crawl.MaxDelegateTasks:
			t.Fatalf("batch of %d tasks accepted", len(b.Tasks))
		case b.Host == "" || len(b.Host) > maxHostLen || b.Host != strings.ToLower(b.Host) || urls.HostKey(b.Host) != b.RingKey:
			t.Fatalf("batch for host %q, ring key %x accepted", b.Host, b.RingKey)
		case b.Gap < 0 || b.Budget <= 0 || b.Wait <= b.Budget || b.Wait > p2p.MaxFetchWait:
			t.Fatalf("batch with gap %v, budget %v, wait %v accepted", b.Gap, b.Budget, b.Wait)
		}
		for i, bt := range b.Tasks {
			if h, err := urls.HostOf(bt.Task.URL); err != nil || h != b.Host || bt.Task.URL == "" || len(bt.Task.URL) > urls.MaxURLLength {
				t.Fatalf("task %d: URL %q (host %q, %v) accepted in a batch for %s", i, bt.Task.URL, h, err, b.Host)
			}
			if bt.Task.Depth < 0 || bt.Task.Attempts < 0 || bt.Task.Redirects < 0 {
				t.Fatalf("task %d: negative counts %+v", i, bt.Task)
			}
			if bt.HasMeta {
				checkMeta(t, fmt.Sprintf("task %d", i), bt.Meta)
				if bt.Meta.URL != "" && bt.Meta.URL != bt.Task.URL {
					t.Fatalf("task %d: metadata of %q accepted for %q", i, bt.Meta.URL, bt.Task.URL)
				}
			}
		}
		var again pb.FetchBatchRequest
		if err := proto.Unmarshal(marshal(t, encodeBatch(b)), &again); err != nil {
			t.Fatal(err)
		}
		back, err := decodeBatch(&again)
		if err != nil || !reflect.DeepEqual(back, b) {
			t.Fatalf("batch does not survive a round trip: %v\n got %+v\nwant %+v", err, back, b)
		}
	})
}

// FuzzDecodeFetchReply decodes arbitrary bytes as a helper's reply to a
// batch of 1 to 4 tasks (nTasks picks it), as the owner does. A busy or
// refusing helper's reply wraps crawl.ErrNoHelper (nothing was fetched),
// a failed one does not. An accepted reply has no more results than
// tasks, no negative durations, no new metadata without a request, and
// each result is about its own task: a reschedule of the same URL, depth
// and redirects with at most one more attempt (a recrawl if finished), a
// retry rescheduled and not dead, a dead letter with the task's URL and
// keys and no reschedule, metadata that is valid and the task's.
func FuzzDecodeFetchReply(f *testing.F) {
	samples := map[string]*crawl.BatchResult{}
	{
		b := fuzzBatch(4)
		t0, t3 := b.Tasks[0].Task, b.Tasks[3].Task
		recrawl, retry := t0, t3
		retry.Attempts++
		m := fuzzMeta(t0.URL)
		m.Fetches, m.Changes = 4, 2
		host, _ := urls.HostOf(b.Tasks[1].Task.URL)
		samples["fetched-dead-redirect-retry"] = &crawl.BatchResult{
			Contacted: true, SinceLast: 300 * time.Millisecond, RetryAfter: 5 * time.Second,
			Results: []crawl.TaskResult{
				{Finished: true, Outcome: frontier.Outcome{Reschedule: &recrawl, At: fuzzFetched.Add(12 * time.Hour), Meta: &m}},
				{Finished: true, Outcome: frontier.Outcome{Dead: &store.DeadLetter{
					URL: b.Tasks[1].Task.URL, RingKey: b.RingKey, URLHash: urls.URLHash(b.Tasks[1].Task.URL), HostKey: urls.HostKey(host),
					Depth: 2, Attempts: 3, Kind: "http_5xx", LastError: "503 Service Unavailable", At: fuzzFetched}}},
				{Finished: true},
				{Outcome: frontier.Outcome{Reschedule: &retry, At: fuzzFetched.Add(time.Minute)}},
			},
		}
		samples["nothing-fetched"] = &crawl.BatchResult{}
	}
	for _, r := range samples {
		f.Add(uint8(3), marshal(f, encodeFetchReply(r)))
	}
	f.Add(uint8(0), marshal(f, &pb.FetchBatchReply{Busy: true}))
	fuzzcorpus.Write(f, func() map[string][]any {
		seeds := map[string][]any{}
		for name, r := range samples {
			seeds[name] = []any{uint8(3), marshal(f, encodeFetchReply(r))}
		}
		seeds["busy"] = []any{uint8(0), marshal(f, &pb.FetchBatchReply{Busy: true})}
		seeds["refused"] = []any{uint8(0), marshal(f, &pb.FetchBatchReply{Error: "fetch batch: 0 tasks, want 1 to 64"})}
		seeds["failed"] = []any{uint8(0), marshal(f, &pb.FetchBatchReply{Error: "reply too large", Failed: true})}
		return seeds
	})
	f.Fuzz(func(t *testing.T, nTasks uint8, body []byte) {
		var reply pb.FetchBatchReply
		if proto.Unmarshal(body, &reply) != nil {
			return
		}
		b := fuzzBatch(1 + int(nTasks%4))
		res, err := decodeFetchReply(b, &reply)
		if nothingFetched := reply.Busy || reply.Error != "" && !reply.Failed; err != nil && errors.Is(err, crawl.ErrNoHelper) != nothingFetched {
			t.Fatalf("reply (busy %v, error %q, failed %v) refused with %v", reply.Busy, reply.Error, reply.Failed, err)
		}
		if err != nil {
			return
		}
		switch {
		case reply.Busy || reply.Error != "" || reply.Failed:
			t.Fatalf("reply (busy %v, error %q, failed %v) accepted", reply.Busy, reply.Error, reply.Failed)
		case len(res.Results) > len(b.Tasks):
			t.Fatalf("%d results for %d tasks accepted", len(res.Results), len(b.Tasks))
		case res.SinceLast < 0 || res.RetryAfter < 0:
			t.Fatalf("negative durations accepted: %+v", res)
		}
		for i, r := range res.Results {
			task, o := b.Tasks[i].Task, r.Outcome
			if !res.Contacted && o.Meta != nil {
				t.Fatalf("result %d: new metadata without a request", i)
			}
			if n := o.Reschedule; n != nil {
				if n.URL != task.URL || n.Depth != task.Depth || n.Redirects != task.Redirects || n.Attempts > task.Attempts+1 || r.Finished && !n.Recrawl {
					t.Fatalf("result %d (finished %v): reschedule %+v of task %+v accepted", i, r.Finished, *n, task)
				}
			}
			if !r.Finished && (o.Reschedule == nil || o.Dead != nil) {
				t.Fatalf("result %d: a retry without reschedule or dead: %+v", i, o)
			}
			if d := o.Dead; d != nil {
				host, _ := urls.HostOf(task.URL)
				if d.URL != task.URL || d.RingKey != b.RingKey || d.URLHash != urls.URLHash(task.URL) || d.HostKey != urls.HostKey(host) ||
					o.Reschedule != nil || len(d.Kind) > 64 || len(d.LastError) > maxDeadErrorLen {
					t.Fatalf("result %d: dead letter %+v of task %+v accepted", i, *d, task)
				}
			}
			if m := o.Meta; m != nil {
				checkMeta(t, fmt.Sprintf("result %d", i), *m)
				if m.URL != task.URL {
					t.Fatalf("result %d: metadata of %q for task %q", i, m.URL, task.URL)
				}
			}
		}
		var again pb.FetchBatchReply
		if err := proto.Unmarshal(marshal(t, encodeFetchReply(res)), &again); err != nil {
			t.Fatal(err)
		}
		back, err := decodeFetchReply(b, &again)
		if err != nil || !reflect.DeepEqual(back, res) {
			t.Fatalf("reply does not survive a round trip: %v\n got %+v\nwant %+v", err, back, res)
		}
	})
}

// FuzzDecodeHostState decodes arbitrary bytes as a host's politeness state
// (a HostPoliteness, the Data of a shard host state a peer replicated or
// handed over), as a new owner restores it. Accepted states pass
// crawl.HostSnapshot.Check, carry a robots.txt body only for a 2xx answer
// (never nil then), and survive hostStates and decoding again unchanged.
func FuzzDecodeHostState(f *testing.F) {
	snaps := map[string]crawl.HostSnapshot{
		"robots-200": {Host: "a.test", Key: urls.HostKey("a.test"), NotBefore: fuzzFetched.Add(2 * time.Second),
			Origin: "http://a.test", RobotsStatus: 200, RobotsFetched: fuzzFetched,
			Robots: []byte("User-agent: *\nDisallow: /private/\nAllow: /private/open/\nCrawl-delay: 2\n\nUser-agent: swarmcrawl\nDisallow: /*.pdf$\n")},
		"robots-200-empty": {Host: "b.test", Key: urls.HostKey("b.test"), Origin: "https://b.test:8443", RobotsStatus: 204, RobotsFetched: fuzzFetched, Robots: []byte{}},
		"robots-404":       {Host: "c.test", Key: urls.HostKey("c.test"), Origin: "http://c.test", RobotsStatus: 404, RobotsFetched: fuzzFetched},
		"clock-only":       {Host: "d.test", Key: urls.HostKey("d.test"), NotBefore: fuzzFetched.Add(time.Hour)},
		"ipv6":             {Host: "::1", Key: urls.HostKey("::1"), Origin: "http://[::1]:8080", RobotsStatus: 503, RobotsFetched: fuzzFetched},
	}
	states := map[string]shard.HostState{}
	for name, s := range snaps {
		hs, err := hostStates([]crawl.HostSnapshot{s})
		if err != nil {
			f.Fatal(err)
		}
		states[name] = hs[0]
		f.Add(hs[0].Key, hs[0].Host, hs[0].Data)
	}
	f.Add(urls.HostKey("a.test"), "a.test", []byte("\x12\x0chttp://b.test\x18\xc8\x01"))
	fuzzcorpus.Write(f, func() map[string][]any {
		seeds := map[string][]any{}
		for name, h := range states {
			seeds[name] = []any{h.Key, h.Host, h.Data}
		}
		return seeds
	})
	f.Fuzz(func(t *testing.T, key uint64, host string, data []byte) {
		s, err := decodeHostState(shard.HostState{Key: key, Host: host, Data: data})
		if err != nil {
			return
		}
		if err := s.Check(); err != nil {
			t.Fatalf("accepted host state fails its check: %v", err)
		}
		if s.Host != host || s.Key != key {
			t.Fatalf("host state of %q (key %x) decoded as %q (key %x)", host, key, s.Host, s.Key)
		}
		if ok := s.RobotsStatus >= 200 && s.RobotsStatus < 300; ok != (s.Robots != nil) {
			t.Fatalf("robots.txt status %d with a body of %d bytes (nil %v)", s.RobotsStatus, len(s.Robots), s.Robots == nil)
		}
		hs, err := hostStates([]crawl.HostSnapshot{s})
		if err != nil {
			t.Fatal(err)
		}
		back, err := decodeHostState(hs[0])
		if err != nil || !reflect.DeepEqual(back, s) {
			t.Fatalf("host state does not survive a round trip: %v\n got %+v\nwant %+v", err, back, s)
		}
	})
}

// FuzzDecodeRecordState decodes arbitrary bytes as a shard record's URL
// state (a serialized UrlMeta, replicated or handed over by a peer), as a
// node does when it adopts the record. Accepted metadata is valid, and
// recordState encodes it back, versioned by its fetch time, to the same.
func FuzzDecodeRecordState(f *testing.F) {
	seeds := map[string][]any{}
	for name, m := range map[string]store.URLMeta{
		"fetched":     fuzzMeta("http://a.test/page"),
		"not-changed": {URL: "https://b.test/", LastFetch: fuzzFetched, Status: 304, Fetches: 7},
		"redirect":    {URL: "http://a.test/old", LastFetch: fuzzFetched, Status: 301, ContentHash: 1, Fetches: 1},
	} {
		meta, _, err := recordState(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(meta)
		seeds[name] = []any{meta}
	}
	fuzzcorpus.Write(f, func() map[string][]any { return seeds })
	f.Fuzz(func(t *testing.T, meta []byte) {
		m, err := decodeRecordState(meta)
		if err != nil {
			return
		}
		checkMeta(t, "record state", m)
		again, version, err := recordState(m)
		if err != nil {
			t.Fatal(err)
		}
		if m.LastFetch.IsZero() {
			if again != nil || version != 0 {
				t.Fatalf("state of a URL never fetched encoded as %x, version %d", again, version)
			}
			return
		}
		back, err := decodeRecordState(again)
		if err != nil || !reflect.DeepEqual(back, m) || version != uint64(m.LastFetch.UnixNano()) {
			t.Fatalf("record state does not survive a round trip: %v, version %d\n got %+v\nwant %+v", err, version, back, m)
		}
	})
}

// FuzzDecodeTasks decodes arbitrary bytes as a task batch (or the tasks a
// TaskBatchResult hands back as not owned) and its tasks with decodeTasks,
// as an owner does before it normalises each URL again. Every task keeps
// its URL, depth and redirects, with no negative count, and encodes back
// to the same task; a URL the owner accepts normalises to at most
// MaxURLLength bytes and has a task key in both key modes.
func FuzzDecodeTasks(f *testing.F) {
	batches := map[string]proto.Message{
		"batch": &pb.TaskBatch{Tasks: encodeTasks([]route.Task{
			{URL: "http://a.test/", Depth: 1}, {URL: "https://b.test/x?y=1", Depth: 4, Redirects: 2}, {URL: "HTTP://C.test:80/a/../b#f", Depth: 2}})},
		"not-owned": &pb.TaskBatchResult{Accepted: 1, NotOwned: encodeTasks([]route.Task{{URL: "http://d.test/", Depth: 3}})},
	}
	for _, m := range batches {
		f.Add(marshal(f, m))
	}
	fuzzcorpus.Write(f, func() map[string][]any {
		seeds := map[string][]any{}
		for name, m := range batches {
			seeds[name] = []any{marshal(f, m)}
		}
		return seeds
	})
	f.Fuzz(func(t *testing.T, body []byte) {
		var batch pb.TaskBatch
		var result pb.TaskBatchResult
		var tasks []*pb.Task
		if proto.Unmarshal(body, &batch) == nil {
			tasks = batch.Tasks
		} else if proto.Unmarshal(body, &result) == nil {
			tasks = result.NotOwned
		}
		got := decodeTasks(tasks)
		if len(got) != len(tasks) {
			t.Fatalf("%d tasks decoded from %d", len(got), len(tasks))
		}
		for i, task := range got {
			if task.URL != tasks[i].GetUrl() || task.Depth != int(tasks[i].GetDepth()) || task.Redirects != int(tasks[i].GetRedirects()) ||
				task.Depth < 0 || task.Redirects < 0 {
				t.Fatalf("task %d decoded as %+v from %v", i, task, tasks[i])
			}
			u, err := urls.Normalize(nil, task.URL)
			if err != nil {
				continue
			}
			if len(u) > urls.MaxURLLength {
				t.Fatalf("task %d: %q normalised to %d bytes", i, task.URL, len(u))
			}
			for _, mode := range []urls.KeyMode{urls.KeyHost, urls.KeyURL} {
				if _, err := urls.TaskKey(u, mode); err != nil {
					t.Fatalf("task %d: %q normalised to %q, which has no %v key: %v", i, task.URL, u, mode, err)
				}
			}
		}
		if back := decodeTasks(encodeTasks(got)); !reflect.DeepEqual(back, got) {
			t.Fatalf("tasks do not survive a round trip:\n got %+v\nwant %+v", back, got)
		}
	})
}

func marshal(tb testing.TB, m proto.Message) []byte {
	tb.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
