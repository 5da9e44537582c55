package warc

import (
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"hash"
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
	return fmt.Sprintf("<urn:uuid:%x-%x-%x-%x-%x>", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}

// digestString formats a SHA-1 sum as a WARC digest.
func digestString(h hash.Hash) string {
	return "sha1:" + base32.StdEncoding.EncodeToString(h.Sum(nil))
}

// gzipWriters compress records at BestSpeed: records are written on the
// fetch path, and, as for the store's page bodies, the default level costs
// much CPU for files only slightly smaller.
var gzipWriters = sync.Pool{New: func() any {
	w, err := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	if err != nil { // only for an invalid level
		panic(err)
	}
	return w
}}

// appendRecord appends one record, compressed as its own gzip member, to
// dst. The block is the concatenation of parts; Content-Length and
// WARC-Block-Digest are computed here, and WARC-Payload-Digest too when
// payloadFrom >= 0 (the payload being parts[payloadFrom:]).
func appendRecord(dst *bytes.Buffer, fields []field, payloadFrom int, parts ...[]byte) error {
	block, payload := sha1.New(), sha1.New()
	n := 0
	for i, p := range parts {
		block.Write(p)
		if payloadFrom >= 0 && i >= payloadFrom {
			payload.Write(p)
		}
		n += len(p)
	}
	var head bytes.Buffer
	head.WriteString(warcVersion + "\r\n")
	for _, f := range fields {
		writeField(&head, f.name, f.value)
	}
	writeField(&head, hBlockDigest, digestString(block))
	if payloadFrom >= 0 {
		writeField(&head, hPayloadDigest, digestString(payload))
	}
	writeField(&head, hContentLength, strconv.Itoa(n))
	head.WriteString("\r\n")

	gz := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(gz)
	gz.Reset(dst)
	gz.Write(head.Bytes()) // writes to a bytes.Buffer cannot fail
	for _, p := range parts {
		gz.Write(p)
	}
	gz.Write([]byte("\r\n\r\n"))
	if err := gz.Close(); err != nil {
		return fmt.Errorf("compress record: %w", err)
	}
	return nil
}

// writeField writes "name: value\r\n", with line breaks in the value
// turned into spaces so that a value can never end the header.
func writeField(b *bytes.Buffer, name, value string) {
	b.WriteString(name)
	b.WriteString(": ")
	b.WriteString(oneLine(value))
	b.WriteString("\r\n")
}

// oneLine replaces CR, LF and other control characters with spaces.
func oneLine(s string) string {
	if strings.IndexFunc(s, isCtl) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isCtl(r) {
			return ' '
		}
		return r
	}, s)
}

func isCtl(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }

// encodeWarcinfo appends the warcinfo record of a new file.
func encodeWarcinfo(dst *bytes.Buffer, filename string, now time.Time, software string) error {
	id, err := newRecordID()
	if err != nil {
		return err
	}
	var body bytes.Buffer
	writeField(&body, "software", software)
	writeField(&body, "format", "WARC File Format 1.1")
	writeField(&body, "conformsTo", "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/")
	return appendRecord(dst, []field{
		{hType, "warcinfo"},
		{hRecordID, id},
		{hDate, now.UTC().Format(dateFormat)},
		{hFilename, filename},
		{hContentType, "application/warc-fields"},
	}, -1, body.Bytes())
}

// encodeExchange appends the response, request and (if there is text)
// conversion records of ex.
func encodeExchange(dst *bytes.Buffer, ex *Exchange) error {
	u, err := url.Parse(ex.URL)
	if err != nil {
		return fmt.Errorf("parse URL: %w", err)
	}
	reqID, err := newRecordID()
	if err != nil {
		return err
	}
	respID, err := newRecordID()
	if err != nil {
		return err
	}
	proto := ex.Proto
	if proto == "" {
		proto = "HTTP/1.1"
	}
	date := ex.Date.UTC().Format(dateFormat)
	ip := ipAddress(ex.RemoteAddr)

	// Response.
	var head bytes.Buffer
	reason := http.StatusText(ex.Status)
	if reason == "" {
		reason = "Unknown"
	}
	fmt.Fprintf(&head, "%s %03d %s\r\n", proto, ex.Status, reason)
	writeHTTPHeader(&head, ex.ResponseHeader, "Transfer-Encoding")
	head.WriteString("\r\n")
	fields := []field{{hType, "response"}, {hRecordID, respID}, {hDate, date}, {hTargetURI, ex.URL}}
	if ip != "" {
		fields = append(fields, field{hIPAddress, ip})
	}
	fields = append(fields, field{hConcurrentTo, reqID})
	if ex.Truncated {
		fields = append(fields, field{hTruncated, "length"})
	}
	fields = append(fields, field{hContentType, "application/http;msgtype=response"})
	if err := appendRecord(dst, fields, 1, head.Bytes(), ex.Body); err != nil {
		return err
	}

	// Request.
	head.Reset()
	method := ex.Method
	if method == "" {
		method = http.MethodGet
	}
	fmt.Fprintf(&head, "%s %s %s\r\n", oneLine(method), oneLine(u.RequestURI()), proto)
	reqHeader := ex.RequestHeader
	if reqHeader.Get("Host") == "" && u.Host != "" {
		reqHeader = reqHeader.Clone()
		if reqHeader == nil {
			reqHeader = http.Header{}
		}
		reqHeader.Set("Host", u.Host)
	}
	writeHTTPHeader(&head, reqHeader)
	head.WriteString("\r\n")
	fields = []field{{hType, "request"}, {hRecordID, reqID}, {hDate, date}, {hTargetURI, ex.URL}}
	if ip != "" {
		fields = append(fields, field{hIPAddress, ip})
	}
	fields = append(fields, field{hConcurrentTo, respID}, field{hContentType, "application/http;msgtype=request"})
	if err := appendRecord(dst, fields, -1, head.Bytes()); err != nil {
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
	fields = []field{{hType, "conversion"}, {hRecordID, convID}, {hDate, date}, {hTargetURI, ex.URL}, {hRefersTo, respID}}
	if ex.Title != "" {
		fields = append(fields, field{HeaderTitle, ex.Title})
	}
	if ex.Simhash != 0 {
		fields = append(fields, field{HeaderSimhash, fmt.Sprintf("%016x", ex.Simhash)})
	}
	fields = append(fields, field{hContentType, "text/plain; charset=utf-8"})
	return appendRecord(dst, fields, 0, []byte(ex.Text))
}

// writeHTTPHeader writes an HTTP header in canonical name order, leaving
// out the names in skip and any name that is not a valid token.
func writeHTTPHeader(b *bytes.Buffer, h http.Header, skip ...string) {
	names := make([]string, 0, len(h))
	for name := range h {
		if validFieldName(name) && !slices.ContainsFunc(skip, func(s string) bool { return strings.EqualFold(s, name) }) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		for _, v := range h[name] {
			writeField(b, name, v)
		}
	}
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
