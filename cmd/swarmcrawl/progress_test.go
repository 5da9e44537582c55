package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
