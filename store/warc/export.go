package warc

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"
)

// TextRecord is one line of ExportJSONL's output: the text extracted from
// one fetched page.
type TextRecord struct {
	// URL is the page's URL.
	URL string `json:"url"`
	// Date is when the page was fetched, RFC 3339 in UTC.
	Date string `json:"date"`
	// Title is the page title; omitted when the page had none.
	Title string `json:"title,omitempty"`
	// Text is the text the crawler extracted: the page's main text
	// (crawl.Page.MainText).
	Text string `json:"text"`
}

// ExportJSONL writes one JSON object per line to w, a TextRecord for each
// conversion record of the files, in file order, and returns how many it
// wrote. A file still being written (name ending in .open) may end in a
// partial record, which is skipped, and may have been completed and renamed
// since it was listed, in which case it is read under its final name. Any
// other damage stops the export with an error naming the file.
func ExportJSONL(files []string, w io.Writer) (int, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	n := 0
	for _, path := range files {
		m, err := exportFile(path, enc)
		n += m
		if err != nil {
			bw.Flush()
			return n, err
		}
	}
	if err := bw.Flush(); err != nil {
		return n, fmt.Errorf("warc: export: %w", err)
	}
	return n, nil
}

func exportFile(path string, enc *json.Encoder) (int, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) && strings.HasSuffix(path, openSuffix) {
		// Completed and renamed since it was listed.
		path = strings.TrimSuffix(path, openSuffix)
		f, err = os.Open(path)
	}
	if err != nil {
		return 0, fmt.Errorf("warc: export: %w", err)
	}
	defer f.Close()
	r := NewReader(f)
	n := 0
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			if strings.HasSuffix(path, openSuffix) && errors.Is(err, io.ErrUnexpectedEOF) {
				return n, nil // the record being written right now
			}
			return n, fmt.Errorf("warc: export %s: %w", path, err)
		}
		if rec.Type != "conversion" {
			continue
		}
		tr := TextRecord{
			URL:   rec.TargetURI,
			Title: rec.Header.Get(HeaderTitle),
			Text:  string(rec.Content),
		}
		if !rec.Date.IsZero() {
			tr.Date = rec.Date.UTC().Format(time.RFC3339)
		}
		if err := enc.Encode(&tr); err != nil {
			return n, fmt.Errorf("warc: export: %w", err)
		}
		n++
	}
}
