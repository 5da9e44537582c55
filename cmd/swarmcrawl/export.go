package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/swarmcrawl/swarmcrawl/p2p/node"
	"github.com/swarmcrawl/swarmcrawl/store/warc"
)

// runExport writes a node's crawl out of its data dir: the WARC files
// concatenated into one (gzip members concatenate into a valid .warc.gz),
// the extracted text as JSON Lines, one sorted CDXJ index of the WARC
// files, or a WACZ package (the WARC files, that index, the pages list),
// which ReplayWeb.page and pywb replay. It reads files only, so it works on
// a stopped node and on a running one (the file still being written is
// left out unless --include-open).
func runExport(args []string, stdout, stderr io.Writer) error {
	if isSwarmExport(args) {
		return runSwarmExport(args, stdout, stderr)
	}
	fs := newFlagSet("export", stderr)
	fs.Bool("swarm", false, "export the whole swarm's crawl from --peer MULTIADDR into --out DIR (see swarmcrawl export --swarm -h)")
	data := fs.String("data", "", "data directory of a node (required)")
	format := fs.String("format", "jsonl", "warc (the archived exchanges), jsonl (extracted text, one JSON object a line), cdxj (a sorted index of the WARC files) or wacz (a WACZ package: WARC files, index, pages)")
	out := fs.String("out", "-", "output file, - for stdout")
	includeOpen := fs.Bool("include-open", false, "also read the WARC file a running node is still writing")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *data == "" {
		return usageErr("--data is required")
	}
	switch *format {
	case "warc", "jsonl", "cdxj", "wacz":
	default:
		return usageErr("--format %q: want warc, jsonl, cdxj or wacz", *format)
	}
	dir := filepath.Join(*data, node.WARCDir)
	files, err := warc.Files(dir, *includeOpen)
	if err != nil {
		return fmt.Errorf("list WARC files in %s: %w", dir, err)
	}
	// Temporary files (sorted runs of the index, the pages list) go beside
	// the output: a big crawl's may not fit in a memory-backed /tmp.
	tmpDir := ""
	if *out != "-" {
		tmpDir = filepath.Dir(*out)
	}
	var w io.Writer = stdout
	if *out != "-" {
		f, err := os.Create(*out)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	if *format == "wacz" {
		st, err := warc.WriteWACZ(bw, files, warc.PackageInfo{
			Title:   "swarmcrawl crawl of " + filepath.Base(filepath.Clean(*data)),
			TempDir: tmpDir,
		})
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if err := bw.Flush(); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		fmt.Fprintf(stderr, "exported %d WARC files (%d bytes), %d index entries and %d pages from %s\n", st.Files, st.WARCBytes, st.Entries, st.Pages, dir)
		return nil
	}
	var sorter *warc.IndexSorter
	if *format == "cdxj" {
		sorter = warc.NewIndexSorter(tmpDir, 0)
		defer sorter.Close()
	}
	progress := newProgressLine(stderr)
	n := 0
	for i, file := range files {
		var m int
		switch *format {
		case "jsonl":
			m, err = warc.ExportJSONL([]string{file}, bw)
		case "warc":
			m, err = concatFiles([]string{file}, bw)
		case "cdxj":
			err = sorter.AddWARC(file)
		}
		n += m
		if err != nil {
			progress.clear()
			return fmt.Errorf("export: %w", err)
		}
		progress.show(i+1 == len(files), "exporting: %d of %d WARC files (%.0f%%)", i+1, len(files), 100*float64(i+1)/float64(len(files)))
	}
	progress.clear()
	if sorter != nil {
		lines, err := sorter.WriteTo(bw)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		n = int(lines)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	unit := "pages"
	switch *format {
	case "warc":
		unit = "WARC files"
	case "cdxj":
		unit = "index entries"
	}
	fmt.Fprintf(stderr, "exported %d %s from %s\n", n, unit, dir)
	return nil
}

func concatFiles(files []string, w io.Writer) (int, error) {
	for i, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return i, err
		}
		_, err = io.Copy(w, f)
		f.Close()
		if err != nil {
			return i, fmt.Errorf("copy %s: %w", name, err)
		}
	}
	return len(files), nil
}
