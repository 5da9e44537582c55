package layout

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// module is the project's module path.
const module = "github.com/swarmcrawl/swarmcrawl"

// rule forbids the packages under a path some imports.
type rule struct {
	// under selects packages by module-relative path: "p2p/ring" is that
	// package, "crawl/..." crawl and everything below it.
	under []string
	// except leaves packages out of under, in the same form.
	except []string
	// forbids reports whether an import (a full import path) breaks the rule.
	forbids func(imp string) bool
	why     string
}

// rules are the import rules of docs/architecture.md's package table.
var rules = []rule{
	{
		under:   []string{"protocol/..."},
		forbids: func(imp string) bool { return isProject(imp) && !within(rel(imp), "protocol/...") },
		why:     "protocol owns the bytes on the wire and imports no other project package",
	},
	{
		under:   []string{"store/...", "crawl/..."},
		forbids: isLibp2p,
		why:     "store and crawl never import libp2p",
	},
	{
		under:   []string{"store/..."},
		forbids: projectUnder("crawl/...", "p2p/...", "cmd/..."),
		why:     "store is durable state: it knows neither the engine nor the swarm",
	},
	{
		under:   []string{"crawl/..."},
		forbids: projectUnder("p2p/...", "cmd/..."),
		why:     "crawl is the engine of one node: it knows nothing of the swarm",
	},
	{
		under:   []string{"p2p/ring"},
		forbids: func(imp string) bool { return !isStd(imp) },
		why:     "the ring is a pure algorithm: standard library only",
	},
	{
		under:   []string{"p2p/shard"},
		forbids: func(imp string) bool { return !isStd(imp) && imp != module+"/p2p/ring" },
		why:     "the shard layer is a pure algorithm: standard library and the ring only",
	},
	{
		under:   []string{"p2p/census"},
		forbids: func(imp string) bool { return !isStd(imp) && imp != module+"/p2p/ring" },
		why:     "the census is a pure algorithm: standard library and the ring only, so that the simulator runs it",
	},
	{
		under: []string{"p2p/route"},
		forbids: func(imp string) bool {
			return !isStd(imp) && !slices.Contains([]string{module + "/p2p/ring", module + "/p2p/shard", module + "/protocol"}, imp)
		},
		why: "the distributed crawl layer (routing, owner, intake) is pure: standard library, the ring, the shard layer and protocol's limits only, never libp2p, the store or the crawl engine, so that the simulator runs it unchanged",
	},
	{
		under: []string{"p2p/sim/..."},
		forbids: func(imp string) bool {
			return !isStd(imp) && !slices.Contains([]string{module + "/p2p/ring", module + "/p2p/shard", module + "/p2p/route", module + "/p2p/census", module + "/internal/memstat"}, imp)
		},
		why: "the simulator drives the pure ring, shard, routing and census code: standard library, the ring, the shard layer, the routing layer, the census and internal/memstat only, never libp2p or the crawl engine",
	},
	{
		under:   []string{"p2p/..."},
		except:  []string{"p2p/node/...", "p2p/localswarm/..."},
		forbids: projectUnder("crawl/...", "store/...", "p2p/node/...", "p2p/localswarm/...", "cmd/..."),
		why:     "the libp2p side of p2p knows neither the crawl engine nor the store; only the node assembles them",
	},
}

func rel(imp string) string { return strings.TrimPrefix(strings.TrimPrefix(imp, module), "/") }

func isProject(imp string) bool { return imp == module || strings.HasPrefix(imp, module+"/") }

// isStd reports whether imp is a standard library package: its first
// path element has no dot.
func isStd(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

func isLibp2p(imp string) bool {
	return strings.HasPrefix(imp, "github.com/libp2p/") || strings.HasPrefix(imp, "github.com/multiformats/")
}

// projectUnder forbids the project packages under any of paths.
func projectUnder(paths ...string) func(string) bool {
	return func(imp string) bool {
		if !isProject(imp) {
			return false
		}
		return slices.ContainsFunc(paths, func(p string) bool { return within(rel(imp), p) })
	}
}

// within reports whether the module-relative package path pkg matches
// pattern ("a/b" exactly, or "a/b/..." for a/b and below).
func within(pkg, pattern string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

func (r rule) applies(pkg string) bool {
	in := func(ps []string) bool { return slices.ContainsFunc(ps, func(p string) bool { return within(pkg, p) }) }
	return in(r.under) && !in(r.except)
}

// check returns one line per import of imports (package path to its
// imports, module-relative) that breaks a rule.
func check(imports map[string][]string) []string {
	var out []string
	for pkg, imps := range imports {
		for _, r := range rules {
			if !r.applies(pkg) {
				continue
			}
			for _, imp := range imps {
				if r.forbids(imp) {
					out = append(out, fmt.Sprintf("%s imports %s: %s", pkg, imp, r.why))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// treeImports reads the imports of every non-test Go file of the module
// rooted at root, by package directory.
func treeImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(dir)
		for _, spec := range f.Imports {
			imp, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			out[pkg] = append(out[pkg], imp)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestImportRules fails when a package imports what its place in the tree
// forbids.
func TestImportRules(t *testing.T) {
	imports := treeImports(t, filepath.Join("..", ".."))
	// The walk must have found the tree, or the test proves nothing.
	for _, pkg := range []string{"protocol", "store", "crawl", "p2p", "p2p/ring", "p2p/shard", "p2p/route", "p2p/sim", "p2p/node", "cmd/swarmcrawl"} {
		if _, ok := imports[pkg]; !ok {
			t.Fatalf("package %s not found under the module root", pkg)
		}
	}
	for _, v := range check(imports) {
		t.Error(v)
	}
}

// TestRulesCatchViolations feeds check a tree with one violation of each
// rule, and a tree without any.
func TestRulesCatchViolations(t *testing.T) {
	clean := map[string][]string{
		"protocol":       {"fmt", "google.golang.org/protobuf/proto", module + "/protocol/pb"},
		"store":          {"github.com/syndtr/goleveldb/leveldb", module + "/protocol"},
		"crawl":          {"net/http", module + "/store", module + "/protocol"},
		"crawl/frontier": {module + "/store"},
		"p2p":            {"github.com/libp2p/go-libp2p", module + "/p2p/ring", module + "/p2p/shard", module + "/protocol/pb"},
		"p2p/ring":       {"sync", "time"},
		"p2p/shard":      {"sync", module + "/p2p/ring"},
		"p2p/census":     {"math", module + "/p2p/ring"},
		"p2p/route":      {"sync", module + "/p2p/ring", module + "/p2p/shard", module + "/protocol"},
		"p2p/sim":        {"container/heap", module + "/p2p/ring", module + "/p2p/shard", module + "/p2p/route", module + "/internal/memstat"},
		"p2p/node":       {module + "/crawl", module + "/store", module + "/p2p", "github.com/libp2p/go-libp2p/core/host"},
		"p2p/localswarm": {module + "/crawl", module + "/p2p/node"},
		"cmd/swarmcrawl": {module + "/p2p/node", module + "/crawl/synthweb"},
	}
	if v := check(clean); len(v) > 0 {
		t.Fatalf("a clean tree has violations: %v", v)
	}
	for name, bad := range map[string]map[string][]string{
		"protocol imports store":       {"protocol": {module + "/store"}},
		"crawl imports libp2p":         {"crawl": {"github.com/libp2p/go-libp2p/core/peer"}},
		"frontier imports multiaddr":   {"crawl/frontier": {"github.com/multiformats/go-multiaddr"}},
		"store imports libp2p":         {"store/warc": {"github.com/libp2p/go-libp2p"}},
		"store imports crawl":          {"store": {module + "/crawl"}},
		"crawl imports p2p":            {"crawl": {module + "/p2p/ring"}},
		"ring imports a module":        {"p2p/ring": {"github.com/google/uuid"}},
		"ring imports protocol":        {"p2p/ring": {module + "/protocol"}},
		"shard imports protocol/pb":    {"p2p/shard": {module + "/protocol/pb"}},
		"census imports protocol":      {"p2p/census": {module + "/protocol"}},
		"p2p imports crawl":            {"p2p": {module + "/crawl"}},
		"p2p imports store":            {"p2p": {module + "/store/warc"}},
		"p2p imports the node":         {"p2p": {module + "/p2p/node"}},
		"a new p2p package imports it": {"p2p/nat": {module + "/crawl/frontier"}},
		"sim imports libp2p":           {"p2p/sim": {"github.com/libp2p/go-libp2p/core/host"}},
		"sim imports protocol":         {"p2p/sim": {module + "/protocol"}},
		"route imports libp2p":         {"p2p/route": {"github.com/libp2p/go-libp2p/core/peer"}},
		"route imports protocol/pb":    {"p2p/route": {module + "/protocol/pb"}},
		"route imports a module":       {"p2p/route": {"github.com/google/uuid"}},
	} {
		if v := check(bad); len(v) != 1 {
			t.Errorf("%s: %d violations %v, want 1", name, len(v), v)
		}
	}
}
