package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/store/warc"
)

// Files of a swarm export's directory.
const (
	// exportStateFile records what the export has fetched, so that a
	// rerun resumes.
	exportStateFile = "export-state.json"
	// exportArchiveDir holds the WARC files fetched, each named after its
	// member (the tail of its peer ID) and its name there; a file still
	// arriving ends in .part.
	exportArchiveDir = "archive"
	exportIndexFile  = "index.cdxj"
	exportPagesFile  = "pages.jsonl"
	exportWACZFile   = "swarm.wacz"
	partSuffix       = ".part"
)

// errIncomplete marks a swarm export that lacks some member's files; the
// command then exits with exitIncomplete, and a rerun resumes.
var errIncomplete = errors.New("export incomplete")

// exitIncomplete is the exit code of an incomplete swarm export.
const exitIncomplete = 3

// maxRingWalk bounds the machines a swarm export's ring walk reaches,
// and walkCallsPerMachine times it the calls the walk makes: about one
// per machine and one per successor list of positions passed over.
const (
	maxRingWalk         = 10000
	walkCallsPerMachine = 4
)

// exportStopEnv names a test hook: with it set to N, the export process
// exits at once (code 75, as if killed, nothing cleaned up) once it has
// fetched N bytes, to show that a rerun resumes.
const exportStopEnv = "SWARMCRAWL_TEST_EXPORT_STOP_AFTER"

// runSwarmExport is `swarmcrawl export --peer MULTIADDR --swarm --out DIR`:
// it collects the crawl from every member of the swarm.
func runSwarmExport(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("export", stderr)
	fs.Bool("swarm", true, "export the whole swarm's crawl (this form)")
	peerAddr := fs.String("peer", "", "full multiaddr (/ip4/.../tcp/.../p2p/<id>) of any swarm member (required)")
	out := fs.String("out", "", "directory to export to; a rerun with the same directory resumes (required)")
	format := fs.String("format", "wacz", "wacz (a WACZ package, "+exportWACZFile+") or folder (the WARC files, "+exportIndexFile+" and "+exportPagesFile+")")
	swarmKey := fs.String("swarm-key", "", "pre-shared key file of a private swarm")
	identity := fs.String("identity", "", "key file giving the client a stable peer ID (created, mode 0600, if missing)")
	chunk := fs.Int("chunk", protocol.MaxArchiveChunk, "bytes asked of a member in one call (4096 to "+strconv.Itoa(protocol.MaxArchiveChunk)+")")
	parallel := fs.Int("parallel", 4, "members fetched from at once (one stream each)")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up on a member after it answered nothing for this long")
	noText := fs.Bool("no-text", false, "leave the pages' text out of the pages list")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *peerAddr == "" {
		return usageErr("--peer is required")
	}
	if *out == "" {
		return usageErr("--out DIR is required with --swarm")
	}
	if *format != "wacz" && *format != "folder" {
		return usageErr("--format %q: want wacz or folder with --swarm", *format)
	}
	if *chunk < 4096 || *chunk > protocol.MaxArchiveChunk {
		return usageErr("--chunk %d: want 4096 to %d", *chunk, protocol.MaxArchiveChunk)
	}
	if *parallel < 1 || *parallel > 64 {
		return usageErr("--parallel %d: want 1 to 64", *parallel)
	}
	infos, err := p2p.ParseAddrInfos([]string{*peerAddr})
	if err != nil || len(infos) != 1 {
		return usageErr("--peer: need one full multiaddr ending in /p2p/<id>: %v", err)
	}
	var psk []byte
	if *swarmKey != "" {
		if psk, err = p2p.LoadSwarmKey(*swarmKey); err != nil {
			return usageErr("--swarm-key: %v", err)
		}
	}
	var key crypto.PrivKey
	if *identity != "" {
		if key, err = p2p.LoadOrCreateKey(*identity); err != nil {
			return usageErr("--identity: %v", err)
		}
	}
	var stopAfter int64
	if v := os.Getenv(exportStopEnv); v != "" {
		stopAfter, _ = strconv.ParseInt(v, 10, 64)
	}
	if err := os.MkdirAll(filepath.Join(*out, exportArchiveDir), 0o755); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	unlock, err := lockExportDir(*out)
	if err != nil {
		return err
	}
	defer unlock()
	state, err := loadExportState(*out)
	if err != nil {
		return err
	}

	h, err := p2p.NewClientHost(key, psk)
	if err != nil {
		return err
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	err = h.Connect(ctx, infos[0])
	cancel()
	if err != nil {
		if *swarmKey == "" {
			return fmt.Errorf("export: %w: %s: %w (if the swarm is private, give its key with --swarm-key)", p2p.ErrNoConnection, *peerAddr, err)
		}
		return fmt.Errorf("export: %w: %s: %w", p2p.ErrNoConnection, *peerAddr, err)
	}
	streams := p2p.NewStreams(h, 0, p2p.NoRingWork)
	positions, down, err := walkRing(context.Background(), p2p.NewRingTransport(h, streams), p2p.RingPeer(infos[0].ID), *timeout, maxRingWalk)
	if err != nil {
		return fmt.Errorf("export: enumerate the members through %s: %w", p2p.ShortID(infos[0].ID), err)
	}
	members, unreachable := machinesOf(positions, down)
	fmt.Fprintf(stderr, "export: %d members found by walking the ring\n", len(members)+len(unreachable))

	ex := &swarmExport{
		dir: *out, streams: streams, state: state, chunk: *chunk, timeout: *timeout,
		stopAfter: stopAfter, progress: newProgressLine(stderr), stderr: stderr, retryWait: time.Second,
	}
	failures := map[string]string{}
	for _, m := range unreachable {
		failures[m.Addr] = "did not answer the ring walk"
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, *parallel)
	stopTicker := ex.startPlainProgress()
	for _, m := range members {
		id, err := peer.Decode(m.Addr)
		if err != nil {
			continue // ring peers are decoded from peer IDs: cannot happen
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := ex.member(id); err != nil {
				mu.Lock()
				failures[m.Addr] = err.Error()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	stopTicker()
	ex.progress.clear()

	st, err := writeExportOutputs(*out, *format, ex.state.completePaths(*out), *noText)
	if err != nil {
		return err
	}
	where := filepath.Join(*out, exportWACZFile)
	if *format == "folder" {
		where = *out
	}
	fmt.Fprintf(stdout, "exported %d WARC files (%d bytes, %d fetched now) from %d members, %d index entries and %d pages: %s\n",
		st.files, st.bytes, ex.fetched.Load(), len(members)-len(failures)+len(unreachable), st.entries, st.pages, where)
	if len(failures) > 0 {
		ids := make([]string, 0, len(failures))
		for id := range failures {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			fmt.Fprintf(stderr, "member %s: %s\n", id, oneLine(failures[id]))
		}
		return fmt.Errorf("%w: %d of %d members not exported (run the same command again to resume)", errIncomplete, len(failures), len(members)+len(unreachable))
	}
	return nil
}

// walkRing enumerates the swarm's members from entry, successor by
// successor over the ring protocol, until the walk is back at entry or
// has reached max machines (or made walkCallsPerMachine times as many
// calls). A successor that does not answer is passed over for the next
// one in its predecessor's list and returned in unreachable. Each call is
// bounded by timeout.
//
// With several positions per node (--vnodes) the walk asks only the
// positions it needs: the first successor of a machine not asked yet,
// or, when every successor in the list belongs to machines asked
// already, the farthest, to go on past them. A machine whose position
// did not answer is not asked again through its other positions. Asking
// every position took V calls per machine, and the bound of 10,000
// positions stopped at 625 machines of 16 positions.
func walkRing(ctx context.Context, rt neighbourAsker, entry ring.Peer, timeout time.Duration, max int) (members, unreachable []ring.Peer, err error) {
	visited := map[ring.Peer]bool{}
	failed := map[ring.Peer]bool{}
	up := map[string]bool{}    // machines with a position that answered
	tried := map[string]bool{} // machines with a position asked
	var cands []ring.Peer      // the successors of the last member that answered
	for cur, calls := entry, 0; len(up) < max && calls < walkCallsPerMachine*max; calls++ {
		tried[cur.Machine()] = true
		cctx, cancel := context.WithTimeout(ctx, timeout)
		nb, err := rt.Neighbours(cctx, cur)
		cancel()
		switch {
		case err != nil && cur == entry:
			return nil, nil, err
		case err != nil:
			failed[cur] = true
			unreachable = append(unreachable, cur)
		default:
			visited[cur] = true
			up[cur.Machine()] = true
			members = append(members, cur)
			cands = nb.Successors
		}
		// The farthest successor to go on from is best one of a machine
		// that answered; one of a machine that did not, only if there is
		// no other.
		next, farthest, farthestDown := ring.Peer{}, ring.Peer{}, ring.Peer{}
		for _, s := range cands {
			if s == entry || visited[s] {
				break // round the ring
			}
			if failed[s] {
				continue
			}
			switch m := s.Machine(); {
			case !tried[m]:
				next = s
			case up[m]:
				farthest = s
			default:
				farthestDown = s
			}
			if !next.IsZero() {
				break
			}
		}
		if next.IsZero() {
			next = farthest
		}
		if next.IsZero() {
			next = farthestDown
		}
		if next.IsZero() {
			break
		}
		cur = next
	}
	return members, unreachable, nil
}

// machinesOf turns the ring positions a walk found into the machines
// holding them, in walk order: a node with --vnodes V shows up V times
// in the walk (its positions "ID/i"), and is one member to export. A
// machine is unreachable only when none of its positions answered. Each
// machine comes back as its position 0, whose Addr is the peer ID.
func machinesOf(reached, down []ring.Peer) (members, unreachable []ring.Peer) {
	machine := func(p ring.Peer) ring.Peer {
		if id, err := peer.Decode(p.Machine()); err == nil {
			return p2p.RingPeer(id)
		}
		return ring.Peer{ID: p.ID, Addr: p.Machine()}
	}
	up := map[string]bool{}
	for _, p := range reached {
		if m := p.Machine(); !up[m] {
			up[m] = true
			members = append(members, machine(p))
		}
	}
	gone := map[string]bool{}
	for _, p := range down {
		if m := p.Machine(); !up[m] && !gone[m] {
			gone[m] = true
			unreachable = append(unreachable, machine(p))
		}
	}
	return members, unreachable
}

// neighbourAsker asks a ring member for its neighbours
// (p2p.RingTransport).
type neighbourAsker interface {
	Neighbours(ctx context.Context, to ring.Peer) (ring.Neighbours, error)
}

// swarmExport fetches the members' WARC files into dir.
type swarmExport struct {
	dir       string
	streams   *p2p.Streams
	state     *exportState
	chunk     int
	timeout   time.Duration
	stopAfter int64
	stderr    io.Writer
	// retryWait is the wait before the first retry of a failed call;
	// each further retry waits twice as long.
	retryWait time.Duration

	progressMu sync.Mutex // the member goroutines share the line
	progress   *progressLine

	fetched       atomic.Int64 // bytes fetched this run
	filesDone     atomic.Int64
	filesListed   atomic.Int64
	bytesListed   atomic.Int64
	bytesPresent  atomic.Int64 // of the listed, already on disk
	membersListed atomic.Int64
}

// show updates the progress line on a terminal.
func (ex *swarmExport) show() {
	total, have := ex.bytesListed.Load(), ex.bytesPresent.Load()+ex.fetched.Load()
	pct := 100.0
	if total > 0 {
		pct = 100 * float64(have) / float64(total)
	}
	ex.progressMu.Lock()
	defer ex.progressMu.Unlock()
	ex.progress.show(false, "exporting: %.1f of %.1f MiB (%.0f%%), %d of %d files, %d members listed",
		float64(have)/(1<<20), float64(total)/(1<<20), pct, ex.filesDone.Load(), ex.filesListed.Load(), ex.membersListed.Load())
}

// startPlainProgress prints a progress line every 10s when stderr is not
// a terminal (the terminal has its line rewritten in place), and returns
// its stop.
func (ex *swarmExport) startPlainProgress() (stop func()) {
	if ex.progress.on {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				fmt.Fprintf(ex.stderr, "export: %d of %d files, %d bytes fetched, %d members listed\n",
					ex.filesDone.Load(), ex.filesListed.Load(), ex.fetched.Load(), ex.membersListed.Load())
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// localName is the name a member's file gets in the export: the tail of
// the member's peer ID, then the file's own name (two members' files may
// be named alike).
func localName(id peer.ID, name string) string {
	s := id.String()
	return s[max(0, len(s)-12):] + "-" + name
}

// member fetches every file member id offers.
func (ex *swarmExport) member(id peer.ID) error {
	files, more, err := ex.list(id)
	if err != nil {
		return err
	}
	ex.membersListed.Add(1)
	for _, f := range files {
		ex.filesListed.Add(1)
		ex.bytesListed.Add(f.Size)
	}
	var errs []error
	for _, f := range files {
		if err := ex.file(id, f); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.Name, err))
		}
		ex.show()
	}
	if more {
		errs = append(errs, fmt.Errorf("it holds more than %d WARC files; the rest were not offered", protocol.MaxArchiveFiles))
	}
	if !ex.progress.on {
		fmt.Fprintf(ex.stderr, "export: member %s: %d files listed, %d failed\n", p2p.ShortID(id), len(files), len(errs))
	}
	return errors.Join(errs...)
}

// list asks member id for its files, again while it answers that it is
// still computing their digests, within the export's timeout.
func (ex *swarmExport) list(id peer.ID) ([]p2p.ArchiveFile, bool, error) {
	deadline := time.Now().Add(ex.timeout)
	for {
		files, more, err := p2p.ListArchive(context.Background(), ex.streams, id)
		if err == nil || !strings.Contains(err.Error(), "ask again") || time.Now().After(deadline) {
			return files, more, err
		}
		time.Sleep(time.Second)
	}
}

// file brings the member's file f into the export: skipped when the copy
// on disk has its size and digest, resumed from the bytes a partial copy
// holds, and checked against the digest before it counts as exported.
func (ex *swarmExport) file(id peer.ID, f p2p.ArchiveFile) error {
	local := localName(id, f.Name)
	final := filepath.Join(ex.dir, exportArchiveDir, local)
	part := final + partSuffix
	want := hex.EncodeToString(f.SHA256[:])
	if sf := ex.state.get(local); sf != nil && sf.Complete && sf.Size == f.Size && sf.SHA256 == want {
		if sum, n, err := fileDigest(final); err == nil && n == f.Size && sum == want {
			ex.bytesPresent.Add(f.Size)
			ex.filesDone.Add(1)
			return nil
		}
	}
	// A copy of an earlier, shorter listing of the file (it was being
	// written then) is the start of this one: resume from its end.
	if _, err := os.Stat(final); err == nil {
		if err := os.Rename(final, part); err != nil {
			return err
		}
	}
	ex.state.set(local, &exportFile{Peer: id.String(), Name: f.Name, Size: f.Size, SHA256: want})
	for attempt := 0; ; attempt++ {
		if err := ex.fetchPart(id, f, part); err != nil {
			return err
		}
		sum, n, err := fileDigest(part)
		if err != nil {
			return err
		}
		if n == f.Size && sum == want {
			break
		}
		if attempt == 1 {
			return fmt.Errorf("%d bytes fetched with SHA-256 %s, the member listed %d bytes with %s", n, sum, f.Size, want)
		}
		// The bytes kept from before do not fit: fetch it all again.
		if err := os.Truncate(part, 0); err != nil {
			return err
		}
	}
	if err := os.Rename(part, final); err != nil {
		return err
	}
	ex.state.set(local, &exportFile{Peer: id.String(), Name: f.Name, Size: f.Size, SHA256: want, Complete: true})
	ex.filesDone.Add(1)
	return ex.state.save(ex.dir)
}

// fetchPart appends to part the bytes of f it lacks, a chunk a call.
func (ex *swarmExport) fetchPart(id peer.ID, f p2p.ArchiveFile, part string) error {
	out, err := os.OpenFile(part, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	have, err := out.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if have > f.Size {
		if err := out.Truncate(0); err != nil {
			return err
		}
		if have, err = out.Seek(0, io.SeekStart); err != nil {
			return err
		}
	}
	ex.bytesPresent.Add(have)
	quiet := time.Now() // when the member last sent anything
	failed := 0         // calls failed in a row
	for have < f.Size {
		n := int(min(int64(ex.chunk), f.Size-have))
		data, err := p2p.FetchArchiveRange(context.Background(), ex.streams, id, f.Name, have, n)
		if err != nil {
			// A busy member is asked again soon; any other failure (a
			// reset stream, a member restarting) up to 3 times, after
			// 1, 2 and 4 s; then the member is reported and a rerun
			// resumes from here.
			if time.Since(quiet) < ex.timeout && strings.Contains(err.Error(), "ask again") {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			if failed < 3 && time.Since(quiet) < ex.timeout {
				time.Sleep(ex.retryWait << failed)
				failed++
				continue
			}
			return err
		}
		failed = 0
		if len(data) == 0 {
			return fmt.Errorf("the member sent nothing at offset %d of %d", have, f.Size)
		}
		if _, err := out.Write(data); err != nil {
			return err
		}
		have += int64(len(data))
		quiet = time.Now()
		if total := ex.fetched.Add(int64(len(data))); ex.stopAfter > 0 && total >= ex.stopAfter {
			out.Sync()
			os.Exit(75) // the test hook: stop as if killed
		}
		ex.show()
	}
	return out.Sync()
}

// fileDigest returns the hex SHA-256 and the size of the file at path.
func fileDigest(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// exportState is what a swarm export has fetched: each WARC file by its
// local name, with its member, its name there, its size and digest, and
// whether the copy is complete. It is saved after every complete file.
type exportState struct {
	mu     sync.Mutex             // guards Files
	saveMu sync.Mutex             // one save at a time: they share the temporary file
	Files  map[string]*exportFile `json:"files"`
}

// exportFile is one WARC file of an export's state.
type exportFile struct {
	Peer     string `json:"peer"`
	Name     string `json:"name"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
	Complete bool   `json:"complete"`
}

// loadExportState reads dir's state file; a missing one is an empty
// state, a damaged one an error (the files on disk are checked against
// the members' digests either way, so deleting it only costs a reread).
func loadExportState(dir string) (*exportState, error) {
	st := &exportState{Files: map[string]*exportFile{}}
	data, err := os.ReadFile(filepath.Join(dir, exportStateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("export: state: %w", err)
	}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("export: state file %s is damaged (delete it to start over; fetched files are kept and checked): %w", filepath.Join(dir, exportStateFile), err)
	}
	if st.Files == nil {
		st.Files = map[string]*exportFile{}
	}
	for name := range st.Files {
		if !p2p.ValidArchiveName(name) {
			return nil, fmt.Errorf("export: state file names a bad file %q", name)
		}
	}
	return st, nil
}

func (s *exportState) get(name string) *exportFile {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Files[name]
}

func (s *exportState) set(name string, f *exportFile) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Files[name] = f
}

// save writes the state to dir, atomically.
func (s *exportState) save(dir string) error {
	s.saveMu.Lock()
	defer s.saveMu.Unlock()
	s.mu.Lock()
	data, err := json.MarshalIndent(s, "", " ")
	s.mu.Unlock()
	if err != nil {
		return err
	}
	err = warc.WriteAtomic(filepath.Join(dir, exportStateFile), func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		return fmt.Errorf("export: state: %w", err)
	}
	return nil
}

// completePaths returns the paths of the complete files, sorted by name.
func (s *exportState) completePaths(dir string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for name, f := range s.Files {
		if f.Complete {
			out = append(out, filepath.Join(dir, exportArchiveDir, name))
		}
	}
	slices.Sort(out)
	return out
}

// exportOutputs counts what writeExportOutputs wrote.
type exportOutputs struct {
	files   int
	bytes   int64
	entries int64
	pages   int
}

// writeExportOutputs writes the merged index of the WARC files at paths
// (every record, as warcio's cdx-index indexes them) to index.cdxj, and
// then either the WACZ package (format wacz) or the pages list (folder),
// each page once, its latest capture. Each output is written beside its
// place and renamed into it.
func writeExportOutputs(dir, format string, paths []string, noText bool) (exportOutputs, error) {
	st := exportOutputs{files: len(paths)}
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			st.bytes += fi.Size()
		}
	}
	err := writeAtomic(filepath.Join(dir, exportIndexFile), func(w io.Writer) error {
		s := warc.NewIndexSorter(dir, 0)
		defer s.Close()
		for _, p := range paths {
			if err := s.AddWARC(p); err != nil {
				return err
			}
		}
		var err error
		st.entries, err = s.WriteTo(w)
		return err
	})
	if err != nil {
		return st, err
	}
	info := warc.PackageInfo{Title: "swarmcrawl swarm export", TempDir: dir, NoText: noText, LatestPages: true}
	if format == "wacz" {
		err = writeAtomic(filepath.Join(dir, exportWACZFile), func(w io.Writer) error {
			ps, err := warc.WriteWACZ(w, paths, info)
			st.pages = ps.Pages
			return err
		})
	} else {
		err = writeAtomic(filepath.Join(dir, exportPagesFile), func(w io.Writer) error {
			var err error
			st.pages, err = warc.WritePages(w, paths, info)
			return err
		})
	}
	return st, err
}

// writeAtomic writes path through fill, whole or not at all
// (warc.WriteAtomic).
func writeAtomic(path string, fill func(io.Writer) error) error {
	if err := warc.WriteAtomic(path, fill); err != nil {
		return fmt.Errorf("export: %s: %w", filepath.Base(path), err)
	}
	return nil
}

// isSwarmExport reports whether export's arguments ask for a swarm export.
func isSwarmExport(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		name, val, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "swarm" && (val == "" || val == "true" || val == "1") {
			return true
		}
	}
	return false
}
