package warc

import (
	"bufio"
	"bytes"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// DefaultSortMemory is how many bytes of CDXJ lines an IndexSorter holds
// before it sorts them and moves them to a temporary file.
const DefaultSortMemory = 32 << 20

// IndexSorter sorts CDXJ lines in bounded memory: lines are added in any
// order and written out sorted, in the byte order of the lines, which is
// the order of their SURT keys, then their timestamps, then the rest (a
// key holds no space, and the space after it sorts before any character
// of a key), the order pywb and ReplayWeb.page search indexes in. Lines
// are held in memory up to a limit; beyond it they are sorted into runs in
// temporary files, which WriteTo merges. Exact duplicate lines are written
// once. Close removes the temporary files.
type IndexSorter struct {
	dir    string
	limit  int
	lines  [][]byte
	held   int
	runs   []*os.File
	closed bool
}

// NewIndexSorter returns an IndexSorter that holds at most memory bytes
// of lines (0: DefaultSortMemory) and puts its runs in tmpDir ("": the
// system's temporary directory).
func NewIndexSorter(tmpDir string, memory int) *IndexSorter {
	if memory <= 0 {
		memory = DefaultSortMemory
	}
	return &IndexSorter{dir: tmpDir, limit: memory}
}

// Add adds one line, which must parse as a CDXJ line (ParseCDXJLine); its
// "\n" is optional.
func (s *IndexSorter) Add(line []byte) error {
	if s.closed {
		return errors.New("warc: index sorter closed")
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	if _, err := ParseCDXJLine(line); err != nil {
		return err
	}
	s.lines = append(s.lines, append(make([]byte, 0, len(line)+1), line...))
	s.held += len(line) + 24 // the slice header too
	if s.held >= s.limit {
		return s.spill()
	}
	return nil
}

// AddEntry adds the line of e.
func (s *IndexSorter) AddEntry(e CDXJEntry) error {
	return s.Add(e.AppendLine(nil))
}

// AddIndex adds every line of a CDXJ index read from r; name names it in
// errors. Blank lines are skipped.
func (s *IndexSorter) AddIndex(r io.Reader, name string) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := readLine(br)
		if len(line) > 0 {
			if aerr := s.Add(line); aerr != nil {
				return fmt.Errorf("warc: index %s line %d: %w", name, n, aerr)
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("warc: index %s line %d: %w", name, n, err)
		}
	}
}

// readLine reads one line without its "\n", refusing lines longer than
// maxCDXJLine without holding them.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > maxCDXJLine+1 {
			return nil, fmt.Errorf("warc: CDXJ line longer than %d bytes", maxCDXJLine)
		}
		line = append(line, frag...)
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), err
	}
}

// spill sorts the held lines into a new run file.
func (s *IndexSorter) spill() error {
	f, err := os.CreateTemp(s.dir, "cdxj-run-*")
	if err != nil {
		return fmt.Errorf("warc: sort index: %w", err)
	}
	s.runs = append(s.runs, f)
	os.Remove(f.Name()) // unlinked now, gone with the last close, whatever happens
	if _, err := s.writeHeld(f); err != nil {
		return fmt.Errorf("warc: sort index: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("warc: sort index: %w", err)
	}
	return nil
}

// writeHeld writes the held lines sorted, without duplicates, to w and
// forgets them.
func (s *IndexSorter) writeHeld(w io.Writer) (int, error) {
	slices.SortFunc(s.lines, bytes.Compare)
	s.lines = slices.CompactFunc(s.lines, bytes.Equal)
	bw := bufio.NewWriterSize(w, 64<<10)
	for _, l := range s.lines {
		bw.Write(l)
		bw.WriteByte('\n')
	}
	n := len(s.lines)
	clear(s.lines)
	s.lines, s.held = s.lines[:0], 0
	return n, bw.Flush()
}

// WriteTo writes every line added, sorted and without duplicates, to w,
// and returns the number of lines written. The sorter is then empty.
func (s *IndexSorter) WriteTo(w io.Writer) (int64, error) {
	if len(s.runs) == 0 {
		n, err := s.writeHeld(w)
		if err != nil {
			return int64(n), fmt.Errorf("warc: write index: %w", err)
		}
		return int64(n), nil
	}
	if len(s.lines) > 0 {
		if err := s.spill(); err != nil {
			return 0, err
		}
	}
	h := make(runHeap, 0, len(s.runs))
	for _, f := range s.runs {
		r := &run{br: bufio.NewReaderSize(f, 64<<10)}
		if ok, err := r.next(); err != nil {
			return 0, err
		} else if ok {
			h = append(h, r)
		}
	}
	heap.Init(&h)
	bw := bufio.NewWriterSize(w, 64<<10)
	var last []byte
	var n int64
	for len(h) > 0 {
		r := h[0]
		if last == nil || !bytes.Equal(r.line, last) {
			bw.Write(r.line)
			if err := bw.WriteByte('\n'); err != nil {
				return n, fmt.Errorf("warc: write index: %w", err)
			}
			last = append(last[:0], r.line...)
			n++
		}
		ok, err := r.next()
		if err != nil {
			return n, err
		}
		if ok {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	if err := bw.Flush(); err != nil {
		return n, fmt.Errorf("warc: write index: %w", err)
	}
	s.closeRuns()
	return n, nil
}

// Close drops the lines and removes the temporary files.
func (s *IndexSorter) Close() error {
	s.closed = true
	s.lines = nil
	s.closeRuns()
	return nil
}

func (s *IndexSorter) closeRuns() {
	for _, f := range s.runs {
		f.Close()
	}
	s.runs = nil
}

// run is one sorted run file being merged.
type run struct {
	br   *bufio.Reader
	line []byte
}

// next reads the run's next line; false at its end.
func (r *run) next() (bool, error) {
	line, err := r.br.ReadBytes('\n')
	if err == io.EOF && len(line) == 0 {
		return false, nil
	}
	if err != nil && err != io.EOF {
		return false, fmt.Errorf("warc: read sorted run: %w", err)
	}
	r.line = bytes.TrimSuffix(line, []byte("\n"))
	return true, nil
}

type runHeap []*run

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return bytes.Compare(h[i].line, h[j].line) < 0 }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(*run)) }
func (h *runHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	*h = old[:len(old)-1]
	return r
}

// MergeIndexes writes to w one sorted CDXJ index (see IndexSorter) of the
// lines of the CDXJ files at paths, which need not be sorted, holding at
// most DefaultSortMemory bytes of lines in memory and the rest in
// temporary files in tmpDir. It returns the number of lines written.
func MergeIndexes(w io.Writer, paths []string, tmpDir string) (int64, error) {
	s := NewIndexSorter(tmpDir, 0)
	defer s.Close()
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return 0, fmt.Errorf("warc: merge indexes: %w", err)
		}
		err = s.AddIndex(f, p)
		f.Close()
		if err != nil {
			return 0, err
		}
	}
	return s.WriteTo(w)
}

// AddWARC adds the index entries of the WARC file at path: those of the
// index written beside it (path+IndexSuffix) when the file is complete and
// has one, else those BuildIndex finds in the file itself (a file written
// before indexes were, or one still being written, up to its last
// complete record).
func (s *IndexSorter) AddWARC(path string) error {
	if !strings.HasSuffix(path, openSuffix) {
		f, err := os.Open(path + IndexSuffix)
		if err == nil {
			defer f.Close()
			return s.AddIndex(f, filepath.Base(path)+IndexSuffix)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("warc: index of %s: %w", filepath.Base(path), err)
		}
	}
	w := &sorterWriter{s: s}
	if _, err := BuildIndex(path, w); err != nil {
		return err
	}
	return nil
}

// sorterWriter adds the lines BuildIndex writes, one Write a line.
type sorterWriter struct{ s *IndexSorter }

func (w *sorterWriter) Write(line []byte) (int, error) {
	if err := w.s.Add(line); err != nil {
		return 0, err
	}
	return len(line), nil
}
