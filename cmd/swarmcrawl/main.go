// Command swarmcrawl runs a peer of a decentralized web crawler, submits
// seeds to a swarm, shows a node's status, repairs a damaged store and
// runs a local demo.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

const usage = `swarmcrawl: a decentralized web crawler

Usage:
  swarmcrawl node   --data DIR --listen MULTIADDR[,..] [--bootstrap MULTIADDR[,..]] [--api HOST:PORT] [--delay D] [--user-agent UA]
                    [--swarm-key FILE] [--allow-peers IDS|@FILE] [--seed-from IDS|@FILE|any] [--vnodes V] [--config FILE]
  swarmcrawl config [node options]   the node's effective configuration, as a --config file (YAML)
  swarmcrawl seed   --peer MULTIADDR [--swarm-key FILE] [--identity FILE] [--wait [--wait-timeout D] [--poll D]] URL...   (or URLs one a line on stdin; --wait exits 3 if URLs were given up)
  swarmcrawl get    --peer MULTIADDR [--swarm-key FILE] [--at TIME] [--warc FILE] URL   (one page's capture, digest verified)
  swarmcrawl status --api HOST:PORT | --data DIR [--json] [--swarm-key FILE]
  swarmcrawl status --swarm --peer MULTIADDR | --api HOST:PORT | --data DIR [--json] [--swarm-key FILE]   the whole swarm: exact, or an estimate with intervals
  swarmcrawl dlq    --api HOST:PORT [--api-token FILE] | --data DIR [--json] [--requeue URL,.. | --requeue-all]
  swarmcrawl export --data DIR [--format jsonl|warc|cdxj|wacz] [--out FILE]
  swarmcrawl export --swarm --peer MULTIADDR --out DIR [--format wacz|folder] [--swarm-key FILE]   the whole swarm's crawl; reruns resume
  swarmcrawl repair --data DIR    recover a stopped node's damaged store and report what was lost
  swarmcrawl demo   [--nodes N] [--hosts N] [--delay D]
  swarmcrawl simulate [--nodes N] [--vnodes V] [--churn F] [--burst F] [--replicas K] [--graph FILE [--hosts FILE]]
                    [--seeds N] [--duration D] [--seed S] [--json]   the real ring, shard and routing code of many nodes, simulated
  swarmcrawl swarm-key [--out FILE]   a new pre-shared key for a private swarm

Run "swarmcrawl COMMAND -h" for a command's options.
`

// errUsage marks errors whose message already says what to do; main
// prints them without the usage text.
var errUsage = errors.New("usage")

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "node":
		err = runNode(args[1:], stdout, stderr)
	case "config":
		err = runConfig(args[1:], stdout, stderr)
	case "seed":
		err = runSeed(args[1:], stdin, stdout, stderr)
	case "get":
		err = runGet(args[1:], stdout, stderr)
	case "status":
		err = runStatus(args[1:], stdout, stderr)
	case "dlq":
		err = runDLQ(args[1:], stdout, stderr)
	case "export":
		err = runExport(args[1:], stdout, stderr)
	case "repair":
		err = runRepair(args[1:], stdout, stderr)
	case "demo":
		err = runDemo(args[1:], stdout, stderr)
	case "simulate":
		err = runSimulate(args[1:], stdout, stderr)
	case "swarm-key":
		err = runSwarmKey(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "swarmcrawl: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errCrawlFailed):
		fmt.Fprintf(stderr, "swarmcrawl %s: %s\n", args[0], oneLine(err.Error()))
		return 3
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "swarmcrawl %s: %s\n", args[0], oneLine(strings.TrimSuffix(err.Error(), ": "+errUsage.Error())))
		return 2
	case errors.Is(err, errIncomplete):
		fmt.Fprintf(stderr, "swarmcrawl %s: %s\n", args[0], oneLine(err.Error()))
		return exitIncomplete
	default:
		fmt.Fprintf(stderr, "swarmcrawl %s: %s\n", args[0], oneLine(err.Error()))
		if args[0] == "get" {
			return exitCode(err) // its own codes, one per kind of failure
		}
		return 1
	}
}

// oneLine folds a multi-line error (libp2p lists every failed dial on its
// own line) into one line, so a user and a log scraper see one message.
func oneLine(msg string) string {
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(strings.TrimSpace(l), "* ")
	}
	return strings.Join(lines, "; ")
}

// usageErr reports a wrong invocation in one line.
func usageErr(format string, a ...any) error {
	return fmt.Errorf(format+": %w", append(a, errUsage)...)
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("swarmcrawl "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses args; a parse error has already been printed by the
// flag package, so it becomes a one-line usage error.
func parseFlags(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fs.SetOutput(os.Stdout)
		fs.PrintDefaults()
		return err
	}
	if err != nil {
		return usageErr("%v", err)
	}
	return nil
}

// newLogger returns the log/slog logger of a command: records of level and
// above written to w as text (key=value) or JSON lines.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, usageErr("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageErr("--log-format %q: want text or json", format)
}
