package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"github.com/bits-and-blooms/bloom/v3"
)

const (
	bloomMagic       = "SWCBLOOM"
	bloomFileVersion = 1
	bloomHeaderLen   = len(bloomMagic) + 1 + 8 + 8
	maxBloomK        = 64
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// newBloom returns an empty filter sized for n entries at false positive rate p.
func newBloom(n uint, p float64) *bloom.BloomFilter {
	if n == 0 {
		n = 1
	}
	return bloom.NewWithEstimates(n, p)
}

// bloomKey returns the 16 bytes the Bloom filter hashes for a URL: the last
// 16 bytes of its per-URL leveldb key.
func bloomKey(k []byte) []byte { return k[1:urlKeyLen] }

// writeBloomFile writes f to path atomically (temporary file, sync, rename,
// sync of the directory).
func writeBloomFile(path string, f *bloom.BloomFilter) (err error) {
	tmp := path + ".tmp"
	file, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("store: write bloom filter: %w", err)
	}
	defer func() {
		if err != nil {
			file.Close()
			os.Remove(tmp)
		}
	}()
	crc := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(io.MultiWriter(file, crc), 1<<20)
	hdr := make([]byte, 0, bloomHeaderLen)
	hdr = append(hdr, bloomMagic...)
	hdr = append(hdr, bloomFileVersion)
	hdr = binary.BigEndian.AppendUint64(hdr, uint64(f.Cap()))
	hdr = binary.BigEndian.AppendUint64(hdr, uint64(f.K()))
	if _, err := bw.Write(hdr); err != nil {
		return fmt.Errorf("store: write bloom filter: %w", err)
	}
	words := f.BitSet().Words()
	nwords := (uint64(f.Cap()) + 63) / 64
	var w [8]byte
	for i := uint64(0); i < nwords; i++ {
		var v uint64
		if i < uint64(len(words)) {
			v = words[i]
		}
		binary.LittleEndian.PutUint64(w[:], v)
		if _, err := bw.Write(w[:]); err != nil {
			return fmt.Errorf("store: write bloom filter: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("store: write bloom filter: %w", err)
	}
	if err := binary.Write(file, binary.BigEndian, crc.Sum32()); err != nil {
		return fmt.Errorf("store: write bloom filter: %w", err)
	}
	if err := file.Sync(); err != nil {
		return fmt.Errorf("store: sync bloom filter: %w", err)
	}
	if err := file.Close(); err != nil {
		return fmt.Errorf("store: close bloom filter: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("store: rename bloom filter: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync() // best effort: not all platforms can sync a directory
		d.Close()
	}
	return nil
}

// readBloomFile loads a filter written by writeBloomFile. It returns an error
// wrapping os.ErrNotExist when there is no file, and one wrapping ErrCorrupt
// when the file is damaged.
func readBloomFile(path string) (*bloom.BloomFilter, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("store: read bloom filter: %w", err)
	}
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("store: bloom filter %s: %w: "+format, append([]any{path, ErrCorrupt}, args...)...)
	}
	if len(data) < bloomHeaderLen+4 {
		return nil, corrupt("file too short (%d bytes)", len(data))
	}
	body, sum := data[:len(data)-4], binary.BigEndian.Uint32(data[len(data)-4:])
	if string(body[:len(bloomMagic)]) != bloomMagic {
		return nil, corrupt("bad magic")
	}
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, corrupt("checksum mismatch (%08x, want %08x)", got, sum)
	}
	if v := body[len(bloomMagic)]; v != bloomFileVersion {
		return nil, corrupt("unknown version %d", v)
	}
	m := binary.BigEndian.Uint64(body[len(bloomMagic)+1:])
	k := binary.BigEndian.Uint64(body[len(bloomMagic)+9:])
	words := body[bloomHeaderLen:]
	if m == 0 || k == 0 || k > maxBloomK {
		return nil, corrupt("bad parameters m=%d k=%d", m, k)
	}
	if uint64(len(words)) != (m+63)/64*8 {
		return nil, corrupt("%d bytes of bits for m=%d", len(words), m)
	}
	bits := make([]uint64, len(words)/8)
	for i := range bits {
		bits[i] = binary.LittleEndian.Uint64(words[i*8:])
	}
	return bloom.FromWithM(bits, uint(m), uint(k)), nil
}

// isNotExist reports whether err says that a file does not exist.
func isNotExist(err error) bool { return errors.Is(err, os.ErrNotExist) }
