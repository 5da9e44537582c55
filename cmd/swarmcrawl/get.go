package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
)

// Exit codes of get, one per way it ends without the page (1 is any other
// failure, 2 a wrong invocation).
const (
	exitNotKnown          = 3
	exitQueued            = 4
	exitHolderUnreachable = 5
	exitDigestMismatch    = 6
	exitNoConnection      = 7
	exitOutOfScope        = 8
)

// exitCode is the exit status of a get that failed with err (the other
// commands exit 1 for these errors).
func exitCode(err error) int {
	switch {
	case errors.Is(err, node.ErrNotKnown):
		return exitNotKnown
	case errors.Is(err, node.ErrQueued):
		return exitQueued
	case errors.Is(err, node.ErrHolderUnreachable):
		return exitHolderUnreachable
	case errors.Is(err, node.ErrDigestMismatch):
		return exitDigestMismatch
	case errors.Is(err, node.ErrOutOfScope):
		return exitOutOfScope
	case errors.Is(err, p2p.ErrNoConnection):
		return exitNoConnection
	}
	return 1
}

func runGet(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("get", stderr)
	peerAddr := fs.String("peer", "", "full multiaddr (/ip4/.../tcp/.../p2p/<id>) of any swarm member (required)")
	timeout := fs.Duration("timeout", 60*time.Second, "give up after this long")
	swarmKey := fs.String("swarm-key", "", "pre-shared key file of a private swarm")
	at := fs.String("at", "", "the capture nearest this time (RFC 3339, e.g. 2026-11-28T08:00:00Z); default the newest")
	warcOut := fs.String("warc", "", "write the capture's WARC records (request, response, text) to this file instead of printing the body")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *peerAddr == "" {
		return usageErr("--peer is required")
	}
	if _, err := p2p.ParseAddrInfos([]string{*peerAddr}); err != nil {
		return usageErr("--peer: %v", err)
	}
	if fs.NArg() != 1 {
		return usageErr("give exactly one URL")
	}
	var when time.Time
	if *at != "" {
		var err error
		if when, err = time.Parse(time.RFC3339, *at); err != nil {
			return usageErr("--at: %v", err)
		}
	}
	var psk []byte
	if *swarmKey != "" {
		var err error
		if psk, err = p2p.LoadSwarmKey(*swarmKey); err != nil {
			return usageErr("--swarm-key: %v", err)
		}
	}
	h, err := p2p.NewClientHost(nil, psk)
	if err != nil {
		return err
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	res, err := node.Get(ctx, h, *peerAddr, fs.Arg(0), when)
	if errors.Is(err, p2p.ErrNoConnection) && *swarmKey == "" {
		return fmt.Errorf("%w (if the swarm is private, give its key with --swarm-key)", err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "%s: captured %s by %s, record %s, %s verified\n", res.URL,
		res.Capture.Time.UTC().Format(time.RFC3339), res.Capture.Holder, res.Capture.RecordID, res.Capture.Digest)
	if *warcOut != "" {
		if err := os.WriteFile(*warcOut, res.WARC, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", *warcOut, err)
		}
		return nil
	}
	if _, err := stdout.Write(res.Body); err != nil {
		return fmt.Errorf("write body: %w", err)
	}
	return nil
}
