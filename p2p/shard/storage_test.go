package shard

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

func TestMergeRecord(t *testing.T) {
	old := Record{Key: 1, Hash: 2, URL: "u", Depth: 3, Redirects: 1}
	if got := MergeRecord(old, Record{Key: 1, Hash: 2, URL: "u", Depth: 5, Done: true}); !got.Done || got.Depth != 3 {
		t.Fatalf("done must win and keep the smaller depth: %+v", got)
	}
	done := old
	done.Done = true
	if got := MergeRecord(done, Record{Key: 1, Hash: 2, URL: "u", Depth: 1}); !got.Done || got.Depth != 1 || got.Redirects != 0 {
		t.Fatalf("a pending copy must not undo Done; smaller depth taken: %+v", got)
	}
	if got := MergeRecord(old, Record{Key: 1, Hash: 2, URL: "other", Depth: 9}); !reflect.DeepEqual(got, old) {
		t.Fatalf("otherwise the stored record is kept: %+v", got)
	}
	v1 := Record{Key: 1, Hash: 2, URL: "u", Done: true, Meta: []byte("fetch 1"), MetaVersion: 10}
	v2 := Record{Key: 1, Hash: 2, URL: "u", Done: true, Meta: []byte("fetch 2"), MetaVersion: 20}
	if a, b := MergeRecord(MergeRecord(old, v1), v2), MergeRecord(MergeRecord(old, v2), v1); string(a.Meta) != "fetch 2" || !reflect.DeepEqual(a, b) {
		t.Fatalf("the newest meta must win in any order: %+v vs %+v", a, b)
	}
	seed := Record{Key: 1, Hash: 2, URL: "u", Seed: true}
	pending := Record{Key: 1, Hash: 2, URL: "u", Redirects: 1}
	if a, b := MergeRecord(seed, pending), MergeRecord(pending, seed); !a.Seed || !b.Seed || !reflect.DeepEqual(a, b) {
		t.Fatalf("seed must win in any order: %+v vs %+v", a, b)
	}
}

func TestMemStorageScanOrder(t *testing.T) {
	s := NewMemStorage()
	keys := []uint64{5, uint64(mx), 0, 100, 5, 50, 1 << 63}
	var recs []Record
	for i, k := range keys {
		recs = append(recs, Record{Key: k, Hash: uint64(10 - i), URL: "u"})
	}
	// Many records at one key to cross scan batches.
	for h := range 600 {
		recs = append(recs, Record{Key: 7, Hash: uint64(h)})
	}
	if err := s.PutRecords(recs); err != nil {
		t.Fatal(err)
	}
	scan := func(r Range) []RecordID {
		var out []RecordID
		if err := s.ScanRecords(r, func(rec Record) error { out = append(out, IDOf(rec)); return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	got := scan(Range{50, 5}) // wraps: (50, max] then [0, 5]
	want := []RecordID{{100, 7}, {1 << 63, 4}, {uint64(mx), 9}, {0, 8}, {5, 6}, {5, 10}}
	if !slices.Equal(got, want) {
		t.Fatalf("wrapping scan = %v, want %v", got, want)
	}
	all := scan(Range{6, 6})
	if len(all) != len(recs) || all[0] != (RecordID{7, 0}) || all[599] != (RecordID{7, 599}) || all[600] != (RecordID{50, 5}) {
		t.Fatalf("whole-ring scan from 6: %d records, starts %v", len(all), all[:3])
	}
	stop := errors.New("stop")
	n := 0
	err := s.ScanRecords(Range{0, 0}, func(Record) error {
		n++
		if n == 300 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 300 {
		t.Fatalf("stop: err %v after %d", err, n)
	}
	if b, err := s.LoadEpochs(); b != nil || err != nil {
		t.Fatalf("LoadEpochs before any save = %v, %v", b, err)
	}
	s.PutHosts([]HostState{{Key: 9, Host: "a", Data: []byte("1")}, {Key: 9, Host: "a", Data: []byte("2")}, {Key: 3, Host: "b"}})
	var hs []HostState
	s.ScanHosts(Range{5, 4}, func(h HostState) error { hs = append(hs, h); return nil })
	if len(hs) != 2 || hs[0].Host != "a" || string(hs[0].Data) != "2" || hs[1].Host != "b" {
		t.Fatalf("hosts: last writer must win, ring order from 5: %+v", hs)
	}
}

// pageRecords resumes exactly after its cursor, including among many
// records at one key and across the wrap.
func TestPaging(t *testing.T) {
	c := newCluster(t, 1)
	c.build(1)
	m := c.nodes[0].m
	var recs []Record
	for _, k := range []uint64{uint64(mx), 0, 1, 2} {
		for h := range 7 {
			recs = append(recs, Record{Key: k, Hash: uint64(h)})
		}
	}
	c.nodes[0].st.PutRecords(recs)
	for _, r := range []Range{{mx - 1, 2}, {2, 2}, {0, 1}} {
		var want []RecordID
		c.nodes[0].st.ScanRecords(r, func(rec Record) error { want = append(want, IDOf(rec)); return nil })
		for _, limit := range []int{1, 3, 7, 100} {
			var got []RecordID
			var after *cursor
			for {
				page, more, err := m.pageRecords(r, after, limit, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, p := range page {
					got = append(got, IDOf(p))
				}
				if !more {
					break
				}
				if len(page) != limit {
					t.Fatalf("short page %d with more", len(page))
				}
				after = &cursor{page[len(page)-1].Key, page[len(page)-1].Hash}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("range %s limit %d: paged %v, want %v", r, limit, got, want)
			}
		}
	}
}

// The in-memory transport shares the ring network's faults.
func TestMemNetFaults(t *testing.T) {
	ctx := context.Background()
	rnet := ring.NewMemNet(1)
	snet := NewMemNet(rnet)
	a, b := ring.Peer{ID: 1, Addr: "a"}, ring.Peer{ID: 2, Addr: "b"}
	clock := ring.NewFakeClock(time.Unix(0, 0))
	rb := ring.NewNode(b, rnet.Transport(b), ring.Config{Clock: clock})
	st := NewMemStorage()
	mb, err := New(NewOwnership(rb), snet.Transport(b), st, newTestApp(st, nil), testConfig(clock))
	if err != nil {
		t.Fatal(err)
	}
	snet.Register(b, mb)
	ta := snet.Transport(a)
	req := &WriteRequest{Claims: []Claim{{Range{0, 10}, Epoch{1, "a"}}}, Records: []Record{{Key: 5, Hash: 1}}}
	if _, err := ta.Replicate(ctx, b, req); err != nil {
		t.Fatalf("healthy: %v", err)
	}
	// The handler got a copy: mutating the request afterwards changes nothing.
	req.Records[0].Done = true
	if r, _ := st.Record(5, 1); r.Done {
		t.Fatal("handler aliased the caller's request")
	}
	rnet.Crash("b")
	if _, err := ta.Replicate(ctx, b, req); !errors.Is(err, ring.ErrUnreachable) {
		t.Fatalf("to crashed: %v", err)
	}
	rnet.Restore("b")
	rnet.Partition([]string{"a"}, []string{"b"})
	if _, err := ta.Digest(ctx, b, &DigestRequest{Range: Range{0, 0}}); !errors.Is(err, ring.ErrUnreachable) {
		t.Fatalf("across partition: %v", err)
	}
	rnet.Heal()
	if _, err := ta.Pull(ctx, ring.Peer{ID: 3, Addr: "nobody"}, &PullRequest{}); !errors.Is(err, ring.ErrUnreachable) {
		t.Fatalf("to unregistered: %v", err)
	}
	// Drops: some lose the request (handler not run), some the reply
	// (handler ran, caller sees an error anyway).
	rnet.SetDropRate(1)
	lostReplies := 0
	for i := range 40 {
		before := mb.Stats()
		_, err := ta.Replicate(ctx, b, &WriteRequest{Claims: []Claim{{Range{0, 10}, Epoch{1, ""}}}})
		if !errors.Is(err, ring.ErrDropped) {
			t.Fatalf("call %d with drop rate 1: %v", i, err)
		}
		if after := mb.Stats(); after.RejectedWrites+after.Implausible > before.RejectedWrites+before.Implausible {
			lostReplies++ // the handler ran and refused the claim
		}
	}
	if lostReplies == 0 || lostReplies == 40 {
		t.Fatalf("%d of 40 drops lost the reply; want some of each kind", lostReplies)
	}
}
