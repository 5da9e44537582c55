package crawl

import (
	"math/bits"
	"unicode"
	"unicode/utf8"
)

// Simhash returns the 64-bit simhash (Charikar) of a text: similar texts
// get fingerprints that differ in few bits, so near-duplicate pages can be
// found by Hamming distance (see SimhashDistance).
//
// The features are word 3-shingles: the text is split into words (runs of
// letters and digits, lowercased; every Han, Hiragana or Katakana character
// is a word of its own, since those scripts do not separate words), and
// each run of three consecutive words is hashed. A word's hash is FNV-1a
// over its lowercased UTF-8 bytes; a shingle's hash chains its three word
// hashes and goes through the MurmurHash3 64-bit finaliser, so that every
// bit of it is an even coin toss, which simhash needs. Each shingle votes
// +1 or -1 on each of the 64 bits; bit i of the result is set when its vote
// is positive. A text of one or two words is a single shingle; a text
// without words returns 0, which callers treat as "no fingerprint".
func Simhash(text string) uint64 {
	var s shingler
	var h uint64 // hash of the word so far
	inWord := false
	for i := 0; i < len(text); {
		if c := text[i]; c < utf8.RuneSelf {
			// ASCII, most of most texts: a table lowercases word bytes
			// and tells them from separators. Words and the separators
			// between them are read in loops of their own, which leave
			// at the first byte of the other kind or of another script.
			if wordByte[c] == 0 {
				if inWord {
					s.word(h)
					inWord = false
				}
				for i++; i < len(text) && wordByte[text[i]] == 0; i++ {
				}
				continue
			}
			if !inWord {
				h, inWord = fnvOffset64, true
			}
			for ; i < len(text); i++ {
				l := wordByte[text[i]]
				if l == 0 || l == nonASCII {
					break
				}
				h = (h ^ uint64(l)) * fnvPrime64
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(text[i:])
		i += size
		switch {
		case isIdeograph(r):
			if inWord {
				s.word(h)
			}
			inWord = false
			s.word(hashRune(fnvOffset64, r))
		case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			if !inWord {
				h, inWord = fnvOffset64, true
			}
			h = hashRune(h, unicode.ToLower(r))
		default:
			if inWord {
				s.word(h)
			}
			inWord = false
		}
	}
	if inWord {
		s.word(h)
	}
	return s.result()
}

// shingler turns word hashes, one at a time, into the votes of their
// 3-shingles.
type shingler struct {
	v voter
	w [3]uint64 // hashes of the last three words, oldest first
	n int       // words so far
}

func (s *shingler) word(h uint64) {
	s.w[0], s.w[1], s.w[2] = s.w[1], s.w[2], h
	s.n++
	if s.n >= 3 {
		s.v.add(shingleHash(s.w[0], s.w[1], s.w[2]))
	}
}

// result is the fingerprint of the words so far (see Simhash).
func (s *shingler) result() uint64 {
	switch s.n {
	case 0:
		return 0
	case 1:
		s.v.add(shingleHash(0, 0, s.w[2]))
	case 2:
		s.v.add(shingleHash(0, s.w[1], s.w[2]))
	}
	return s.v.result()
}

// wordByte maps the ASCII bytes of words (letters and digits) to their
// lowercase, the other ASCII bytes to 0, and the bytes of characters
// beyond ASCII to nonASCII.
var wordByte = func() (t [256]byte) {
	for c := range len(t) {
		switch b := byte(c); {
		case b >= utf8.RuneSelf:
			t[c] = nonASCII
		case 'A' <= b && b <= 'Z':
			t[c] = b + 'a' - 'A'
		case isASCIIWordByte(b):
			t[c] = b
		}
	}
	return t
}()

// nonASCII marks, in wordByte, the bytes that start or continue a UTF-8
// encoded character beyond ASCII.
const nonASCII = 0x80

// voter counts, for each of 64 bit positions, how many shingle hashes have
// that bit set. Hashes are counted sixteen at a time in bit-sliced
// counters (Harley and Seal's carry-save adders: a bit of ones, twos,
// fours and eights per position, some five operations a hash); each
// sixteen a position reaches is added, eight positions at a time, to a
// byte lane (lane j holds, in its byte k, the sixteens of bit 8k+j), which
// is flushed into the wide counters before a byte can overflow.
type voter struct {
	block  [16]uint64 // hashes not counted yet
	queued int        // how many of block
	// ones, twos, fours and eights hold, per bit position, the count of
	// the counted hashes modulo 16 in binary.
	ones, twos, fours, eights uint64
	lanes                     [8]uint64
	pending                   int       // sixteens in lanes, at most 255 a byte
	sixteens                  [64]int64 // flushed sixteens per bit position
	n                         int64     // hashes added
}

const laneBits = 0x0101010101010101

func (v *voter) add(h uint64) {
	v.block[v.queued] = h
	if v.queued++; v.queued == len(v.block) {
		v.countBlock()
	}
}

// csa is a carry-save adder: for each bit position, a+b+c = 2*carry+sum.
func csa(a, b, c uint64) (carry, sum uint64) {
	u := a ^ b
	return a&b | u&c, u ^ c
}

// countBlock counts the sixteen queued hashes.
func (v *voter) countBlock() {
	b := &v.block
	var twosA, twosB, foursA, foursB, eightsA, eightsB, sixteens uint64
	twosA, v.ones = csa(v.ones, b[0], b[1])
	twosB, v.ones = csa(v.ones, b[2], b[3])
	foursA, v.twos = csa(v.twos, twosA, twosB)
	twosA, v.ones = csa(v.ones, b[4], b[5])
	twosB, v.ones = csa(v.ones, b[6], b[7])
	foursB, v.twos = csa(v.twos, twosA, twosB)
	eightsA, v.fours = csa(v.fours, foursA, foursB)
	twosA, v.ones = csa(v.ones, b[8], b[9])
	twosB, v.ones = csa(v.ones, b[10], b[11])
	foursA, v.twos = csa(v.twos, twosA, twosB)
	twosA, v.ones = csa(v.ones, b[12], b[13])
	twosB, v.ones = csa(v.ones, b[14], b[15])
	foursB, v.twos = csa(v.twos, twosA, twosB)
	eightsB, v.fours = csa(v.fours, foursA, foursB)
	sixteens, v.eights = csa(v.eights, eightsA, eightsB)
	for j := range v.lanes {
		v.lanes[j] += sixteens >> j & laneBits
	}
	v.queued = 0
	v.n += int64(len(v.block))
	if v.pending++; v.pending == 255 {
		v.flush()
	}
}

func (v *voter) flush() {
	for j, l := range v.lanes {
		for k := 0; k < 8; k++ {
			v.sixteens[8*k+j] += int64(l >> (8 * k) & 0xff)
		}
		v.lanes[j] = 0
	}
	v.pending = 0
}

// result sets each bit that more than half of the hashes set, i.e. whose
// +1/-1 vote is positive.
func (v *voter) result() uint64 {
	v.flush()
	n := v.n + int64(v.queued)
	var fp uint64
	for i, s := range v.sixteens {
		ones := 16*s + int64(v.eights>>i&1)*8 + int64(v.fours>>i&1)*4 + int64(v.twos>>i&1)*2 + int64(v.ones>>i&1)
		for _, h := range v.block[:v.queued] {
			ones += int64(h >> i & 1)
		}
		if 2*ones > n {
			fp |= 1 << i
		}
	}
	return fp
}

// SimhashDistance returns the Hamming distance between two fingerprints:
// the number of bits in which they differ, from 0 (same) to 64.
func SimhashDistance(a, b uint64) int { return bits.OnesCount64(a ^ b) }

const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// shingleHash combines three word hashes, order-sensitively, into one
// well-mixed 64-bit hash.
func shingleHash(a, b, c uint64) uint64 {
	h := (a*fnvPrime64 ^ b) * fnvPrime64
	return fmix64(h ^ c)
}

// fmix64 is the finaliser of MurmurHash3: every input bit affects every
// output bit with probability close to one half.
func fmix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

func isASCIIWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// isIdeograph reports whether r belongs to a script written without spaces
// between words, so that each character counts as a word.
func isIdeograph(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana)
}

// hashRune feeds the UTF-8 bytes of r into an FNV-1a hash.
func hashRune(h uint64, r rune) uint64 {
	var buf [utf8.UTFMax]byte
	n := utf8.EncodeRune(buf[:], r)
	for _, c := range buf[:n] {
		h = (h ^ uint64(c)) * fnvPrime64
	}
	return h
}
