package warc

import (
	"bytes"
	stdflate "compress/flate"
	stdgzip "compress/gzip"
	"io"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	kgzip "github.com/klauspost/compress/gzip"
)

// deflateInputs returns inputs of every kind the deflater must handle.
func deflateInputs() map[string][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	in := map[string][]byte{
		"empty":    {},
		"one":      {'x'},
		"short":    []byte("abc"),
		"eight":    []byte("abcdefgh"),
		"nine":     []byte("abcdefghi"),
		"run":      bytes.Repeat([]byte{'a'}, 1000),
		"zeros":    make([]byte, maxDeflateInput),
		"lorem":    []byte(strings.Repeat("lorem ipsum dolor sit amet consectetur ", 160)),
		"alphabet": []byte(strings.Repeat("abcdefghijklmnopqrstuvwxyz", 2600)[:maxDeflateInput]),
	}
	random := make([]byte, maxDeflateInput)
	for i := range random {
		random[i] = byte(r.Uint32())
	}
	in["random"] = random
	in["random small"] = random[:300]
	// Few symbols, skewed: a Huffman code for it is longer than 15 bits
	// unless limited.
	var skew []byte
	for i := 0; len(skew) < 60000; i++ {
		for j := range 24 {
			if i%(1<<min(j, 20)) == 0 {
				skew = append(skew, byte('A'+j))
			}
		}
	}
	in["skewed"] = skew
	// Byte frequencies in the Fibonacci sequence, shuffled: the Huffman
	// code is 21 bits deep unless limited.
	var fib []byte
	for i, a, b := 0, 1, 1; len(fib)+a <= maxDeflateInput; i, a, b = i+1, b, a+b {
		fib = append(fib, bytes.Repeat([]byte{byte(i * 7)}, a)...)
	}
	r.Shuffle(len(fib), func(i, j int) { fib[i], fib[j] = fib[j], fib[i] })
	in["fibonacci"] = fib
	// Text with repeats at distances up to and past the window.
	var far []byte
	for len(far) < 1000 {
		far = append(far, byte('a'+r.IntN(26)))
	}
	dists := []int{1, 2, 3, 4, 5, 7, 100, 1000, 20000, 32767, 32768, 32769, 40000}
	for len(far) < maxDeflateInput-400 {
		if dist := dists[r.IntN(len(dists))]; dist <= len(far) {
			for range 3 + r.IntN(300) {
				far = append(far, far[len(far)-dist])
			}
		}
		for range r.IntN(20) {
			far = append(far, byte('a'+r.IntN(26)))
		}
	}
	in["far"] = far
	// Mixed: runs, text and noise.
	var mixed []byte
	for len(mixed) < 50000 {
		switch r.IntN(3) {
		case 0:
			mixed = append(mixed, bytes.Repeat([]byte{byte(r.IntN(256))}, r.IntN(600))...)
		case 1:
			mixed = append(mixed, in["lorem"][:r.IntN(len(in["lorem"]))]...)
		default:
			mixed = append(mixed, random[:r.IntN(2000)]...)
		}
	}
	in["mixed"] = mixed
	for i, p := range benchPages(4) {
		in["page body "+string(rune('0'+i))] = p.Body
		in["page text "+string(rune('0'+i))] = []byte(p.Text)
	}
	return in
}

func checkDeflater(t *testing.T, d *deflater, name string, src []byte, preset *presetCode) {
	t.Helper()
	z := d.appendGzip(nil, src, preset)
	for _, rd := range []struct {
		name string
		open func(io.Reader) (io.Reader, error)
	}{
		{"compress/gzip", func(r io.Reader) (io.Reader, error) { return stdgzip.NewReader(r) }},
		{"klauspost", func(r io.Reader) (io.Reader, error) { return kgzip.NewReader(r) }},
	} {
		zr, err := rd.open(bytes.NewReader(z))
		if err != nil {
			t.Fatalf("%s: %s: %v", name, rd.name, err)
		}
		got, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("%s: %s: %v", name, rd.name, err)
		}
		if !bytes.Equal(got, src) {
			t.Fatalf("%s: %s: read %d bytes different from the %d written", name, rd.name, len(got), len(src))
		}
	}
	// The deflate stream alone, with nothing after it, also reads.
	fr := stdflate.NewReader(bytes.NewReader(z[10 : len(z)-8]))
	if got, err := io.ReadAll(fr); err != nil || !bytes.Equal(got, src) {
		t.Fatalf("%s: compress/flate: %v", name, err)
	}
}

func TestDeflaterRoundTrip(t *testing.T) {
	d := new(deflater)
	inputs := deflateInputs()
	// With a code of each record's own, and with the request records'
	// preset code wherever it can write the record.
	for _, preset := range []*presetCode{nil, requestCode()} {
		for name, src := range inputs {
			checkDeflater(t, d, name, src, preset)
			// Also every length of a prefix of the start.
			if name == "mixed" || name == "page body 0" {
				for n := range 300 {
					checkDeflater(t, d, name, src[:n], preset)
				}
			}
		}
		// A deflater is reused: nothing of one record leaks into the next.
		for range 3 {
			for name, src := range inputs {
				checkDeflater(t, d, name, src, preset)
			}
		}
	}
}

// TestRequestPresetCode checks that request records are written with the
// preset code, about as small as with a code of their own, and that a
// record the code cannot write gets its own.
func TestRequestPresetCode(t *testing.T) {
	p := requestCode()
	if got := 8*len(p.header) + int(p.tailBits); got != p.headerBits {
		t.Fatalf("preset header holds %d bits, want %d", got, p.headerBits)
	}
	d := new(deflater)
	e := new(encoder)
	var withPreset, own int
	for i, ex := range benchPages(16) {
		u, err := url.Parse(ex.URL)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := appendRequest(e, &buf, &ex, u, "HTTP/1.1", "2025-03-14T15:09:26Z", "192.0.2.1", "<urn:uuid:1>", "<urn:uuid:2>", nil); err != nil {
			t.Fatal(err)
		}
		rec := e.rec
		z := d.appendGzip(nil, rec, p)
		if !bytes.HasPrefix(z[len(gzipHeader):], p.header) {
			t.Errorf("request record %d is not written with the preset code", i)
		}
		checkDeflater(t, d, "request", rec, p)
		withPreset += len(z)
		own += len(d.appendGzip(nil, rec, nil))
	}
	t.Logf("16 request records: %d bytes with the preset code, %d with codes of their own", withPreset, own)
	if withPreset > own+own/10 {
		t.Errorf("16 request records: %d bytes with the preset code, %d with codes of their own", withPreset, own)
	}
	// A byte the preset has no code for: the record gets its own code.
	rec := []byte("GET /caf\xc3\xa9 HTTP/1.1\r\nHost: example.com\r\n\r\n")
	if z := d.appendGzip(nil, rec, p); bytes.HasPrefix(z[len(gzipHeader):], p.header) {
		t.Error("a record with bytes beyond ASCII is written with the preset code")
	}
	checkDeflater(t, d, "request beyond ASCII", rec, p)
}

// TestDeflaterSize checks that the deflater compresses pages about as
// well as klauspost/compress at BestSpeed, and stores what does not
// compress.
func TestDeflaterSize(t *testing.T) {
	d := new(deflater)
	kz, _ := kgzip.NewWriterLevel(nil, kgzip.BestSpeed)
	var ours, theirs int
	for name, src := range deflateInputs() {
		var b bytes.Buffer
		kz.Reset(&b)
		kz.Write(src)
		kz.Close()
		n := len(d.appendGzip(nil, src, nil))
		if n > len(src)+5+18 {
			t.Errorf("%s: %d bytes to %d", name, len(src), n)
		}
		if strings.HasPrefix(name, "page") {
			ours += n
			theirs += b.Len()
		}
	}
	t.Logf("pages: %d bytes, klauspost at BestSpeed %d", ours, theirs)
	if ours > theirs+theirs/50 {
		t.Errorf("pages compress to %d bytes, klauspost at BestSpeed %d", ours, theirs)
	}
}

func TestBuildLengths(t *testing.T) {
	d := new(deflater)
	flat := make([]uint32, numLitLen)
	for i := range flat {
		flat[i] = 3
	}
	fib := make([]uint32, numLitLen)
	for i, a, b := 0, uint32(1), uint32(1); i < 25; i, a, b = i+1, b, a+b {
		fib[i*11] = a
	}
	for _, c := range []struct {
		name string
		freq []uint32
	}{
		{"two", []uint32{0, 5, 0, 1}},
		{"three", []uint32{1, 1, 1}},
		{"flat", flat},
		{"fibonacci", fib},
	} {
		for _, maxBits := range []int32{7, 15} {
			if c.name == "flat" && maxBits == 7 {
				continue // 286 symbols do not fit in 7 bits
			}
			lens := make([]uint8, len(c.freq))
			d.buildLengths(c.freq, lens, maxBits)
			// A complete code: the Kraft sum is exactly 1.
			kraft := 0
			for sym, l := range lens {
				if (l == 0) != (c.freq[sym] == 0) || int32(l) > maxBits {
					t.Fatalf("%s, %d bits: symbol %d of frequency %d has length %d", c.name, maxBits, sym, c.freq[sym], l)
				}
				if l > 0 {
					kraft += 1 << (15 - l)
				}
			}
			if kraft != 1<<15 {
				t.Errorf("%s, %d bits: Kraft sum %d/32768", c.name, maxBits, kraft)
			}
		}
	}
}

func FuzzDeflater(f *testing.F) {
	for _, src := range deflateInputs() {
		if len(src) < 4000 {
			f.Add(src)
		}
	}
	d := new(deflater)
	f.Fuzz(func(t *testing.T, src []byte) {
		if len(src) > maxDeflateInput {
			src = src[:maxDeflateInput]
		}
		checkDeflater(t, d, "fuzz", src, nil)
		checkDeflater(t, d, "fuzz, preset code", src, requestCode())
	})
}

// TestWriteExchangeRecordSizes writes records on both sides of the
// deflater's limit, and far beyond it, and reads them back whole, with
// their digests, each from its own gzip member.
func TestWriteExchangeRecordSizes(t *testing.T) {
	dir := t.TempDir()
	w := newTestWriter(t, dir, Options{})
	words := benchPages(1)[0].Text
	var sent []Exchange
	for _, n := range []int{maxDeflateInput - 700, maxDeflateInput - 500, maxDeflateInput - 300, 70 << 10, 1 << 20} {
		text := strings.Repeat(words+"\n", n/len(words)+1)[:n]
		ex := page("https://example.com/"+strconv.Itoa(n), text)
		if err := w.WriteExchange(ex); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, ex)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	recs := readAll(t, files(t, dir, false)...)
	i := 0
	for _, rec := range recs {
		checkDigests(t, rec)
		switch rec.Type {
		case "response":
			if _, body, _ := bytes.Cut(rec.Content, []byte("\r\n\r\n")); !bytes.Equal(body, sent[i].Body) {
				t.Errorf("%s: response body of %d bytes, want %d", rec.TargetURI, len(body), len(sent[i].Body))
			}
		case "conversion":
			if string(rec.Content) != sent[i].Text {
				t.Errorf("%s: text of %d bytes, want %d", rec.TargetURI, len(rec.Content), len(sent[i].Text))
			}
			i++
		}
	}
	if i != len(sent) {
		t.Errorf("read %d conversion records, want %d", i, len(sent))
	}
}

// TestRadixSortMatchesSort checks the Huffman builder's sort against
// slices.Sort on frequency tables of every shape the deflater meets:
// small, large, all equal, and frequencies on both sides of 256.
func TestRadixSortMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 2000; trial++ {
		n := 2 + rng.IntN(numLitLen-1)
		limit := []int{2, 256, 257, 1 << 16}[trial%4]
		var keys []uint64
		for sym := 0; sym < numLitLen && len(keys) < n; sym++ {
			if rng.IntN(3) == 0 {
				continue
			}
			keys = append(keys, uint64(1+rng.IntN(limit-1))<<16|uint64(sym))
		}
		want := slices.Clone(keys)
		slices.Sort(want)
		got := radixSort(slices.Clone(keys), make([]uint64, len(keys)))
		if !slices.Equal(got, want) {
			t.Fatalf("trial %d: radixSort(%v) = %v, want %v", trial, keys, got, want)
		}
	}
}
