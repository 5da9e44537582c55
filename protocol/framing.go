package protocol

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"google.golang.org/protobuf/proto"
)

// ErrTooLarge reports a frame above the size cap of its protocol.
var ErrTooLarge = errors.New("message too large")

// WriteMsg frames msg and writes it to w. It refuses to send a message
// larger than max, so a node never produces a frame its peers must reject.
func WriteMsg(w io.Writer, msg proto.Message, max int) error {
	body, err := proto.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encode %T: %w", msg, err)
	}
	if len(body) > max {
		return fmt.Errorf("encode %T: %d bytes: %w (cap %d)", msg, len(body), ErrTooLarge, max)
	}
	frame := make([]byte, 0, binary.MaxVarintLen64+len(body))
	frame = binary.AppendUvarint(frame, uint64(len(body)))
	frame = append(frame, body...)
	if _, err := w.Write(frame); err != nil {
		return fmt.Errorf("write %T: %w", msg, err)
	}
	return nil
}

// ReadMsg reads one frame from r into msg. A frame longer than max is
// refused before its body is read.
func ReadMsg(r io.Reader, msg proto.Message, max int) error {
	br, ok := r.(io.ByteReader)
	if !ok {
		br = byteReader{r}
	}
	n, err := binary.ReadUvarint(br)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("read %T: %w", msg, io.ErrUnexpectedEOF)
		}
		return fmt.Errorf("read %T length: %w", msg, err)
	}
	if n > uint64(max) {
		return fmt.Errorf("read %T: %d bytes: %w (cap %d)", msg, n, ErrTooLarge, max)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return fmt.Errorf("read %T body: %w", msg, err)
	}
	if err := proto.Unmarshal(body, msg); err != nil {
		return fmt.Errorf("decode %T: %w", msg, err)
	}
	return nil
}

// byteReader reads the length prefix one byte at a time so that nothing
// after the frame is consumed from the stream.
type byteReader struct{ r io.Reader }

func (b byteReader) ReadByte() (byte, error) {
	var buf [1]byte
	_, err := io.ReadFull(b.r, buf[:])
	return buf[0], err
}
