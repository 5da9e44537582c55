package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

func TestRoundTripKeepsBackToBackFrames(t *testing.T) {
	var buf bytes.Buffer
	first := &pb.TaskBatch{Tasks: []*pb.Task{{Url: "http://a.test/", Depth: 1}, {Url: "http://b.test/x", Depth: 2}}}
	second := &pb.SeedRequest{Urls: []string{"http://c.test/"}}
	if err := WriteMsg(&buf, first, MaxTaskMsgBytes); err != nil {
		t.Fatal(err)
	}
	if err := WriteMsg(&buf, second, MaxSeedMsgBytes); err != nil {
		t.Fatal(err)
	}
	// A plain io.Reader (no ReadByte) must not lose the second frame.
	r := struct{ io.Reader }{&buf}
	var got1 pb.TaskBatch
	var got2 pb.SeedRequest
	if err := ReadMsg(r, &got1, MaxTaskMsgBytes); err != nil {
		t.Fatal(err)
	}
	if err := ReadMsg(r, &got2, MaxSeedMsgBytes); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(first, &got1) || !proto.Equal(second, &got2) {
		t.Fatalf("round trip changed messages: %v / %v", &got1, &got2)
	}
}

func TestReadRefusesOversizedFrameBeforeReadingIt(t *testing.T) {
	var frame []byte
	frame = binary.AppendUvarint(frame, 1<<30) // claims 1 GiB, sends nothing
	err := ReadMsg(bytes.NewReader(frame), &pb.RingRequest{}, MaxRingMsgBytes)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("want ErrTooLarge, got %v", err)
	}
}

func TestWriteRefusesOversizedMessage(t *testing.T) {
	big := &pb.SeedRequest{Urls: []string{strings.Repeat("x", MaxRingMsgBytes)}}
	var buf bytes.Buffer
	if err := WriteMsg(&buf, big, MaxRingMsgBytes); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("want ErrTooLarge, got %v", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("oversized message partly written: %d bytes", buf.Len())
	}
}

func TestReadRejectsBrokenFrames(t *testing.T) {
	cases := map[string][]byte{
		"empty stream":    nil,
		"truncated body":  append(binary.AppendUvarint(nil, 10), 1, 2, 3),
		"garbage payload": append(binary.AppendUvarint(nil, 3), 0xff, 0xff, 0xff),
		"endless varint":  bytes.Repeat([]byte{0x80}, 12),
	}
	for name, frame := range cases {
		t.Run(name, func(t *testing.T) {
			if err := ReadMsg(bytes.NewReader(frame), &pb.TaskBatch{}, MaxTaskMsgBytes); err == nil {
				t.Fatal("broken frame accepted")
			}
		})
	}
}

func FuzzReadMsg(f *testing.F) {
	var buf bytes.Buffer
	_ = WriteMsg(&buf, &pb.RingRequest{Body: &pb.RingRequest_Ping{Ping: &pb.Ping{}}}, MaxRingMsgBytes)
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		var m pb.RingRequest
		_ = ReadMsg(bytes.NewReader(data), &m, MaxRingMsgBytes) // must not panic
	})
}

// budget counts what a reader reserves and refuses beyond limit.
type budget struct{ held, limit int }

func (b *budget) Reserve(n int) error {
	if b.held+n > b.limit {
		return errors.New("over budget")
	}
	b.held += n
	return nil
}

func (b *budget) Release(n int) { b.held -= n }

// A frame that declares the protocol's full size and then sends little
// costs little: the body's buffer grows only as bytes arrive. Before, the
// whole declared size was allocated before the first byte was read.
func TestTruncatedFrameAllocatesLittle(t *testing.T) {
	frame := binary.AppendUvarint(nil, MaxShardMsgBytes)
	frame = append(frame, bytes.Repeat([]byte{1}, 100)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := ReadMsg(bytes.NewReader(frame), &pb.WriteRequest{}, MaxShardMsgBytes)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated frame: %v, want unexpected EOF", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<10 {
		t.Fatalf("a frame declaring %d bytes and sending 100 allocated %d bytes", MaxShardMsgBytes, alloc)
	}
}

// Frames of every size around the buffer's growth steps round-trip over a
// reader that returns short reads, and the reader reserves what it holds,
// at most twice the frame (or the first buffer) and what decoding it
// allocates.
func TestReadMsgBudgetRoundTrip(t *testing.T) {
	for _, size := range []int{0, 1, FirstBuffer - 8, FirstBuffer, FirstBuffer + 1, 3 * FirstBuffer, 1 << 20} {
		msg := &pb.SeedRequest{}
		if size > 0 {
			msg.Urls = []string{strings.Repeat("u", size)}
		}
		var buf bytes.Buffer
		if err := WriteMsg(&buf, msg, MaxSeedMsgBytes); err != nil {
			t.Fatal(err)
		}
		body := proto.Size(msg)
		b := &budget{limit: 1 << 30}
		got := &pb.SeedRequest{}
		reserved, err := ReadMsgBudget(iotest.HalfReader(&buf), got, MaxSeedMsgBytes, b)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if !proto.Equal(msg, got) {
			t.Fatalf("size %d: message changed", size)
		}
		var wire bytes.Buffer
		_ = WriteMsg(&wire, msg, MaxSeedMsgBytes)
		decoded, err := DecodedBytes(wire.Bytes()[wire.Len()-body:], msg.ProtoReflect().Descriptor())
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if reserved != b.held || reserved < body+decoded || reserved > max(2*body, FirstBuffer)+decoded {
			t.Fatalf("size %d (body %d): reserved %d, budget holds %d", size, body, reserved, b.held)
		}
	}
}

// A budget that refuses stops the read before the buffer grows past it,
// and the reader reports what it still holds.
func TestReadMsgBudgetRefusal(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteMsg(&buf, &pb.SeedRequest{Urls: []string{strings.Repeat("u", 1<<20)}}, MaxSeedMsgBytes); err != nil {
		t.Fatal(err)
	}
	b := &budget{limit: 64 << 10}
	reserved, err := ReadMsgBudget(&buf, &pb.SeedRequest{}, MaxSeedMsgBytes, b)
	if err == nil || !strings.Contains(err.Error(), "over budget") {
		t.Fatalf("read beyond the budget: %v", err)
	}
	if reserved != b.held || reserved > b.limit {
		t.Fatalf("reserved %d, budget holds %d of %d", reserved, b.held, b.limit)
	}
}
