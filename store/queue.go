package store

// The crawl frontier's durable tables: the queue (tasks ready to be crawled
// as soon as their host's politeness allows) and the schedule (tasks that
// wait for a time: retries after a backoff and recrawls).
//
//	table     prefix  key                                                  value
//	queue     'q'     'q' | host key (8) | priority (1) | sequence (8)     queue record
//	schedule  'w'     'w' | due (8, Unix nanoseconds) | sequence (8)       schedule record
//
// The queue is laid out by host key, so one host's queue is one contiguous
// range ordered by (priority, sequence): the head of a host is the first key
// of its range. In the default key mode the host key is the ring key. The
// schedule is ordered by due time, so the tasks that are due are the first
// keys of the table. Sequence numbers are unique across both tables and
// increase with every write, so ties are served in arrival order.
//
// Queue record, version 1 (host key, priority and sequence come from the key):
//
//	version    byte = 1
//	ring key   8 bytes BE
//	URL hash   8 bytes BE
//	url        bytes
//	depth      varint
//	attempts   varint
//	redirects  varint
//	flags      byte: bit 0 = recrawl
//
// Schedule record, version 1: the queue record followed by
//
//	host key   8 bytes BE
//	priority   byte
//
// The counters store/queue_count, store/schedule_count, store/retry_count
// (scheduled entries with attempts > 0, i.e. retries), store/dead_count and the last
// sequence number store/queue_seq (8-byte big-endian each) are written in the
// same leveldb batch as the records they count.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
	"unsafe"

	"github.com/syndtr/goleveldb/leveldb"
	"github.com/syndtr/goleveldb/leveldb/opt"
	"github.com/syndtr/goleveldb/leveldb/util"
)

// Table prefixes of the crawl state tables (see store/doc.go).
const (
	prefixQueue    byte = 'q'
	prefixSchedule byte = 'w'
	prefixURLMeta  byte = 'u'
	prefixDead     byte = 'x'
	prefixHost     byte = 'h'
)

// Counter names of the crawl state tables.
const (
	metaQueueCount    = reservedMetaPrefix + "queue_count"
	metaScheduleCount = reservedMetaPrefix + "schedule_count"
	metaDeadCount     = reservedMetaPrefix + "dead_count"
	metaRetryCount    = reservedMetaPrefix + "retry_count"
	metaQueueSeq      = reservedMetaPrefix + "queue_seq"
)

const (
	queueKeyLen    = 18
	scheduleKeyLen = 17
	// MaxPriority is the largest queue priority; smaller values are served
	// first.
	MaxPriority = math.MaxUint8
)

// queueLocks serialise the read-modify-write of the crawl state counters of
// one DB. They are striped by DB address rather than kept in the DB, so
// that this file owns its state without a reference that would keep a
// closed DB alive.
var queueLocks [64]sync.Mutex

func (db *DB) queueLock() *sync.Mutex {
	p := uintptr(unsafe.Pointer(db))
	return &queueLocks[(p>>4)%uintptr(len(queueLocks))]
}

// QueueEntry is one task of the frontier, in the queue or in the schedule.
type QueueEntry struct {
	// HostKey identifies the host whose queue the entry belongs to (the
	// ring key in the default host-key mode).
	HostKey uint64
	// RingKey and URLHash identify the URL, as in every per-URL table.
	RingKey, URLHash uint64
	// URL is the normalised URL.
	URL string
	// Depth is the number of link hops from a seed.
	Depth int
	// Priority orders a host's queue: smaller first, in [0, MaxPriority].
	Priority int
	// Attempts is the number of failed fetches so far.
	Attempts int
	// Redirects is the number of redirect hops that led to the URL.
	Redirects int
	// Recrawl marks a task that refetches a URL crawled before.
	Recrawl bool
	// Seq is the sequence number, assigned by ApplyQueue.
	Seq uint64
	// Due is when a scheduled entry moves into its host's queue; unused in
	// the queue.
	Due time.Time
}

// Less reports whether e is served before o within one host's queue.
func (e *QueueEntry) Less(o *QueueEntry) bool {
	if e.Priority != o.Priority {
		return e.Priority < o.Priority
	}
	return e.Seq < o.Seq
}

// QueueCounts are the sizes of the crawl state tables.
type QueueCounts struct {
	Queued    int64 // entries in the queue table
	Scheduled int64 // entries in the schedule table
	Retrying  int64 // scheduled entries with Attempts > 0: retries
	Dead      int64 // dead letters
}

// QueueUpdate is one atomic change of the crawl state tables: everything in
// it is written in one leveldb batch, so a crash leaves either all of it or
// none. Each entry may appear once per update.
type QueueUpdate struct {
	// Push appends entries to their hosts' queues; ApplyQueue assigns each
	// a sequence number and writes it back into the slice.
	Push []QueueEntry
	// Remove deletes queue entries, identified by HostKey, Priority and
	// Seq. Entries that are not there are ignored: each is looked up, so
	// that the Queued count stays exact.
	Remove []QueueEntry
	// RemoveKnown deletes queue entries like Remove, but without looking
	// them up: the caller knows each one is in the queue table, because it
	// read or wrote it and nothing can have removed it since (the frontier
	// removes the tasks it handed out, and is the only one to change the
	// queue). Queued is counted down by one per entry; an entry listed here
	// that is not there would make it wrong. An entry listed twice, in
	// RemoveKnown or in both lists, is removed and counted once.
	RemoveKnown []QueueEntry
	// Schedule adds entries to the schedule at their Due time; sequence
	// numbers are written back as for Push.
	Schedule []QueueEntry
	// Unschedule deletes schedule entries, identified by Due and Seq (as
	// ScanSchedule returns them); the retry count follows the stored
	// entry's attempts. Entries that are not there are ignored: each is
	// read first.
	Unschedule []QueueEntry
	// UnscheduleKnown deletes schedule entries like Unschedule, but without
	// reading them: the caller knows each one is in the schedule as it
	// passes it, Attempts included, because it read it and nothing can have
	// changed it since (the frontier is the only one to change the
	// schedule). Scheduled is counted down by one per entry, and Retrying
	// by one per entry with attempts; an entry listed here that is not
	// there would make them wrong. An entry listed twice, here or in both
	// lists, is deleted and counted once.
	UnscheduleKnown []QueueEntry
	// Dead stores dead letters, replacing any for the same URL.
	Dead []DeadLetter
	// Undead deletes dead letters, identified by RingKey and URLHash.
	Undead []DeadLetter
	// URLMeta stores URL metadata.
	URLMeta []URLMetaRecord
	// Hosts stores host states.
	Hosts []HostState
}

// URLMetaRecord is URL metadata with the identity it is stored under.
type URLMetaRecord struct {
	RingKey, URLHash uint64
	Meta             URLMeta
}

// ApplyQueue writes u atomically and returns the table sizes after it.
func (db *DB) ApplyQueue(u *QueueUpdate) (QueueCounts, error) {
	mu := db.queueLock()
	mu.Lock()
	defer mu.Unlock()
	if db.closed.Load() {
		return QueueCounts{}, ErrClosed
	}
	c, seq, err := db.queueCounters()
	if err != nil {
		return c, err
	}
	before := c
	b := new(leveldb.Batch)
	for i := range u.Push {
		e := &u.Push[i]
		if err := checkPriority(e.Priority); err != nil {
			return before, err
		}
		seq++
		e.Seq = seq
		b.Put(queueKey(e.HostKey, e.Priority, e.Seq), encodeQueueEntry(nil, e, false))
		c.Queued++
	}
	var listed removals
	for i := range u.RemoveKnown {
		e := &u.RemoveKnown[i]
		if listed.again(e, len(u.RemoveKnown)+len(u.Remove)) {
			continue
		}
		b.Delete(queueKey(e.HostKey, e.Priority, e.Seq))
		c.Queued--
	}
	for i := range u.Remove {
		e := &u.Remove[i]
		if listed.again(e, len(u.RemoveKnown)+len(u.Remove)) {
			continue
		}
		k := queueKey(e.HostKey, e.Priority, e.Seq)
		db.queueLookups.Add(1)
		ok, err := db.ldb.Has(k, nil)
		if err != nil {
			return before, ldbErr(err, "remove queue entry %s", keyString(e.RingKey, e.URLHash))
		}
		if ok {
			b.Delete(k)
			c.Queued--
		}
	}
	for i := range u.Schedule {
		e := &u.Schedule[i]
		if err := checkPriority(e.Priority); err != nil {
			return before, err
		}
		seq++
		e.Seq = seq
		b.Put(scheduleKey(e.Due, e.Seq), encodeQueueEntry(nil, e, true))
		c.Scheduled++
		if e.Attempts > 0 {
			c.Retrying++
		}
	}
	var unscheduled map[string]bool
	if n := len(u.Unschedule) + len(u.UnscheduleKnown); n > 0 {
		unscheduled = make(map[string]bool, n)
	}
	for i := range u.UnscheduleKnown {
		e := &u.UnscheduleKnown[i]
		k := scheduleKey(e.Due, e.Seq)
		if unscheduled[string(k)] {
			continue // listed twice: counted once
		}
		unscheduled[string(k)] = true
		b.Delete(k)
		c.Scheduled--
		if e.Attempts > 0 {
			c.Retrying--
		}
	}
	for i := range u.Unschedule {
		e := &u.Unschedule[i]
		k := scheduleKey(e.Due, e.Seq)
		if unscheduled[string(k)] {
			continue // listed twice: counted once
		}
		db.queueLookups.Add(1)
		v, err := db.ldb.Get(k, nil)
		if errors.Is(err, leveldb.ErrNotFound) {
			continue
		}
		if err != nil {
			return before, ldbErr(err, "unschedule entry %s", keyString(e.RingKey, e.URLHash))
		}
		var stored QueueEntry
		if err := decodeQueueEntry(v, &stored, true); err != nil {
			return before, fmt.Errorf("store: unschedule entry due %v seq %d: %w", e.Due, e.Seq, err)
		}
		unscheduled[string(k)] = true
		b.Delete(k)
		c.Scheduled--
		if stored.Attempts > 0 {
			c.Retrying--
		}
	}
	for i := range u.Dead {
		d := &u.Dead[i]
		k := urlKey(prefixDead, d.RingKey, d.URLHash)
		ok, err := db.ldb.Has(k, nil)
		if err != nil {
			return before, ldbErr(err, "put dead letter %s", keyString(d.RingKey, d.URLHash))
		}
		if !ok {
			c.Dead++
		}
		b.Put(k, encodeDeadLetter(d))
	}
	for i := range u.Undead {
		d := &u.Undead[i]
		k := urlKey(prefixDead, d.RingKey, d.URLHash)
		ok, err := db.ldb.Has(k, nil)
		if err != nil {
			return before, ldbErr(err, "delete dead letter %s", keyString(d.RingKey, d.URLHash))
		}
		if ok {
			b.Delete(k)
			c.Dead--
		}
	}
	for i := range u.URLMeta {
		m := &u.URLMeta[i]
		k := urlKey(prefixURLMeta, m.RingKey, m.URLHash)
		db.keys.add(k)
		b.Put(k, encodeURLMeta(&m.Meta))
	}
	for i := range u.Hosts {
		h := &u.Hosts[i]
		b.Put(hostRecordKey(h.HostKey), encodeHostState(h))
	}
	if b.Len() == 0 {
		return c, nil
	}
	db.putQueueCounters(b, before, c, seq)
	err = db.ldb.Write(b, nil)
	db.wroteQueueCounters(c, seq, err)
	if err != nil {
		return before, ldbErr(err, "write crawl state (%d records)", b.Len())
	}
	return c, nil
}

// queueID identifies a queue entry: the fields of its key.
type queueID struct {
	hostKey, seq uint64
	priority     int
}

// removals are the queue entries one ApplyQueue has removed so far, so that
// an entry listed twice is counted once.
type removals map[queueID]struct{}

// again reports whether e was listed before in this update, and notes it
// otherwise. total is the number of removals in the update: with one
// there is nothing to note.
func (r *removals) again(e *QueueEntry, total int) bool {
	if total < 2 {
		return false
	}
	id := queueID{e.HostKey, e.Seq, e.Priority}
	if _, ok := (*r)[id]; ok {
		return true
	}
	if *r == nil {
		*r = make(removals, total)
	}
	(*r)[id] = struct{}{}
	return false
}

func checkPriority(p int) error {
	if p < 0 || p > MaxPriority {
		return fmt.Errorf("store: queue priority %d not in [0, %d]", p, MaxPriority)
	}
	return nil
}

// queueCounters reads the counters and the last sequence number. Called
// with the queue lock held.
func (db *DB) queueCounters() (QueueCounts, uint64, error) {
	if qc := &db.queueCache; qc.valid {
		return qc.counts, qc.seq, nil
	}
	c, seq, err := db.readQueueCounters()
	if err == nil {
		db.queueCache = queueCounterCache{valid: true, counts: c, seq: seq}
	}
	return c, seq, err
}

// queueCounterCache is a copy of the queue counters and sequence number in
// memory; valid is false until they are read, and again after a write that
// failed (which may or may not have reached the store).
type queueCounterCache struct {
	valid  bool
	counts QueueCounts
	seq    uint64
}

// wroteQueueCounters records the outcome of a write of the queue counters
// (see putQueueCounters) under the queue lock.
func (db *DB) wroteQueueCounters(c QueueCounts, seq uint64, err error) {
	db.queueCache = queueCounterCache{valid: err == nil, counts: c, seq: seq}
}

// readQueueCounters reads the counters and sequence number from the store.
func (db *DB) readQueueCounters() (QueueCounts, uint64, error) {
	var c QueueCounts
	q, err := db.readCounter(metaQueueCount)
	if err != nil {
		return c, 0, err
	}
	s, err := db.readCounter(metaScheduleCount)
	if err != nil {
		return c, 0, err
	}
	d, err := db.readCounter(metaDeadCount)
	if err != nil {
		return c, 0, err
	}
	r, err := db.readCounter(metaRetryCount)
	if err != nil {
		return c, 0, err
	}
	seq, err := db.readCounter(metaQueueSeq)
	if err != nil {
		return c, 0, err
	}
	return QueueCounts{Queued: int64(q), Scheduled: int64(s), Retrying: int64(r), Dead: int64(d)}, seq, nil
}

// putQueueCounters adds the counters that changed to b.
func (db *DB) putQueueCounters(b *leveldb.Batch, before, after QueueCounts, seq uint64) {
	put := func(name string, v int64) {
		b.Put(metaKey(name), binary.BigEndian.AppendUint64(nil, uint64(max(v, 0))))
	}
	if after.Queued != before.Queued {
		put(metaQueueCount, after.Queued)
	}
	if after.Scheduled != before.Scheduled {
		put(metaScheduleCount, after.Scheduled)
	}
	if after.Dead != before.Dead {
		put(metaDeadCount, after.Dead)
	}
	if after.Retrying != before.Retrying {
		put(metaRetryCount, after.Retrying)
	}
	b.Put(metaKey(metaQueueSeq), binary.BigEndian.AppendUint64(nil, seq))
}

// QueueCounts returns the current sizes of the crawl state tables.
func (db *DB) QueueCounts() (QueueCounts, error) {
	mu := db.queueLock()
	mu.Lock()
	defer mu.Unlock()
	if db.closed.Load() {
		return QueueCounts{}, ErrClosed
	}
	c, _, err := db.queueCounters()
	return c, err
}

// QueueHead returns up to n entries from the head of a host's queue, in
// order, leaving out those skip reports (skip may be nil).
func (db *DB) QueueHead(hostKey uint64, n int, skip func(*QueueEntry) bool) ([]QueueEntry, error) {
	return db.QueueHeadAfter(hostKey, nil, n, skip)
}

// QueueHeadAfter is QueueHead for the entries that sort after the entry
// after (see QueueEntry.Less; nil: all of them). A caller that knows
// where it read up to should say so: the entries removed from a queue
// stay in leveldb as deletion markers until a compaction drops them, and
// a read from the head of the queue steps over every one of them (some
// 200 µs for 8 entries once 2,800 were removed, against 9 µs).
func (db *DB) QueueHeadAfter(hostKey uint64, after *QueueEntry, n int, skip func(*QueueEntry) bool) ([]QueueEntry, error) {
	if db.closed.Load() {
		return nil, ErrClosed
	}
	r := hostRange(hostKey)
	if after != nil {
		// The least key above after's.
		r.Start = append(queueKey(hostKey, after.Priority, after.Seq), 0)
	}
	it := db.ldb.NewIterator(r, nil)
	defer it.Release()
	var out []QueueEntry
	for len(out) < n && it.Next() {
		var e QueueEntry
		if err := decodeQueueKey(it.Key(), &e); err != nil {
			return out, err
		}
		if err := decodeQueueEntry(it.Value(), &e, false); err != nil {
			return out, fmt.Errorf("store: queue entry of host %016x: %w", hostKey, err)
		}
		if skip != nil && skip(&e) {
			continue
		}
		out = append(out, e)
	}
	if err := it.Error(); err != nil {
		return out, ldbErr(err, "read queue of host %016x", hostKey)
	}
	return out, nil
}

// QueueHosts calls fn with the head entry of every host that has a queue,
// in host key order. It seeks from host to host, so its cost grows with the
// number of hosts, not of entries. An error from fn stops it and is
// returned as is.
func (db *DB) QueueHosts(fn func(head QueueEntry) error) error {
	if db.closed.Load() {
		return ErrClosed
	}
	it := db.ldb.NewIterator(tableRange(prefixQueue), &opt.ReadOptions{DontFillCache: true})
	defer it.Release()
	for ok := it.First(); ok; {
		var e QueueEntry
		if err := decodeQueueKey(it.Key(), &e); err != nil {
			return err
		}
		if err := decodeQueueEntry(it.Value(), &e, false); err != nil {
			return fmt.Errorf("store: queue entry of host %016x: %w", e.HostKey, err)
		}
		if err := fn(e); err != nil {
			return err
		}
		if e.HostKey == math.MaxUint64 {
			break
		}
		ok = it.Seek(hostStart(e.HostKey + 1))
	}
	if err := it.Error(); err != nil {
		return ldbErr(err, "list queued hosts")
	}
	return nil
}

// DropHostQueue removes every entry of a host's queue that keep does not
// report (keep may be nil), in batches, and returns how many it removed.
func (db *DB) DropHostQueue(hostKey uint64, keep func(*QueueEntry) bool) (int, error) {
	dropped := 0
	for {
		batch, err := db.QueueHead(hostKey, 1024, keep)
		if err != nil {
			return dropped, err
		}
		if len(batch) == 0 {
			return dropped, nil
		}
		if _, err := db.ApplyQueue(&QueueUpdate{Remove: batch}); err != nil {
			return dropped, err
		}
		dropped += len(batch)
	}
}

// NextDue returns the due time of the earliest scheduled entry; ok is false
// when the schedule is empty.
func (db *DB) NextDue() (due time.Time, ok bool, err error) {
	if db.closed.Load() {
		return time.Time{}, false, ErrClosed
	}
	it := db.ldb.NewIterator(tableRange(prefixSchedule), nil)
	defer it.Release()
	if !it.First() {
		if err := it.Error(); err != nil {
			return time.Time{}, false, ldbErr(err, "read schedule")
		}
		return time.Time{}, false, nil
	}
	var e QueueEntry
	if err := decodeScheduleKey(it.Key(), &e); err != nil {
		return time.Time{}, false, err
	}
	return e.Due, true, nil
}

// PromoteDue moves up to n scheduled entries that are due at now into their
// hosts' queues, atomically, and returns them as queued (with their new
// sequence numbers).
func (db *DB) PromoteDue(now time.Time, n int) ([]QueueEntry, error) {
	mu := db.queueLock()
	mu.Lock()
	defer mu.Unlock()
	if db.closed.Load() {
		return nil, ErrClosed
	}
	limit := scheduleKey(now, math.MaxUint64)
	it := db.ldb.NewIterator(&util.Range{Start: []byte{prefixSchedule}, Limit: limit}, nil)
	var due []QueueEntry
	var keys [][]byte
	for len(due) < n && it.Next() {
		var e QueueEntry
		if err := decodeScheduleKey(it.Key(), &e); err != nil {
			it.Release()
			return nil, err
		}
		if err := decodeQueueEntry(it.Value(), &e, true); err != nil {
			it.Release()
			return nil, fmt.Errorf("store: schedule entry: %w", err)
		}
		due = append(due, e)
		keys = append(keys, append([]byte(nil), it.Key()...))
	}
	err := it.Error()
	it.Release()
	if err != nil {
		return nil, ldbErr(err, "read schedule")
	}
	if len(due) == 0 {
		return nil, nil
	}
	c, seq, err := db.queueCounters()
	if err != nil {
		return nil, err
	}
	before := c
	b := new(leveldb.Batch)
	for i := range due {
		b.Delete(keys[i])
		c.Scheduled--
		e := &due[i]
		if e.Attempts > 0 {
			c.Retrying--
		}
		seq++
		e.Seq = seq
		e.Due = time.Time{}
		b.Put(queueKey(e.HostKey, e.Priority, e.Seq), encodeQueueEntry(nil, e, false))
		c.Queued++
	}
	db.putQueueCounters(b, before, c, seq)
	err = db.ldb.Write(b, nil)
	db.wroteQueueCounters(c, seq, err)
	if err != nil {
		return nil, ldbErr(err, "promote %d scheduled entries", len(due))
	}
	return due, nil
}

// ScanSchedule calls fn for every scheduled entry in due order. An error
// from fn stops the scan and is returned as is.
func (db *DB) ScanSchedule(fn func(QueueEntry) error) error {
	if db.closed.Load() {
		return ErrClosed
	}
	snap, err := db.ldb.GetSnapshot()
	if err != nil {
		return ldbErr(err, "scan schedule")
	}
	defer snap.Release()
	it := snap.NewIterator(tableRange(prefixSchedule), &opt.ReadOptions{DontFillCache: true})
	defer it.Release()
	for it.Next() {
		var e QueueEntry
		if err := decodeScheduleKey(it.Key(), &e); err != nil {
			return err
		}
		if err := decodeQueueEntry(it.Value(), &e, true); err != nil {
			return fmt.Errorf("store: schedule entry: %w", err)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return ldbErr(err, "scan schedule")
	}
	return nil
}

func queueKey(hostKey uint64, priority int, seq uint64) []byte {
	k := make([]byte, queueKeyLen)
	k[0] = prefixQueue
	binary.BigEndian.PutUint64(k[1:9], hostKey)
	k[9] = byte(priority)
	binary.BigEndian.PutUint64(k[10:18], seq)
	return k
}

func hostStart(hostKey uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefixQueue
	binary.BigEndian.PutUint64(k[1:], hostKey)
	return k
}

// hostRange is the key range of one host's queue.
func hostRange(hostKey uint64) *util.Range {
	limit := []byte{prefixQueue + 1}
	if hostKey != math.MaxUint64 {
		limit = hostStart(hostKey + 1)
	}
	return &util.Range{Start: hostStart(hostKey), Limit: limit}
}

func decodeQueueKey(k []byte, e *QueueEntry) error {
	if len(k) != queueKeyLen || k[0] != prefixQueue {
		return fmt.Errorf("%w: malformed queue key %x", ErrCorrupt, k)
	}
	e.HostKey = binary.BigEndian.Uint64(k[1:9])
	e.Priority = int(k[9])
	e.Seq = binary.BigEndian.Uint64(k[10:18])
	return nil
}

// scheduleKey orders by due time; times before 1970 sort as 1970.
func scheduleKey(due time.Time, seq uint64) []byte {
	k := make([]byte, scheduleKeyLen)
	k[0] = prefixSchedule
	binary.BigEndian.PutUint64(k[1:9], uint64(max(due.UnixNano(), 0)))
	binary.BigEndian.PutUint64(k[9:17], seq)
	return k
}

func decodeScheduleKey(k []byte, e *QueueEntry) error {
	if len(k) != scheduleKeyLen || k[0] != prefixSchedule {
		return fmt.Errorf("%w: malformed schedule key %x", ErrCorrupt, k)
	}
	e.Due = time.Unix(0, int64(binary.BigEndian.Uint64(k[1:9]))).UTC()
	e.Seq = binary.BigEndian.Uint64(k[9:17])
	return nil
}

const flagRecrawl = 1

// encodeQueueEntry appends the queue record of e, or the schedule record
// when scheduled.
func encodeQueueEntry(dst []byte, e *QueueEntry, scheduled bool) []byte {
	if dst == nil {
		dst = make([]byte, 0, 40+len(e.URL))
	}
	dst = append(dst, recordVersion1)
	dst = binary.BigEndian.AppendUint64(dst, e.RingKey)
	dst = binary.BigEndian.AppendUint64(dst, e.URLHash)
	dst = appendString(dst, e.URL)
	dst = binary.AppendVarint(dst, int64(e.Depth))
	dst = binary.AppendVarint(dst, int64(e.Attempts))
	dst = binary.AppendVarint(dst, int64(e.Redirects))
	var flags byte
	if e.Recrawl {
		flags |= flagRecrawl
	}
	dst = append(dst, flags)
	if scheduled {
		dst = binary.BigEndian.AppendUint64(dst, e.HostKey)
		dst = append(dst, byte(e.Priority))
	}
	return dst
}

func decodeQueueEntry(v []byte, e *QueueEntry, scheduled bool) error {
	d := decoder{b: v}
	if ver := d.byte(); d.err == nil && ver != recordVersion1 {
		return fmt.Errorf("%w: unknown queue record version %d", ErrCorrupt, ver)
	}
	e.RingKey = d.fixed64()
	e.URLHash = d.fixed64()
	e.URL = d.str()
	e.Depth = d.int()
	e.Attempts = d.int()
	e.Redirects = d.int()
	flags := d.byte()
	e.Recrawl = flags&flagRecrawl != 0
	if scheduled {
		e.HostKey = d.fixed64()
		e.Priority = int(d.byte())
	}
	return d.finish()
}
