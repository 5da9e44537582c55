package main

import (
	"bytes"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
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
