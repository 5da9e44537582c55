// Package warc writes and reads the WARC files in which a swarmcrawl node
// archives what it fetches (WARC 1.1, ISO 28500:2017,
// https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/),
// so that standard web archive tools (warcio, pywb, the Wayback Machine's
// indexers) can read them.
//
// # Files
//
// A Writer writes into one directory files named
//
//	<prefix>-<UTC time of creation, yyyyMMddHHmmssSSS>-<sequence, 5 digits>.warc.gz
//
// so that their names sort in the order they were written. A file is
// written under its name plus ".open" and renamed to its final name when it
// is complete: when it grew past Options.MaxFileBytes (it then holds that
// much plus at most one exchange) or when the Writer is closed. A file
// without the suffix is never written again. A node killed while writing
// leaves a .open file behind; the next NewWriter on the directory cuts it
// after its last complete record and renames it (see NewWriter).
//
// Beside each file the Writer writes its CDXJ index, named after the file
// plus ".cdxj" (IndexSuffix): one line per response and conversion record,
// in file order, as npm warcio's cdx-index writes them (CDXJEntry, SURT).
// It is written under its name plus ".open", buffered, and renamed just
// before its file, so that an index without the suffix is complete when
// its file is. NewWriter rebuilds the index of a file it recovers from the
// file itself and removes the indexes of files that are gone. BuildIndex
// indexes a file that has none; IndexSorter and MergeIndexes sort and
// merge indexes in bounded memory; WriteWACZ packages files as WACZ.
//
// Every record is compressed as its own gzip member, as the specification
// recommends, so a file can be read from any record's offset and a cut
// file loses only its last record.
//
// # Records
//
// Each file starts with a warcinfo record (Content-Type
// application/warc-fields) naming the software and the format. Each fetch
// (an Exchange) then adds, in this order, which is the order Heritrix
// writes and the one warcio's and pywb's indexers pair:
//
//   - a response record: Content-Type application/http;msgtype=response,
//     the block being the HTTP status line, the response headers and the
//     body as received (still content-coded, e.g. gzip, with its
//     Content-Encoding header). The body was de-chunked by the HTTP client,
//     so Transfer-Encoding is left out of the headers. WARC-Payload-Digest
//     is the digest of the body; a body cut at the crawler's size limit is
//     marked WARC-Truncated: length.
//   - a request record: Content-Type application/http;msgtype=request, the
//     request line and the headers that were sent (with Host).
//   - when the page had text, a conversion record: Content-Type
//     text/plain; charset=utf-8, the block being the extracted text.
//
// The request and response name each other in WARC-Concurrent-To; the
// conversion names the response in WARC-Refers-To. All three carry the
// page's URL in WARC-Target-URI and the fetch time in WARC-Date (UTC, to the
// second); request and response carry the server's address in
// WARC-IP-Address when it is known. Every record has a WARC-Record-ID of the
// form <urn:uuid:...> (random, version 4), a Content-Length and a
// WARC-Block-Digest; response and conversion records also have a
// WARC-Payload-Digest. Digests are SHA-1 in base 32: "sha1:" followed by 32
// characters.
//
// Two extension fields carry what the crawler derived from the page, on the
// conversion record:
//
//	WARC-Title    the page's <title> (UTF-8, line breaks replaced by spaces)
//	WARC-Simhash  the page's 64-bit simhash as 16 lowercase hex digits
//
// HTTP header names are written in Go's canonical form, sorted, because the
// HTTP client does not keep their original case or order; the values are
// those received.
package warc
