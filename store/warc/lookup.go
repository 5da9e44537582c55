package warc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Location is where one exchange's records (request, response and
// conversion, each its own gzip member) are: in File, a base name in the
// archive's directory, Length bytes from Offset.
type Location struct {
	File           string
	Offset, Length int64
}

// ErrNotFound is ReadExchange's error when the location names no file of
// the archive, or lies past its end.
var ErrNotFound = errors.New("warc: exchange not found")

// ReadExchange returns the bytes of the exchange at loc in dir, the
// archive's directory: a file still being written is read under its open
// name. A location longer than maxBytes, or whose file name is not a
// plain name of the directory, is refused.
func ReadExchange(dir string, loc Location, maxBytes int64) ([]byte, error) {
	if loc.File == "" || loc.File != filepath.Base(loc.File) || strings.HasPrefix(loc.File, ".") {
		return nil, fmt.Errorf("warc: read exchange: bad file name %q", loc.File)
	}
	if loc.Offset < 0 || loc.Length <= 0 || loc.Length > maxBytes {
		return nil, fmt.Errorf("warc: read exchange in %s: %d bytes at %d (at most %d)", loc.File, loc.Length, loc.Offset, maxBytes)
	}
	f, err := os.Open(filepath.Join(dir, loc.File))
	if errors.Is(err, os.ErrNotExist) {
		f, err = os.Open(filepath.Join(dir, loc.File+openSuffix))
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, loc.File)
	}
	if err != nil {
		return nil, fmt.Errorf("warc: read exchange: %w", err)
	}
	defer f.Close()
	b := make([]byte, loc.Length)
	if _, err := f.ReadAt(b, loc.Offset); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %s is shorter than %d", ErrNotFound, loc.File, loc.Offset+loc.Length)
		}
		return nil, fmt.Errorf("warc: read exchange in %s: %w", loc.File, err)
	}
	return b, nil
}

// ParseExchange reads the records of an exchange as ReadExchange returns
// it (or a peer sent it): each must be whole.
func ParseExchange(b []byte) ([]*Record, error) {
	r := NewReader(bytes.NewReader(b))
	var out []*Record
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("warc: parse exchange: %w", err)
		}
		out = append(out, rec)
	}
}
