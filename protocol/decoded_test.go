package protocol

import (
	"bytes"
	"errors"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// decodeCases are frames of the shapes peers send, honest and hostile:
// many tiny messages (each a Go struct many times its wire size), long
// strings, nested metadata, packed lists and unknown fields.
func decodeCases() map[string]proto.Message {
	empties := &pb.WriteRequest{Records: make([]*pb.ShardRecord, 200_000)}
	for i := range empties.Records {
		empties.Records[i] = &pb.ShardRecord{}
	}
	full := &pb.WriteRequest{}
	for i := range MaxShardRecords {
		full.Records = append(full.Records, &pb.ShardRecord{
			Key: uint64(i), Hash: uint64(i) * 7, Url: "http://example.com/" + strings.Repeat("p", 2000),
			Depth: 3, Done: true, MetaVersion: 9, Seed: i%2 == 0,
			Meta: &pb.UrlMeta{Etag: strings.Repeat("e", 200), LastModified: "Mon, 02 Jan 2006 15:04:05 GMT"},
		})
		full.Hosts = append(full.Hosts, &pb.HostState{Key: uint64(i), Host: "h.example", Politeness: &pb.HostPoliteness{Robots: []byte(strings.Repeat("r", 100))}})
	}
	tasks := &pb.TaskBatch{}
	for i := range MaxBatchTasks {
		tasks.Tasks = append(tasks.Tasks, &pb.Task{Url: "http://example.com/a/" + strings.Repeat("x", i%300), Depth: uint32(i)})
	}
	seeds := &pb.SeedRequest{Urls: make([]string, 300_000)}
	ring := &pb.RingRequest{Body: &pb.RingRequest_Ping{Ping: &pb.Ping{}}}
	return map[string]proto.Message{
		"200k empty records": empties, "2000 full records": full,
		"1000 tasks": tasks, "300k empty seed URLs": seeds, "ring ping": ring,
	}
}

// liveAfterDecode is the heap that decoding body into a new message like
// m keeps live, measured across garbage collections.
func liveAfterDecode(t *testing.T, body []byte, m proto.Message) int {
	t.Helper()
	// Once first: the protobuf runtime builds its tables for a message
	// type on its first decode, and they stay.
	if err := proto.Unmarshal(body, m.ProtoReflect().Type().New().Interface()); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got := m.ProtoReflect().Type().New().Interface()
	if err := proto.Unmarshal(body, got); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(got)
	runtime.KeepAlive(body) // live before, so that only the decoded message counts
	runtime.KeepAlive(m)
	return int(after.HeapAlloc) - int(before.HeapAlloc)
}

// What DecodedBytes says decoding a frame costs is at least what the
// decoded message holds on the heap, and not so much more that an honest
// frame would be refused: at most twice it, and a few KiB. A frame of
// 200,000 empty records (400 KB on the wire) decodes into more than
// 20 MB: the bound sees it.
func TestDecodedBytesBoundsTheHeap(t *testing.T) {
	for name, m := range decodeCases() {
		body, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		est, err := DecodedBytes(body, m.ProtoReflect().Descriptor())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		live := liveAfterDecode(t, body, m)
		t.Logf("%s: %d bytes on the wire, %d live after decoding, bound %d (%.2fx)", name, len(body), live, est, float64(est)/float64(max(live, 1)))
		// A few KiB of the runtime's own come and go between two
		// measurements.
		if est+8<<10 < live {
			t.Errorf("%s: bound %d below the %d bytes decoding keeps", name, est, live)
		}
		if est > 2*live+4<<10 {
			t.Errorf("%s: bound %d more than twice the %d bytes decoding keeps", name, est, live)
		}
	}
}

// A frame that would decode into more than the reader's budget is refused
// before it is decoded: 200,000 empty records arrive in 400 KB, within a
// 4 MiB budget, and would decode into over 20 MB. Before the decoded
// size was reserved, the read succeeded holding 512 KiB of the budget.
func TestReadMsgBudgetRefusesDecodeBomb(t *testing.T) {
	m := decodeCases()["200k empty records"]
	var buf bytes.Buffer
	if err := WriteMsg(&buf, m, MaxShardMsgBytes); err != nil {
		t.Fatal(err)
	}
	b := &budget{limit: 4 << 20}
	got := &pb.WriteRequest{}
	reserved, err := ReadMsgBudget(&buf, got, MaxShardMsgBytes, b)
	if err == nil || !strings.Contains(err.Error(), "over budget") {
		t.Fatalf("decode bomb read within a %d-byte budget: %v (reserved %d, %d records decoded)", b.limit, err, reserved, len(got.Records))
	}
	if len(got.Records) != 0 {
		t.Fatalf("%d records decoded though the budget refused", len(got.Records))
	}
	if reserved != b.held || reserved > b.limit {
		t.Fatalf("reserved %d, budget holds %d of %d", reserved, b.held, b.limit)
	}
}

// Malformed frames fail the bound as they fail decoding, and messages
// nested past maxNesting are refused (the wire schema nests a few levels
// and has no recursive message, so only a hostile frame gets there).
func TestDecodedBytesMalformed(t *testing.T) {
	md := (&pb.WriteRequest{}).ProtoReflect().Descriptor()
	for _, body := range [][]byte{{0x12}, {0x12, 0x05, 0x01}, {0x80}} {
		if _, err := DecodedBytes(body, md); err == nil {
			t.Errorf("% x: no error", body)
		} else if proto.Unmarshal(body, &pb.WriteRequest{}) == nil {
			t.Errorf("% x: refused (%v) though it decodes", body, err)
		}
	}
	if _, err := decodedBytes(nil, md, maxNesting+1); !errors.Is(err, errTooDeep) {
		t.Errorf("past %d levels: %v, want %v", maxNesting, err, errTooDeep)
	}
}

// BenchmarkDecodedBytes is the cost of bounding a frame's decoded size
// beside the cost of decoding it (the ratio of the two sub-benchmarks is
// what the bound adds to reading a frame).
func BenchmarkDecodedBytes(b *testing.B) {
	for _, name := range []string{"2000 full records", "1000 tasks"} {
		m := decodeCases()[name]
		body, err := proto.Marshal(m)
		if err != nil {
			b.Fatal(err)
		}
		md := m.ProtoReflect().Descriptor()
		b.Run(name+"/bound", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := DecodedBytes(body, md); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/decode", func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if err := proto.Unmarshal(body, m.ProtoReflect().Type().New().Interface()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
