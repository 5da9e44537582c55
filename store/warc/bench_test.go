package warc

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// benchVocabulary returns n made-up words of 2 to 4 syllables, generated
// from r.
func benchVocabulary(r *rand.Rand, n int) []string {
	const onsets, vowels, codas = "bcdfghjklmnprstvwz", "aeiou", "lmnrst"
	seen := make(map[string]bool, n)
	words := make([]string, 0, n)
	for len(words) < n {
		var b strings.Builder
		for range 2 + r.IntN(3) {
			b.WriteByte(onsets[r.IntN(len(onsets))])
			b.WriteByte(vowels[r.IntN(len(vowels))])
			if r.IntN(3) == 0 {
				b.WriteByte(codas[r.IntN(len(codas))])
			}
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			words = append(words, w)
		}
	}
	return words
}

// benchPages returns n deterministic exchanges resembling crawled HTML
// pages: about 11 KB of HTML with 60 links and 5-10 KB of text drawn
// from a vocabulary of 4000 words with a Zipf distribution, as in natural
// language.
func benchPages(n int) []Exchange {
	r := rand.New(rand.NewPCG(20250314, 1))
	vocab := benchVocabulary(r, 4000)
	zipf := rand.NewZipf(r, 1.1, 2, uint64(len(vocab)-1))
	word := func() string { return vocab[zipf.Uint64()] }
	pages := make([]Exchange, n)
	for i := range pages {
		host := word() + "-" + word() + ".example"
		url := fmt.Sprintf("https://%s/%s/%s-%d.html", host, word(), word(), r.IntN(100000))
		title := word() + " " + word() + " " + word()

		// The text: sentences in paragraphs.
		var text strings.Builder
		textLen := 5000 + r.IntN(3500)
		var paras []string
		for text.Len() < textLen {
			var p strings.Builder
			for range 3 + r.IntN(6) {
				w := word()
				p.WriteString(strings.ToUpper(w[:1]) + w[1:])
				for range 5 + r.IntN(15) {
					p.WriteByte(' ')
					p.WriteString(word())
				}
				p.WriteString(". ")
			}
			s := strings.TrimSpace(p.String())
			paras = append(paras, s)
			if text.Len() > 0 {
				text.WriteString("\n\n")
			}
			text.WriteString(s)
		}

		// The HTML: a head, a navigation list and the paragraphs with the
		// rest of the 60 links among them.
		var h bytes.Buffer
		fmt.Fprintf(&h, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>%s</title>\n", title)
		h.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<link rel=\"stylesheet\" href=\"/static/site.css\">\n</head>\n<body>\n<nav><ul>\n")
		link := func() string {
			href := "/" + word() + "/" + word() + "-" + strconv.Itoa(r.IntN(1000)) + ".html"
			if r.IntN(4) == 0 {
				href = "https://" + word() + ".example" + href
			}
			return fmt.Sprintf("<a href=%q>%s %s</a>", href, word(), word())
		}
		const nav = 20
		for range nav {
			fmt.Fprintf(&h, "<li>%s</li>\n", link())
		}
		fmt.Fprintf(&h, "</ul></nav>\n<main>\n<h1>%s</h1>\n", title)
		inline := 60 - nav
		for j, p := range paras {
			h.WriteString("<p>")
			fields := strings.Fields(p)
			// Spread the inline links over the paragraphs.
			k := inline * (j + 1) / len(paras)
			k -= inline * j / len(paras)
			for m, f := range fields {
				if m > 0 {
					h.WriteByte(' ')
				}
				h.WriteString(f)
				if k > 0 && m%7 == 3 {
					h.WriteByte(' ')
					h.WriteString(link())
					k--
				}
			}
			for ; k > 0; k-- {
				h.WriteByte(' ')
				h.WriteString(link())
			}
			h.WriteString("</p>\n")
		}
		h.WriteString("</main>\n<footer><p>&copy; 2025 " + host + "</p></footer>\n</body>\n</html>\n")

		pages[i] = Exchange{
			URL:        url,
			Date:       fetchTime,
			RemoteAddr: fmt.Sprintf("192.0.2.%d:443", 1+r.IntN(250)),
			RequestHeader: http.Header{
				"User-Agent":      {"swarmcrawl/0.1 (+https://swarmcrawl.example/bot)"},
				"Accept":          {"text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"},
				"Accept-Encoding": {"gzip"},
			},
			Proto:  "HTTP/1.1",
			Status: 200,
			ResponseHeader: http.Header{
				"Content-Type":   {"text/html; charset=utf-8"},
				"Content-Length": {strconv.Itoa(h.Len())},
				"Date":           {"Fri, 14 Mar 2025 15:09:26 GMT"},
				"Last-Modified":  {"Mon, 03 Feb 2025 08:21:45 GMT"},
				"Etag":           {fmt.Sprintf("\"%016x\"", r.Uint64())},
				"Cache-Control":  {"max-age=3600"},
				"Server":         {"nginx"},
			},
			Body:    h.Bytes(),
			Title:   title,
			Text:    text.String(),
			Simhash: r.Uint64(),
		}
	}
	return pages
}

// BenchmarkWriteExchangePages writes realistic pages (see benchPages) on
// one goroutine: the CPU the archive costs per crawled page, and the
// compressed bytes per page.
func BenchmarkWriteExchangePages(b *testing.B) {
	pages := benchPages(64)
	var in int
	for _, p := range pages {
		in += len(p.Body) + len(p.Text)
	}
	b.Run("write", func(b *testing.B) {
		w, err := NewWriter(b.TempDir(), Options{MaxFileBytes: 256 << 20, Now: fixedClock()})
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		// Open the file, with its warcinfo record, outside the timing.
		if err := w.WriteExchange(pages[0]); err != nil {
			b.Fatal(err)
		}
		start := w.BytesWritten()
		b.SetBytes(int64(in / len(pages)))
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			if err := w.WriteExchange(pages[n%len(pages)]); err != nil {
				b.Fatal(err)
			}
			n++
		}
		b.ReportMetric(float64(w.BytesWritten()-start)/float64(n), "B/page")
	})
	b.Run("encode", func(b *testing.B) {
		var buf bytes.Buffer
		b.SetBytes(int64(in / len(pages)))
		b.ReportAllocs()
		n, out := 0, 0
		for b.Loop() {
			buf.Reset()
			if err := encodeExchange(&buf, &pages[n%len(pages)], nil); err != nil {
				b.Fatal(err)
			}
			out += buf.Len()
			n++
		}
		b.ReportMetric(float64(out)/float64(n), "B/page")
	})
}

// TestBenchPages checks that the benchmark's pages look as described.
func TestBenchPages(t *testing.T) {
	pages := benchPages(64)
	var body, text, links int
	for _, p := range pages {
		body += len(p.Body)
		text += len(p.Text)
		links += bytes.Count(p.Body, []byte("<a href="))
		if len(p.Text) < 5000 || len(p.Text) > 10200 {
			t.Errorf("%s: text of %d bytes", p.URL, len(p.Text))
		}
	}
	n := len(pages)
	t.Logf("per page: %d bytes of HTML, %d of text, %d links", body/n, text/n, links/n)
	if body/n < 9000 || body/n > 14000 || links != 60*n {
		t.Errorf("pages average %d bytes of HTML, %d links; want about 11 KB, 60", body/n, links/n)
	}
}
