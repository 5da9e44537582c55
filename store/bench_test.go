package store

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/internal/memstat"
)

// splitmix64 is a fast deterministic generator of well-spread uint64s.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// fillBatch fills batch with the URLs numbered first, first+1, ...
func fillBatch(batch []SeenEntry, first uint64) {
	var buf []byte
	for i := range batch {
		n := first + uint64(i)
		buf = append(buf[:0], "https://example.com/page/"...)
		buf = strconv.AppendUint(buf, n, 10)
		batch[i] = SeenEntry{
			Key:     splitmix64(n),
			URLHash: splitmix64(n ^ 0x5555555555555555),
			URL:     string(buf),
			Depth:   int(n % 5),
		}
	}
}

const benchBatch = 100

// BenchmarkMarkSeenNew measures MarkSeen of batches of 100 URLs that were
// never seen (one op = one batch), with the default options.
func BenchmarkMarkSeenNew(b *testing.B) {
	db := openTest(b, b.TempDir(), DefaultOptions())
	batch := make([]SeenEntry, benchBatch)
	next := uint64(0)
	for b.Loop() {
		fillBatch(batch, next)
		next += benchBatch
		got, err := db.MarkSeen(batch)
		if err != nil {
			b.Fatal(err)
		}
		if !got[0] {
			b.Fatal("new URL reported seen")
		}
	}
	b.ReportMetric(float64(next)/b.Elapsed().Seconds(), "urls/s")
}

// BenchmarkMarkSeenDuplicate measures MarkSeen of batches of 100 URLs that
// were all seen before (one op = one batch): every entry passes the Bloom
// filter and is confirmed with a leveldb read.
func BenchmarkMarkSeenDuplicate(b *testing.B) {
	const stored = 200_000
	db := openTest(b, b.TempDir(), DefaultOptions())
	load := make([]SeenEntry, 1000)
	for i := uint64(0); i < stored; i += 1000 {
		fillBatch(load, i)
		if _, err := db.MarkSeen(load); err != nil {
			b.Fatal(err)
		}
	}
	batch := make([]SeenEntry, benchBatch)
	urls := 0
	x := uint64(1)
	for b.Loop() {
		for i := range batch {
			x = splitmix64(x)
			fillBatch(batch[i:i+1], x%stored)
		}
		got, err := db.MarkSeen(batch)
		if err != nil {
			b.Fatal(err)
		}
		if got[0] {
			b.Fatal("duplicate reported new")
		}
		urls += benchBatch
	}
	b.ReportMetric(float64(urls)/b.Elapsed().Seconds(), "urls/s")
}

// BenchmarkSeen measures Seen of URLs that were never seen (Bloom filter
// answers alone).
func BenchmarkSeenNew(b *testing.B) {
	db := openTest(b, b.TempDir(), DefaultOptions())
	x := uint64(0)
	for b.Loop() {
		x++
		if ok, err := db.Seen(splitmix64(x), x); err != nil || ok {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkPutPage measures PutPage of a 20 KB HTML page.
func BenchmarkPutPage(b *testing.B) {
	db := openTest(b, b.TempDir(), DefaultOptions())
	body := bytes.Repeat([]byte(`<div class="item"><a href="/item/1234">Item title</a> some text</div>`+"\n"), 300)
	p := testPage(0, 0, body)
	x := uint64(0)
	for b.Loop() {
		x++
		p.Key, p.URLHash = splitmix64(x), x
		if err := db.PutPage(p); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(body)))
}

// heapInUse returns the live Go heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// seenHeap is the result of measureSeenHeap.
type seenHeap struct {
	urls       int
	rssBytes   int64 // growth of the resident set while opening and filling the DB
	heapBytes  int64 // live Go heap of the DB holding urls URLs
	openBytes  int64 // live Go heap of the DB right after Open (incl. Bloom filter)
	bloomBytes int64 // size of the Bloom filter's bit set
	insert     time.Duration
}

// measureSeenHeap opens a DB sized for n URLs in the given mode, marks n new
// URLs and measures the live Go heap the DB then holds (Bloom filter,
// leveldb memtables and cache, store state), from before Open.
func measureSeenHeap(tb testing.TB, mode SeenMode, n int) seenHeap {
	tb.Helper()
	opts := DefaultOptions()
	opts.SeenMode = mode
	opts.BloomExpected = uint(max(n, 1))
	batch := make([]SeenEntry, 1000)
	dir := tb.TempDir()
	before, rssBefore := heapInUse(), memstat.ResidentBytes()
	db, err := Open(dir, opts)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	opened := heapInUse()
	start := time.Now()
	for i := 0; i < n; i += len(batch) {
		b := batch[:min(len(batch), n-i)]
		fillBatch(b, uint64(i))
		if _, err := db.MarkSeen(b); err != nil {
			tb.Fatal(err)
		}
	}
	insert := time.Since(start)
	after := heapInUse()
	res := seenHeap{
		urls:       n,
		rssBytes:   int64(memstat.ResidentBytes()) - int64(rssBefore),
		heapBytes:  int64(after) - int64(before),
		openBytes:  int64(opened) - int64(before),
		bloomBytes: int64(db.bloom.Cap() / 8),
		insert:     insert,
	}
	runtime.KeepAlive(db)
	return res
}

// BenchmarkSeenHeap reports the Go heap held per million seen URLs in each
// mode, with the Bloom filter sized for the number of URLs inserted. One op
// is one URL, so the default -benchtime measures about a second's worth of
// URLs; use e.g. -benchtime=2000000x for 2M. heapB/1Murls is the whole heap
// of the open DB divided by the URL count, so it includes costs that do not
// grow with the URL count (leveldb memtables, block cache, buffers: the
// absolute number of such bytes is reported as otherB) and so overstates the
// per-URL cost at small op counts; bloomB/1Murls is the part that grows
// linearly.
func BenchmarkSeenHeap(b *testing.B) {
	for _, mode := range []SeenMode{SeenExact, SeenBloomOnly} {
		b.Run(mode.String(), func(b *testing.B) {
			b.ReportAllocs()
			r := measureSeenHeap(b, mode, b.N)
			perM := 1e6 / float64(r.urls)
			b.ReportMetric(float64(r.heapBytes)*perM, "heapB/1Murls")
			b.ReportMetric(float64(r.rssBytes)*perM, "rssB/1Murls")
			b.ReportMetric(float64(r.bloomBytes)*perM, "bloomB/1Murls")
			b.ReportMetric(float64(r.heapBytes-r.bloomBytes), "otherB")
		})
	}
}

// BenchmarkPutShardRecords measures what the sync of the write that
// acknowledges new URLs costs: compare the synced and unsynced runs of a
// batch of 1 new record (a lone seed) and of 100 (a busy owner's accept
// batch). Run with a fixed -benchtime (e.g. 3000x) so both runs write to
// a database of the same size.
func BenchmarkPutShardRecords(b *testing.B) {
	for _, batch := range []int{1, 100} {
		for _, synced := range []bool{true, false} {
			name := fmt.Sprintf("batch=%d/synced", batch)
			if !synced {
				name = fmt.Sprintf("batch=%d/unsynced", batch)
			}
			b.Run(name, func(b *testing.B) {
				opts := testOptions(SeenExact)
				opts.noSync = !synced
				db := openTest(b, b.TempDir(), opts)
				recs := make([]ShardRecord, batch)
				next := uint64(1)
				for b.Loop() {
					for i := range recs {
						k := splitmix64(next)
						next++
						recs[i] = ShardRecord{Key: k, URLHash: k >> 7, URL: "http://h.example/p", Depth: 1}
					}
					if err := db.PutShardRecords(recs); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkApplyQueueRemove measures what the frontier writes when a task
// completes: its queue entry removed, a new one pushed (so that the queue
// keeps its size, 100,000 entries over 1,000 hosts) and the URL's
// metadata. Remove looks the entry up; RemoveKnown trusts the caller.
func BenchmarkApplyQueueRemove(b *testing.B) {
	for _, known := range []bool{false, true} {
		name := "Remove"
		if known {
			name = "RemoveKnown"
		}
		b.Run(name, func(b *testing.B) {
			opts := DefaultOptions()
			opts.noSync = true
			db := openTest(b, b.TempDir(), opts)
			const hosts, queued = 1000, 100_000
			entry := func(n uint64) QueueEntry {
				host := n % hosts
				return QueueEntry{HostKey: host, RingKey: host, URLHash: splitmix64(n), URL: "https://example.com/page/" + strconv.FormatUint(n, 10), Depth: 3, Priority: 4}
			}
			var live []QueueEntry // in push order, the oldest first
			for n := uint64(0); n < queued; n += 1000 {
				u := &QueueUpdate{}
				for i := range uint64(1000) {
					u.Push = append(u.Push, entry(n+i))
				}
				if _, err := db.ApplyQueue(u); err != nil {
					b.Fatal(err)
				}
				live = append(live, u.Push...)
			}
			next := uint64(queued)
			meta := URLMeta{URL: "https://example.com/page/x", Status: 200, Fetches: 1, LastFetch: time.Unix(1e9, 0)}
			for b.Loop() {
				done := live[0]
				live = live[1:]
				u := &QueueUpdate{
					Push:    []QueueEntry{entry(next)},
					URLMeta: []URLMetaRecord{{RingKey: done.RingKey, URLHash: done.URLHash, Meta: meta}},
				}
				if known {
					u.RemoveKnown = []QueueEntry{done}
				} else {
					u.Remove = []QueueEntry{done}
				}
				next++
				c, err := db.ApplyQueue(u)
				if err != nil {
					b.Fatal(err)
				}
				if c.Queued != queued {
					b.Fatalf("%d queued, want %d", c.Queued, queued)
				}
				live = append(live, u.Push[0])
			}
		})
	}
}

// BenchmarkQueueHeadDrained reads the next 8 entries of a host's queue
// once 2,800 entries before them were removed (their deletion markers
// still in leveldb), as the frontier does for a large host: from the head
// of the queue (QueueHead) and from where the last read ended
// (QueueHeadAfter).
func BenchmarkQueueHeadDrained(b *testing.B) {
	opts := DefaultOptions()
	opts.noSync = true
	db := openTest(b, b.TempDir(), opts)
	u := &QueueUpdate{}
	for i := range 3000 {
		u.Push = append(u.Push, QueueEntry{HostKey: 42, RingKey: 42, URLHash: uint64(i), URL: "https://example.com/page/" + strconv.Itoa(i), Priority: 4})
	}
	if _, err := db.ApplyQueue(u); err != nil {
		b.Fatal(err)
	}
	if _, err := db.ApplyQueue(&QueueUpdate{RemoveKnown: u.Push[:2800]}); err != nil {
		b.Fatal(err)
	}
	last := u.Push[2799]
	for _, name := range []string{"QueueHead", "QueueHeadAfter"} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				var head []QueueEntry
				var err error
				if name == "QueueHead" {
					head, err = db.QueueHead(42, 8, nil)
				} else {
					head, err = db.QueueHeadAfter(42, &last, 8, nil)
				}
				if err != nil || len(head) != 8 || head[0].Seq != u.Push[2800].Seq {
					b.Fatalf("head %v, %v", head, err)
				}
			}
		})
	}
}
