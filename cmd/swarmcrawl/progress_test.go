package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/node"
)

// TestProgressLine checks that progress shows only on a terminal: a pipe
// or a file gets none of it, and on a terminal each update rewrites the
// line, the last one always shows, and clear leaves nothing behind.
func TestProgressLine(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := newProgressLine(f)
	p.show(true, "seeding: %d", 1)
	p.clear()
	if st, _ := f.Stat(); st.Size() != 0 {
		t.Fatalf("progress written to a file: %d bytes", st.Size())
	}

	var b bytes.Buffer
	p = &progressLine{w: &b, on: true, every: 1 << 62} // a terminal, updates rare
	p.show(false, "step %d", 1)
	p.show(false, "step %d", 2) // too soon: dropped
	p.show(true, "step %d", 3)  // the last: always shown
	p.clear()
	got := b.String()
	if strings.Contains(got, "step 2") || !strings.Contains(got, "\r\x1b[Kstep 1") || !strings.Contains(got, "\r\x1b[Kstep 3") || !strings.HasSuffix(got, "\r\x1b[K") {
		t.Fatalf("progress output %q", got)
	}
}

// TestStatusWatch checks status --watch: the status is printed again every
// interval, and a node that stops answering is a line, not the end.
func TestStatusWatch(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 2 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"peer_id":"12D3KooWtest","crawl":{"fetched":7}}`)
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 450*time.Millisecond)
	defer cancel()
	var out bytes.Buffer
	watchStatus(ctx, strings.TrimPrefix(srv.URL, "http://"), true, 100*time.Millisecond, &out)
	got := out.String()
	if n := strings.Count(got, `"fetched":7`); n < 3 || !strings.Contains(got, "503") {
		t.Fatalf("watch printed the status %d times (want at least 3 in 450ms at 100ms) and the failure %v:\n%s", n, strings.Contains(got, "503"), got)
	}
}

// TestRequeueAllInBatches checks dlq --requeue-all against a node holding
// more dead letters than one request moves: they are moved a batch at a
// time, all of them, with the progress line showing how far it is.
func TestRequeueAllInBatches(t *testing.T) {
	var mu sync.Mutex
	letters := map[string]bool{}
	for i := range 2500 {
		letters[fmt.Sprintf("http://a.test/%d", i)] = true
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/dlq":
			limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
			out := node.DeadLetters{Total: int64(len(letters)), Items: []node.DeadLetterInfo{}}
			for u := range letters {
				if len(out.Items) >= limit {
					break
				}
				out.Items = append(out.Items, node.DeadLetterInfo{URL: u})
			}
			json.NewEncoder(w).Encode(out)
		case r.Method == http.MethodPost && r.URL.Path == "/dlq/requeue":
			var req node.RequeueRequest
			json.NewDecoder(r.Body).Decode(&req)
			n := 0
			for _, u := range req.URLs {
				if letters[u] {
					delete(letters, u)
					n++
				}
			}
			json.NewEncoder(w).Encode(node.RequeueResult{Requeued: n})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	var b bytes.Buffer
	p := &progressLine{w: &b, on: true}
	n, err := requeueAllDeadLetters(strings.TrimPrefix(srv.URL, "http://"), "token", p)
	if err != nil || n != 2500 || len(letters) != 0 {
		t.Fatalf("requeued %d (err %v), %d left; want all 2500", n, err, len(letters))
	}
	if !strings.Contains(b.String(), "requeueing: 1000 of 2500") || !strings.Contains(b.String(), "2500 of 2500") {
		t.Fatalf("progress %q", b.String())
	}
}
