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
// that bit set. It adds eight bits at a time: lane j holds, in its byte k,
// the count of bit 8k+j over the last few hashes, which is flushed into
// the wide counters before a byte can overflow.
type voter struct {
	lanes   [8]uint64
	pending int       // hashes in lanes
	ones    [64]int64 // flushed counts of set bits
	n       int64     // hashes added
}

const laneBits = 0x0101010101010101

func (v *voter) add(h uint64) {
	for j := range v.lanes {
		v.lanes[j] += h >> j & laneBits
	}
	v.n++
	if v.pending++; v.pending == 255 {
		v.flush()
	}
}

func (v *voter) flush() {
	for j, l := range v.lanes {
		for k := 0; k < 8; k++ {
			v.ones[8*k+j] += int64(l >> (8 * k) & 0xff)
		}
		v.lanes[j] = 0
	}
	v.pending = 0
}

// result sets each bit that more than half of the hashes set, i.e. whose
// +1/-1 vote is positive.
func (v *voter) result() uint64 {
	v.flush()
	var fp uint64
	for i, ones := range v.ones {
		if 2*ones > v.n {
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
