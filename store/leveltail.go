package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/syndtr/goleveldb/leveldb/storage"
	"github.com/syndtr/goleveldb/leveldb/util"
)

// leveldb writes its journal (the log of recent writes) and its manifest
// (the list of table files) in the same record format: 32 KiB blocks of
// chunks, each with a 7-byte header (CRC-32C of type and payload, masked
// as leveldb does; length, 2 bytes LE; type) and its payload. A record is
// one full chunk, or a first chunk, middle chunks and a last chunk. A
// block's last 1 to 6 bytes are zero when no header fits there.
//
// A process killed in the middle of a write leaves a record cut short at
// the end of the file: leveldb writes a record of more than one block with
// one write per block. A power loss can also leave zeros where the last,
// unsynced, bytes should be. Open checks the journal strictly (a damaged
// record fails it), so it first cuts such an unfinished write off: it was
// never acknowledged. Anything else (a checksum that fails, a record
// followed by readable ones) is left for Open to refuse.
const (
	levelBlockSize  = 32 << 10
	levelHeaderSize = 7

	chunkFull   = 1
	chunkFirst  = 2
	chunkMiddle = 3
	chunkLast   = 4
)

// tornTail looks for a write cut short at the end of data, a journal or
// manifest file. It returns the length of the intact part and whether the
// rest is such an unfinished write (or zeros). keep == len(data) with torn
// false means the file ends cleanly; keep < len(data) with torn false means
// damage that is not an unfinished write.
func tornTail(data []byte) (keep int, torn bool) {
	good := 0 // end of the last complete record
	inRecord := false
	off := 0
	for off < len(data) {
		blockEnd := (off/levelBlockSize + 1) * levelBlockSize
		if blockEnd-off < levelHeaderSize {
			off = blockEnd // the zero trailer of a block
			continue
		}
		if off+levelHeaderSize > len(data) {
			return good, true // header cut short
		}
		h := data[off : off+levelHeaderSize]
		length := int(binary.LittleEndian.Uint16(h[4:6]))
		typ := h[6]
		end := off + levelHeaderSize + length
		switch {
		case allZero(h):
			if allZero(data[off:]) {
				return good, true // zeros to the end: unsynced bytes lost
			}
			return good, false
		case typ < chunkFull || typ > chunkLast || end > blockEnd:
			return good, false
		case end > len(data):
			return good, true // payload cut short
		case binary.LittleEndian.Uint32(h[0:4]) != util.NewCRC(data[off+6:end]).Value():
			return good, false
		}
		switch typ {
		case chunkFull:
			if inRecord {
				return good, false
			}
			good = end
		case chunkFirst:
			if inRecord {
				return good, false
			}
			inRecord = true
		case chunkMiddle:
			if !inRecord {
				return good, false
			}
		case chunkLast:
			if !inRecord {
				return good, false
			}
			inRecord = false
			good = end
		}
		off = end
	}
	if inRecord {
		return good, true // the record's last chunks were never written
	}
	return len(data), false
}

func allZero(b []byte) bool {
	return len(bytes.TrimLeft(b, "\x00")) == 0
}

// trimTornTails cuts an unfinished write off the end of the newest journal
// and of the current manifest of the leveldb database in path, whose
// storage stor is open (and so locked). It returns the bytes it cut.
func trimTornTails(path string, stor storage.Storage) (int64, error) {
	var files []storage.FileDesc
	journals, err := stor.List(storage.TypeJournal)
	if err != nil {
		return 0, fmt.Errorf("store: list leveldb journals: %w", err)
	}
	if len(journals) > 0 {
		newest := journals[0]
		for _, fd := range journals[1:] {
			if fd.Num > newest.Num {
				newest = fd
			}
		}
		files = append(files, newest)
	}
	// A database without a manifest is new, or damaged in a way
	// leveldb's own open reports.
	if fd, err := stor.GetMeta(); err == nil {
		files = append(files, fd)
	}
	var total int64
	for _, fd := range files {
		n, err := trimTornTail(filepath.Join(path, levelFileName(fd)))
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// trimTornTail cuts an unfinished write off the end of one file and
// returns how many bytes it cut.
func trimTornTail(name string) (int64, error) {
	data, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: read %s: %w", name, err)
	}
	keep, torn := tornTail(data)
	if !torn || keep == len(data) {
		return 0, nil
	}
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("store: cut an unfinished write off %s: %w", name, err)
	}
	defer f.Close()
	if err := f.Truncate(int64(keep)); err != nil {
		return 0, fmt.Errorf("store: cut an unfinished write off %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("store: cut an unfinished write off %s: %w", name, err)
	}
	return int64(len(data) - keep), nil
}

// levelFileName is the name leveldb's file storage gives a file.
func levelFileName(fd storage.FileDesc) string {
	switch fd.Type {
	case storage.TypeManifest:
		return fmt.Sprintf("MANIFEST-%06d", fd.Num)
	case storage.TypeJournal:
		return fmt.Sprintf("%06d.log", fd.Num)
	case storage.TypeTable:
		return fmt.Sprintf("%06d.ldb", fd.Num)
	default:
		return fmt.Sprintf("%06d.tmp", fd.Num)
	}
}

// chunkAt checks the chunk whose header starts at off, which leaves room
// for a header in its block. It returns the chunk's type and end, or why
// it is not a chunk.
func chunkAt(data []byte, off int) (typ byte, end int, reason string) {
	blockEnd := (off/levelBlockSize + 1) * levelBlockSize
	h := data[off : off+levelHeaderSize]
	typ = h[6]
	end = off + levelHeaderSize + int(binary.LittleEndian.Uint16(h[4:6]))
	switch {
	case allZero(h):
		return 0, 0, "zeros where a record should be"
	case typ < chunkFull || typ > chunkLast:
		return 0, 0, "bad chunk type"
	case end > blockEnd:
		return 0, 0, "chunk length past its block"
	case end > len(data):
		return 0, 0, "record cut short"
	case binary.LittleEndian.Uint32(h[0:4]) != util.NewCRC(data[off+6:end]).Value():
		return 0, 0, "checksum mismatch"
	}
	return typ, end, ""
}

// journalSalvage is what salvageJournal could read of a damaged journal
// or manifest.
type journalSalvage struct {
	// records are the records whose every chunk is intact, in order.
	records [][]byte
	// dropped counts the bytes of the chunks that could not be used;
	// reasons says why, once per reason.
	dropped int
	reasons []string
	// tailDamaged is set when no record could be read after the last
	// damage.
	tailDamaged bool
}

// salvageJournal reads every intact record of a journal or manifest.
// leveldb's own reader gives up on the rest of a block at its first bad
// chunk, so that 8 damaged bytes can cost up to 32 KiB of records; this
// one drops only the record whose chunk is damaged, and finds the next
// chunk by its checksum, so it also reads on past a damaged header.
func salvageJournal(data []byte) journalSalvage {
	var s journalSalvage
	var cur []byte
	inRecord, recStart := false, 0
	lastDamage, lastRecord := -1, -1
	damage := func(at int, reason string) {
		lastDamage = at
		if !slices.Contains(s.reasons, reason) {
			s.reasons = append(s.reasons, reason)
		}
		if inRecord { // the chunks read of this record are lost with it
			s.dropped += at - recStart
			inRecord, cur = false, nil
		}
	}
	off := 0
	for off < len(data) {
		blockEnd := (off/levelBlockSize + 1) * levelBlockSize
		if blockEnd-off < levelHeaderSize {
			off = min(blockEnd, len(data)) // the zero trailer of a block
			continue
		}
		if off+levelHeaderSize > len(data) {
			damage(off, "record cut short")
			s.dropped += len(data) - off
			break
		}
		typ, end, reason := chunkAt(data, off)
		if reason != "" {
			damage(off, reason)
			next := resyncJournal(data, off+1)
			s.dropped += next - off
			off = next
			continue
		}
		payload := data[off+levelHeaderSize : end]
		switch typ {
		case chunkFull, chunkFirst:
			if inRecord {
				damage(off, "record without its last chunk")
			}
			if typ == chunkFull {
				s.records = append(s.records, slices.Clone(payload))
				lastRecord = off
			} else {
				cur, inRecord, recStart = slices.Clone(payload), true, off
			}
		case chunkMiddle, chunkLast:
			if !inRecord {
				damage(off, "chunk without its record's first chunk")
				s.dropped += end - off
				break
			}
			cur = append(cur, payload...)
			if typ == chunkLast {
				s.records = append(s.records, cur)
				lastRecord = off
				cur, inRecord = nil, false
			}
		}
		off = end
	}
	if inRecord {
		damage(len(data), "record cut short")
	}
	s.tailDamaged = lastDamage > lastRecord
	return s
}

// resyncJournal returns the offset of the first intact chunk at or after
// from, or len(data).
func resyncJournal(data []byte, from int) int {
	for p := from; p+levelHeaderSize <= len(data); p++ {
		blockEnd := (p/levelBlockSize + 1) * levelBlockSize
		if blockEnd-p < levelHeaderSize {
			p = blockEnd - 1
			continue
		}
		if typ := data[p+6]; typ < chunkFull || typ > chunkLast {
			continue
		}
		if _, _, reason := chunkAt(data, p); reason == "" {
			return p
		}
	}
	return len(data)
}
