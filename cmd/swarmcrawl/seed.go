package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/protocol"
)

func runSeed(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("seed", stderr)
	peerAddr := fs.String("peer", "", "full multiaddr (/ip4/.../tcp/.../p2p/<id>) of any swarm member (required)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	swarmKey := fs.String("swarm-key", "", "pre-shared key file of a private swarm")
	identity := fs.String("identity", "", "key file giving the client a stable peer ID (created, mode 0600, if missing), for nodes that list their seeders (--seed-from, --allow-peers)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *peerAddr == "" {
		return usageErr("--peer is required")
	}
	if _, err := p2p.ParseAddrInfos([]string{*peerAddr}); err != nil {
		return usageErr("--peer: %v", err)
	}
	urls := fs.Args()
	if len(urls) == 0 {
		var err error
		if urls, err = readLines(stdin); err != nil {
			return fmt.Errorf("read seeds from stdin: %w", err)
		}
	}
	if len(urls) == 0 {
		return usageErr("no seed URLs: give them as arguments or one a line on stdin")
	}
	var psk []byte
	if *swarmKey != "" {
		var err error
		if psk, err = p2p.LoadSwarmKey(*swarmKey); err != nil {
			return usageErr("--swarm-key: %v", err)
		}
	}
	// The seed client is not a swarm member and listens nowhere; its
	// identity is a throwaway one unless the nodes must know it.
	var key crypto.PrivKey
	if *identity != "" {
		var err error
		if key, err = p2p.LoadOrCreateKey(*identity); err != nil {
			return usageErr("--identity: %v", err)
		}
	}
	h, err := p2p.NewClientHost(key, psk)
	if err != nil {
		return err
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	res, err := submitInChunks(ctx, h, *peerAddr, urls, newProgressLine(stderr))
	if errors.Is(err, p2p.ErrNoConnection) && *swarmKey == "" {
		return fmt.Errorf("%w (if the swarm is private, give its key with --swarm-key)", err)
	}
	if err != nil {
		return err
	}
	for _, r := range res.Rejected {
		fmt.Fprintf(stderr, "rejected %s: %s\n", r.URL, r.Reason)
	}
	fmt.Fprintf(stdout, "accepted %d of %d seeds (%d new, %d already seen, %d pending delivery, %d rejected)\n",
		res.Accepted+res.Duplicates+res.Pending, len(urls), res.Accepted, res.Duplicates, res.Pending, len(res.Rejected))
	if len(res.Rejected) == len(urls) {
		return fmt.Errorf("every seed was rejected")
	}
	return nil
}

// readLines reads non-empty, non-comment lines.
func readLines(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out, sc.Err()
}

// seedChunk is how many seeds go in one SubmitSeeds call: a long list is
// sent a chunk at a time so that its progress can be shown.
const seedChunk = 10 * protocol.MaxSeedURLs

// submitInChunks submits urls a chunk at a time, showing on progress how
// many were sent, and sums the results.
func submitInChunks(ctx context.Context, h host.Host, addr string, urls []string, progress *progressLine) (p2p.SeedResult, error) {
	defer progress.clear()
	var total p2p.SeedResult
	for sent := 0; sent < len(urls); {
		n := min(seedChunk, len(urls)-sent)
		res, err := p2p.SubmitSeeds(ctx, h, addr, urls[sent:sent+n])
		total.Accepted += res.Accepted
		total.Duplicates += res.Duplicates
		total.Pending += res.Pending
		total.Rejected = append(total.Rejected, res.Rejected...)
		if err != nil {
			return total, err
		}
		sent += n
		progress.show(sent == len(urls), "seeding: %d of %d URLs sent (%.0f%%), %d accepted", sent, len(urls), 100*float64(sent)/float64(len(urls)), total.Accepted+total.Duplicates+total.Pending)
	}
	return total, nil
}
