package store

// Host state: what the crawler keeps per host across restarts.
//
//	table     prefix  key                     value
//	hosts     'h'     'h' | host key (8, BE)  host record
//
// Host record, version 1:
//
//	version      byte = 1
//	host         bytes
//	fetched      varint
//	dropped      varint
//	not before   time (see urlmeta.go)
//	crawl delay  varint, nanoseconds; absent (as in records written before
//	             it was added) when 0

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/syndtr/goleveldb/leveldb"
)

// HostState is the durable state of one host.
type HostState struct {
	// HostKey identifies the host (see QueueEntry.HostKey).
	HostKey uint64
	// Host is the hostname.
	Host string
	// Fetched counts the distinct pages fetched from the host, the measure
	// of its page budget.
	Fetched int64
	// Dropped counts the tasks dropped because the budget was spent.
	Dropped int64
	// NotBefore is the earliest time the host may be contacted again, set
	// by a Retry-After answer.
	NotBefore time.Time
	// CrawlDelay is the Crawl-delay of the host's robots.txt when it was
	// last read (0: none), so that a restarted run keeps the host's gap
	// before it has its robots.txt again.
	CrawlDelay time.Duration
}

// Host returns the state of the host; ok is false when none is stored.
func (db *DB) Host(hostKey uint64) (h HostState, ok bool, err error) {
	if db.closed.Load() {
		return h, false, ErrClosed
	}
	v, err := db.ldb.Get(hostRecordKey(hostKey), nil)
	if errors.Is(err, leveldb.ErrNotFound) {
		return HostState{HostKey: hostKey}, false, nil
	}
	if err != nil {
		return h, false, ldbErr(err, "host %016x", hostKey)
	}
	h.HostKey = hostKey
	if err := decodeHostState(v, &h); err != nil {
		return h, false, fmt.Errorf("store: host %016x: %w", hostKey, err)
	}
	return h, true, nil
}

// PutHost stores the state of h.HostKey, replacing any.
func (db *DB) PutHost(h HostState) error {
	_, err := db.ApplyQueue(&QueueUpdate{Hosts: []HostState{h}})
	return err
}

func hostRecordKey(key uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefixHost
	binary.BigEndian.PutUint64(k[1:], key)
	return k
}

func encodeHostState(h *HostState) []byte {
	dst := make([]byte, 0, 32+len(h.Host))
	dst = append(dst, recordVersion1)
	dst = appendString(dst, h.Host)
	dst = binary.AppendVarint(dst, h.Fetched)
	dst = binary.AppendVarint(dst, h.Dropped)
	dst = appendTime(dst, h.NotBefore)
	if h.CrawlDelay != 0 {
		dst = binary.AppendVarint(dst, int64(h.CrawlDelay))
	}
	return dst
}

func decodeHostState(v []byte, h *HostState) error {
	d := decoder{b: v}
	if ver := d.byte(); d.err == nil && ver != recordVersion1 {
		return fmt.Errorf("%w: unknown host record version %d", ErrCorrupt, ver)
	}
	h.Host = d.str()
	h.Fetched = d.varint()
	h.Dropped = d.varint()
	h.NotBefore = d.stamp()
	if d.err == nil && len(d.b) > 0 {
		if h.CrawlDelay = time.Duration(d.varint()); d.err == nil && h.CrawlDelay <= 0 {
			d.fail("crawl delay %v not positive", h.CrawlDelay)
		}
	}
	return d.finish()
}
