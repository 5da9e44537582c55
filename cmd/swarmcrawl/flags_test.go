package main

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// --hot-queue reaches the node's crawl configuration, defaults to
// crawl's default, 0 turns delegation off (crawl.None), and a negative
// value is a usage error that names the flag.
func TestHotQueueFlag(t *testing.T) {
	parse := func(args ...string) (node.Config, error) {
		fs := newFlagSet("node", io.Discard)
		var o nodeOptions
		o.register(fs)
		if err := parseFlags(fs, append([]string{"--data", t.TempDir()}, args...)); err != nil {
			return node.Config{}, err
		}
		return o.nodeConfig(io.Discard)
	}
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
	parse := func(args ...string) (node.Config, error) {
		fs := newFlagSet("node", io.Discard)
		var o nodeOptions
		o.register(fs)
		if err := parseFlags(fs, append([]string{"--data", t.TempDir()}, args...)); err != nil {
			return node.Config{}, err
		}
		return o.nodeConfig(io.Discard)
	}
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
