package p2p

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// MaxArchiveFileBytes bounds the size of a WARC file a member may offer:
// far above what a Writer makes (1 GiB by default), low enough that a
// hostile list cannot make a client plan for an endless download.
const MaxArchiveFileBytes = 1 << 40

// ArchiveFile is one WARC file a member offers on the archive protocol
// (/swarmcrawl/archive/1.0.0): its final name, the size to fetch, the
// SHA-256 of those bytes, and whether it is still being written (then
// size is that of its complete records, a prefix that only grows).
type ArchiveFile struct {
	Name   string
	Size   int64
	SHA256 [32]byte
	Open   bool
}

// ValidArchiveName reports whether name may name a WARC file on the
// archive protocol: a plain file name (no directory, no "..", nothing
// but letters, digits, '.', '-' and '_'), at most
// protocol.MaxArchiveNameBytes long, ending in .warc.gz or .warc. Both
// sides check it: the member before it opens a file, the client before
// it creates one.
func ValidArchiveName(name string) bool {
	if name == "" || len(name) > protocol.MaxArchiveNameBytes || strings.HasPrefix(name, ".") || strings.Contains(name, "..") {
		return false
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return strings.HasSuffix(name, ".warc.gz") || strings.HasSuffix(name, ".warc")
}

// ServeArchive answers the archive protocol on s: list answers a list
// request, read a range request (name, offset, length already checked
// against the protocol's bounds). Unhandle(protocol.ArchiveID) stops it.
func ServeArchive(s *Streams, list func(ctx context.Context, in Inbound) ([]ArchiveFile, bool, error),
	read func(ctx context.Context, in Inbound, name string, off int64, n int) ([]byte, error)) {
	s.Handle(protocol.ArchiveID, func() proto.Message { return &pb.ArchiveRequest{} },
		func(ctx context.Context, in Inbound, m proto.Message) proto.Message {
			fail := func(err error) proto.Message { return &pb.ArchiveResponse{Error: err.Error()} }
			switch b := m.(*pb.ArchiveRequest).Body.(type) {
			case *pb.ArchiveRequest_List:
				files, more, err := list(ctx, in)
				if err != nil {
					return fail(err)
				}
				if len(files) > protocol.MaxArchiveFiles {
					files, more = files[:protocol.MaxArchiveFiles], true
				}
				resp := &pb.ArchiveResponse{MoreFiles: more}
				for _, f := range files {
					resp.Files = append(resp.Files, &pb.ArchiveFile{Name: f.Name, Size: uint64(f.Size), Sha256: f.SHA256[:], Open: f.Open})
				}
				return resp
			case *pb.ArchiveRequest_Range:
				r := b.Range
				if r == nil || !ValidArchiveName(r.Name) {
					return fail(errors.New("archive range: bad file name"))
				}
				if r.Length == 0 || r.Length > protocol.MaxArchiveChunk || r.Offset > MaxArchiveFileBytes {
					return fail(fmt.Errorf("archive range: offset %d, length %d out of bounds (at most %d bytes)", r.Offset, r.Length, protocol.MaxArchiveChunk))
				}
				data, err := read(ctx, in, r.Name, int64(r.Offset), int(r.Length))
				if err != nil {
					return fail(err)
				}
				return &pb.ArchiveResponse{Data: data}
			default:
				return fail(errors.New("unknown archive request"))
			}
		})
}

// ListArchive asks the member to for the WARC files it offers, and checks
// the answer: at most protocol.MaxArchiveFiles files, each with a valid
// name (ValidArchiveName), unique, a size within MaxArchiveFileBytes and
// a 32-byte digest. more says the member holds files the list left out.
func ListArchive(ctx context.Context, s *Streams, to peer.ID) (files []ArchiveFile, more bool, err error) {
	resp := &pb.ArchiveResponse{}
	req := &pb.ArchiveRequest{Body: &pb.ArchiveRequest_List{List: &pb.ArchiveList{}}}
	if err := s.Call(ctx, to, protocol.ArchiveID, req, resp); err != nil {
		return nil, false, err
	}
	if resp.Error != "" {
		return nil, false, fmt.Errorf("archive list from %s: %s", ShortID(to), clip(resp.Error))
	}
	if len(resp.Files) > protocol.MaxArchiveFiles {
		return nil, false, fmt.Errorf("archive list from %s: %d files, more than %d", ShortID(to), len(resp.Files), protocol.MaxArchiveFiles)
	}
	seen := make(map[string]bool, len(resp.Files))
	for _, f := range resp.Files {
		if !ValidArchiveName(f.Name) || seen[f.Name] {
			return nil, false, fmt.Errorf("archive list from %s: bad or repeated file name %q", ShortID(to), clip(f.Name))
		}
		seen[f.Name] = true
		if f.Size > MaxArchiveFileBytes || len(f.Sha256) != 32 {
			return nil, false, fmt.Errorf("archive list from %s: %s: size %d or digest of %d bytes out of bounds", ShortID(to), f.Name, f.Size, len(f.Sha256))
		}
		af := ArchiveFile{Name: f.Name, Size: int64(f.Size), Open: f.Open}
		copy(af.SHA256[:], f.Sha256)
		files = append(files, af)
	}
	return files, resp.MoreFiles, nil
}

// FetchArchiveRange fetches n bytes (at most protocol.MaxArchiveChunk) of
// the member's WARC file name from off on. A member that sends more than
// asked is refused; fewer is returned as it came (the caller knows the
// size it expects, and asks again from where it stopped).
func FetchArchiveRange(ctx context.Context, s *Streams, to peer.ID, name string, off int64, n int) ([]byte, error) {
	if n <= 0 || n > protocol.MaxArchiveChunk || off < 0 {
		return nil, fmt.Errorf("archive range %s@%d+%d: out of bounds", name, off, n)
	}
	resp := &pb.ArchiveResponse{}
	req := &pb.ArchiveRequest{Body: &pb.ArchiveRequest_Range{Range: &pb.ArchiveRange{Name: name, Offset: uint64(off), Length: uint32(n)}}}
	if err := s.Call(ctx, to, protocol.ArchiveID, req, resp); err != nil {
		return nil, err
	}
	if resp.Error != "" {
		return nil, fmt.Errorf("archive range %s@%d from %s: %s", name, off, ShortID(to), clip(resp.Error))
	}
	if len(resp.Data) > n {
		return nil, fmt.Errorf("archive range %s@%d from %s: %d bytes, asked for %d", name, off, ShortID(to), len(resp.Data), n)
	}
	return resp.Data, nil
}

// clip shortens a peer's text for an error message.
func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}
