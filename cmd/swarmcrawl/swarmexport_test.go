package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/internal/replaytest"
	"github.com/swarmcrawl/swarmcrawl/store/warc"
)

// runExportCmd runs `swarmcrawl export` with args (and env) and returns
// its exit code, stdout and stderr.
func runExportCmd(t *testing.T, bin string, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"export"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("export: %v", err)
	}
	return code, stdout.String(), stderr.String()
}

// TestSwarmExport: 5 nodes of a private swarm crawl a synthetic web; a
// client that is not a member, holding the key, exports the whole crawl
// through one member. The export holds every ground-truth page exactly
// once in its pages list and a response for each in its index; the merged
// index agrees record for record with npm warcio's cdx-index over the
// same files; an export stopped mid-file (as if killed) and run again
// ends identical to one run in one go; the WACZ package holds the files
// byte for byte and a manifest whose hashes are right.
func TestSwarmExport(t *testing.T) {
	bin := binary(t)
	keyFile := filepath.Join(t.TempDir(), "swarm.key")
	if out, err := exec.Command(bin, "swarm-key", "--out", keyFile).CombinedOutput(); err != nil {
		t.Fatalf("swarm-key: %v\n%s", err, out)
	}
	cfg := synthweb.DefaultConfig()
	cfg.Seed = 11
	cfg.Hosts = 16
	web, err := synthweb.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	env := []string{"HTTP_PROXY=" + web.URL(), "http_proxy=" + web.URL(), "NO_PROXY=", "no_proxy="}
	common := []string{"--delay", "50ms", "--max-depth", "100", "--discovery=false", "--swarm-key", keyFile}
	first := startNode(t, bin, env, common...)
	nodes := []*proc{first}
	for range 4 {
		nodes = append(nodes, startNode(t, bin, env, append(slices.Clone(common), "--bootstrap", first.addrs[0])...))
	}
	waitRing(t, bin, nodes, 45*time.Second)
	if out, err := exec.Command(bin, append([]string{"seed", "--swarm-key", keyFile, "--peer", nodes[2].addrs[0]}, web.Seeds()...)...).CombinedOutput(); err != nil {
		t.Fatalf("seed: %v\n%s", err, out)
	}
	truth := web.GroundTruth(token)
	deadline := time.Now().Add(3 * time.Minute)
	for len(web.Missing(token)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("crawl incomplete: %d of %d pages missing", len(web.Missing(token)), len(truth))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// A page is archived just after it is served.
	time.Sleep(2 * time.Second)
	holders := 0
	for _, n := range nodes {
		if files, _ := warc.Files(filepath.Join(n.data, "warc"), true); len(files) > 0 {
			holders++
		}
	}

	// An export stopped part way through a file, as if killed, then run
	// again.
	resumed := t.TempDir()
	args := []string{"--swarm", "--peer", nodes[3].addrs[0], "--swarm-key", keyFile, "--chunk", "4096", "--out", resumed}
	code, _, stderr := runExportCmd(t, bin, []string{exportStopEnv + "=20000"}, args...)
	if code != 75 {
		t.Fatalf("export with the stop hook: exit %d, want 75 (stopped)\n%s", code, tail(stderr, 2000))
	}
	parts, _ := filepath.Glob(filepath.Join(resumed, exportArchiveDir, "*"+partSuffix))
	if len(parts) == 0 {
		t.Fatalf("the stopped export left no partial file to resume")
	}
	partSizes := map[string]int64{}
	for _, p := range parts {
		fi, _ := os.Stat(p)
		partSizes[strings.TrimSuffix(filepath.Base(p), partSuffix)] = fi.Size()
	}
	var kept int64 // what the stopped export left on disk
	left, _ := filepath.Glob(filepath.Join(resumed, exportArchiveDir, "*"))
	for _, p := range left {
		fi, _ := os.Stat(p)
		kept += fi.Size()
	}
	// A byte of a partial file damaged (a disk's, or a hostile member's):
	// the digest finds it and the file is fetched again whole.
	// The partial file with the most bytes (the stop may leave an empty
	// one beside it, which holds nothing to damage).
	part := parts[0]
	for _, p := range parts {
		if partSizes[strings.TrimSuffix(filepath.Base(p), partSuffix)] > partSizes[strings.TrimSuffix(filepath.Base(part), partSuffix)] {
			part = p
		}
	}
	damaged := strings.TrimSuffix(filepath.Base(part), partSuffix)
	if partSizes[damaged] == 0 {
		t.Fatalf("the stopped export left only empty partial files: nothing to damage")
	}
	{
		f, err := os.OpenFile(part, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte{'#'}, partSizes[damaged]/2); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	code, stdout, stderr := runExportCmd(t, bin, nil, args...)
	if code != 0 {
		t.Fatalf("resumed export: exit %d\n%s%s", code, stdout, tail(stderr, 3000))
	}
	t.Logf("resumed export: %s", strings.TrimSpace(stdout))
	var nFiles, total, fetchedNow int64
	if _, err := fmt.Sscanf(stdout, "exported %d WARC files (%d bytes, %d fetched now)", &nFiles, &total, &fetchedNow); err != nil {
		t.Fatalf("resumed export's output %q: %v", stdout, err)
	}
	// The rerun fetched what was missing, and then the damaged file
	// again, whole: the damage shows only in the digest of the whole.
	damagedSize := int64(len(mustReadFile(t, filepath.Join(resumed, exportArchiveDir, damaged))))
	if want := total - kept + damagedSize; fetchedNow != want {
		t.Errorf("the rerun fetched %d bytes; %d of %d were on disk, the damaged file has %d: want %d", fetchedNow, kept, total, damagedSize, want)
	}

	// The same in one go, as a folder.
	whole := t.TempDir()
	code, stdout, stderr = runExportCmd(t, bin, nil, "--swarm", "--peer", nodes[0].addrs[0], "--swarm-key", keyFile, "--format", "folder", "--out", whole)
	if code != 0 {
		t.Fatalf("export: exit %d\n%s%s", code, stdout, tail(stderr, 3000))
	}
	if !strings.Contains(stdout, "from 5 members") {
		t.Errorf("export output %q: want it from 5 members", stdout)
	}

	// Identical: the same WARC files byte for byte, the same index, the
	// same pages.
	files := warcFilesIn(t, whole)
	if got := warcFilesIn(t, resumed); !slices.Equal(got, files) {
		t.Fatalf("resumed export has files %v, the other %v", got, files)
	}
	if len(files) < holders {
		t.Errorf("%d WARC files exported, %d nodes hold some", len(files), holders)
	}
	partway := 0
	for _, name := range files {
		a := mustReadFile(t, filepath.Join(resumed, exportArchiveDir, name))
		b := mustReadFile(t, filepath.Join(whole, exportArchiveDir, name))
		if !bytes.Equal(a, b) {
			t.Errorf("%s: %d bytes after the resumed export, %d in one go", name, len(a), len(b))
		}
		if n, ok := partSizes[name]; ok && n < int64(len(b)) {
			partway++
		}
	}
	if partway == 0 {
		t.Errorf("the stopped export left no file part way (%v): nothing was resumed by range", partSizes)
	}
	index := mustReadFile(t, filepath.Join(whole, exportIndexFile))
	if got := mustReadFile(t, filepath.Join(resumed, exportIndexFile)); !bytes.Equal(got, index) {
		t.Errorf("the resumed export's index differs from the one-go export's")
	}
	pages := mustReadFile(t, filepath.Join(whole, exportPagesFile))
	wacz := readWACZ(t, filepath.Join(resumed, exportWACZFile))
	if !bytes.Equal(wacz["pages/pages.jsonl"], pages) {
		t.Errorf("the WACZ's pages list differs from the folder's")
	}

	// Every ground-truth page exactly once in the pages list (the HTML
	// pages: the PDFs, images and broken links are no pages) and a
	// response for each in the index.
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(pages))
	sc.Buffer(nil, 16<<20)
	sc.Scan() // the header
	for sc.Scan() {
		var p struct{ URL string }
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		seen[p.URL]++
	}
	responses := map[string]bool{}
	entries := parseIndex(t, index)
	for _, e := range entries {
		if e.Status != "" {
			responses[e.URL] = true
		}
	}
	htmlPages := 0
	for _, u := range truth {
		if !responses[u] {
			t.Errorf("the index has no response for %s", u)
		}
		if strings.HasSuffix(u, ".pdf") || strings.HasSuffix(u, ".png") || strings.Contains(u, "/old/") {
			continue
		}
		htmlPages++
		if seen[u] != 1 {
			t.Errorf("%s listed %d times in pages.jsonl, want once", u, seen[u])
		}
	}
	for u, n := range seen {
		if n != 1 {
			t.Errorf("%s listed %d times", u, n)
		}
	}

	// A member whose files cannot be had (its WARC directory is gone for
	// now): the export says it is incomplete, names the member, and exits
	// 3; once the files are back, a rerun completes it.
	var holder *proc
	for _, n := range nodes {
		if fs, _ := warc.Files(filepath.Join(n.data, "warc"), true); len(fs) > 0 {
			holder = n
		}
	}
	hidden := filepath.Join(holder.data, "warc-hidden")
	if err := os.Rename(filepath.Join(holder.data, "warc"), hidden); err != nil {
		t.Fatal(err)
	}
	partial := t.TempDir()
	partialArgs := []string{"--swarm", "--peer", nodes[1].addrs[0], "--swarm-key", keyFile, "--format", "folder", "--out", partial}
	code, _, stderr = runExportCmd(t, bin, nil, partialArgs...)
	if err := os.Rename(hidden, filepath.Join(holder.data, "warc")); err != nil {
		t.Fatal(err)
	}
	holderID := holder.addrs[0][strings.LastIndex(holder.addrs[0], "/")+1:]
	if code != exitIncomplete || !strings.Contains(stderr, "export incomplete: 1 of 5 members") || !strings.Contains(stderr, "member "+holderID) {
		t.Errorf("export with a member's files missing: exit %d, want %d, naming %s\n%s", code, exitIncomplete, holderID, tail(stderr, 2000))
	}
	if code, stdout, stderr = runExportCmd(t, bin, nil, partialArgs...); code != 0 {
		t.Fatalf("rerun of the incomplete export: exit %d\n%s%s", code, stdout, tail(stderr, 2000))
	}
	if !bytes.Equal(mustReadFile(t, filepath.Join(partial, exportIndexFile)), index) {
		t.Errorf("the completed rerun's index differs from the one-go export's")
	}

	// The WACZ: its WARC files are the exported ones, its index the
	// merged one but for the conversion records, its manifest right; and
	// it replays in ReplayWeb.page: a ground-truth page shows its text.
	checkWACZ(t, wacz, filepath.Join(resumed, exportArchiveDir), files, index)
	target, ts, want := replayTarget(t, pages)
	replaytest.Replay(t, filepath.Join(resumed, exportWACZFile), target, ts, want, "swarm-export-replay.png")

	// npm warcio's cdx-index over the same files agrees record for record.
	paths := make([]string, len(files))
	for i, name := range files {
		paths[i] = filepath.Join(whole, exportArchiveDir, name)
	}
	if theirs, ok := warcioIndex(t, paths); ok {
		slices.SortFunc(theirs, func(a, b warc.CDXJEntry) int { return bytes.Compare(a.AppendLine(nil), b.AppendLine(nil)) })
		if len(theirs) != len(entries) {
			t.Errorf("merged index: %d entries, warcio %d", len(entries), len(theirs))
		}
		for i := range min(len(theirs), len(entries)) {
			if theirs[i] != entries[i] {
				t.Errorf("entry %d:\nours   %+v\nwarcio %+v", i, entries[i], theirs[i])
				break
			}
		}
	}
	// The swarm fetches more (a new seed, which answers 404): the files
	// being written grow, and a rerun of the export fetches only what
	// was added to them.
	sizeOf := func() int64 {
		var n int64
		for _, nd := range nodes {
			fs, _ := warc.Files(filepath.Join(nd.data, "warc"), true)
			for _, f := range fs {
				if fi, err := os.Stat(f); err == nil {
					n += fi.Size()
				}
			}
		}
		return n
	}
	before := sizeOf()
	extra := strings.TrimSuffix(web.Seeds()[0], "/") + "/no-such-page-" + strings.Repeat("x", 20)
	if out, err := exec.Command(bin, "seed", "--swarm-key", keyFile, "--peer", nodes[4].addrs[0], extra).CombinedOutput(); err != nil {
		t.Fatalf("seed: %v\n%s", err, out)
	}
	for deadline := time.Now().Add(time.Minute); sizeOf() == before; {
		if time.Now().After(deadline) {
			t.Fatalf("the new seed %s was not archived in a minute", extra)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second) // its last record
	code, stdout, stderr = runExportCmd(t, bin, nil, args...)
	if code != 0 {
		t.Fatalf("export after the swarm fetched more: exit %d\n%s%s", code, stdout, tail(stderr, 3000))
	}
	var total2, fetched2 int64
	if _, err := fmt.Sscanf(stdout, "exported %d WARC files (%d bytes, %d fetched now)", &nFiles, &total2, &fetched2); err != nil {
		t.Fatalf("export output %q: %v", stdout, err)
	}
	if fetched2 != total2-total || fetched2 <= 0 {
		t.Errorf("after the swarm wrote %d more bytes, the rerun fetched %d (exported %d, before %d): want only what was added", sizeOf()-before, fetched2, total2, total)
	}
	if !strings.Contains(string(mustReadFile(t, filepath.Join(resumed, exportIndexFile))), "no-such-page-") {
		t.Errorf("the index lacks the new capture %s", extra)
	}

	t.Logf("5 nodes (%d holding WARC files) crawled %d pages; the export has %d WARC files, %d index entries, %d pages listed (%d ground-truth HTML pages)",
		holders, len(truth), len(files), len(entries), len(seen), htmlPages)
}

// warcFilesIn lists the WARC files of an export directory.
func warcFilesIn(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := warc.Files(filepath.Join(dir, exportArchiveDir), false)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}

func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parseIndex(t *testing.T, data []byte) []warc.CDXJEntry {
	t.Helper()
	var out []warc.CDXJEntry
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		e, err := warc.ParseCDXJLine(line)
		if err != nil {
			t.Fatalf("index line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// readWACZ returns a WACZ package's entries by name.
func readWACZ(t *testing.T, path string) map[string][]byte {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	out := map[string][]byte{}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		out[f.Name] = b
	}
	return out
}

// checkWACZ checks a swarm export's WACZ as the one-node WACZ is checked:
// every WARC file stored byte for byte, an index whose lines are the
// merged index's (the conversion records left out), and a manifest that
// lists every entry with its size and SHA-256, itself hashed in the
// digest file.
func checkWACZ(t *testing.T, entries map[string][]byte, archive string, files []string, merged []byte) {
	t.Helper()
	for _, name := range files {
		if !bytes.Equal(entries["archive/"+name], mustReadFile(t, filepath.Join(archive, name))) {
			t.Errorf("WACZ archive/%s differs from the exported file", name)
		}
	}
	all := map[string]bool{}
	for _, l := range strings.Split(string(merged), "\n") {
		all[l] = true
	}
	lines := strings.Split(strings.TrimSpace(string(entries["indexes/index.cdx"])), "\n")
	for _, l := range lines {
		if !all[l] {
			t.Errorf("WACZ index line not in the merged index: %s", l)
			break
		}
	}
	if len(lines) == 0 || len(lines) >= len(all) {
		t.Errorf("WACZ index has %d lines, the merged one %d: want fewer (no conversion records), not none", len(lines), len(all))
	}
	var manifest struct {
		Resources []struct {
			Path  string
			Hash  string
			Bytes int
		}
	}
	if err := json.Unmarshal(entries["datapackage.json"], &manifest); err != nil {
		t.Fatalf("datapackage.json: %v", err)
	}
	if len(manifest.Resources) != len(files)+2 {
		t.Errorf("manifest lists %d resources, want %d", len(manifest.Resources), len(files)+2)
	}
	for _, r := range manifest.Resources {
		sum := sha256.Sum256(entries[r.Path])
		if r.Hash != "sha256:"+hex.EncodeToString(sum[:]) || r.Bytes != len(entries[r.Path]) {
			t.Errorf("manifest entry %s: %d bytes %s, the entry %d bytes", r.Path, r.Bytes, r.Hash, len(entries[r.Path]))
		}
	}
	sum := sha256.Sum256(entries["datapackage.json"])
	if !strings.Contains(string(entries["datapackage-digest.json"]), "sha256:"+hex.EncodeToString(sum[:])) {
		t.Errorf("datapackage-digest.json does not hold the manifest's hash")
	}
}

// warcioIndex runs npm warcio's cdx-index (CDXJ) over paths, from
// $SWARMCRAWL_NPM_DIR or the repository's .cache/npm, where .ci/run
// installs it. Without node or warcio it reports false (under CI, where
// they must be there, it fails).
func warcioIndex(t *testing.T, paths []string) ([]warc.CDXJEntry, bool) {
	t.Helper()
	node, err := exec.LookPath("node")
	dir := os.Getenv("SWARMCRAWL_NPM_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", ".cache", "npm")
	}
	cli := filepath.Join(dir, "node_modules", "warcio", "dist", "cli.js")
	if _, serr := os.Stat(cli); err != nil || serr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the warcio cross-check needs node and warcio in %s under CI: %v %v", dir, err, serr)
		}
		t.Logf("skipping the warcio cross-check: node or %s missing", cli)
		return nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{cli, "cdx-index", "--format", "cdxj"}, paths...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("warcio cdx-index: %v\n%s", err, stderr.String())
	}
	return parseIndex(t, out), true
}

// replayTarget picks a page of a pages list to replay: its URL, its
// capture time as 14 digits, and a line of its text to look for.
func replayTarget(t *testing.T, pages []byte) (target, ts, want string) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(pages))
	sc.Buffer(nil, 16<<20)
	sc.Scan() // the header
	for sc.Scan() {
		var p struct{ URL, TS, Text string }
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		at, err := time.Parse(time.RFC3339, p.TS)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(p.Text, "\n") {
			if line = strings.TrimSpace(line); len(line) >= 30 {
				return p.URL, at.UTC().Format("20060102150405"), line[:30]
			}
		}
	}
	t.Fatal("no page with text to replay")
	return "", "", ""
}
