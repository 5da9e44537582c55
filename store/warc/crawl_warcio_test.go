package warc_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/frontier"
	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/store"
	"github.com/swarmcrawl/swarmcrawl/store/warc"
)

// archiveSink archives every page the crawler stores, as a node does.
type archiveSink struct{ w *warc.Writer }

func (s archiveSink) StorePage(_ context.Context, p *crawl.Page) error {
	return s.w.WriteExchange(p.WARCExchange())
}

// requeueSink stands in for the ring: new links go back to the crawler.
type requeueSink struct {
	mu   sync.Mutex
	seen map[string]bool
	c    *crawl.Crawler
}

func (s *requeueSink) Discovered(_ context.Context, _ frontier.Task, links []frontier.Task) {
	s.mu.Lock()
	var fresh []frontier.Task
	for _, l := range links {
		if !s.seen[l.URL] {
			s.seen[l.URL] = true
			fresh = append(fresh, l)
		}
	}
	s.mu.Unlock()
	s.c.Enqueue(fresh...)
}

// TestWarcioReadsACrawl is the archive's promise to users: crawl a
// synthetic web into rotating WARC files, and an independent reader
// (npm's warcio) finds every fetched page in them, with its response and
// its extracted text, every digest right.
func TestWarcioReadsACrawl(t *testing.T) {
	node, npmDir := warc.WarcioDirForTest(t)
	web, err := synthweb.Start(synthweb.Config{Seed: 4, Hosts: 12})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "store"), store.Options{BloomExpected: 10000})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, err := warc.NewWriter(filepath.Join(dir, "warc"), warc.Options{MaxFileBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	cc := crawl.DefaultConfig()
	cc.Delay = 0
	cc.Proxy = web.Proxy()
	cc.MaxDepth = 100
	links := &requeueSink{seen: map[string]bool{}}
	c, err := crawl.New(cc, db, archiveSink{w}, links)
	if err != nil {
		t.Fatal(err)
	}
	links.c = c
	links.Discovered(context.Background(), frontier.Task{}, seedTasks(web.Seeds()))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	deadline := time.Now().Add(time.Minute)
	for len(web.Missing("swarmcrawl")) > 0 || !c.Idle() {
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("crawl incomplete: %d pages missing", len(web.Missing("swarmcrawl")))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	paths := warc.FilesForTest(t, filepath.Join(dir, "warc"), false)
	if len(paths) < 2 {
		t.Fatalf("want the crawl to span several files (rotation), got %d", len(paths))
	}
	report := warc.RunWarcioForTest(t, node, npmDir, paths)
	responses := map[string]string{} // target URI -> record ID
	texts := map[string]string{}     // response record ID -> extracted text
	for _, f := range report.Files {
		for _, r := range f.Records {
			if r.BlockDigest != "" && r.BlockDigest != r.ComputedBlockDigest {
				t.Errorf("%s %s: block digest %s, warcio's bytes give %s", r.Type, r.TargetURI, r.BlockDigest, r.ComputedBlockDigest)
			}
			switch r.Type {
			case "response":
				responses[r.TargetURI] = r.ID
			case "conversion":
				texts[r.RefersTo] = r.Text
			}
		}
	}
	truth := web.GroundTruth("swarmcrawl")
	for _, u := range truth {
		id, ok := responses[u]
		if !ok {
			t.Errorf("warcio finds no response record for %s", u)
			continue
		}
		html := !strings.HasSuffix(u, ".pdf") && !strings.HasSuffix(u, ".png") && !strings.Contains(u, "/old/")
		if html && len(texts[id]) < 100 {
			t.Errorf("%s: extracted text missing or short in the archive (%d bytes)", u, len(texts[id]))
		}
	}
	t.Logf("warcio read %d files: %d responses, %d with text, for %d ground-truth pages", len(paths), len(responses), len(texts), len(truth))
}

func seedTasks(urls []string) []frontier.Task {
	out := make([]frontier.Task, len(urls))
	for i, u := range urls {
		out[i] = frontier.Task{URL: u}
	}
	return out
}
