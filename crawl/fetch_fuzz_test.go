package crawl

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/internal/fuzzcorpus"
)

// contentCodings are the Content-Encoding values a fuzz input's coding
// byte picks from: what decodeBody accepts, in the spellings servers use,
// and one it refuses.
var contentCodings = []string{"gzip", "deflate", "", "identity", "x-gzip", " GZIP ", "Deflate", "br"}

// bodyEncoder compresses bodies as a server would, reusing its writers
// (one fuzz worker runs inputs one at a time).
type bodyEncoder struct {
	gzip  *gzip.Writer
	zlib  *zlib.Writer
	flate *flate.Writer
	buf   bytes.Buffer
}

func newBodyEncoder() *bodyEncoder {
	e := &bodyEncoder{}
	e.gzip, _ = gzip.NewWriterLevel(nil, gzip.BestSpeed)
	e.zlib, _ = zlib.NewWriterLevel(nil, zlib.BestSpeed)
	e.flate, _ = flate.NewWriter(nil, flate.BestSpeed)
	return e
}

// encode returns body in coding "gzip", "zlib" or "flate" (raw DEFLATE).
func (e *bodyEncoder) encode(tb testing.TB, coding string, body []byte) []byte {
	tb.Helper()
	e.buf.Reset()
	var w interface {
		io.WriteCloser
		Reset(io.Writer)
	}
	switch coding {
	case "gzip":
		w = e.gzip
	case "zlib":
		w = e.zlib
	case "flate":
		w = e.flate
	default:
		tb.Fatalf("coding %q", coding)
	}
	w.Reset(&e.buf)
	if _, err := w.Write(body); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return bytes.Clone(e.buf.Bytes())
}

// FuzzDecodeBody undoes the content coding of an arbitrary response body
// (coding picks a contentCodings entry), as the fetcher does with what a
// server sends, under a limit of up to 64 KiB, the body cut at the
// limit as received or not. It never panics; an error comes with no body;
// a decoded body is at most limit bytes, and reported truncated when it
// was cut; identity returns the body as received. Then the input, taken
// as a page, is encoded with gzip, zlib and raw DEFLATE (both of which
// "deflate" must accept): each decodes back to the page, cut at the limit
// and reported truncated exactly when the page is longer.
func FuzzDecodeBody(f *testing.F) {
	seeds := map[string][]any{}
	w, err := synthweb.New(synthweb.Config{Seed: 1, Hosts: 1, Cases: true})
	if err != nil {
		f.Fatal(err)
	}
	for _, c := range []struct {
		name, url, coding string
		index             uint8
	}{
		{"synth-gzip", "http://gzip.synth.test/p/1", "gzip", 0},
		{"synth-deflate", "http://deflate.synth.test/p/1", "deflate", 1},
		{"synth-plain", "http://h000.synth.test/", "", 2},
	} {
		req := httptest.NewRequest(http.MethodGet, c.url, nil)
		req.Header.Set("Accept-Encoding", c.coding)
		rec := httptest.NewRecorder()
		w.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Encoding") != c.coding {
			f.Fatalf("%s: %d, Content-Encoding %q", c.url, rec.Code, rec.Header().Get("Content-Encoding"))
		}
		seeds[c.name] = []any{c.index, rec.Body.Bytes(), uint16(16 << 10), false}
	}
	w.Close()
	page := []byte("<html><title>t</title><a href=/x>x</a>" + string(bytes.Repeat([]byte("text "), 300)) + "</html>")
	enc := newBodyEncoder()
	deflated := enc.encode(f, "flate", page)
	seeds["raw-deflate-cut"] = []any{uint8(1), deflated[:len(deflated)/2], uint16(1000), true}
	seeds["gzip-over-limit"] = []any{uint8(0), enc.encode(f, "gzip", page), uint16(100), false}
	for _, s := range seeds {
		f.Add(s[0].(uint8), s[1].([]byte), s[2].(uint16), s[3].(bool))
	}
	fuzzcorpus.Write(f, func() map[string][]any { return seeds })
	f.Fuzz(func(t *testing.T, coding uint8, raw []byte, limit uint16, rawTruncated bool) {
		name, max := contentCodings[int(coding)%len(contentCodings)], int64(limit)
		body, truncated, err := decodeBody(name, raw, max, rawTruncated)
		switch {
		case err != nil && (body != nil || truncated):
			t.Fatalf("%s: error %v with %d bytes (truncated %v)", name, err, len(body), truncated)
		case int64(len(body)) > max && name != "" && name != "identity":
			t.Fatalf("%s: %d bytes decoded under a limit of %d", name, len(body), max)
		case (name == "" || name == "identity") && (err != nil || !bytes.Equal(body, raw) || truncated):
			t.Fatalf("%q coding changed the body (%v)", name, err)
		}
		for _, c := range []struct{ coding, header string }{{"gzip", "gzip"}, {"zlib", "deflate"}, {"flate", "deflate"}} {
			body, truncated, err := decodeBody(c.header, enc.encode(t, c.coding, raw), max, false)
			want := raw[:min(int64(len(raw)), max)]
			if err != nil || !bytes.Equal(body, want) || truncated != (int64(len(raw)) > max) {
				t.Fatalf("%s: %d bytes decoded to %d (truncated %v, %v), want %d", c.coding, len(raw), len(body), truncated, err, len(want))
			}
		}
	})
}
