package warc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// recoverOpenFile completes a file that a crashed Writer left with the
// .open suffix: it keeps the file up to the end of its last complete
// record and renames it, or removes it when no record is complete.
func recoverOpenFile(path string) error {
	good, err := completeLength(path)
	if err != nil {
		return fmt.Errorf("warc: recover %s: %w", filepath.Base(path), err)
	}
	if good == 0 {
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("warc: recover %s: %w", filepath.Base(path), err)
		}
		return nil
	}
	if err := os.Truncate(path, good); err != nil {
		return fmt.Errorf("warc: recover %s: %w", filepath.Base(path), err)
	}
	final := strings.TrimSuffix(path, openSuffix)
	if _, err := os.Lstat(final); err == nil {
		return fmt.Errorf("warc: recover %s: %s exists too", filepath.Base(path), filepath.Base(final))
	}
	if err := os.Rename(path, final); err != nil {
		return fmt.Errorf("warc: recover %s: %w", filepath.Base(path), err)
	}
	// The index written with the file may miss the lines of the last
	// exchanges (it is buffered) or name records that were cut: build it
	// again from what the file now holds.
	if err := writeIndexFile(final); err != nil {
		return fmt.Errorf("warc: recover %s: %w", filepath.Base(path), err)
	}
	return nil
}

// writeIndexFile builds the CDXJ index of the complete WARC file at path
// and puts it, whole, at path+IndexSuffix, removing the index being
// written with it.
func writeIndexFile(path string) error {
	err := WriteAtomic(path+IndexSuffix, func(w io.Writer) error {
		_, err := BuildIndex(path, w)
		return err
	})
	if err != nil {
		return err
	}
	os.Remove(path + IndexSuffix + openSuffix)
	return nil
}

// completeLength returns the length of the prefix of a WARC file that
// holds only complete, readable records, each ending a gzip member.
func completeLength(path string) (int64, error) {
	return CompleteLength(path, 0)
}

// CompleteLength returns the length of the prefix of the gzip-compressed
// WARC file at path that holds only complete, readable records, each
// ending a gzip member, reading from offset from on: from must be the end
// of a record (0, or a length CompleteLength returned before for the same
// file, which only grows while it is written). It is how much of a file
// still being written can be handed out whole.
func CompleteLength(path string, from int64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return 0, err
	}
	r := NewReader(f)
	good := from
	for {
		_, err := r.Next()
		if err == io.EOF {
			return good, nil
		}
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, ErrMalformed) {
				return good, nil // the damage a crash leaves: cut it off
			}
			return 0, err
		}
		if !r.gzipped {
			return 0, errors.New("not a gzip-compressed WARC file")
		}
		if !r.inMember {
			good = from + r.end
		}
	}
}
