package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"
)

// progressLine shows how far long work has come (a large seed file, an
// export) as one line rewritten in place, on a terminal only: piped or
// redirected output stays free of it.
type progressLine struct {
	w     io.Writer
	on    bool
	every time.Duration // at most one update this often; the last one always shows
	last  time.Time
	shown bool
}

// newProgressLine returns a progress line on w, shown when w is a
// terminal.
func newProgressLine(w io.Writer) *progressLine {
	f, ok := w.(*os.File)
	return &progressLine{w: w, on: ok && term.IsTerminal(int(f.Fd())), every: 100 * time.Millisecond}
}

// show replaces the line with the formatted text; final forces it out
// even if the last update was very recent.
func (p *progressLine) show(final bool, format string, args ...any) {
	if !p.on || !final && time.Since(p.last) < p.every {
		return
	}
	p.last = time.Now()
	fmt.Fprintf(p.w, "\r\x1b[K"+format, args...)
	p.shown = true
}

// clear removes the line, leaving the cursor where it started, so that
// the command's last words stand alone.
func (p *progressLine) clear() {
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}
