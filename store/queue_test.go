package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

func qe(host uint64, prio int, url string) QueueEntry {
	return QueueEntry{HostKey: host, RingKey: host, URLHash: uint64(len(url))<<32 | host, URL: url, Depth: prio, Priority: prio}
}

func apply(t *testing.T, db *DB, u *QueueUpdate) QueueCounts {
	t.Helper()
	c, err := db.ApplyQueue(u)
	if err != nil {
		t.Fatalf("ApplyQueue: %v", err)
	}
	return c
}

func urls(es []QueueEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.URL
	}
	return out
}

// TestQueueOrderAndHosts checks that a host's queue reads back in
// (priority, arrival) order, that other hosts' entries never mix in, and
// that QueueHosts yields each host's head once.
func TestQueueOrderAndHosts(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	u := &QueueUpdate{Push: []QueueEntry{
		qe(7, 3, "http://a/3"), qe(7, 1, "http://a/1"), qe(8, 0, "http://b/0"),
		qe(7, 1, "http://a/1b"), qe(6, 2, "http://c/2"), qe(7, 0, "http://a/0"),
	}}
	c := apply(t, db, u)
	if c.Queued != 6 {
		t.Fatalf("counts %+v", c)
	}
	for i := 1; i < len(u.Push); i++ {
		if u.Push[i].Seq <= u.Push[i-1].Seq {
			t.Fatalf("sequence numbers not increasing: %+v", u.Push)
		}
	}
	head, err := db.QueueHead(7, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := urls(head), []string{"http://a/0", "http://a/1", "http://a/1b", "http://a/3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("host 7 queue %v, want %v", got, want)
	}
	if !reflect.DeepEqual(head[1], u.Push[1]) {
		t.Errorf("entry read back %+v, written %+v", head[1], u.Push[1])
	}
	// After an entry: those that sort after it, other hosts' never.
	after, err := db.QueueHeadAfter(7, &head[1], 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := urls(after), []string{"http://a/1b", "http://a/3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("QueueHeadAfter(a/1) = %v, want %v", got, want)
	}
	if last, _ := db.QueueHeadAfter(7, &head[3], 10, nil); len(last) != 0 {
		t.Errorf("QueueHeadAfter(the last entry) = %v, want none", urls(last))
	}
	skipped, _ := db.QueueHead(7, 2, func(e *QueueEntry) bool { return e.URL == "http://a/0" })
	if got := urls(skipped); !reflect.DeepEqual(got, []string{"http://a/1", "http://a/1b"}) {
		t.Errorf("QueueHead with skip: %v", got)
	}
	var heads []string
	if err := db.QueueHosts(func(h QueueEntry) error { heads = append(heads, h.URL); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := []string{"http://c/2", "http://a/0", "http://b/0"}; !reflect.DeepEqual(heads, want) {
		t.Errorf("QueueHosts heads %v, want %v", heads, want)
	}
	if _, err := db.ApplyQueue(&QueueUpdate{Push: []QueueEntry{qe(1, 256, "x")}}); err == nil {
		t.Error("priority 256 accepted")
	}
}

// TestQueueCountsExactAndDurable checks the counters across removals of
// absent entries, replaced dead letters, promotion, and a reopen.
func TestQueueCountsExactAndDurable(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, testOptions(SeenExact))
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	push := &QueueUpdate{Push: []QueueEntry{qe(1, 1, "http://a/1"), qe(1, 1, "http://a/2"), qe(2, 1, "http://b/1")}}
	apply(t, db, push)
	retry := qe(1, 1, "http://a/1")
	retry.Attempts, retry.Due = 1, now.Add(time.Minute)
	recrawl := qe(2, 1, "http://b/1")
	recrawl.Recrawl, recrawl.Due = true, now.Add(time.Hour)
	dead := DeadLetter{URL: "http://a/2", RingKey: 1, URLHash: 99, HostKey: 1, Attempts: 4, Kind: "http_5xx", LastError: "HTTP 503", At: now}
	c := apply(t, db, &QueueUpdate{
		Remove:   []QueueEntry{push.Push[0], push.Push[1], push.Push[2], {HostKey: 5, Seq: 12345}},
		Schedule: []QueueEntry{retry, recrawl},
		Dead:     []DeadLetter{dead},
	})
	want := QueueCounts{Queued: 0, Scheduled: 2, Retrying: 1, Dead: 1}
	if c != want {
		t.Fatalf("counts %+v, want %+v", c, want)
	}
	dead.LastError = "HTTP 500"
	if c := apply(t, db, &QueueUpdate{Dead: []DeadLetter{dead}}); c.Dead != 1 {
		t.Fatalf("replacing a dead letter counted it twice: %+v", c)
	}
	due, ok, err := db.NextDue()
	if err != nil || !ok || !due.Equal(retry.Due) {
		t.Fatalf("NextDue = %v %v %v, want %v", due, ok, err, retry.Due)
	}
	if got, _ := db.PromoteDue(now, 10); len(got) != 0 {
		t.Fatalf("promoted %v before due", got)
	}
	got, err := db.PromoteDue(now.Add(2*time.Minute), 10)
	if err != nil || len(got) != 1 || got[0].URL != retry.URL || got[0].Attempts != 1 || !got[0].Due.IsZero() {
		t.Fatalf("PromoteDue = %+v, %v", got, err)
	}
	db.Close()

	db = openTest(t, dir, testOptions(SeenExact))
	c, err = db.QueueCounts()
	if want := (QueueCounts{Queued: 1, Scheduled: 1, Retrying: 0, Dead: 1}); err != nil || c != want {
		t.Fatalf("counts after reopen %+v %v, want %+v", c, err, want)
	}
	head, _ := db.QueueHead(1, 10, nil)
	if len(head) != 1 || head[0].Seq != got[0].Seq || head[0].Attempts != 1 {
		t.Fatalf("promoted entry in the queue: %+v", head)
	}
	var sched []QueueEntry
	db.ScanSchedule(func(e QueueEntry) error { sched = append(sched, e); return nil })
	if len(sched) != 1 || !sched[0].Recrawl || !sched[0].Due.Equal(recrawl.Due) || sched[0].HostKey != 2 || sched[0].Priority != 1 {
		t.Fatalf("schedule %+v", sched)
	}
	var dls []DeadLetter
	db.DeadLetters(func(d DeadLetter) error { dls = append(dls, d); return nil })
	if len(dls) != 1 || !reflect.DeepEqual(dls[0], dead) {
		t.Fatalf("dead letters %+v, want %+v", dls, dead)
	}
	if err := db.DeleteDeadLetter(1, 99); err != nil || db.DeadLetterCount() != 0 {
		t.Fatalf("DeleteDeadLetter: %v, count %d", err, db.DeadLetterCount())
	}
	// Pushes after the reopen continue the sequence.
	more := &QueueUpdate{Push: []QueueEntry{qe(3, 0, "http://c/0")}}
	apply(t, db, more)
	if more.Push[0].Seq <= got[0].Seq {
		t.Errorf("sequence restarted after reopen: %d <= %d", more.Push[0].Seq, got[0].Seq)
	}
}

func TestDropHostQueue(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	var es []QueueEntry
	for i := range 2500 {
		e := qe(4, i%3, fmt.Sprintf("http://d/%d", i))
		e.Recrawl = i%100 == 0
		es = append(es, e)
	}
	es = append(es, qe(5, 0, "http://e/0"))
	apply(t, db, &QueueUpdate{Push: es})
	n, err := db.DropHostQueue(4, func(e *QueueEntry) bool { return e.Recrawl })
	if err != nil || n != 2475 {
		t.Fatalf("DropHostQueue = %d, %v; want 2475", n, err)
	}
	left, _ := db.QueueHead(4, 100, nil)
	if len(left) != 25 {
		t.Errorf("%d entries left, want the 25 recrawls", len(left))
	}
	if c, _ := db.QueueCounts(); c.Queued != 26 {
		t.Errorf("counts %+v", c)
	}
}

func TestURLMetaAndHostRoundTrip(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	if _, ok, err := db.URLMeta(1, 2); ok || err != nil {
		t.Fatalf("URLMeta of nothing: %v %v", ok, err)
	}
	m := URLMeta{URL: "http://a/", ETag: `"x"`, LastModified: "Mon, 02 Jan 2006 15:04:05 GMT", Fingerprint: 1 << 63, ContentHash: 42,
		LastFetch: time.Unix(1700000000, 5).UTC(), NextCrawl: time.Unix(1700003600, 0).UTC(), Interval: time.Hour, Status: 200, Changes: 2, Fetches: 5}
	if err := db.PutURLMeta(1, 2, m); err != nil {
		t.Fatal(err)
	}
	got, ok, err := db.URLMeta(1, 2)
	if err != nil || !ok || !reflect.DeepEqual(got, m) {
		t.Fatalf("URLMeta = %+v %v %v, want %+v", got, ok, err, m)
	}
	var scanned int
	db.ScanURLMeta(0, 0, func(k, h uint64, _ URLMeta) error { scanned++; return nil })
	if scanned != 1 {
		t.Errorf("ScanURLMeta saw %d", scanned)
	}
	h := HostState{HostKey: 9, Host: "a.example", Fetched: 25, Dropped: 3, NotBefore: time.Unix(1800000000, 0).UTC(), CrawlDelay: 1500 * time.Millisecond}
	if err := db.PutHost(h); err != nil {
		t.Fatal(err)
	}
	gotH, ok, err := db.Host(9)
	if err != nil || !ok || !reflect.DeepEqual(gotH, h) {
		t.Fatalf("Host = %+v %v %v", gotH, ok, err)
	}
	// A record written before the Crawl-delay was kept reads as none.
	old := HostState{HostKey: 11, Host: "b.example", Fetched: 2}
	v := encodeHostState(&old)
	v = append(v[:0:0], v...)
	if err := db.ldb.Put(hostRecordKey(11), v, nil); err != nil {
		t.Fatal(err)
	}
	if gotH, ok, err := db.Host(11); err != nil || !ok || !reflect.DeepEqual(gotH, old) {
		t.Fatalf("Host of a record without a Crawl-delay = %+v %v %v", gotH, ok, err)
	}
	// A Crawl-delay that is not positive is damage.
	if err := db.ldb.Put(hostRecordKey(12), binary.AppendVarint(encodeHostState(&HostState{Host: "c.example"}), -5), nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Host(12); !errors.Is(err, ErrCorrupt) {
		t.Errorf("negative crawl delay: %v", err)
	}
	// Corrupt records are reported, not misread.
	db.putRaw(t, urlKey(prefixURLMeta, 1, 3), []byte{1, 200})
	if _, _, err := db.URLMeta(1, 3); !errors.Is(err, ErrCorrupt) {
		t.Errorf("truncated url meta: %v", err)
	}
	if err := db.ldb.Put(hostRecordKey(10), []byte{9}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Host(10); !errors.Is(err, ErrCorrupt) {
		t.Errorf("unknown host record version: %v", err)
	}
	db.Close()
	if _, err := db.ApplyQueue(&QueueUpdate{}); !errors.Is(err, ErrClosed) {
		t.Errorf("ApplyQueue on a closed DB: %v", err)
	}
}

// TestApplyQueueUnscheduleKnown: UnscheduleKnown deletes schedule entries
// and counts them, retries by the attempts passed, without reading them;
// an entry listed twice, in either list or in both, is counted once;
// Unschedule reads each entry; and the counts survive a reopen.
func TestApplyQueueUnscheduleKnown(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, testOptions(SeenExact))
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	var add QueueUpdate
	for i, attempts := range []int{0, 2, 0, 1, 0} {
		e := qe(uint64(i+1), 1, fmt.Sprintf("http://h%d/", i))
		e.Attempts, e.Recrawl, e.Due = attempts, attempts == 0, now.Add(time.Duration(i)*time.Minute)
		add.Schedule = append(add.Schedule, e)
	}
	if c := apply(t, db, &add); c != (QueueCounts{Scheduled: 5, Retrying: 2}) {
		t.Fatalf("counts after scheduling %+v", c)
	}
	e := scheduled(t, db)

	lookups := db.queueLookups.Load()
	c := apply(t, db, &QueueUpdate{
		UnscheduleKnown: []QueueEntry{e[0], e[1], e[1], e[2]}, // e[1] twice
		Unschedule:      []QueueEntry{e[2]},                   // and e[2] in both lists
	})
	if want := (QueueCounts{Scheduled: 2, Retrying: 1}); c != want {
		t.Fatalf("counts after known unschedules %+v, want %+v", c, want)
	}
	if n := db.queueLookups.Load() - lookups; n != 0 {
		t.Errorf("known unschedules read %d entries, want none", n)
	}
	if got := scheduled(t, db); !reflect.DeepEqual(got, e[3:]) {
		t.Errorf("schedule %+v, want %+v", got, e[3:])
	}

	lookups = db.queueLookups.Load()
	c = apply(t, db, &QueueUpdate{Unschedule: []QueueEntry{e[0], e[3]}}) // e[0] gone
	if want := (QueueCounts{Scheduled: 1}); c != want {
		t.Fatalf("counts after unscheduling a gone entry and e[3] %+v, want %+v", c, want)
	}
	if n := db.queueLookups.Load() - lookups; n != 2 {
		t.Errorf("Unschedule read %d entries, want 2", n)
	}

	db.Close()
	db = openTest(t, dir, testOptions(SeenExact))
	if c, err := db.QueueCounts(); err != nil || c != (QueueCounts{Scheduled: 1}) {
		t.Errorf("counts after reopen %+v %v, want 1 scheduled", c, err)
	}
}

// TestApplyQueueUnschedule: Unschedule deletes schedule entries by due time
// and sequence, in the same batch as the rest of the update, keeps the
// other entries as they were, ignores absent and repeated entries, keeps
// the counters right (the retry count from the stored entry, whatever the
// caller passes) across a reopen, and writes nothing when any part of the
// update fails.
func TestApplyQueueUnschedule(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, testOptions(SeenExact))
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	sched := func(host uint64, url string, attempts int, due time.Duration) QueueEntry {
		e := qe(host, 1, url)
		e.Attempts, e.Recrawl, e.Due = attempts, attempts == 0, now.Add(due)
		return e
	}
	queued := &QueueUpdate{Push: []QueueEntry{qe(1, 0, "http://a/q")}}
	apply(t, db, queued)
	add := &QueueUpdate{Schedule: []QueueEntry{
		sched(1, "http://a/retry", 2, time.Minute),
		sched(2, "http://b/recrawl", 0, time.Hour),
		sched(3, "http://c/recrawl", 0, 2*time.Hour),
		sched(1, "http://a/retry2", 1, 3*time.Hour),
	}}
	if c := apply(t, db, add); c != (QueueCounts{Queued: 1, Scheduled: 4, Retrying: 2}) {
		t.Fatalf("counts after scheduling %+v", c)
	}
	all := scheduled(t, db)
	retry, recrawl, keep1, keep2 := all[0], all[1], all[2], all[3]

	dead := DeadLetter{URL: "http://d/", RingKey: 4, URLHash: 44, HostKey: 4, Attempts: 3, Kind: "timeout", At: now}
	c := apply(t, db, &QueueUpdate{
		Unschedule: []QueueEntry{
			{Due: retry.Due, Seq: retry.Seq}, // identity only: attempts come from the store
			recrawl,
			recrawl,                          // repeated: counted once
			{Due: now, Seq: 1 << 40},         // absent
			{Due: keep1.Due, Seq: keep2.Seq}, // no such pair
		},
		Remove: queued.Push,
		Push:   []QueueEntry{qe(5, 0, "http://e/")},
		Dead:   []DeadLetter{dead},
	})
	want := QueueCounts{Queued: 1, Scheduled: 2, Retrying: 1, Dead: 1}
	if c != want {
		t.Fatalf("counts %+v, want %+v", c, want)
	}
	if got := scheduled(t, db); !reflect.DeepEqual(got, []QueueEntry{keep1, keep2}) {
		t.Fatalf("schedule after Unschedule %+v, want the two others untouched %+v", got, []QueueEntry{keep1, keep2})
	}
	if due, ok, err := db.NextDue(); err != nil || !ok || !due.Equal(keep1.Due) {
		t.Errorf("NextDue = %v %v %v, want %v", due, ok, err, keep1.Due)
	}

	// A failing part (a bad priority, a corrupt schedule record) leaves
	// everything as it was: the entries to unschedule too.
	bad := qe(6, 0, "http://f/")
	bad.Priority = MaxPriority + 1
	if _, err := db.ApplyQueue(&QueueUpdate{Unschedule: []QueueEntry{keep1}, Push: []QueueEntry{bad}}); err == nil {
		t.Fatal("a push of priority 256 accepted")
	}
	if err := db.ldb.Put(scheduleKey(now, 7), []byte{1, 2}, nil); err != nil {
		t.Fatal(err)
	}
	_, err := db.ApplyQueue(&QueueUpdate{
		Unschedule: []QueueEntry{keep1, {Due: now, Seq: 7}},
		Undead:     []DeadLetter{dead},
	})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("unscheduling a corrupt record: %v, want ErrCorrupt", err)
	}
	if err := db.ldb.Delete(scheduleKey(now, 7), nil); err != nil {
		t.Fatal(err)
	}
	if c, err := db.QueueCounts(); err != nil || c != want {
		t.Errorf("counts after failed updates %+v %v, want %+v", c, err, want)
	}
	if got := scheduled(t, db); !reflect.DeepEqual(got, []QueueEntry{keep1, keep2}) {
		t.Errorf("schedule after failed updates %+v", got)
	}

	db.Close()
	db = openTest(t, dir, testOptions(SeenExact))
	if c, err := db.QueueCounts(); err != nil || c != want {
		t.Errorf("counts after reopen %+v %v, want %+v", c, err, want)
	}
	c = apply(t, db, &QueueUpdate{Unschedule: []QueueEntry{keep1, keep2}})
	if want := (QueueCounts{Queued: 1, Dead: 1}); c != want {
		t.Errorf("counts after unscheduling all %+v, want %+v", c, want)
	}
	if _, ok, err := db.NextDue(); ok || err != nil {
		t.Errorf("NextDue of an empty schedule: %v %v", ok, err)
	}
}

// scheduled returns every schedule entry, in due order.
func scheduled(t *testing.T, db *DB) []QueueEntry {
	t.Helper()
	var out []QueueEntry
	if err := db.ScanSchedule(func(e QueueEntry) error {
		out = append(out, e)
		return nil
	}); err != nil {
		t.Fatalf("ScanSchedule: %v", err)
	}
	return out
}

// TestDeadLetterLookup: DeadLetter finds a dead letter by its URL identity
// and nothing under a neighbouring one, sees replacements and deletions,
// reports a corrupt record as ErrCorrupt and a closed DB as ErrClosed.
func TestDeadLetterLookup(t *testing.T) {
	db := openTest(t, t.TempDir(), testOptions(SeenExact))
	at := time.Date(2026, 5, 1, 12, 0, 0, 7, time.UTC)
	d := DeadLetter{URL: "http://a/x", RingKey: 5, URLHash: 50, HostKey: 5, Depth: 2, Redirects: 1, Attempts: 4, Kind: "http_5xx", LastError: "HTTP 503", At: at}
	other := DeadLetter{URL: "http://b/y", RingKey: 5, URLHash: 51, HostKey: 6, Attempts: 1, Kind: "timeout", At: at}
	if got, ok, err := db.DeadLetter(5, 50); ok || err != nil || got != (DeadLetter{}) {
		t.Fatalf("DeadLetter before any = %+v %v %v", got, ok, err)
	}
	for _, x := range []DeadLetter{d, other} {
		if err := db.PutDeadLetter(x); err != nil {
			t.Fatal(err)
		}
	}
	got, ok, err := db.DeadLetter(5, 50)
	if err != nil || !ok || got != d {
		t.Fatalf("DeadLetter = %+v %v %v, want %+v", got, ok, err, d)
	}
	for _, k := range [][2]uint64{{5, 49}, {5, 52}, {4, 50}, {6, 50}} {
		if _, ok, err := db.DeadLetter(k[0], k[1]); ok || err != nil {
			t.Errorf("DeadLetter%v = %v %v, want none", k, ok, err)
		}
	}
	d.LastError, d.Attempts = "HTTP 500", 5
	if err := db.PutDeadLetter(d); err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := db.DeadLetter(5, 50); !ok || got != d {
		t.Errorf("DeadLetter after replacing = %+v %v, want %+v", got, ok, d)
	}
	if err := db.DeleteDeadLetter(5, 50); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := db.DeadLetter(5, 50); ok || err != nil {
		t.Errorf("DeadLetter after deleting = %v %v, want none", ok, err)
	}
	if got, ok, _ := db.DeadLetter(5, 51); !ok || got != other {
		t.Errorf("the other dead letter = %+v %v, want %+v", got, ok, other)
	}
	if err := db.ldb.Put(urlKey(prefixDead, 7, 70), []byte{1, 0}, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := db.DeadLetter(7, 70); ok || !errors.Is(err, ErrCorrupt) {
		t.Errorf("corrupt dead letter: %v %v, want ErrCorrupt", ok, err)
	}
	db.Close()
	if _, _, err := db.DeadLetter(5, 51); !errors.Is(err, ErrClosed) {
		t.Errorf("DeadLetter on a closed DB: %v, want ErrClosed", err)
	}
}

// TestApplyQueueRemoveKnown: entries removed as known to be there are
// deleted and counted without a lookup; an entry listed twice, in either
// list or in both, is counted once; a Remove of an entry already gone is
// looked up and not counted; and the counts survive a reopen and agree
// with a recount.
func TestApplyQueueRemoveKnown(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, dir, testOptions(SeenExact))
	push := &QueueUpdate{Push: []QueueEntry{
		qe(1, 1, "http://a/1"), qe(1, 1, "http://a/2"), qe(1, 2, "http://a/3"),
		qe(2, 0, "http://b/1"), qe(2, 0, "http://b/2"), qe(3, 0, "http://c/1"),
	}}
	apply(t, db, push)
	e := push.Push

	lookups := db.queueLookups.Load()
	if c := apply(t, db, &QueueUpdate{RemoveKnown: []QueueEntry{e[0]}}); c.Queued != 5 {
		t.Fatalf("after one known removal: %+v, want 5 queued", c)
	}
	c := apply(t, db, &QueueUpdate{
		RemoveKnown: []QueueEntry{e[1], e[2], e[1]}, // e[1] twice
		Remove:      []QueueEntry{e[2]},             // and e[2] in both lists
	})
	if c.Queued != 3 {
		t.Fatalf("after removals listed twice: %+v, want 3 queued", c)
	}
	if n := db.queueLookups.Load() - lookups; n != 0 {
		t.Errorf("known removals looked up %d entries, want none", n)
	}
	if head, _ := db.QueueHead(1, 10, nil); len(head) != 0 {
		t.Errorf("host 1 still has %v", urls(head))
	}

	// Remove looks entries up: one already gone (e[0]) is not counted, one
	// listed twice is counted once.
	lookups = db.queueLookups.Load()
	c = apply(t, db, &QueueUpdate{Remove: []QueueEntry{e[0], e[3], e[3]}})
	if c.Queued != 2 {
		t.Fatalf("after removing a gone entry and one listed twice: %+v, want 2 queued", c)
	}
	if n := db.queueLookups.Load() - lookups; n != 2 {
		t.Errorf("Remove looked up %d entries, want 2 (e[0] and e[3], once)", n)
	}
	if head, _ := db.QueueHead(2, 10, nil); !reflect.DeepEqual(urls(head), []string{"http://b/2"}) {
		t.Errorf("host 2 queue %v, want [http://b/2]", urls(head))
	}

	db.Close()
	db = openTest(t, dir, testOptions(SeenExact))
	if c, err := db.QueueCounts(); err != nil || c.Queued != 2 {
		t.Fatalf("counts after reopen %+v %v, want 2 queued", c, err)
	}
	n := 0
	if err := db.QueueHosts(func(h QueueEntry) error {
		head, err := db.QueueHead(h.HostKey, 100, nil)
		n += len(head)
		return err
	}); err != nil || n != 2 {
		t.Errorf("%d entries in the queue table (%v), counted 2", n, err)
	}
}
