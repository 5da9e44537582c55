package sim

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// line is one series of a chart.
type line struct {
	name  string
	color string
	pts   [][2]float64
}

// chart is a plain SVG line chart.
type chart struct {
	title, xLabel, yLabel string
	lines                 []line
	yMin, yMax            float64 // yMax 0: from the data
}

const (
	svgW, svgH                 = 720, 360
	padL, padR, padT, padB     = 64, 24, 36, 48
	plotW, plotH               = svgW - padL - padR, svgH - padT - padB
	gridLinesX, gridLinesY int = 6, 5
)

// write renders the chart.
func (c chart) write(w io.Writer) error {
	xMax, yMax := 0.0, c.yMax
	for _, l := range c.lines {
		for _, p := range l.pts {
			xMax = math.Max(xMax, p[0])
			if c.yMax == 0 {
				yMax = math.Max(yMax, p[1])
			}
		}
	}
	if xMax == 0 {
		xMax = 1
	}
	if yMax <= c.yMin {
		yMax = c.yMin + 1
	}
	x := func(v float64) float64 { return padL + v/xMax*plotW }
	y := func(v float64) float64 { return padT + plotH - (v-c.yMin)/(yMax-c.yMin)*plotH }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgW, svgH, svgW, svgH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgW, svgH)
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", padL, esc(c.title))
	for i := 0; i <= gridLinesY; i++ {
		v := c.yMin + (yMax-c.yMin)*float64(i)/float64(gridLinesY)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", padL, y(v), padL+plotW, y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", padL-6, y(v)+4, tick(v))
	}
	for i := 0; i <= gridLinesX; i++ {
		v := xMax * float64(i) / float64(gridLinesX)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>`+"\n", x(v), padT, x(v), padT+plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(v), padT+plotH+16, tick(v))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", padL+plotW/2, svgH-8, esc(c.xLabel))
	fmt.Fprintf(&b, `<text x="14" y="%d" text-anchor="middle" transform="rotate(-90 14 %d)">%s</text>`+"\n", padT+plotH/2, padT+plotH/2, esc(c.yLabel))
	for i, l := range c.lines {
		var pts []string
		for _, p := range l.pts {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p[0]), y(math.Min(math.Max(p[1], c.yMin), yMax))))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", l.color, strings.Join(pts, " "))
		lx := padL + plotW - 170
		ly := padT + 14 + 16*i
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/><text x="%d" y="%d">%s</text>`+"\n",
			lx, ly-4, lx+18, ly-4, l.color, lx+24, ly, esc(l.name))
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func tick(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e7 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2g", v)
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// WriteHopsSVG plots mean and p99 lookup hops per sample interval over
// simulated time, with the ½·log₂N+1 bound.
func (r *Report) WriteHopsSVG(w io.Writer) error {
	mean := line{name: "mean hops", color: "#1f77b4"}
	p99 := line{name: "p99 hops", color: "#d62728"}
	bound := line{name: "½·log₂N + 1", color: "#999"}
	for _, s := range r.Series {
		if s.Lookups == 0 {
			continue
		}
		mean.pts = append(mean.pts, [2]float64{s.T, s.MeanHops})
		p99.pts = append(p99.pts, [2]float64{s.T, float64(s.P99Hops)})
		n := float64(s.Nodes * r.Config.VNodes)
		bound.pts = append(bound.pts, [2]float64{s.T, 0.5*math.Log2(math.Max(n, 1)) + 1})
	}
	return chart{
		title:  fmt.Sprintf("Lookup hops, %d nodes × %d vnodes, churn %.1f%%/min", r.Config.Nodes, r.Config.VNodes, 100*r.Config.Churn),
		xLabel: "simulated time (s)", yLabel: "hops",
		lines: []line{mean, p99, bound},
	}.write(w)
}

// WriteCoverageSVG plots crawl coverage of the reachable pages over
// simulated time.
func (r *Report) WriteCoverageSVG(w io.Writer) error {
	cov := line{name: "coverage (%)", color: "#2ca02c"}
	for _, s := range r.Series {
		if s.Phase == "build" {
			continue
		}
		cov.pts = append(cov.pts, [2]float64{s.T, 100 * s.Coverage})
	}
	return chart{
		title:  fmt.Sprintf("Crawl coverage, %d nodes, %d pages, churn %.1f%%/min", r.Config.Nodes, r.Config.Pages, 100*r.Config.Churn),
		xLabel: "simulated time (s)", yLabel: "% of reachable pages fetched",
		lines: []line{cov}, yMax: 100,
	}.write(w)
}

// WritePlots writes hops.svg and, for a run with a crawl, coverage.svg
// into dir.
func (r *Report) WritePlots(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("sim: plots: %w", err)
	}
	write := func(name string, f func(io.Writer) error) error {
		var b strings.Builder
		if err := f(&b); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
			return fmt.Errorf("sim: plots: %w", err)
		}
		return nil
	}
	if err := write("hops.svg", r.WriteHopsSVG); err != nil {
		return err
	}
	if r.Crawl != nil {
		return write("coverage.svg", r.WriteCoverageSVG)
	}
	return nil
}
