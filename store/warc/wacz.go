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
		res, pages, err := packWARC(zw, path, sorter, pagesEnc, info.NoText, seen)
		if err != nil {
			return st, err
		}
		resources = append(resources, res)
		st.Files++
		st.Pages += pages
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
	if _, err := pagesTmp.Seek(0, io.SeekStart); err != nil {
		return st, fmt.Errorf("warc: wacz: pages: %w", err)
	}
	res, err = addEntry(zw, "pages/pages.jsonl", zip.Deflate, info.Created, func(out io.Writer) error {
		if _, err := io.WriteString(out, `{"format":"json-pages-1.0","id":"pages","title":"All Pages"}`+"\n"); err != nil {
			return err
		}
		_, err := io.Copy(out, pagesTmp)
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
			return sorter.AddEntry(e)
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
			return fmt.Errorf("read %s: %w", name, err)
		}
		if err := emit(); err != nil {
			return err
		}
		// What the reader left unread (nothing but padding, normally)
		// is copied too.
		_, err = io.Copy(io.Discard, src)
		return err
	})
	return res, pages, err
}
