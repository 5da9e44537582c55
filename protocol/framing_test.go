package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

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
