package store

import (
	"errors"
	"slices"
	"testing"
)

func TestOutboxSurvivesReopenAndKeepsOrder(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, Options{BloomExpected: 1000})
	if err != nil {
		t.Fatal(err)
	}
	in := []OutboxEntry{{URL: "http://a.test/1", Depth: 1}, {URL: "http://b.test/2", Depth: 2, Redirects: 1, Attempts: 3}, {URL: "http://c.test/3"}}
	if err := db.PutOutbox(in); err != nil {
		t.Fatal(err)
	}
	if in[0].ID == 0 {
		t.Fatal("ID 0 assigned; it means \"not persisted\" to callers")
	}
	if err := db.DeleteOutbox([]uint64{in[0].ID}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, Options{BloomExpected: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var got []OutboxEntry
	if err := db.ScanOutbox(func(e OutboxEntry) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, in[1:]) {
		t.Fatalf("after reopen the outbox holds %+v, want %+v", got, in[1:])
	}
	// New entries after a restart never reuse an ID, so a delete of an old
	// entry cannot remove a new one.
	more := []OutboxEntry{{URL: "http://d.test/"}}
	if err := db.PutOutbox(more); err != nil {
		t.Fatal(err)
	}
	if more[0].ID <= in[2].ID {
		t.Fatalf("ID %d reused after restart (last was %d)", more[0].ID, in[2].ID)
	}
}

func TestOutboxCorruptRecordIsAnError(t *testing.T) {
	db, err := Open(t.TempDir(), Options{BloomExpected: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.ldb.Put(outboxKey(7), []byte{recordVersion1, 0xff}, nil); err != nil {
		t.Fatal(err)
	}
	err = db.ScanOutbox(func(OutboxEntry) error { return nil })
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt outbox record: got %v, want ErrCorrupt", err)
	}
}
