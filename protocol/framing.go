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

// FirstBuffer is the buffer a reader starts a frame's body with; it
// doubles (up to the frame's size) each time it is full, so a frame's
// buffer never holds more than twice the bytes that arrived, or
// FirstBuffer.
const FirstBuffer = 4 << 10

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

// Budget accounts the memory a reader holds for the frame it reads, so
// that the memory peers can make a node hold is bounded where the budget
// says, not by the frames' declared sizes.
type Budget interface {
	// Reserve is asked before the reader holds n more bytes; an error
	// stops the read.
	Reserve(n int) error
	// Release gives back n bytes reserved before.
	Release(n int)
}

// ReadMsg reads one frame from r into msg. A frame longer than max is
// refused before its body is read, and the body's buffer grows only as
// its bytes arrive (see FirstBuffer): a frame that declares max bytes and
// sends few costs few.
func ReadMsg(r io.Reader, msg proto.Message, max int) error {
	_, err := ReadMsgBudget(r, msg, max, nil)
	return err
}

// ReadMsgBudget is ReadMsg that reserves from b each time it grows the
// frame's buffer (the old buffer and the new while it copies), then what
// decoding the frame will allocate (DecodedBytes) before it decodes, and
// stops with b's error when b refuses. It returns the bytes it reserved
// and still holds, also on error: the caller releases them once it is
// done with msg. A nil b reserves nothing.
func ReadMsgBudget(r io.Reader, msg proto.Message, max int, b Budget) (reserved int, err error) {
	br, ok := r.(io.ByteReader)
	if !ok {
		br = byteReader{r}
	}
	n, err := binary.ReadUvarint(br)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("read %T: %w", msg, io.ErrUnexpectedEOF)
		}
		return 0, fmt.Errorf("read %T length: %w", msg, err)
	}
	if n > uint64(max) {
		return 0, fmt.Errorf("read %T: %d bytes: %w (cap %d)", msg, n, ErrTooLarge, max)
	}
	body, reserved, err := readBody(r, int(n), b)
	if err != nil {
		return reserved, fmt.Errorf("read %T body: %w", msg, err)
	}
	if b != nil {
		// What decoding will allocate is reserved before it does: a
		// frame of many small messages decodes into many times its size.
		decoded, err := DecodedBytes(body, msg.ProtoReflect().Descriptor())
		if err != nil {
			return reserved, fmt.Errorf("decode %T: %w", msg, err)
		}
		if err := b.Reserve(decoded); err != nil {
			return reserved, fmt.Errorf("decode %T of %d bytes into %d: %w", msg, len(body), decoded, err)
		}
		reserved += decoded
	}
	if err := proto.Unmarshal(body, msg); err != nil {
		return reserved, fmt.Errorf("decode %T: %w", msg, err)
	}
	return reserved, nil
}

// readBody reads n bytes from r into a buffer that starts at FirstBuffer
// bytes and doubles (up to n) each time it is full, reserving each new
// buffer from b first and releasing the old once copied.
func readBody(r io.Reader, n int, b Budget) (body []byte, reserved int, err error) {
	for len(body) < n {
		if len(body) == cap(body) {
			size := min(n, max(FirstBuffer, 2*cap(body)))
			if b != nil {
				// The old buffer and the new are both held while one is
				// copied into the other.
				if err := b.Reserve(size); err != nil {
					return nil, reserved, fmt.Errorf("%d of %d bytes read: %w", len(body), n, err)
				}
				reserved += size
			}
			grown := make([]byte, len(body), size)
			copy(grown, body)
			if b != nil && cap(body) > 0 {
				b.Release(cap(body))
				reserved -= cap(body)
			}
			body = grown
		}
		m, err := io.ReadFull(r, body[len(body):cap(body)])
		body = body[:len(body)+m]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, reserved, fmt.Errorf("%d of %d bytes read: %w", len(body), n, err)
		}
	}
	return body, reserved, nil
}

// byteReader reads the length prefix one byte at a time so that nothing
// after the frame is consumed from the stream.
type byteReader struct{ r io.Reader }

func (b byteReader) ReadByte() (byte, error) {
	var buf [1]byte
	_, err := io.ReadFull(b.r, buf[:])
	return buf[0], err
}
