package warc

import (
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
)

// Exchange is one HTTP fetch to archive.
type Exchange struct {
	// URL is the URL that was fetched (WARC-Target-URI).
	URL string
	// Date is when the fetch started. Zero means the Writer's clock now.
	Date time.Time
	// RemoteAddr is the server's address, "ip:port" or "ip"; "" if
	// unknown (WARC-IP-Address).
	RemoteAddr string
	// Method is the request method. Default "GET".
	Method string
	// RequestHeader holds the headers that were sent. A Host header is
	// added from URL when it has none.
	RequestHeader http.Header
	// Proto is the protocol of the exchange as Go names it ("HTTP/1.1",
	// "HTTP/2.0"). Default "HTTP/1.1".
	Proto string
	// Status is the response status code.
	Status int
	// ResponseHeader holds the headers received. Transfer-Encoding is not
	// written, since Body is de-chunked.
	ResponseHeader http.Header
	// Body is the response body as received: de-chunked but still
	// content-coded (gzip, deflate...), possibly cut at a size limit.
	Body []byte
	// Truncated says that Body was cut at a size limit; the response
	// record is then marked WARC-Truncated: length.
	Truncated bool
	// Title is the page title, written as WARC-Title on the conversion
	// record.
	Title string
	// Text is the page's extracted text. When it is not empty, a
	// conversion record carries it.
	Text string
	// Simhash is the fingerprint of Text, written as WARC-Simhash on the
	// conversion record when it is not zero.
	Simhash uint64
	// ResponseID is the WARC-Record-ID to give the response record, as
	// NewRecordID returns it; "" means a fresh one. A crawler that
	// records where each capture is sets it before the write.
	ResponseID string
	// PayloadDigest is PayloadDigest(Body) when the caller computed it
	// already (the crawler, for the capture it records); "" means it is
	// computed here.
	PayloadDigest string
}

// NewRecordID returns a fresh WARC-Record-ID, a random (version 4) UUID
// URN such as "<urn:uuid:...>", for Exchange.ResponseID.
func NewRecordID() (string, error) { return newRecordID() }

// PayloadDigest returns the WARC-Payload-Digest the response record of a
// fetch with this body gets ("sha1:" and 32 base32 digits).
func PayloadDigest(body []byte) string {
	sum := sha1.Sum(body)
	b := make([]byte, digestLen)
	putDigest(b, &sum)
	return string(b)
}

// warcVersion starts every record.
const warcVersion = "WARC/1.1"

// Header field names, as written.
const (
	hType          = "WARC-Type"
	hRecordID      = "WARC-Record-ID"
	hDate          = "WARC-Date"
	hTargetURI     = "WARC-Target-URI"
	hIPAddress     = "WARC-IP-Address"
	hConcurrentTo  = "WARC-Concurrent-To"
	hRefersTo      = "WARC-Refers-To"
	hTruncated     = "WARC-Truncated"
	hFilename      = "WARC-Filename"
	hBlockDigest   = "WARC-Block-Digest"
	hPayloadDigest = "WARC-Payload-Digest"
	hContentType   = "Content-Type"
	hContentLength = "Content-Length"
)

// Extension fields of the conversion record (see the package
// documentation).
const (
	// HeaderTitle holds the page title.
	HeaderTitle = "WARC-Title"
	// HeaderSimhash holds the page's simhash, 16 lowercase hex digits.
	HeaderSimhash = "WARC-Simhash"
)

// conversionType is the Content-Type of conversion records.
const conversionType = "text/plain; charset=utf-8"

// dateFormat is WARC-Date: UTC, to the second (W3C-ISO8601).
const dateFormat = "2006-01-02T15:04:05Z"

// field is one named field of a record header.
type field struct{ name, value string }

// newRecordID returns a fresh WARC-Record-ID, a random (version 4) UUID URN.
func newRecordID() (string, error) {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		return "", fmt.Errorf("record id: %w", err)
	}
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	const prefix = "<urn:uuid:"
	b := make([]byte, 0, len(prefix)+36+1)
	b = append(b, prefix...)
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hexDigits[c>>4], hexDigits[c&0xf])
	}
	b = append(b, '>')
	return string(b), nil
}

const hexDigits = "0123456789abcdef"

// gzipWriters compress, at BestSpeed, the records too large for a
// deflater: records are written on the fetch path, and, as for the store's
// page bodies, the default level costs much CPU for files only slightly
// smaller.
var gzipWriters = sync.Pool{New: func() any {
	w, err := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	if err != nil { // only for an invalid level
		panic(err)
	}
	return w
}}

// encoder holds what appendRecord reuses from record to record.
type encoder struct {
	// rec is the uncompressed record being written.
	rec []byte
	// http is the HTTP header of the exchange's record being written.
	http []byte
	// digestAt is where the payload digest is in rec, after a record with
	// one.
	digestAt int
	deflater
}

var encoders = sync.Pool{New: func() any { return new(encoder) }}

func getEncoder() *encoder { return encoders.Get().(*encoder) }

func putEncoder(e *encoder) {
	if cap(e.rec) > 256<<10 || cap(e.http) > 64<<10 { // a rare huge page
		e.rec, e.http = nil, nil
	}
	encoders.Put(e)
}

// recordEnd ends every record.
const recordEnd = "\r\n\r\n"

// digestLen is the length of a digest field's value, "sha1:" and 32
// base32 digits.
var digestLen = len("sha1:") + base32.StdEncoding.EncodedLen(sha1.Size)

// appendRecord appends one record, compressed as its own gzip member, to
// dst. Its block is http followed by payload; Content-Length and
// WARC-Block-Digest are computed here, and WARC-Payload-Digest too (of
// payload) if payloadDigest, unless known gives it already (a digest as
// PayloadDigest returns it). A record of a kind with a preset code passes
// it (see presetCode), others nil.
func appendRecord[P string | []byte](e *encoder, dst *bytes.Buffer, fields []field, http []byte, payload P, payloadDigest bool, known string, preset *presetCode) error {
	// The record is built whole in e.rec, its digests written in once the
	// block is in place behind the header.
	n := len(http) + len(payload)
	r := append(e.rec[:0], warcVersion+"\r\n"...)
	for _, f := range fields {
		r = appendField(r, f.name, f.value)
	}
	r = append(r, hBlockDigest+": "...)
	blockAt := len(r)
	r = append(r, make([]byte, digestLen)...)
	r = append(r, "\r\n"...)
	payloadAt := -1
	if payloadDigest {
		r = append(r, hPayloadDigest+": "...)
		payloadAt = len(r)
		e.digestAt = payloadAt
		r = append(r, make([]byte, digestLen)...)
		r = append(r, "\r\n"...)
	}
	r = append(r, hContentLength+": "...)
	r = strconv.AppendInt(r, int64(n), 10)
	r = append(r, "\r\n\r\n"...)
	start := len(r)
	r = append(r, http...)
	r = append(r, payload...)
	r = append(r, recordEnd...)
	e.rec = r

	block := r[start : start+n]
	sum := sha1.Sum(block)
	putDigest(r[blockAt:], &sum)
	switch {
	case !payloadDigest:
	case len(known) == digestLen:
		copy(r[payloadAt:], known)
	default:
		if len(http) > 0 {
			sum = sha1.Sum(block[len(http):])
		}
		putDigest(r[payloadAt:], &sum)
	}

	if len(r) <= maxDeflateInput {
		dst.Grow(len(r) + len(r)/8 + 64) // more than the worst case
		dst.Write(e.appendGzip(dst.AvailableBuffer(), r, preset))
		return nil
	}
	gz := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(gz)
	gz.Reset(dst)
	gz.Write(r) // writes to a bytes.Buffer cannot fail
	if err := gz.Close(); err != nil {
		return fmt.Errorf("compress record: %w", err)
	}
	return nil
}

// putDigest writes a SHA-1 sum as a WARC digest, digestLen bytes, at the
// start of b.
func putDigest(b []byte, sum *[sha1.Size]byte) {
	copy(b, "sha1:")
	base32.StdEncoding.Encode(b[len("sha1:"):digestLen], sum[:])
}

// appendField appends "name: value\r\n", with line breaks in the value
// turned into spaces so that a value can never end the header.
func appendField(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, ": "...)
	b = appendOneLine(b, value)
	return append(b, "\r\n"...)
}

// appendOneLine appends s with CR, LF and other control characters
// replaced by spaces.
func appendOneLine(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if isCtl(rune(s[i])) { // the control characters are all ASCII
			return append(b, strings.Map(func(r rune) rune {
				if isCtl(r) {
					return ' '
				}
				return r
			}, s)...)
		}
	}
	return append(b, s...)
}

func isCtl(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }

// encodeWarcinfo appends the warcinfo record of a new file.
func encodeWarcinfo(dst *bytes.Buffer, filename string, now time.Time, software string) error {
	id, err := newRecordID()
	if err != nil {
		return err
	}
	e := getEncoder()
	defer putEncoder(e)
	body := appendField(e.http[:0], "software", software)
	body = appendField(body, "format", "WARC File Format 1.1")
	body = appendField(body, "conformsTo", "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/")
	e.http = body
	return appendRecord(e, dst, []field{
		{hType, "warcinfo"},
		{hRecordID, id},
		{hDate, now.UTC().Format(dateFormat)},
		{hFilename, filename},
		{hContentType, "application/warc-fields"},
	}, body, "", false, "", nil)
}

// exchangeIndex is where the records of an encoded exchange that go into
// the CDXJ index are in the buffer, and their payload digests (without
// "sha1:").
type exchangeIndex struct {
	respStart, respEnd int
	respDigest         string
	convStart, convEnd int // convEnd 0: no conversion record
	convDigest         string
}

// payloadDigest returns the base32 digits of the payload digest of the
// record e just built.
func (e *encoder) payloadDigest() string {
	return string(e.rec[e.digestAt+len("sha1:") : e.digestAt+digestLen])
}

// encodeExchange appends the response, request and (if there is text)
// conversion records of ex; with idx set it notes where the response and
// conversion are.
func encodeExchange(dst *bytes.Buffer, ex *Exchange, idx *exchangeIndex) error {
	u, err := url.Parse(ex.URL)
	if err != nil {
		return fmt.Errorf("parse URL: %w", err)
	}
	reqID, err := newRecordID()
	if err != nil {
		return err
	}
	respID := ex.ResponseID
	if respID == "" {
		respID, err = newRecordID()
	}
	if err != nil {
		return err
	}
	proto := ex.Proto
	if proto == "" {
		proto = "HTTP/1.1"
	}
	date := ex.Date.UTC().Format(dateFormat)
	ip := ipAddress(ex.RemoteAddr)
	e := getEncoder()
	defer putEncoder(e)

	// Response.
	reason := http.StatusText(ex.Status)
	if reason == "" {
		reason = "Unknown"
	}
	head := append(e.http[:0], proto...)
	head = append(head, ' ')
	if ex.Status >= 100 && ex.Status <= 999 {
		head = strconv.AppendInt(head, int64(ex.Status), 10)
	} else {
		head = fmt.Appendf(head, "%03d", ex.Status)
	}
	head = append(head, ' ')
	head = append(head, reason...)
	head = append(head, "\r\n"...)
	head = appendHTTPHeader(head, ex.ResponseHeader, "Transfer-Encoding")
	head = append(head, "\r\n"...)
	e.http = head
	var fieldsArr [9]field
	fields := append(fieldsArr[:0], field{hType, "response"}, field{hRecordID, respID}, field{hDate, date}, field{hTargetURI, ex.URL})
	if ip != "" {
		fields = append(fields, field{hIPAddress, ip})
	}
	fields = append(fields, field{hConcurrentTo, reqID})
	if ex.Truncated {
		fields = append(fields, field{hTruncated, "length"})
	}
	fields = append(fields, field{hContentType, "application/http;msgtype=response"})
	start := dst.Len()
	if err := appendRecord(e, dst, fields, head, ex.Body, true, ex.PayloadDigest, nil); err != nil {
		return err
	}
	if idx != nil {
		idx.respStart, idx.respEnd, idx.respDigest = start, dst.Len(), e.payloadDigest()
		idx.convEnd = 0
	}
	if err := appendRequest(e, dst, ex, u, proto, date, ip, reqID, respID, requestCode()); err != nil {
		return err
	}

	// Conversion.
	if ex.Text == "" {
		return nil
	}
	convID, err := newRecordID()
	if err != nil {
		return err
	}
	fields = append(fields[:0], field{hType, "conversion"}, field{hRecordID, convID}, field{hDate, date}, field{hTargetURI, ex.URL}, field{hRefersTo, respID})
	if ex.Title != "" {
		fields = append(fields, field{HeaderTitle, ex.Title})
	}
	if ex.Simhash != 0 {
		fields = append(fields, field{HeaderSimhash, fmt.Sprintf("%016x", ex.Simhash)})
	}
	fields = append(fields, field{hContentType, conversionType})
	start = dst.Len()
	if err := appendRecord(e, dst, fields, nil, ex.Text, true, "", nil); err != nil {
		return err
	}
	if idx != nil {
		idx.convStart, idx.convEnd, idx.convDigest = start, dst.Len(), e.payloadDigest()
	}
	return nil
}

// appendRequest appends the request record of ex, compressed with preset
// when it can be (nil: with a code of its own).
func appendRequest(e *encoder, dst *bytes.Buffer, ex *Exchange, u *url.URL, proto, date, ip, reqID, respID string, preset *presetCode) error {
	method := ex.Method
	if method == "" {
		method = http.MethodGet
	}
	head := appendOneLine(e.http[:0], method)
	head = append(head, ' ')
	head = appendOneLine(head, u.RequestURI())
	head = append(head, ' ')
	head = append(head, proto...)
	head = append(head, "\r\n"...)
	reqHeader := ex.RequestHeader
	if reqHeader.Get("Host") == "" && u.Host != "" {
		reqHeader = reqHeader.Clone()
		if reqHeader == nil {
			reqHeader = http.Header{}
		}
		reqHeader.Set("Host", u.Host)
	}
	head = appendHTTPHeader(head, reqHeader)
	head = append(head, "\r\n"...)
	e.http = head
	var fieldsArr [7]field
	fields := append(fieldsArr[:0], field{hType, "request"}, field{hRecordID, reqID}, field{hDate, date}, field{hTargetURI, ex.URL})
	if ip != "" {
		fields = append(fields, field{hIPAddress, ip})
	}
	fields = append(fields, field{hConcurrentTo, respID}, field{hContentType, "application/http;msgtype=request"})
	return appendRecord(e, dst, fields, head, "", false, "", preset)
}

// requestCode is the preset code of request records, made from the
// request record of a typical crawled page.
var requestCode = sync.OnceValue(func() *presetCode {
	ex := &Exchange{
		URL:        "http://www.example.com/news/2025/03/page-0123.html?id=4567&lang=en",
		Date:       time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC),
		RemoteAddr: "192.0.2.10:80",
		RequestHeader: http.Header{
			"User-Agent":      {"swarmcrawl/0.1 (+https://swarmcrawl.example/bot)"},
			"Accept":          {"text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"},
			"Accept-Encoding": {"gzip"},
		},
	}
	// The sample is constant: an error here is a bug, found by any test
	// that writes a record.
	u, err := url.Parse(ex.URL)
	if err != nil {
		panic(err)
	}
	const id = "<urn:uuid:0f3c5a8e-7b21-4d9f-a6e4-92c1d0b7e853>"
	e := new(encoder)
	var scratch bytes.Buffer
	if err := appendRequest(e, &scratch, ex, u, "HTTP/1.1", ex.Date.Format(dateFormat), ipAddress(ex.RemoteAddr), id, id, nil); err != nil {
		panic(err)
	}
	return newPresetCode(e.rec)
})

// appendHTTPHeader appends an HTTP header in canonical name order, leaving
// out the names in skip and any name that is not a valid token.
func appendHTTPHeader(b []byte, h http.Header, skip ...string) []byte {
	names := make([]string, 0, len(h))
	for name := range h {
		if validFieldName(name) && !slices.ContainsFunc(skip, func(s string) bool { return strings.EqualFold(s, name) }) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		for _, v := range h[name] {
			b = appendField(b, name, v)
		}
	}
	return b
}

// validFieldName reports whether name is an HTTP token, so that it can be
// written as a header name.
func validFieldName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// ipAddress returns the IP of "ip:port" or "ip", or "" if addr is neither.
func ipAddress(addr string) string {
	if host, _, err := net.SplitHostPort(addr); err == nil {
		addr = host
	}
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return ""
	}
	return ip.WithZone("").String()
}
