package shard

import (
	"bytes"
	"cmp"
	"errors"
	"slices"
	"sync"
)

// Storage is a node's durable shard state: the records and host states of
// every range it owns or replicates, and its epoch table. Implementations
// must be safe for concurrent use.
type Storage interface {
	// PutRecords stores records, merging each with any stored version of
	// the same (Key, Hash) by MergeRecord, durably: they survive a power
	// loss once it returns.
	PutRecords(recs []Record) error
	// PutRecordsNoSync is PutRecords for records that survive a crash of
	// the process once it returns, and a power loss once a later
	// PutRecords returns (see Manager.AcceptOwn).
	PutRecordsNoSync(recs []Record) error
	// ScanRecords calls fn for every record whose Key lies in r, in ring
	// order starting just after r.From, and by Hash within one Key. A
	// non-nil error from fn stops the scan and is returned.
	ScanRecords(r Range, fn func(Record) error) error
	// PutHosts stores host states; the last writer wins.
	PutHosts(hs []HostState) error
	// ScanHosts calls fn for every host state whose Key lies in r, in ring
	// order starting just after r.From, and by Host within one Key.
	ScanHosts(r Range, fn func(HostState) error) error
	// LoadEpochs returns what SaveEpochs last stored; nil, nil when never
	// saved.
	LoadEpochs() ([]byte, error)
	// SaveEpochs stores the encoded epoch table durably.
	SaveEpochs(b []byte) error
}

// MemStorage is a map-backed Storage for tests and the simulator. It keeps
// what it is given across a Manager's "crash": make a new Manager on the
// same MemStorage to model a restart.
type MemStorage struct {
	mu       sync.Mutex
	failPuts error    // see FailWrites
	recs     []Record // sorted by (Key, Hash)
	hosts    []HostState
	epochs   []byte
	// unsynced are the records PutRecordsNoSync stored since the last
	// PutRecords, which a power loss would take (a sync covers every
	// earlier write).
	unsynced map[[2]uint64]bool
}

var _ Storage = (*MemStorage)(nil)

// NewMemStorage returns an empty MemStorage.
func NewMemStorage() *MemStorage { return &MemStorage{} }

func cmpRec(r Record, k struct{ key, hash uint64 }) int {
	if c := cmp.Compare(r.Key, k.key); c != 0 {
		return c
	}
	return cmp.Compare(r.Hash, k.hash)
}

// FailWrites makes PutRecords and PutHosts fail with err, storing nothing,
// until it is called with nil: a full disk or a broken store, for tests
// and the simulator.
func (s *MemStorage) FailWrites(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failPuts = err
}

// PutRecordsNoSync implements Storage. The records count as unsynced (see
// Unsynced) until the next PutRecords.
func (s *MemStorage) PutRecordsNoSync(recs []Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failPuts != nil {
		return s.failPuts
	}
	s.putLocked(recs)
	if s.unsynced == nil {
		s.unsynced = make(map[[2]uint64]bool)
	}
	for _, r := range recs {
		s.unsynced[[2]uint64{r.Key, r.Hash}] = true
	}
	return nil
}

// Unsynced reports whether the record (key, hash) was stored by
// PutRecordsNoSync and no PutRecords came after: whether a power loss
// could take it.
func (s *MemStorage) Unsynced(key, hash uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unsynced[[2]uint64{key, hash}]
}

// PutRecords implements Storage.
func (s *MemStorage) PutRecords(recs []Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failPuts != nil {
		return s.failPuts
	}
	clear(s.unsynced)
	s.putLocked(recs)
	return nil
}

// putLocked merges recs in.
func (s *MemStorage) putLocked(recs []Record) {
	for _, r := range recs {
		i, found := slices.BinarySearchFunc(s.recs, struct{ key, hash uint64 }{r.Key, r.Hash}, cmpRec)
		if found {
			s.recs[i] = MergeRecord(s.recs[i], r)
			continue
		}
		s.recs = slices.Insert(s.recs, i, r)
	}
}

// Record returns the stored record of (key, hash), if any.
func (s *MemStorage) Record(key, hash uint64) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, found := slices.BinarySearchFunc(s.recs, struct{ key, hash uint64 }{key, hash}, cmpRec)
	if !found {
		return Record{}, false
	}
	return s.recs[i], true
}

// GetRecord implements RecordGetter.
func (s *MemStorage) GetRecord(key, hash uint64) (Record, bool, error) {
	r, ok := s.Record(key, hash)
	return r, ok, nil
}

// AnyPending reports whether a stored record is not Done.
func (s *MemStorage) AnyPending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.recs, func(r Record) bool { return !r.Done })
}

// Len returns how many records are stored.
func (s *MemStorage) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.recs)
}

// scanBatch is how many records a scan copies per lock hold, so fn runs
// unlocked (it may write to the storage) and an early stop copies little.
const scanBatch = 256

var errStopScan = errors.New("stop scan")

// ScanRecords implements Storage.
func (s *MemStorage) ScanRecords(r Range, fn func(Record) error) error {
	var batch []Record
	for _, sp := range ringOrder(r) {
		next := struct{ key, hash uint64 }{sp.lo, 0}
		first := true
		for {
			s.mu.Lock()
			i, found := slices.BinarySearchFunc(s.recs, next, cmpRec)
			if found && !first {
				i++ // resume after the last record handed out
			}
			batch = batch[:0]
			for ; i < len(s.recs) && len(batch) < scanBatch && s.recs[i].Key <= sp.hi; i++ {
				batch = append(batch, s.recs[i])
			}
			s.mu.Unlock()
			for _, rec := range batch {
				if err := fn(rec); err != nil {
					return err
				}
			}
			if len(batch) < scanBatch {
				break
			}
			last := batch[len(batch)-1]
			next, first = struct{ key, hash uint64 }{last.Key, last.Hash}, false
		}
	}
	return nil
}

// PutHosts implements Storage.
func (s *MemStorage) PutHosts(hs []HostState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failPuts != nil {
		return s.failPuts
	}
	for _, h := range hs {
		h.Data = bytes.Clone(h.Data)
		i, found := slices.BinarySearchFunc(s.hosts, h, cmpHost)
		if found {
			s.hosts[i] = h
			continue
		}
		s.hosts = slices.Insert(s.hosts, i, h)
	}
	return nil
}

func cmpHost(a, b HostState) int {
	if c := cmp.Compare(a.Key, b.Key); c != 0 {
		return c
	}
	return cmp.Compare(a.Host, b.Host)
}

// ScanHosts implements Storage.
func (s *MemStorage) ScanHosts(r Range, fn func(HostState) error) error {
	var out []HostState
	s.mu.Lock()
	for _, sp := range ringOrder(r) {
		i, _ := slices.BinarySearchFunc(s.hosts, HostState{Key: sp.lo}, cmpHost)
		for ; i < len(s.hosts) && s.hosts[i].Key <= sp.hi; i++ {
			h := s.hosts[i]
			h.Data = bytes.Clone(h.Data)
			out = append(out, h)
		}
	}
	s.mu.Unlock()
	for _, h := range out {
		if err := fn(h); err != nil {
			return err
		}
	}
	return nil
}

// LoadEpochs implements Storage.
func (s *MemStorage) LoadEpochs() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.epochs), nil
}

// SaveEpochs implements Storage.
func (s *MemStorage) SaveEpochs(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epochs = bytes.Clone(b)
	return nil
}
