package warc

import (
	"archive/zip"
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// WACZVersion is the version of the WACZ format WriteWACZ writes
// (https://specs.webrecorder.net/wacz/1.1.1/).
const WACZVersion = "1.1.1"

// PackageInfo describes a WACZ package in its datapackage.json.
type PackageInfo struct {
	// Title names the collection. Default "swarmcrawl crawl".
	Title string
	// Description is a longer, Markdown description; "" for none.
	Description string
	// Software names the program that wrote the package. Default
	// "swarmcrawl".
	Software string
	// Created is when the package was made. Default now.
	Created time.Time
	// TempDir holds the temporary files of the index and the pages list
	// while the package is written ("": the system's).
	TempDir string
	// NoText leaves the pages' text out of pages/pages.jsonl (it feeds
	// ReplayWeb.page's full-text search, and is most of the list's size).
	NoText bool
	// LatestPages lists each URL once in pages/pages.jsonl, its latest
	// capture, when the files hold more than one (a page fetched again
	// after its holder left the swarm). The WARC files and the index keep
	// every capture.
	LatestPages bool
}

// PackageStats counts what WriteWACZ packaged.
type PackageStats struct {
	// Files is the number of WARC files.
	Files int
	// Entries is the number of lines of the CDXJ index.
	Entries int64
	// Pages is the number of pages listed.
	Pages int
	// WARCBytes is the size of the WARC files packaged.
	WARCBytes int64
}

// waczPage is one line of pages/pages.jsonl.
type waczPage struct {
	ID    string `json:"id"`
	URL   string `json:"url"`
	TS    string `json:"ts"`
	Title string `json:"title,omitempty"`
	Text  string `json:"text,omitempty"`
}

// waczResource is one file of a WACZ, as datapackage.json lists it.
type waczResource struct {
	Name  string `json:"name"`
	Path  string `json:"path"`
	Hash  string `json:"hash"`
	Bytes int64  `json:"bytes"`
}

// WriteWACZ writes to w a WACZ 1.1.1 package (a zip file,
// https://specs.webrecorder.net/wacz/1.1.1/) of the WARC files at paths,
// the form ReplayWeb.page and Browsertrix load:
//
//	archive/<file>.warc.gz   each WARC file, stored (not compressed again)
//	indexes/index.cdx        one CDXJ index of all of them, sorted, of the
//	                         records a replay tool serves (responses, not
//	                         the conversion records)
//	pages/pages.jsonl        the HTML pages fetched with status 200: url,
//	                         ts, title and text (from the conversion record)
//	datapackage.json         every file above with its size and SHA-256
//	datapackage-digest.json  the SHA-256 of datapackage.json
//
// Each WARC file is read once: copied into the package while it is
// indexed and its pages listed. The index is sorted in bounded memory
// (IndexSorter); the pages list waits in a temporary file. A file still
// being written (name ending in .open) is packaged up to its last
// complete record, under its final name. The files' base names must
// differ. Damage in a file stops the export with an error naming it.
func WriteWACZ(w io.Writer, paths []string, info PackageInfo) (PackageStats, error) {
	var st PackageStats
	if info.Title == "" {
		info.Title = "swarmcrawl crawl"
	}
	if info.Software == "" {
		info.Software = "swarmcrawl"
	}
	if info.Created.IsZero() {
		info.Created = time.Now()
	}
	created := info.Created.UTC().Format(time.RFC3339)

	sorter := NewIndexSorter(info.TempDir, 0)
	defer sorter.Close()
	pagesTmp, err := os.CreateTemp(info.TempDir, "wacz-pages-*")
	if err != nil {
		return st, fmt.Errorf("warc: wacz: %w", err)
	}
	defer os.Remove(pagesTmp.Name())
	defer pagesTmp.Close()
	pagesBuf := bufio.NewWriterSize(pagesTmp, 64<<10)
	pagesEnc := json.NewEncoder(pagesBuf)
	pagesEnc.SetEscapeHTML(false)

	zw := zip.NewWriter(w)
	var resources []waczResource
	seen := map[string]bool{}
	for _, path := range paths {
		res, _, err := packWARC(zw, path, sorter, pagesEnc, info.NoText, seen)
		if err != nil {
			return st, err
		}
		resources = append(resources, res)
		st.Files++
		st.WARCBytes += res.Bytes
	}
	if err := pagesBuf.Flush(); err != nil {
		return st, fmt.Errorf("warc: wacz: pages: %w", err)
	}

	// The index.
	res, err := addEntry(zw, "indexes/index.cdx", zip.Deflate, info.Created, func(out io.Writer) error {
		var err error
		st.Entries, err = sorter.WriteTo(out)
		return err
	})
	if err != nil {
		return st, err
	}
	resources = append(resources, res)

	// The pages.
	res, err = addEntry(zw, "pages/pages.jsonl", zip.Deflate, info.Created, func(out io.Writer) error {
		var err error
		st.Pages, err = copyPages(pagesTmp, out, info.LatestPages)
		return err
	})
	if err != nil {
		return st, err
	}
	resources = append(resources, res)

	// The manifest, and its digest.
	manifest, err := json.MarshalIndent(struct {
		Profile     string         `json:"profile"`
		WACZVersion string         `json:"wacz_version"`
		Title       string         `json:"title"`
		Description string         `json:"description,omitempty"`
		Created     string         `json:"created"`
		Modified    string         `json:"modified"`
		Software    string         `json:"software"`
		Resources   []waczResource `json:"resources"`
	}{"data-package", WACZVersion, info.Title, info.Description, created, created, info.Software, resources}, "", " ")
	if err != nil {
		return st, fmt.Errorf("warc: wacz: datapackage.json: %w", err)
	}
	res, err = addEntry(zw, "datapackage.json", zip.Deflate, info.Created, func(out io.Writer) error {
		_, err := out.Write(manifest)
		return err
	})
	if err != nil {
		return st, err
	}
	digest, err := json.MarshalIndent(struct {
		Path string `json:"path"`
		Hash string `json:"hash"`
	}{"datapackage.json", res.Hash}, "", " ")
	if err != nil {
		return st, fmt.Errorf("warc: wacz: datapackage-digest.json: %w", err)
	}
	if _, err := addEntry(zw, "datapackage-digest.json", zip.Deflate, info.Created, func(out io.Writer) error {
		_, err := out.Write(digest)
		return err
	}); err != nil {
		return st, err
	}
	if err := zw.Close(); err != nil {
		return st, fmt.Errorf("warc: wacz: %w", err)
	}
	return st, nil
}

// addEntry adds one file to the zip, written by fill, and returns its
// resource: size and SHA-256.
func addEntry(zw *zip.Writer, name string, method uint16, modified time.Time, fill func(io.Writer) error) (waczResource, error) {
	ew, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: method, Modified: modified})
	if err != nil {
		return waczResource{}, fmt.Errorf("warc: wacz: %s: %w", name, err)
	}
	hw := &hashCounter{h: sha256.New()}
	if err := fill(io.MultiWriter(ew, hw)); err != nil {
		return waczResource{}, fmt.Errorf("warc: wacz: %s: %w", name, err)
	}
	return waczResource{Name: filepath.Base(name), Path: name, Hash: hw.sum(), Bytes: hw.n}, nil
}

// hashCounter hashes and counts what is written to it.
type hashCounter struct {
	h hash.Hash
	n int64
}

func (c *hashCounter) Write(p []byte) (int, error) {
	c.h.Write(p)
	c.n += int64(len(p))
	return len(p), nil
}

func (c *hashCounter) sum() string { return "sha256:" + hex.EncodeToString(c.h.Sum(nil)) }

// packWARC copies one WARC file into the zip, stored, while it indexes it
// into sorter and lists its pages with enc.
func packWARC(zw *zip.Writer, path string, sorter *IndexSorter, enc *json.Encoder, noText bool, seen map[string]bool) (waczResource, int, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) && strings.HasSuffix(path, openSuffix) {
		path = strings.TrimSuffix(path, openSuffix) // completed since listed
		f, err = os.Open(path)
	}
	if err != nil {
		return waczResource{}, 0, fmt.Errorf("warc: wacz: %w", err)
	}
	defer f.Close()
	name := strings.TrimSuffix(filepath.Base(path), openSuffix)
	if seen[name] {
		return waczResource{}, 0, fmt.Errorf("warc: wacz: two WARC files named %s", name)
	}
	seen[name] = true
	size := int64(-1) // all of it
	if strings.HasSuffix(path, openSuffix) {
		// Only the complete records of a file being written.
		if size, err = completeLength(path); err != nil {
			return waczResource{}, 0, fmt.Errorf("warc: wacz: %s: %w", name, err)
		}
	} else if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	modified := time.Now()
	if fi, err := f.Stat(); err == nil {
		modified = fi.ModTime()
	}
	pages := 0
	res, err := addEntry(zw, "archive/"+name, zip.Store, modified, func(out io.Writer) error {
		var in io.Reader = f
		if size >= 0 {
			in = io.LimitReader(f, size)
		}
		src := io.TeeReader(in, out)
		var err error
		if pages, err = scanPages(src, name, sorter.AddEntry, enc, noText); err != nil {
			return err
		}
		// What the reader left unread (nothing but padding, normally)
		// is copied too.
		_, err = io.Copy(io.Discard, src)
		return err
	})
	return res, pages, err
}

// scanPages reads the WARC file src (named name), hands each index entry
// of a record a replay tool serves to onEntry (nil: none) and lists its
// pages with enc, and returns how many it listed.
func scanPages(src io.Reader, name string, onEntry func(CDXJEntry) error, enc *json.Encoder, noText bool) (int, error) {
	pages := 0
	var pending *waczPage // the last 200 HTML response, waiting for its text
	var pendingID string
	emit := func() error {
		if pending == nil {
			return nil
		}
		p := pending
		pending = nil
		if noText {
			p.Text = ""
		}
		pages++
		return enc.Encode(p)
	}
	// Conversion records stay out of the index: ReplayWeb.page keeps
	// one capture per URL and time, and would replay the text of the
	// page in its place. pages.jsonl carries the text.
	conversions := map[int64]bool{}
	addEntry := func(e CDXJEntry) error {
		if conversions[e.Offset] {
			delete(conversions, e.Offset)
			return nil
		}
		if onEntry == nil {
			return nil
		}
		return onEntry(e)
	}
	_, err := IndexRecords(src, name, addEntry, func(rec *Record) error {
		if rec.Type == "conversion" {
			conversions[rec.Offset] = true
		}
		if pending != nil && rec.Type == "conversion" && rec.RefersTo == pendingID {
			pending.Title, pending.Text = rec.Header.Get(HeaderTitle), string(rec.Content)
			return emit()
		}
		if rec.Type != "response" {
			return nil
		}
		if err := emit(); err != nil {
			return err
		}
		if status, mime := httpHead(rec.Content); status == "200" && (strings.EqualFold(mime, "text/html") || strings.EqualFold(mime, "application/xhtml+xml")) && !rec.Date.IsZero() {
			ts := rec.Date.UTC().Format(time.RFC3339)
			sum := sha256.Sum256([]byte(ts + " " + rec.TargetURI))
			pending, pendingID = &waczPage{ID: hex.EncodeToString(sum[:8]), URL: rec.TargetURI, TS: ts}, rec.ID
		}
		return nil
	})
	if err != nil {
		return pages, fmt.Errorf("read %s: %w", name, err)
	}
	if err := emit(); err != nil {
		return pages, err
	}
	return pages, nil
}

// pagesHeader is the first line of a pages.jsonl.
const pagesHeader = `{"format":"json-pages-1.0","id":"pages","title":"All Pages"}` + "\n"

// copyPages writes the pages list held in tmp (one page a line, from the
// start) to out, and returns how many pages it wrote: all of them, or,
// with latest, one per URL, the latest capture (the first of equal
// times). The latest capture of each URL is found in a first pass, which
// holds every URL in memory once.
func copyPages(tmp *os.File, out io.Writer, latest bool) (int, error) {
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	if _, err := io.WriteString(out, pagesHeader); err != nil {
		return 0, err
	}
	if !latest {
		n := 0
		sc := bufio.NewScanner(tmp)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			if _, err := out.Write(append(sc.Bytes(), '\n')); err != nil {
				return n, err
			}
			n++
		}
		return n, sc.Err()
	}
	keep := map[string]string{} // URL → latest ts
	sc := bufio.NewScanner(tmp)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var p waczPage
	for sc.Scan() {
		p = waczPage{}
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return 0, err
		}
		if ts, ok := keep[p.URL]; !ok || p.TS > ts {
			keep[p.URL] = p.TS
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	n := 0
	sc = bufio.NewScanner(tmp)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		p = waczPage{}
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return n, err
		}
		if ts, ok := keep[p.URL]; !ok || ts != p.TS {
			continue
		}
		delete(keep, p.URL)
		if _, err := out.Write(append(sc.Bytes(), '\n')); err != nil {
			return n, err
		}
		n++
	}
	return n, sc.Err()
}

// WritePages writes to w the pages list of the WARC files at paths, as
// pages/pages.jsonl of a WACZ package (see WriteWACZ) holds it: the HTML
// pages fetched with status 200, with their text unless info.NoText, one
// per URL with info.LatestPages. It returns how many pages it wrote.
// info.TempDir holds the list while it is written.
func WritePages(w io.Writer, paths []string, info PackageInfo) (int, error) {
	tmp, err := os.CreateTemp(info.TempDir, "pages-*")
	if err != nil {
		return 0, fmt.Errorf("warc: pages: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	buf := bufio.NewWriterSize(tmp, 64<<10)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return 0, fmt.Errorf("warc: pages: %w", err)
		}
		_, err = scanPages(bufio.NewReaderSize(f, 256<<10), filepath.Base(path), nil, enc, info.NoText)
		f.Close()
		if err != nil {
			return 0, fmt.Errorf("warc: pages: %w", err)
		}
	}
	if err := buf.Flush(); err != nil {
		return 0, fmt.Errorf("warc: pages: %w", err)
	}
	n, err := copyPages(tmp, w, info.LatestPages)
	if err != nil {
		return n, fmt.Errorf("warc: pages: %w", err)
	}
	return n, nil
}
