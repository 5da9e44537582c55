package crawl

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// randomWords returns n words drawn from a vocabulary of size vocab.
func randomWords(r *rand.Rand, n, vocab int) []string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = syllables(uint64(r.IntN(vocab)))
	}
	return ws
}

// syllables spells a number as a pronounceable word, so that the
// vocabulary looks like prose to the tokeniser.
func syllables(v uint64) string {
	const cons, vows = "bcdfghklmnprstvz", "aeiou"
	var b strings.Builder
	for {
		b.WriteByte(cons[v%16])
		v /= 16
		b.WriteByte(vows[v%5])
		v /= 5
		if v == 0 {
			return b.String()
		}
	}
}

func TestSimhashIdenticalAndCaseInsensitive(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	text := strings.Join(randomWords(r, 500, 5000), " ")
	a := Simhash(text)
	if a == 0 {
		t.Fatal("Simhash of a 500-word text is 0")
	}
	if b := Simhash(text); b != a {
		t.Fatalf("Simhash is not deterministic: %x then %x", a, b)
	}
	// Case, punctuation and layout are not content.
	variant := strings.ToUpper(strings.ReplaceAll(text, " ", ",\n  "))
	if d := SimhashDistance(a, Simhash(variant)); d != 0 {
		t.Errorf("case and punctuation changed the fingerprint by %d bits", d)
	}
}

func TestSimhashOneWordChanged(t *testing.T) {
	// A 64-bit simhash of a 500-word page moves a few bits when one word
	// changes: each bit is a vote of ~500 shingles, three of which change,
	// and a bit flips when its vote was close. Over many random pages the
	// distance is mostly 0-3 (which NearDupDistance 3 catches), rarely
	// more, and never anywhere near that of unrelated pages (~32).
	r := rand.New(rand.NewPCG(1, 2))
	const trials = 300
	within3, total, worst := 0, 0, 0
	for range trials {
		ws := randomWords(r, 500, 5000)
		a := Simhash(strings.Join(ws, " "))
		ws[r.IntN(len(ws))] = "replacement"
		d := SimhashDistance(a, Simhash(strings.Join(ws, " ")))
		total += d
		worst = max(worst, d)
		if d <= 3 {
			within3++
		}
	}
	mean := float64(total) / trials
	t.Logf("one word changed in 500: mean distance %.2f, %d%% within 3, worst %d", mean, 100*within3/trials, worst)
	if mean > 3 || within3 < trials*3/4 || worst > 12 {
		t.Errorf("one changed word moved the fingerprint too far: mean %.2f, %d/%d within 3, worst %d", mean, within3, trials, worst)
	}
}

func TestSimhashUnrelatedPages(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	closest := 64
	for range 300 {
		a := Simhash(strings.Join(randomWords(r, 500, 5000), " "))
		b := Simhash(strings.Join(randomWords(r, 500, 5000), " "))
		closest = min(closest, SimhashDistance(a, b))
	}
	if closest <= 10 {
		t.Errorf("two unrelated pages are within %d bits", closest)
	}
	// Same words, different order: shingles see word order.
	ws := randomWords(r, 500, 5000)
	a := Simhash(strings.Join(ws, " "))
	r.Shuffle(len(ws), func(i, j int) { ws[i], ws[j] = ws[j], ws[i] })
	if d := SimhashDistance(a, Simhash(strings.Join(ws, " "))); d <= 10 {
		t.Errorf("a shuffled page is within %d bits of the original", d)
	}
}

func TestSimhashShortAndEmptyTexts(t *testing.T) {
	for _, s := range []string{"", "   ", "!!! ... ---", "\n\t"} {
		if fp := Simhash(s); fp != 0 {
			t.Errorf("Simhash(%q) = %x, want 0 (no words)", s, fp)
		}
	}
	one, two := Simhash("hello"), Simhash("hello world")
	if one == 0 || two == 0 || one == two {
		t.Errorf("short texts: %x %x, want distinct non-zero fingerprints", one, two)
	}
	if Simhash("Hello!") != one {
		t.Error("one-word text depends on punctuation")
	}
	// Word order matters within a shingle, too.
	if Simhash("north south east") == Simhash("south north east") || Simhash("north south east") == Simhash("north east south") {
		t.Error("a 3-word shingle does not depend on word order")
	}
}

func TestSimhashUnicodeWords(t *testing.T) {
	// Accented words are words; ideographic text is split per character,
	// so a Chinese page with one character changed is still near its
	// original while an unrelated one is not.
	if Simhash("Ünïcödé wörds here") != Simhash("ünïcödé WÖRDS here") {
		t.Error("non-ASCII letters are not lowercased")
	}
	zh := strings.Repeat("網路爬蟲是一種按照一定的規則自動地抓取萬維網資訊的程式或者腳本", 8)
	zh2 := strings.Replace(zh, "規", "规", 1)
	if d := SimhashDistance(Simhash(zh), Simhash(zh2)); d > 6 {
		t.Errorf("one ideograph changed: distance %d", d)
	}
	other := strings.Repeat("今天天氣很好我們一起去公園散步然後吃午飯再回家休息看書寫字", 8)
	if d := SimhashDistance(Simhash(zh), Simhash(other)); d <= 10 {
		t.Errorf("unrelated Chinese texts within %d bits", d)
	}
}

func TestSimhashDistance(t *testing.T) {
	tests := []struct {
		a, b uint64
		want int
	}{
		{0, 0, 0},
		{0, 1, 1},
		{0xFFFF_FFFF_FFFF_FFFF, 0, 64},
		{0b1011, 0b0110, 3},
	}
	for _, tc := range tests {
		if got := SimhashDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("SimhashDistance(%x, %x) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func BenchmarkSimhash(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	// About the text of a 12 KB synthetic page.
	text := strings.Join(randomWords(r, 1500, 5000), " ")
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		Simhash(text)
	}
}

func BenchmarkExtractText(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	var page strings.Builder
	page.WriteString("<!DOCTYPE html><html><head><title>Bench page</title><script>var x = 1;</script></head><body>")
	for page.Len() < 12<<10 {
		page.WriteString("<p>")
		page.WriteString(strings.Join(randomWords(r, 40, 5000), " <a href=\"/x\">link</a> "))
		page.WriteString("</p>\n")
	}
	page.WriteString("</body></html>")
	body := []byte(page.String())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		ExtractText(body, "text/html; charset=utf-8")
	}
}

// naiveSimhash is the textbook definition Simhash must agree with: +1/-1
// votes per bit, one shingle at a time.
func naiveSimhash(text string) uint64 {
	var hs []uint64
	for h := range words(text) {
		hs = append(hs, h)
	}
	var shingles []uint64
	switch len(hs) {
	case 0:
		return 0
	case 1:
		shingles = []uint64{shingleHash(0, 0, hs[0])}
	case 2:
		shingles = []uint64{shingleHash(0, hs[0], hs[1])}
	default:
		for i := 2; i < len(hs); i++ {
			shingles = append(shingles, shingleHash(hs[i-2], hs[i-1], hs[i]))
		}
	}
	var votes [64]int
	for _, h := range shingles {
		for i := range votes {
			if h>>i&1 == 1 {
				votes[i]++
			} else {
				votes[i]--
			}
		}
	}
	var fp uint64
	for i, v := range votes {
		if v > 0 {
			fp |= 1 << i
		}
	}
	return fp
}

func TestSimhashMatchesDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	// Lengths around the voter's blocks of 16 hashes (a text of n words
	// has n-2 shingles) and its flush after 255 blocks, and a long text.
	for _, n := range []int{1, 2, 3, 4, 17, 18, 19, 34, 100, 256, 257, 258, 511, 512, 513, 4081, 4082, 4083, 5000, 8180} {
		text := strings.Join(randomWords(r, n, 50), " ")
		if got, want := Simhash(text), naiveSimhash(text); got != want {
			t.Errorf("%d words: Simhash = %016x, definition gives %016x", n, got, want)
		}
	}
	// A page that repeats one word: every shingle is the same, so every
	// counter moves on every shingle, which overflows narrow counters.
	for _, n := range []int{15, 16, 17, 255, 256, 257, 258, 1000, 4079, 4080, 4081, 4096, 8200} {
		text := strings.Repeat("spam ", n+2)
		if got, want := Simhash(text), naiveSimhash(text); got != want {
			t.Errorf("one word %d times: Simhash = %016x, definition gives %016x", n+2, got, want)
		}
	}
}

func TestSimhashShingleBitsAreFair(t *testing.T) {
	// Simhash needs every bit of a shingle hash to be an independent fair
	// coin, even for short, similar words, whose FNV hashes differ only in
	// a few low bits.
	const n = 20000
	var ones [64]int
	var agree [63]int // bit i equal to bit i+1
	r := rand.New(rand.NewPCG(13, 14))
	letter := func() string { return string(rune('a' + r.IntN(26))) }
	for range n {
		var w [3]uint64
		for i := range w {
			for h := range words(letter() + letter()) {
				w[i] = h
			}
		}
		h := shingleHash(w[0], w[1], w[2])
		for i := range ones {
			ones[i] += int(h >> i & 1)
			if i < 63 && h>>i&1 == h>>(i+1)&1 {
				agree[i]++
			}
		}
	}
	for i, c := range ones {
		if f := float64(c) / n; f < 0.47 || f > 0.53 {
			t.Errorf("bit %d is set in %.3f of shingle hashes", i, f)
		}
	}
	for i, c := range agree {
		if f := float64(c) / n; f < 0.47 || f > 0.53 {
			t.Errorf("bits %d and %d agree in %.3f of shingle hashes", i, i+1, f)
		}
	}
}

// words yields the FNV-1a hash of each lowercased word of s: the
// definition of a text's words that Simhash implements in one loop, which
// naiveSimhash follows.
func words(s string) func(yield func(uint64) bool) {
	return func(yield func(uint64) bool) {
		var h uint64
		inWord := false
		for i := 0; i < len(s); {
			r, size := rune(s[i]), 1
			if r >= utf8.RuneSelf {
				r, size = utf8.DecodeRuneInString(s[i:])
			}
			i += size
			switch {
			case r < utf8.RuneSelf && isASCIIWordByte(byte(r)):
				if !inWord {
					h, inWord = fnvOffset64, true
				}
				c := byte(r)
				if 'A' <= c && c <= 'Z' {
					c += 'a' - 'A'
				}
				h = (h ^ uint64(c)) * fnvPrime64
			case r >= utf8.RuneSelf && isIdeograph(r):
				if inWord && !yield(h) {
					return
				}
				inWord = false
				if !yield(hashRune(fnvOffset64, r)) {
					return
				}
			case r >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)):
				if !inWord {
					h, inWord = fnvOffset64, true
				}
				h = hashRune(h, unicode.ToLower(r))
			default:
				if inWord && !yield(h) {
					return
				}
				inWord = false
			}
		}
		if inWord {
			yield(h)
		}
	}
}

// FuzzSimhash: whatever the text (mixed scripts, combining marks, bytes
// that are not UTF-8, separators of every kind), Simhash gives what the
// byte-at-a-time definition gives.
func FuzzSimhash(f *testing.F) {
	for _, s := range []string{
		"", "a", "Café au LAIT, s'il vous plaît", "naïve\u0301 e\u0301te\u0301",
		"日本語のテキスト mixed with ASCII words", "ÅÄÖ åäö ÅLAND", "x\x80y \xff\xfez",
		"tab\tnew\nline\r\nend", "a-b_c.d/e?f=g&h#i", "ＡＢＣ full width", "123 456abc ABC123",
		strings.Repeat("spam ", 300),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if got, want := Simhash(text), naiveSimhash(text); got != want {
			t.Fatalf("Simhash(%q) = %016x, the definition gives %016x", text, got, want)
		}
	})
}
