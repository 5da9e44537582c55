package warc

import (
	"bufio"
	"io"
	"os"
)

// WriteAtomic writes the file at path through fill, buffered, into a
// temporary file beside it, syncs it and renames it into place: a reader
// sees the old file or the whole new one, never a part. On error the
// temporary file is removed and the old file is left as it was.
func WriteAtomic(path string, fill func(io.Writer) error) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = fill(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
