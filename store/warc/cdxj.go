package warc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// IndexSuffix ends the name of the CDXJ index of a WARC file: the index of
// X.warc.gz is X.warc.gz.cdxj (see the package documentation).
const IndexSuffix = ".cdxj"

// CDXJEntry is one line of a CDXJ index: where one record of a WARC file
// is, and what it holds. The fields are those npm warcio's cdx-index
// writes (and pywb reads).
type CDXJEntry struct {
	// Key is the SURT form of URL (see SURT).
	Key string
	// Timestamp is the record's WARC-Date as 14 digits, yyyyMMddHHmmss.
	Timestamp string
	// URL is the record's WARC-Target-URI.
	URL string
	// MIME is the media type: of the HTTP response for a response record
	// (without parameters), the record's Content-Type otherwise, or
	// warc/revisit; "" if unknown.
	MIME string
	// Status is the HTTP status code, "" for a record without one.
	Status string
	// Digest is the payload digest, without its algorithm ("sha1:").
	Digest string
	// Length is the length of the record in the file as stored (its gzip
	// member in a compressed file).
	Length int64
	// Offset is where the record starts in the file.
	Offset int64
	// Filename is the base name of the WARC file.
	Filename string
}

// cdxjJSON is the JSON part of a CDXJ line, in warcio's field order;
// numbers are strings, as warcio and pywb write them.
type cdxjJSON struct {
	URL      string `json:"url"`
	MIME     string `json:"mime,omitempty"`
	Status   string `json:"status,omitempty"`
	Digest   string `json:"digest,omitempty"`
	Length   string `json:"length"`
	Offset   string `json:"offset"`
	Filename string `json:"filename"`
}

// AppendLine appends e as one CDXJ line, ending in "\n", to b.
func (e *CDXJEntry) AppendLine(b []byte) []byte {
	b = append(b, e.Key...)
	b = append(b, ' ')
	b = append(b, e.Timestamp...)
	b = append(b, ' ')
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	// Strings always encode: an error here is impossible.
	enc.Encode(cdxjJSON{ // ends the line with "\n"
		URL: e.URL, MIME: e.MIME, Status: e.Status, Digest: e.Digest,
		Length: strconv.FormatInt(e.Length, 10), Offset: strconv.FormatInt(e.Offset, 10),
		Filename: e.Filename,
	})
	return append(b, buf.Bytes()...)
}

// maxCDXJLine bounds the length of a CDXJ line read from a file.
const maxCDXJLine = 64 << 10

// ParseCDXJLine parses one CDXJ line (with or without its "\n"). The JSON
// part must hold at least url, offset, length and filename; Length and
// Offset must be non-negative numbers and Filename a plain file name.
func ParseCDXJLine(line []byte) (CDXJEntry, error) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	if len(line) > maxCDXJLine {
		return CDXJEntry{}, fmt.Errorf("warc: CDXJ line of %d bytes, more than %d", len(line), maxCDXJLine)
	}
	key, rest, ok1 := bytes.Cut(line, []byte(" "))
	ts, js, ok2 := bytes.Cut(rest, []byte(" "))
	if !ok1 || !ok2 || len(key) == 0 || len(ts) == 0 || !allDigits(ts) || len(js) == 0 || js[0] != '{' {
		return CDXJEntry{}, fmt.Errorf("warc: CDXJ line %.80q: want \"key timestamp {json}\"", line)
	}
	var j cdxjJSON
	if err := json.Unmarshal(js, &j); err != nil {
		return CDXJEntry{}, fmt.Errorf("warc: CDXJ line %.80q: %w", line, err)
	}
	e := CDXJEntry{Key: string(key), Timestamp: string(ts), URL: j.URL, MIME: j.MIME, Status: j.Status, Digest: j.Digest, Filename: j.Filename}
	var err1, err2 error
	e.Length, err1 = strconv.ParseInt(j.Length, 10, 64)
	e.Offset, err2 = strconv.ParseInt(j.Offset, 10, 64)
	if err1 != nil || err2 != nil || e.Length <= 0 || e.Offset < 0 {
		return CDXJEntry{}, fmt.Errorf("warc: CDXJ line %.80q: offset %q, length %q", line, j.Offset, j.Length)
	}
	if e.Filename == "" || e.Filename != filepath.Base(e.Filename) || e.Filename == ".." || strings.ContainsAny(e.Filename, `/\`) {
		return CDXJEntry{}, fmt.Errorf("warc: CDXJ line %.80q: filename %q is not a plain name", line, e.Filename)
	}
	return e, nil
}

func allDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// SURT returns the Sort-friendly URI Reordering Transform of an http(s)
// URL as warcio (npm, 2.4) computes it for a CDXJ key: lower case, a
// leading www (www2...) dropped, the host's labels reversed and joined
// with commas, the port when it is not the scheme's default, ")", the
// path, and the query's arguments sorted; the fragment is dropped:
//
//	https://www.Example.com:8080/a/B?b=2&a=1#top -> com,example:8080)/a/b?a=1&b=2
//
// A URL of another scheme, or one that does not parse, is returned as is
// but with its spaces escaped, so that a key never holds a space.
func SURT(rawURL string) string {
	if !strings.HasPrefix(rawURL, "https:") && !strings.HasPrefix(rawURL, "http:") {
		return strings.ReplaceAll(rawURL, " ", "%20")
	}
	s := stripWWW(rawURL)
	lower := strings.ToLower(s)
	u, err := url.Parse(lower)
	if err != nil || u.Host == "" {
		return strings.ReplaceAll(s, " ", "%20")
	}
	host := u.Hostname()
	if strings.Contains(host, ":") {
		host = "[" + host + "]" // an IPv6 address stays whole, in brackets
	} else if ascii, err := idna.Lookup.ToASCII(host); err == nil {
		host = ascii
	}
	labels := strings.Split(host, ".")
	slices.Reverse(labels)
	var b strings.Builder
	b.WriteString(strings.Join(labels, ","))
	if port := u.Port(); port != "" && !(port == "80" && u.Scheme == "http" || port == "443" && u.Scheme == "https") {
		b.WriteByte(':')
		b.WriteString(port)
	}
	b.WriteByte(')')
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	b.WriteString(path)
	if u.RawQuery != "" {
		args := strings.Split(u.RawQuery, "&")
		slices.Sort(args)
		b.WriteByte('?')
		b.WriteString(strings.Join(args, "&"))
	}
	return strings.ReplaceAll(b.String(), " ", "%20")
}

// stripWWW drops "www." or "www<digits>." after the scheme of an http(s)
// URL (as written, case included, as warcio does).
func stripWWW(s string) string {
	scheme := "http://"
	if strings.HasPrefix(s, "https://") {
		scheme = "https://"
	} else if !strings.HasPrefix(s, scheme) {
		return s
	}
	rest := s[len(scheme):]
	if !strings.HasPrefix(rest, "www") {
		return s
	}
	i := 3
	for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
		i++
	}
	if i < len(rest) && rest[i] == '.' {
		return scheme + rest[i+1:]
	}
	return s
}

// cdxjTimestamp turns a WARC-Date into the 14 digits of a CDXJ timestamp,
// as warcio does: the separators dropped, cut after the seconds.
func cdxjTimestamp(date string) string {
	ts := strings.Map(func(r rune) rune {
		if r == '-' || r == ':' || r == 'T' {
			return -1
		}
		return r
	}, date)
	if len(ts) > 14 {
		ts = ts[:14]
	}
	return ts
}

// indexable reports whether a record of this type and Content-Type goes
// into a CDXJ index: all but requests, warcinfo, and metadata or resource
// records of WARC fields (warcio's rule).
func indexable(typ, contentType string) bool {
	switch typ {
	case "request", "warcinfo", "":
		return false
	case "metadata", "resource":
		return contentType != "application/warc-fields"
	}
	return true
}

// mimeOf returns the media type of a Content-Type value without its
// parameters, as warcio gives it for HTTP messages.
func mimeOf(contentType string) string {
	mime, _, _ := strings.Cut(contentType, ";")
	return strings.TrimSpace(mime)
}

// entryOf returns the CDXJ entry of a record read by a Reader, but for
// its Length, or false when the record is not indexed.
func entryOf(rec *Record, filename string) (CDXJEntry, bool) {
	ct := rec.Header.Get(hContentType)
	if !indexable(rec.Type, ct) || rec.TargetURI == "" {
		return CDXJEntry{}, false
	}
	e := CDXJEntry{
		Key:       SURT(rec.TargetURI),
		Timestamp: cdxjTimestamp(rec.Header.Get(hDate)),
		URL:       rec.TargetURI,
		Offset:    rec.Offset,
		Filename:  filename,
	}
	if e.Timestamp == "" || !allDigits([]byte(e.Timestamp)) {
		return CDXJEntry{}, false // a key without a time cannot be looked up
	}
	if _, d, ok := strings.Cut(rec.Header.Get(hPayloadDigest), ":"); ok {
		e.Digest = d
	}
	switch rec.Type {
	case "revisit":
		e.MIME = "warc/revisit"
		e.Status, _ = httpHead(rec.Content)
	case "response":
		e.Status, e.MIME = httpHead(rec.Content)
	default:
		e.MIME = ct
	}
	return e, true
}

// httpHead returns the status code and the media type (of its first
// Content-Type field) of the HTTP response at the start of block, "" for
// what it does not find.
func httpHead(block []byte) (status, mime string) {
	end := bytes.Index(block, []byte("\r\n\r\n"))
	if end < 0 {
		end = len(block)
	}
	lines := strings.Split(string(block[:end]), "\r\n")
	if f := strings.Fields(lines[0]); len(f) >= 2 && strings.HasPrefix(f[0], "HTTP/") {
		if n, err := strconv.Atoi(f[1]); err == nil && n >= 100 && n <= 999 {
			status = f[1]
		}
	}
	// Several Content-Type fields read as one, their values joined, as
	// warcio (the Fetch API's Headers) reads them.
	var types []string
	for _, l := range lines[1:] {
		if name, value, ok := strings.Cut(l, ":"); ok && strings.EqualFold(strings.TrimSpace(name), "Content-Type") {
			types = append(types, strings.TrimSpace(value))
		}
	}
	return status, mimeOf(strings.Join(types, ", "))
}

// maxMemberEntries bounds the index entries held while a gzip member of
// several records is read (the Writer writes one record a member).
const maxMemberEntries = 4096

// IndexRecords reads the WARC data of r, the file named filename: it calls
// onRecord, if not nil, with each record in file order, and onEntry with
// the CDXJ entry of each indexed record (see the package documentation),
// in file order, once the record's end is known. It returns the number of
// bytes of r that hold complete records. It stops at the first error of
// a callback or of the data (errors.Is(err, io.ErrUnexpectedEOF) for a
// cut record, ErrMalformed for others); what was emitted until then
// stands.
func IndexRecords(r io.Reader, filename string, onEntry func(CDXJEntry) error, onRecord func(*Record) error) (int64, error) {
	wr := NewReader(r)
	var pending []CDXJEntry // entries of the current gzip member
	var good int64
	for {
		rec, err := wr.Next()
		if err == io.EOF {
			return good, nil
		}
		if err != nil {
			return good, err
		}
		if onRecord != nil {
			if err := onRecord(rec); err != nil {
				return good, err
			}
		}
		if e, ok := entryOf(rec, filename); ok {
			if len(pending) == maxMemberEntries {
				return good, fmt.Errorf("%w: more than %d records in the gzip member at offset %d", ErrMalformed, maxMemberEntries, rec.Offset)
			}
			pending = append(pending, e)
		}
		var end int64
		switch {
		case wr.gzipped && wr.inMember:
			continue // the member's end is not known yet
		case wr.gzipped:
			end = wr.end
		default:
			end = wr.src.n - int64(wr.br.Buffered())
		}
		for i := range pending {
			pending[i].Length = end - pending[i].Offset
			if err := onEntry(pending[i]); err != nil {
				return good, err
			}
		}
		pending = pending[:0]
		good = end
	}
}

// BuildIndex writes to w the CDXJ index of the WARC file at path, in file
// order, for a file that has none (one written before the Writer wrote
// indexes, or by another program). It reads the file to its end, or to
// the last complete record of a file still being written (name ending in
// .open, which is left out of the entries' file name); any other damage
// is an error naming the file. It returns the number of entries.
func BuildIndex(path string, w io.Writer) (int, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) && strings.HasSuffix(path, openSuffix) {
		path = strings.TrimSuffix(path, openSuffix) // completed since listed
		f, err = os.Open(path)
	}
	if err != nil {
		return 0, fmt.Errorf("warc: index: %w", err)
	}
	defer f.Close()
	name := strings.TrimSuffix(filepath.Base(path), openSuffix)
	n := 0
	var line []byte
	_, err = IndexRecords(f, name, func(e CDXJEntry) error {
		line = e.AppendLine(line[:0])
		n++
		_, err := w.Write(line)
		return err
	}, nil)
	if err != nil && !(strings.HasSuffix(path, openSuffix) && errors.Is(err, io.ErrUnexpectedEOF)) {
		return n, fmt.Errorf("warc: index %s: %w", filepath.Base(path), err)
	}
	return n, nil
}
