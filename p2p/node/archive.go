package node

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/store/warc"
)

// What a node serves on the archive protocol (/swarmcrawl/archive/1.0.0),
// to any peer that can connect to it: the export client lists its WARC
// files and fetches them a range at a time. The streams' limits bound the
// calls (2 at once from one peer, 32 from all, 30s each); these bound the
// work they cause.
const (
	// archiveRate is how many bytes a second the node sends of its WARC
	// files, to every peer together; archiveBurst how many it may send at
	// once (one chunk).
	archiveRate  = 32 << 20
	archiveBurst = protocol.MaxArchiveChunk
	// archiveHashBudget bounds the time one list call spends computing
	// digests of files it has not seen before: a node with many large
	// files answers "ask again" and carries on at the next call from
	// where it stopped, so no call runs into its deadline.
	archiveHashBudget = 10 * time.Second
)

// archiveServer answers the archive protocol from a node's WARC
// directory. A complete file is offered whole; the file still being
// written is offered up to its last complete record (warc.CompleteLength),
// a prefix that only grows and that the client can fetch again later from
// where it stopped. Digests are computed once per file and byte: the
// hash of a file being written is carried forward as it grows.
type archiveServer struct {
	dir     string
	limiter *rate.Limiter

	mu    sync.Mutex
	files map[string]*archiveSum // by final name
}

// archiveSum is what the server knows of one file: the prefix it has
// hashed (and, for a file being written, found complete) and the running
// hash over it.
type archiveSum struct {
	size   int64     // bytes hashed, the size last offered
	sum    [32]byte  // SHA-256 of the first size bytes
	h      hash.Hash // running hash at size; nil once the file is complete and hashed
	closed bool      // the file is complete: size is its length
}

func newArchiveServer(dir string) *archiveServer {
	return &archiveServer{dir: dir, limiter: rate.NewLimiter(archiveRate, archiveBurst), files: map[string]*archiveSum{}}
}

// errHashing is the list call's answer while digests are still being
// computed.
var errHashing = errors.New("archive: still computing the digests of the WARC files; ask again")

// list returns the node's WARC files, oldest first, with their sizes and
// digests.
func (a *archiveServer) list(ctx context.Context, _ p2p.Inbound) ([]p2p.ArchiveFile, bool, error) {
	paths, err := warc.Files(a.dir, true)
	if err != nil {
		return nil, false, errors.New("archive: cannot list the WARC files")
	}
	more := false
	if len(paths) > protocol.MaxArchiveFiles {
		paths, more = paths[:protocol.MaxArchiveFiles], true
	}
	deadline := time.Now().Add(archiveHashBudget)
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]p2p.ArchiveFile, 0, len(paths))
	for _, path := range paths {
		if ctx.Err() != nil || time.Now().After(deadline) {
			return nil, false, errHashing
		}
		name := strings.TrimSuffix(filepath.Base(path), ".open")
		if !p2p.ValidArchiveName(name) {
			continue // not a name a Writer gives; not offered
		}
		open := name != filepath.Base(path)
		s, err := a.update(name, open, deadline)
		if errors.Is(err, fs.ErrNotExist) {
			continue // renamed or removed since listed; the next list has it
		}
		if err != nil {
			if errors.Is(err, errHashing) {
				return nil, false, err
			}
			return nil, false, fmt.Errorf("archive: %s: cannot read it", name)
		}
		out = append(out, p2p.ArchiveFile{Name: name, Size: s.size, SHA256: s.sum, Open: !s.closed})
	}
	return out, more, nil
}

// update brings the digest of file name up to date: for a complete file,
// its whole length; for one being written, its complete records. Called
// with a.mu held.
func (a *archiveServer) update(name string, open bool, deadline time.Time) (*archiveSum, error) {
	s := a.files[name]
	if s != nil && s.closed {
		return s, nil
	}
	path := filepath.Join(a.dir, name)
	var size int64
	if open {
		from := int64(0)
		if s != nil {
			from = s.size
		}
		n, err := warc.CompleteLength(path+".open", from)
		if errors.Is(err, fs.ErrNotExist) {
			open = false // completed since listed
		} else if err != nil {
			return nil, err
		} else {
			size = n
		}
	}
	if !open {
		fi, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		size = fi.Size()
	}
	if s == nil || size < s.size {
		// New, or shorter than hashed: the node cut a damaged tail off
		// at its restart. Hash it from the start.
		s = &archiveSum{h: sha256.New()}
		a.files[name] = s
	}
	if size > s.size {
		f, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) && open {
			f, err = os.Open(path + ".open")
		}
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if _, err := f.Seek(s.size, io.SeekStart); err != nil {
			return nil, err
		}
		// A chunk at a time, so that a large new file stops at the
		// call's budget and resumes at the next call.
		buf := make([]byte, 1<<20)
		for s.size < size {
			n := int(min(int64(len(buf)), size-s.size))
			if _, err := io.ReadFull(f, buf[:n]); err != nil {
				return nil, err
			}
			s.h.Write(buf[:n])
			s.size += int64(n)
			if s.size < size && time.Now().After(deadline) {
				return nil, errHashing
			}
		}
		copy(s.sum[:], s.h.Sum(nil))
	} else if s.size == 0 {
		copy(s.sum[:], s.h.Sum(nil))
	}
	if !open {
		s.closed, s.h = true, nil
	}
	return s, nil
}

// read returns n bytes of file name from off on, within the size the last
// list offered (a file not listed yet is not served), pacing the node's
// archive bytes to archiveRate.
func (a *archiveServer) read(ctx context.Context, _ p2p.Inbound, name string, off int64, n int) ([]byte, error) {
	a.mu.Lock()
	s := a.files[name]
	var size int64
	if s != nil {
		size = s.size
	}
	a.mu.Unlock()
	if s == nil {
		return nil, errors.New("archive: no such file listed")
	}
	if off > size {
		return nil, fmt.Errorf("archive: %s: offset %d beyond its %d bytes", name, off, size)
	}
	n = int(min(int64(n), size-off))
	if n == 0 {
		return nil, nil
	}
	if err := a.limiter.WaitN(ctx, n); err != nil {
		return nil, errors.New("archive: busy; ask again")
	}
	path := filepath.Join(a.dir, name)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.Open(path + ".open")
	}
	if errors.Is(err, fs.ErrNotExist) {
		// Completed and renamed between the two opens.
		f, err = os.Open(path)
	}
	if err != nil {
		return nil, fmt.Errorf("archive: %s: cannot open it", name)
	}
	defer f.Close()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil {
		return nil, fmt.Errorf("archive: %s: cannot read it", name)
	}
	return buf, nil
}
