package crawl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// The annotated pages go-trafilatura compares extractors on: its
// scripts/comparison/data.go maps each page's URL to the file holding it
// (under test-files/comparison or test-files/mock) and to snippets that
// are in the page's main content ("with") and that are not ("without").
// The pages are third-party web pages, so they are read from the Go
// module cache and not kept in this repository.
const (
	trafilaturaModule  = "github.com/markusmobius/go-trafilatura"
	trafilaturaVersion = "v1.12.2"
)

// evalPage is one annotated page of the set.
type evalPage struct {
	url, file     string
	body          []byte
	with, without []string
}

// contentType is what a server would send with the page: the files are
// UTF-8 but some declare it only past the first kilobyte, where a
// browser (and the crawler) no longer looks, so the type names the
// charset, as go-trafilatura's comparison, which parses every file as
// UTF-8, assumes.
func (p evalPage) contentType() string {
	if utf8.Valid(p.body) {
		return "text/html; charset=utf-8"
	}
	return "text/html"
}

// evalScore counts the snippets of the set an extractor's text holds or
// leaves out, as go-trafilatura's comparison does: a "with" snippet found
// is a true positive, one missing a false negative; a "without" snippet
// found is a false positive. An empty text misses every snippet.
type evalScore struct{ tp, fn, fp, tn int }

func (s *evalScore) add(p evalPage, text string) {
	for _, w := range p.with {
		if text != "" && strings.Contains(text, w) {
			s.tp++
		} else {
			s.fn++
		}
	}
	for _, w := range p.without {
		if text != "" && strings.Contains(text, w) {
			s.fp++
		} else {
			s.tn++
		}
	}
}

func (s evalScore) precision() float64 { return float64(s.tp) / float64(s.tp+s.fp) }
func (s evalScore) recall() float64    { return float64(s.tp) / float64(s.tp+s.fn) }
func (s evalScore) f1() float64        { return 2 * float64(s.tp) / float64(2*s.tp+s.fp+s.fn) }

func (s evalScore) String() string {
	return fmt.Sprintf("precision %.4f, recall %.4f, F1 %.4f (tp %d, fn %d, fp %d, tn %d)",
		s.precision(), s.recall(), s.f1(), s.tp, s.fn, s.fp, s.tn)
}

// annotatedPages returns go-trafilatura's annotated set, from the module
// cache (downloading the pinned version if need be). Without a Go
// toolchain or module proxy the test is skipped, unless CI is set, when
// it fails.
func annotatedPages(tb testing.TB) []evalPage {
	tb.Helper()
	dir, err := trafilaturaDir(tb)
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("annotated set: %v", err)
		}
		tb.Skipf("annotated set unavailable (no Go toolchain or module proxy?): %v", err)
	}
	pages, err := readAnnotations(filepath.Join(dir, "scripts", "comparison", "data.go"))
	if err != nil {
		tb.Fatalf("annotated set: %v", err)
	}
	for i := range pages {
		p := &pages[i]
		for _, sub := range []string{"comparison", "mock"} {
			if p.body, err = os.ReadFile(filepath.Join(dir, "test-files", sub, p.file)); err == nil {
				break
			}
		}
		if err != nil {
			tb.Fatalf("annotated set: page of %s: %v", p.url, err)
		}
	}
	return pages
}

// trafilaturaDir returns the module cache directory of the pinned
// go-trafilatura. `go mod download` of an explicit module@version runs
// outside this module's graph (in a temporary directory), so go.mod
// does not change.
func trafilaturaDir(tb testing.TB) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", err
	}
	cmd := exec.Command(goBin, "mod", "download", "-json", trafilaturaModule+"@"+trafilaturaVersion)
	cmd.Dir = tb.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GO111MODULE=on")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w: %s", trafilaturaModule, trafilaturaVersion, err, stderr.String())
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", fmt.Errorf("go mod download: %w", err)
	}
	if m.Error != "" || m.Dir == "" {
		return "", fmt.Errorf("go mod download: %q", m.Error)
	}
	return m.Dir, nil
}

// readAnnotations reads the comparisonData map literal of go-trafilatura's
// data.go with the Go parser.
func readAnnotations(path string) ([]evalPage, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var pages []evalPage
	var bad error
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "comparisonData" || len(vs.Values) != 1 {
			return true
		}
		lit, ok := vs.Values[0].(*ast.CompositeLit)
		if !ok {
			bad = fmt.Errorf("comparisonData is not a literal")
			return false
		}
		for _, e := range lit.Elts {
			kv, ok := e.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			var p evalPage
			p.url, _ = stringLit(kv.Key)
			entry, ok := kv.Value.(*ast.CompositeLit)
			if !ok {
				continue
			}
			for _, fe := range entry.Elts {
				field, ok := fe.(*ast.KeyValueExpr)
				if !ok {
					continue
				}
				name, _ := field.Key.(*ast.Ident)
				if name == nil {
					continue
				}
				switch name.Name {
				case "File":
					p.file, _ = stringLit(field.Value)
				case "With":
					p.with = stringsLit(field.Value)
				case "Without":
					p.without = stringsLit(field.Value)
				}
			}
			if p.file != "" {
				pages = append(pages, p)
			}
		}
		return false
	})
	if bad != nil {
		return nil, bad
	}
	if len(pages) == 0 {
		return nil, fmt.Errorf("%s: no comparisonData entries", path)
	}
	return pages, nil
}

func stringLit(e ast.Expr) (string, bool) {
	b, ok := e.(*ast.BasicLit)
	if !ok || b.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(b.Value)
	return s, err == nil
}

func stringsLit(e ast.Expr) []string {
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil
	}
	var out []string
	for _, el := range lit.Elts {
		if s, ok := stringLit(el); ok {
			out = append(out, s)
		}
	}
	return out
}

// TestMainTextAnnotatedSet: on go-trafilatura's 983 annotated pages, the
// main text (what the crawler stores as a page's text record and
// fingerprints) holds the snippets annotated as main content and leaves
// out those annotated as not, with F1 at least 0.90 over the whole set,
// counted as go-trafilatura's comparison counts it. The whole visible
// text is scored too, for the record.
func TestMainTextAnnotatedSet(t *testing.T) {
	pages := annotatedPages(t)
	var main, full evalScore
	var dur time.Duration
	for _, p := range pages {
		start := time.Now()
		c := extractContent(p.body, p.contentType())
		dur += time.Since(start)
		main.add(p, c.main)
		full.add(p, c.text)
		if os.Getenv("MAINTEXT_DUMP") != "" {
			var one evalScore
			one.add(p, c.main)
			if one.fn > 0 || one.fp > 0 {
				t.Logf("%s (%s): fn %d fp %d", p.file, p.url, one.fn, one.fp)
				for _, w := range p.with {
					if !strings.Contains(c.main, w) {
						t.Logf("   missing %q (in full text: %v)", w, strings.Contains(c.text, w))
					}
				}
				for _, w := range p.without {
					if strings.Contains(c.main, w) {
						t.Logf("   unwanted %q", w)
					}
				}
			}
		}
	}
	t.Logf("%d pages, %.3f ms a page", len(pages), dur.Seconds()*1000/float64(len(pages)))
	t.Logf("main text: %v", main)
	t.Logf("visible text: %v", full)
	if len(pages) < 900 {
		t.Errorf("only %d annotated pages", len(pages))
	}
	if f := main.f1(); f < 0.90 {
		t.Errorf("main text F1 %.3f, want >= 0.90", f)
	}
}

// BenchmarkParseAnnotated: what the crawl path does to each page of the
// annotated set (parsePage: links, text and main text in one pass), as
// CPU time per page. Run it on an older commit (the file needs nothing
// newer than parsePage) for the cost of the main text's choice.
func BenchmarkParseAnnotated(b *testing.B) {
	pages := annotatedPages(b)
	pageURL, _ := url.Parse("http://example.com/page.html")
	var bytes int64
	for _, p := range pages {
		bytes += int64(len(p.body))
	}
	b.SetBytes(bytes / int64(len(pages)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := pages[i%len(pages)]
		parsePage(p.body, p.contentType(), pageURL, "swarmcrawl", 0)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/page")
}
