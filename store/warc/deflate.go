package warc

import (
	"encoding/binary"
	"hash/crc32"
	"math/bits"
)

// Records of up to maxDeflateInput bytes, nearly all of a crawl's, are
// compressed here rather than by klauspost/compress. Each becomes a gzip
// member of a single deflate block (RFC 1951): the matches are found by a
// greedy LZ77 pass much like klauspost's level 1 (BestSpeed), and written
// with whichever of a dynamic Huffman code, the fixed code or no
// compression gives the fewest bytes.
//
// The gain is in building the dynamic code. A general compressor builds
// it with package-merge, some 10 µs a member whatever its size: as much as
// the rest of the work on a page's records together. Here the code comes
// from the sorted frequencies in linear time (Moffat and Katajainen); in
// the rare case that it is longer than deflate's 15 bits, it is built
// again from halved frequencies. On pages and text the output is about 2%
// smaller than klauspost's at BestSpeed, as its search checks every
// position while matches keep coming, where klauspost's skips some.

// maxDeflateInput is the largest record compressed by a deflater: the
// largest stored block, so that a block is never split.
const maxDeflateInput = 1<<16 - 1

const (
	deflateTableBits = 13
	deflateMinMatch  = 4
	deflateMaxMatch  = 258
	deflateMaxDist   = 1 << 15
	// deflateSkipLog sets how fast the match search skips ahead in data
	// where it finds no match: by 1 + (bytes since the last match) >>
	// deflateSkipLog.
	deflateSkipLog = 5
	endBlock       = 256
	numLitLen      = 286
	numDist        = 30
	numCodegen     = 19
)

// gzipHeader starts every member: no name, no time, the XFL and OS bytes
// klauspost/compress writes at BestSpeed.
var gzipHeader = [10]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 4, 255}

// match is a match and the literals before it: (literals) << 32 |
// (distance code) << 24 | (length-3) << 16 | (distance-1).
type match uint64

// hcode is a Huffman code, bit-reversed as the bit stream wants it, and
// its length.
type hcode struct {
	code uint16
	len  uint8
}

var (
	// fixedLitLen and fixedDist are the fixed codes (RFC 1951 3.2.6).
	fixedLitLen [288]hcode
	fixedDist   [numDist]hcode
	// lengthSym maps a match length minus 3 to its length symbol minus
	// 257.
	lengthSym   [256]uint8
	lengthBase  = [29]uint16{0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 255}
	lengthExtra = [29]uint8{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0}
	// codegenOrder is the order in which the code length code's lengths
	// are written.
	codegenOrder = [numCodegen]uint8{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}
)

func init() {
	var lens [288]uint8
	for sym := range lens {
		switch {
		case sym < 144:
			lens[sym] = 8
		case sym < 256:
			lens[sym] = 9
		case sym < 280:
			lens[sym] = 7
		default:
			lens[sym] = 8
		}
	}
	canonicalCodes(lens[:], fixedLitLen[:])
	var dlens [numDist]uint8
	for i := range dlens {
		dlens[i] = 5
	}
	canonicalCodes(dlens[:], fixedDist[:])
	for s := range lengthBase {
		end := 256
		if s+1 < len(lengthBase) {
			end = int(lengthBase[s+1])
		}
		for l := int(lengthBase[s]); l < end; l++ {
			lengthSym[l] = uint8(s)
		}
	}
}

// distCode returns the distance code of a distance minus 1, d < 32768,
// and its number of extra bits.
func distCode(d uint32) (code, extra uint32) {
	if d < 4 {
		return d, 0
	}
	nb := uint32(bits.Len32(d)) - 2
	return 2*(nb+1) + (d>>nb)&1, nb
}

// deflater compresses records; its state is reused from one to the next.
type deflater struct {
	// table maps the hash of 5 bytes to where in the record they were
	// last seen. It is cleared for each record: its 16 KiB cost less to
	// clear than larger entries that outlive a record cost to read.
	table [1 << deflateTableBits]uint16

	// matches are the matches found in the record being compressed.
	matches  []match
	litFreq  [numLitLen]uint32
	distFreq [numDist]uint32
	litLen   [numLitLen]uint8
	distLen  [numDist]uint8
	litCode  [numLitLen]hcode
	distCode [numDist]hcode
	// codegen is the run-length encoded code lengths: symbol, extra
	// bits value pairs.
	codegen     []uint8
	codegenFreq [numCodegen]uint32
	codegenLen  [numCodegen]uint8
	codegenCode [numCodegen]hcode
	// nlit, ndist and ncodegen are how many lengths of each code the
	// block header holds.
	nlit, ndist, ncodegen int
	// sort and sortTmp are scratch space for buildLengths.
	sort, sortTmp [numLitLen]uint64
	lens          [numLitLen]int32
}

// appendGzip appends src, len(src) <= maxDeflateInput, compressed as one
// gzip member, to dst; with preset's code if it can write src, and does so
// in fewer bits than the fixed code and than storing it (nil: none).
func (d *deflater) appendGzip(dst, src []byte, preset *presetCode) []byte {
	dst = append(dst, gzipHeader[:]...)
	dst = d.appendDeflate(dst, src, preset)
	dst = binary.LittleEndian.AppendUint32(dst, crc32.ChecksumIEEE(src))
	return binary.LittleEndian.AppendUint32(dst, uint32(len(src)))
}

// appendDeflate appends src, len(src) <= maxDeflateInput, as a deflate
// stream of one block to dst (for preset, see appendGzip).
func (d *deflater) appendDeflate(dst, src []byte, preset *presetCode) []byte {
	d.tokenize(src)
	d.litFreq[endBlock] = 1

	// The size in bits of each kind of block.
	storedBits := 8 + 32 + 8*len(src) // 3 header bits padded to a byte
	extraBits := 0
	for s, f := range d.litFreq[endBlock+1:] {
		extraBits += int(f) * int(lengthExtra[s])
	}
	for c, f := range d.distFreq[4:] {
		extraBits += int(f) * (c/2 + 1)
	}
	fixedBits := 3 + extraBits
	for sym, f := range d.litFreq {
		fixedBits += int(f) * int(fixedLitLen[sym].len)
	}
	for _, f := range d.distFreq {
		fixedBits += int(f) * 5
	}
	if preset != nil {
		if presetBits, ok := preset.bits(d, extraBits); ok && presetBits < fixedBits && presetBits < storedBits {
			w := bitWriter{out: append(dst, preset.header...), acc: preset.tail, nacc: preset.tailBits}
			w.writeTokens(src, d.matches, preset.lit[:], preset.dist[:])
			w.flush()
			return w.out
		}
	}

	dynBits := d.dynamicCode() + extraBits
	for sym, f := range d.litFreq {
		dynBits += int(f) * int(d.litLen[sym])
	}
	for c, f := range d.distFreq {
		dynBits += int(f) * int(d.distLen[c])
	}

	w := bitWriter{out: dst}
	switch {
	case storedBits <= fixedBits && storedBits <= dynBits:
		w.put(0b001, 3) // BFINAL, BTYPE=00
		w.flush()
		w.out = binary.LittleEndian.AppendUint16(w.out, uint16(len(src)))
		w.out = binary.LittleEndian.AppendUint16(w.out, ^uint16(len(src)))
		return append(w.out, src...)
	case fixedBits <= dynBits:
		w.put(0b011, 3) // BFINAL, BTYPE=01
		w.writeTokens(src, d.matches, fixedLitLen[:], fixedDist[:])
	default:
		d.writeDynamicHeader(&w)
		w.writeTokens(src, d.matches, d.litCode[:], d.distCode[:])
	}
	w.flush()
	return w.out
}

// dynamicCode builds the dynamic codes of the symbol frequencies counted
// (d.litLen, d.distLen) and the run-length encoding of their lengths
// (d.codegen, coded with d.codegenLen), and returns the size in bits of
// the block header that carries them. Each code gets at least two
// symbols, as zlib does, so that it is a complete code, as decoders want.
func (d *deflater) dynamicCode() int {
	ensureTwo(d.litFreq[:])
	ensureTwo(d.distFreq[:])
	d.buildLengths(d.litFreq[:], d.litLen[:], 15)
	d.buildLengths(d.distFreq[:], d.distLen[:], 15)
	d.nlit = numLitLen
	for d.nlit > endBlock+1 && d.litLen[d.nlit-1] == 0 {
		d.nlit--
	}
	d.ndist = numDist
	for d.ndist > 1 && d.distLen[d.ndist-1] == 0 {
		d.ndist--
	}
	d.codegen = d.codegen[:0]
	clear(d.codegenFreq[:])
	d.runLengths(d.litLen[:d.nlit])
	d.runLengths(d.distLen[:d.ndist])
	ensureTwo(d.codegenFreq[:])
	d.buildLengths(d.codegenFreq[:], d.codegenLen[:], 7)
	d.ncodegen = numCodegen
	for d.ncodegen > 4 && d.codegenLen[codegenOrder[d.ncodegen-1]] == 0 {
		d.ncodegen--
	}
	bits := 3 + 5 + 5 + 4 + 3*d.ncodegen
	for c, f := range d.codegenFreq {
		bits += int(f) * int(d.codegenLen[c])
	}
	return bits + 2*int(d.codegenFreq[16]) + 3*int(d.codegenFreq[17]) + 7*int(d.codegenFreq[18])
}

// writeDynamicHeader writes the header of a block with the dynamic codes
// dynamicCode built, and sets d.litCode and d.distCode to them.
func (d *deflater) writeDynamicHeader(w *bitWriter) {
	w.put(0b101, 3) // BFINAL, BTYPE=10
	w.put(uint32(d.nlit-257), 5)
	w.put(uint32(d.ndist-1), 5)
	w.put(uint32(d.ncodegen-4), 4)
	for _, c := range codegenOrder[:d.ncodegen] {
		w.put(uint32(d.codegenLen[c]), 3)
	}
	canonicalCodes(d.codegenLen[:], d.codegenCode[:])
	for i := 0; i < len(d.codegen); i += 2 {
		c := d.codegenCode[d.codegen[i]]
		w.put(uint32(c.code)|uint32(d.codegen[i+1])<<c.len, uint(c.len)+uint(codegenExtra[d.codegen[i]]))
	}
	canonicalCodes(d.litLen[:], d.litCode[:])
	canonicalCodes(d.distLen[:], d.distCode[:])
}

// presetCode is a dynamic Huffman code made once, from a sample, for
// records that are all alike: the request records, which differ in their
// URLs, times, record IDs and digests only. Building a code costs a few
// microseconds a record, more than the rest of the work on a record that
// small; the preset's block header is copied as it is. The code covers
// every printable ASCII byte, tab, CR and LF, and every length and
// distance, so that it can write any request record of a crawl (one with
// other bytes gets a code of its own).
type presetCode struct {
	litLen  [numLitLen]uint8
	distLen [numDist]uint8
	lit     [numLitLen]hcode
	dist    [numDist]hcode
	// header is the block header: whole bytes, then the tailBits bits of
	// tail.
	header     []byte
	tail       uint64
	tailBits   uint
	headerBits int
}

// newPresetCode makes a code for records like sample.
func newPresetCode(sample []byte) *presetCode {
	d := new(deflater)
	d.tokenize(sample)
	// The sample's symbols weigh most; every other symbol a record of the
	// kind may hold gets the least weight.
	for i := range d.litFreq {
		d.litFreq[i] *= 8
	}
	for i := range d.distFreq {
		d.distFreq[i] *= 8
	}
	for c := ' '; c <= '~'; c++ {
		d.litFreq[c]++
	}
	for _, c := range []byte{'\t', '\r', '\n'} {
		d.litFreq[c]++
	}
	for sym := endBlock; sym < numLitLen; sym++ {
		d.litFreq[sym]++
	}
	for c := range d.distFreq {
		d.distFreq[c]++
	}
	p := &presetCode{headerBits: d.dynamicCode()}
	var w bitWriter
	d.writeDynamicHeader(&w)
	p.litLen, p.distLen, p.lit, p.dist = d.litLen, d.distLen, d.litCode, d.distCode
	p.header, p.tail, p.tailBits = w.out, w.acc, w.nacc
	return p
}

// bits returns the size in bits of the block that writes the symbols d
// counted, with extraBits extra bits, in p's code, and false if p lacks a
// code for one of them.
func (p *presetCode) bits(d *deflater, extraBits int) (int, bool) {
	n := p.headerBits + extraBits
	for sym, f := range d.litFreq {
		if f != 0 && p.litLen[sym] == 0 {
			return 0, false
		}
		n += int(f) * int(p.litLen[sym])
	}
	for c, f := range d.distFreq {
		if f != 0 && p.distLen[c] == 0 {
			return 0, false
		}
		n += int(f) * int(p.distLen[c])
	}
	return n, true
}

// codegenExtra is the number of extra bits of each code length symbol.
var codegenExtra = [numCodegen]uint8{16: 2, 17: 3, 18: 7}

// tokenize finds the literals and matches of src, and counts the symbols
// that they are written with.
func (d *deflater) tokenize(src []byte) {
	clear(d.litFreq[:])
	clear(d.distFreq[:])
	matches := d.matches[:0]
	clear(d.table[:])

	const hashShift = 64 - deflateTableBits
	const prime5bytes = 889523592379
	table := &d.table
	s, emit := 0, 0
	sLimit := len(src) - 8 // for 8-byte loads at s
	for s < sLimit {
		cv := binary.LittleEndian.Uint64(src[s:])
		h := (cv << 24) * prime5bytes >> hashShift
		cand := int(table[h])
		table[h] = uint16(s)
		if uint(s-cand-1) >= deflateMaxDist || uint32(cv) != binary.LittleEndian.Uint32(src[cand:]) {
			s += 1 + (s-emit)>>deflateSkipLog
			continue
		}
		for cand > 0 && s > emit && src[cand-1] == src[s-1] {
			cand--
			s--
		}
		for _, c := range src[emit:s] {
			d.litFreq[c]++
		}
		lits := match(s - emit)
		n := deflateMinMatch + matchLen(src[s+deflateMinMatch:], src[cand+deflateMinMatch:])
		dist := uint32(s - cand - 1)
		dc, _ := distCode(dist)
		m := match(dc)<<24 | match(dist)
		s += n
		emit = s
		for n > 0 {
			// A longer match is written as several, none shorter than 3.
			l := n
			if l > deflateMaxMatch {
				l = min(deflateMaxMatch, n-3)
			}
			matches = append(matches, lits<<32|m|match(l-3)<<16)
			lits = 0
			d.litFreq[endBlock+1+int(lengthSym[l-3])]++
			d.distFreq[dc]++
			n -= l
		}
		// Index a position inside the match, where the next one may start.
		if s-2 < sLimit {
			cv := binary.LittleEndian.Uint64(src[s-2:])
			table[(cv<<24)*prime5bytes>>hashShift] = uint16(s - 2)
		}
	}
	for _, c := range src[emit:] {
		d.litFreq[c]++
	}
	d.matches = matches
}

// matchLen returns how many bytes a and b have in common at their start;
// len(b) >= len(a).
func matchLen(a, b []byte) int {
	n := 0
	for len(a)-n >= 8 {
		if x := binary.LittleEndian.Uint64(a[n:]) ^ binary.LittleEndian.Uint64(b[n:]); x != 0 {
			return n + bits.TrailingZeros64(x)>>3
		}
		n += 8
	}
	for n < len(a) && a[n] == b[n] {
		n++
	}
	return n
}

// ensureTwo gives the first symbols frequency 1 until at least two
// symbols have a frequency.
func ensureTwo(freq []uint32) {
	n := 0
	for _, f := range freq {
		if f != 0 {
			n++
		}
	}
	for i := 0; n < 2; i++ {
		if freq[i] == 0 {
			freq[i] = 1
			n++
		}
	}
}

// buildLengths sets lens to the lengths of a Huffman code for freq, none
// longer than maxBits, a symbol of frequency 0 getting none. At least two
// frequencies are not 0.
func (d *deflater) buildLengths(freq []uint32, lens []uint8, maxBits int32) {
	keys := d.sort[:0]
	for sym, f := range freq {
		if f != 0 {
			keys = append(keys, uint64(f)<<16|uint64(sym))
		}
	}
	keys = radixSort(keys, d.sortTmp[:len(keys)])
	a := d.lens[:len(keys)]
	for shift := 16; ; shift++ {
		for i, k := range keys {
			// Halving the frequencies, rounding up, flattens the code.
			f := int32(k >> shift)
			if k>>16&(1<<(shift-16)-1) != 0 {
				f++
			}
			a[i] = f
		}
		minimumRedundancy(a)
		if a[0] <= maxBits {
			break
		}
	}
	clear(lens)
	for i, k := range keys {
		lens[uint16(k)] = uint8(a[i])
	}
}

// radixSort sorts keys, frequency<<16|symbol with frequencies below 1<<16
// and keys in ascending symbol order, by frequency then symbol, as
// slices.Sort would: a stable counting sort on each byte of the frequency,
// the high byte only when some frequency has one. It returns the sorted
// keys, in keys or in tmp (len(tmp) == len(keys)).
func radixSort(keys, tmp []uint64) []uint64 {
	var high uint64
	for _, k := range keys {
		high |= k
	}
	for shift := uint(16); shift < 32; shift += 8 {
		if shift == 24 && high>>24 == 0 {
			break
		}
		var count [257]int
		for _, k := range keys {
			count[k>>shift&0xff+1]++
		}
		for i := 1; i < len(count); i++ {
			count[i] += count[i-1]
		}
		for _, k := range keys {
			b := k >> shift & 0xff
			tmp[count[b]] = k
			count[b]++
		}
		keys, tmp = tmp, keys
	}
	return keys
}

// minimumRedundancy replaces the frequencies a, in ascending order, with
// the lengths of a Huffman code for them (so in descending order), in
// place: A. Moffat and J. Katajainen, "In-place calculation of
// minimum-redundancy codes" (1995). len(a) >= 2.
func minimumRedundancy(a []int32) {
	n := len(a)
	// Phase 1: build the tree; a[i] becomes the parent of internal node i.
	a[0] += a[1]
	root, leaf := 0, 2
	for next := 1; next < n-1; next++ {
		if leaf >= n || a[root] < a[leaf] {
			a[next] = a[root]
			a[root] = int32(next)
			root++
		} else {
			a[next] = a[leaf]
			leaf++
		}
		if leaf >= n || root < next && a[root] < a[leaf] {
			a[next] += a[root]
			a[root] = int32(next)
			root++
		} else {
			a[next] += a[leaf]
			leaf++
		}
	}
	// Phase 2: the depth of each internal node.
	a[n-2] = 0
	for next := n - 3; next >= 0; next-- {
		a[next] = a[a[next]] + 1
	}
	// Phase 3: the depth of each leaf.
	avail, used, depth := 1, 0, int32(0)
	root, next := n-2, n-1
	for avail > 0 {
		for root >= 0 && a[root] == depth {
			used++
			root--
		}
		for avail > used {
			a[next] = depth
			next--
			avail--
		}
		avail, used, depth = 2*used, 0, depth+1
	}
}

// runLengths appends lens, run-length encoded with the code length
// symbols 16, 17 and 18, to d.codegen, and counts the symbols.
func (d *deflater) runLengths(lens []uint8) {
	cg := d.codegen
	for i := 0; i < len(lens); {
		l := lens[i]
		j := i + 1
		for j < len(lens) && lens[j] == l {
			j++
		}
		run := j - i
		i = j
		if l == 0 {
			for run >= 11 {
				r := min(run, 138)
				cg = append(cg, 18, uint8(r-11))
				d.codegenFreq[18]++
				run -= r
			}
			if run >= 3 {
				cg = append(cg, 17, uint8(run-3))
				d.codegenFreq[17]++
				run = 0
			}
		} else {
			cg = append(cg, l, 0)
			d.codegenFreq[l]++
			run--
			for run >= 3 {
				r := min(run, 6)
				cg = append(cg, 16, uint8(r-3))
				d.codegenFreq[16]++
				run -= r
			}
		}
		for ; run > 0; run-- {
			cg = append(cg, l, 0)
			d.codegenFreq[l]++
		}
	}
	d.codegen = cg
}

// canonicalCodes sets codes to the canonical Huffman code of lengths lens.
func canonicalCodes(lens []uint8, codes []hcode) {
	var count, next [16]uint16
	for _, l := range lens {
		count[l]++
	}
	count[0] = 0
	code := uint16(0)
	for b := 1; b < 16; b++ {
		code = (code + count[b-1]) << 1
		next[b] = code
	}
	for sym, l := range lens {
		if l == 0 {
			codes[sym] = hcode{}
			continue
		}
		codes[sym] = hcode{code: bits.Reverse16(next[l]) >> (16 - l), len: l}
		next[l]++
	}
}

// bitWriter appends a deflate bit stream to a byte slice.
type bitWriter struct {
	out  []byte
	acc  uint64
	nacc uint
}

// put writes the n low bits of v, n <= 32.
func (w *bitWriter) put(v uint32, n uint) {
	w.acc |= uint64(v) << w.nacc
	w.nacc += n
	if w.nacc >= 32 {
		w.out = binary.LittleEndian.AppendUint32(w.out, uint32(w.acc))
		w.acc >>= 32
		w.nacc -= 32
	}
}

// flush writes the bits still held, padded to a byte.
func (w *bitWriter) flush() {
	for w.nacc > 0 {
		w.out = append(w.out, byte(w.acc))
		w.acc >>= 8
		w.nacc -= min(w.nacc, 8)
	}
}

// writeTokens writes src, as the literals and matches that tokenize
// found, and the end of block, with the codes lit and dist.
func (w *bitWriter) writeTokens(src []byte, matches []match, lit, dist []hcode) {
	lit = lit[:numLitLen]
	dist = dist[:numDist]
	out, acc, nacc := w.out, w.acc, w.nacc
	literals := func(b []byte) {
		for _, c := range b {
			h := lit[c]
			acc |= uint64(h.code) << nacc
			nacc += uint(h.len)
			if nacc >= 32 {
				out = binary.LittleEndian.AppendUint32(out, uint32(acc))
				acc >>= 32
				nacc -= 32
			}
		}
	}
	pos := 0
	for _, m := range matches {
		if lits := int(m >> 32); lits > 0 {
			literals(src[pos : pos+lits])
			pos += lits
		}
		l := uint8(m >> 16)
		pos += int(l) + 3
		s := lengthSym[l]
		c := lit[endBlock+1+int(s)]
		acc |= uint64(uint32(c.code)|uint32(l-uint8(lengthBase[s]))<<c.len) << nacc
		nacc += uint(c.len) + uint(lengthExtra[s])
		dc := uint8(m>>24) & 31
		eb := max(dc/2, 1) - 1
		c = dist[dc]
		v := uint64(c.code) | uint64(uint32(m)&0xffff&(1<<eb-1))<<c.len
		if nacc >= 32 {
			out = binary.LittleEndian.AppendUint32(out, uint32(acc))
			acc >>= 32
			nacc -= 32
		}
		acc |= v << nacc
		nacc += uint(c.len) + uint(eb)
		if nacc >= 32 {
			out = binary.LittleEndian.AppendUint32(out, uint32(acc))
			acc >>= 32
			nacc -= 32
		}
	}
	literals(src[pos:])
	w.out, w.acc, w.nacc = out, acc, nacc
	c := lit[endBlock]
	w.put(uint32(c.code), uint(c.len))
}
