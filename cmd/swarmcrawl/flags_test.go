package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
	"github.com/swarmcrawl/swarmcrawl/p2p/route"
	"github.com/swarmcrawl/swarmcrawl/p2p/sim"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// --hot-queue reaches the node's crawl configuration, defaults to
// crawl's default, 0 turns delegation off (crawl.None), and a negative
// value is a usage error that names the flag.
func TestHotQueueFlag(t *testing.T) {
	parse := func(args ...string) (node.Config, error) { return parseNodeFlags(t, args...) }
	cfg, err := parse()
	if err != nil || cfg.Crawl.HotQueue != crawl.DefaultConfig().HotQueue {
		t.Fatalf("default: HotQueue %d, err %v; want %d", cfg.Crawl.HotQueue, err, crawl.DefaultConfig().HotQueue)
	}
	for v, want := range map[int]int{0: crawl.None, 7: 7} {
		cfg, err := parse("--hot-queue", strconv.Itoa(v))
		if err != nil || cfg.Crawl.HotQueue != want {
			t.Fatalf("--hot-queue %d: HotQueue %d, err %v; want %d", v, cfg.Crawl.HotQueue, err, want)
		}
	}
	var stderr bytes.Buffer
	if code := run([]string{"node", "--data", t.TempDir(), "--hot-queue", "-1"}, nil, io.Discard, &stderr); code != 2 {
		t.Fatalf("--hot-queue -1: exit %d, want 2 (usage); stderr %q", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "--hot-queue") {
		t.Fatalf("usage error does not name the flag: %q", stderr.String())
	}
}

// --min-free-disk takes a size with a unit, defaults to the store's
// default threshold, 0 turns the check off (the store's negative), and a
// negative or unreadable size is a usage error that names the flag.
func TestMinFreeDiskFlag(t *testing.T) {
	parse := func(args ...string) (node.Config, error) { return parseNodeFlags(t, args...) }
	cfg, err := parse()
	if want := store.DefaultOptions().MinFreeBytes; err != nil || cfg.Store.MinFreeBytes != want {
		t.Fatalf("default: MinFreeBytes %d, err %v; want %d", cfg.Store.MinFreeBytes, err, want)
	}
	for v, want := range map[string]int64{"0": -1, "500MiB": 500 << 20, "2GB": 2e9, "1.5 GiB": 3 << 29, "4096": 4096, "10kb": 10_000} {
		cfg, err := parse("--min-free-disk", v)
		if err != nil || cfg.Store.MinFreeBytes != want {
			t.Fatalf("--min-free-disk %s: MinFreeBytes %d, err %v; want %d", v, cfg.Store.MinFreeBytes, err, want)
		}
	}
	for _, bad := range []string{"-1GiB", "lots", "5 parsecs", ""} {
		var stderr bytes.Buffer
		if code := run([]string{"node", "--data", t.TempDir(), "--min-free-disk", bad}, nil, io.Discard, &stderr); code != 2 {
			t.Fatalf("--min-free-disk %q: exit %d, want 2 (usage); stderr %q", bad, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), "min-free-disk") {
			t.Fatalf("usage error does not name the flag: %q", stderr.String())
		}
	}
}

// --scope, --scope-include and --scope-exclude reach the node's crawl
// configuration (patterns taken whole, commas and all, from the command
// line and from a config file's list); a bad value, a bad pattern, and a
// seed rule the key mode cannot judge are usage errors that name the flag
// and the pattern.
func TestScopeFlags(t *testing.T) {
	parse := func(args ...string) (node.Config, error) {
		_, o, err := parseNodeOptions("node", append([]string{"--data", t.TempDir()}, args...), io.Discard)
		if err != nil {
			return node.Config{}, err
		}
		return o.nodeConfig(io.Discard)
	}
	cfg, err := parse()
	if err != nil || !cfg.Crawl.Scope.Any() {
		t.Fatalf("default scope %+v, %v; want any", cfg.Crawl.Scope, err)
	}
	cfg, err = parse("--scope", "seed-hosts", "--scope-include", `^https?://[^/]+/(a|b){1,2}`, "--scope-include", `/docs/`, "--scope-exclude", `\.pdf$`)
	want := crawl.ScopeConfig{Mode: crawl.ScopeSeedHosts, Include: []string{`^https?://[^/]+/(a|b){1,2}`, `/docs/`}, Exclude: []string{`\.pdf$`}}
	if err != nil || !reflect.DeepEqual(cfg.Crawl.Scope, want) {
		t.Fatalf("scope %+v, %v; want %+v", cfg.Crawl.Scope, err, want)
	}
	cfg, err = parse("--scope", "seed-domains", "--key", "domain")
	if err != nil || cfg.Crawl.Scope.Mode != crawl.ScopeSeedDomains || cfg.Crawl.KeyMode != urls.KeyDomain {
		t.Fatalf("--scope seed-domains --key domain: %+v %v, %v", cfg.Crawl.Scope, cfg.Crawl.KeyMode, err)
	}
	file := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(file, []byte("scope: seed-hosts\nscope-exclude:\n  - '\\.pdf$'\n  - 'x{1,3}'\nscope-include: '/a,b/'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err = parse("--config", file)
	want = crawl.ScopeConfig{Mode: crawl.ScopeSeedHosts, Include: []string{"/a,b/"}, Exclude: []string{`\.pdf$`, "x{1,3}"}}
	if err != nil || !reflect.DeepEqual(cfg.Crawl.Scope, want) {
		t.Fatalf("scope from %s: %+v, %v; want %+v", file, cfg.Crawl.Scope, err, want)
	}
	for _, c := range []struct {
		args []string
		want []string // in the one-line error
	}{
		{[]string{"--scope", "seed-host"}, []string{"--scope", `"seed-host"`}},
		{[]string{"--scope-include", "(unclosed"}, []string{"--scope-include", `"(unclosed"`}},
		{[]string{"--scope-exclude", "ok", "--scope-exclude", "a**"}, []string{"--scope-exclude", `"a**"`}},
		{[]string{"--scope-exclude", ""}, []string{"--scope-exclude", "empty"}},
		{[]string{"--scope", "seed-hosts", "--key", "url"}, []string{"--scope seed-hosts", "--key host"}},
		{[]string{"--scope", "seed-domains"}, []string{"--scope seed-domains", "--key domain"}},
		{[]string{"--scope", "seed-domains", "--key", "url"}, []string{"--scope seed-domains", "--key domain"}},
		{[]string{"--key", "tld"}, []string{"--key", `"tld"`}},
	} {
		var stderr bytes.Buffer
		args := append([]string{"node", "--data", t.TempDir()}, c.args...)
		if code := run(args, nil, io.Discard, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage); stderr %q", c.args, code, stderr.String())
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(stderr.String(), w) {
				t.Errorf("%v: usage error %q does not name %s", c.args, stderr.String(), w)
			}
		}
	}
}

// --vnodes reaches the node's configuration, defaults to
// route.DefaultVNodes (16, issue 28's measured balance), as `simulate
// --vnodes` does, and a value outside 1..node.MaxVNodes is a usage error
// that names the flag.
func TestVNodesFlag(t *testing.T) {
	parse := func(args ...string) (node.Config, error) { return parseNodeFlags(t, args...) }
	if route.DefaultVNodes != 16 {
		t.Fatalf("route.DefaultVNodes %d, want 16 (issue 28)", route.DefaultVNodes)
	}
	if cfg, err := parse(); err != nil || cfg.VNodes != route.DefaultVNodes {
		t.Fatalf("default: VNodes %d, err %v; want %d", cfg.VNodes, err, route.DefaultVNodes)
	}
	if v := sim.DefaultConfig().VNodes; v != route.DefaultVNodes { // simulate --vnodes's default
		t.Fatalf("simulate --vnodes defaults to %d positions, a node to %d", v, route.DefaultVNodes)
	}
	if cfg, err := parse("--vnodes", "8"); err != nil || cfg.VNodes != 8 {
		t.Fatalf("--vnodes 8: VNodes %d, err %v", cfg.VNodes, err)
	}
	for _, bad := range []string{"0", strconv.Itoa(node.MaxVNodes + 1)} {
		var stderr bytes.Buffer
		if code := run([]string{"node", "--data", t.TempDir(), "--vnodes", bad}, nil, io.Discard, &stderr); code != 2 {
			t.Fatalf("--vnodes %s: exit %d, want 2 (usage); stderr %q", bad, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), "--vnodes") {
			t.Fatalf("usage error does not name the flag: %q", stderr.String())
		}
	}
}

// parseNodeFlags parses node flags (with a fresh --data) into the node's
// configuration, as `swarmcrawl node` would.
func parseNodeFlags(t *testing.T, args ...string) (node.Config, error) {
	fs := newFlagSet("node", io.Discard)
	var o nodeOptions
	o.register(fs)
	if err := parseFlags(fs, append([]string{"--data", t.TempDir()}, args...)); err != nil {
		return node.Config{}, err
	}
	return o.nodeConfig(io.Discard)
}
