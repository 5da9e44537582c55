package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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
