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

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/census"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
	"github.com/swarmcrawl/swarmcrawl/p2p/seedsig"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

func runSeed(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlagSet("seed", stderr)
	peerAddr := fs.String("peer", "", "full multiaddr (/ip4/.../tcp/.../p2p/<id>) of any swarm member (required)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	swarmKey := fs.String("swarm-key", "", "pre-shared key file of a private swarm")
	identity := fs.String("identity", "", "key file giving the client a stable peer ID (created, mode 0600, if missing), for nodes that list their seeders (--seed-from, --allow-peers); the client then signs each seed with it, so that every node that lists it honours the seed whichever member forwards it")
	wait := fs.Bool("wait", false, "after seeding, wait until the swarm's crawl is complete (no member has work, the same pages fetched over two censuses); exit 3 if URLs were given up (new dead letters) meanwhile")
	waitTimeout := fs.Duration("wait-timeout", 0, "with --wait: give up waiting after this long (0: no limit)")
	poll := fs.Duration("poll", 3*time.Second, "with --wait: how often to count the swarm")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *poll < 2*time.Second {
		return usageErr("--poll %v: want at least 2s", *poll)
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
	var before node.SwarmStatus
	if *wait {
		// The dead letters already there are not this crawl's failures.
		if before, err = node.AskSwarmStatus(ctx, h, *peerAddr); err != nil {
			return fmt.Errorf("before seeding: %w", err)
		}
	}
	// With an identity the client signs its seeds: every owner that lists
	// it (--seed-from) then honours them, whichever member takes them.
	// Without one, the member signs for the clients it takes seeds from.
	var proofs []*pb.SeedProof
	if key != nil {
		if proofs, err = signSeeds(key, urls, time.Now()); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "seeds signed by %s (list it with node --seed-from)\n", h.ID())
	}
	res, err := submitInChunks(ctx, h, *peerAddr, urls, proofs, newProgressLine(stderr))
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
	if !*wait {
		return nil
	}
	wctx := context.Background()
	if *waitTimeout > 0 {
		var wcancel context.CancelFunc
		wctx, wcancel = context.WithTimeout(wctx, *waitTimeout)
		defer wcancel()
	}
	return waitCrawl(wctx, h, *peerAddr, before, *poll, stdout, newProgressLine(stderr))
}

// errCrawlFailed reports a crawl that completed with URLs given up; the
// command exits 3 with it.
var errCrawlFailed = errors.New("crawl complete with failures")

// waitCrawl counts the swarm every poll until the crawl is complete: no
// member has work (queued, scheduled, in flight or in an outbox) and the
// pages fetched are the same in two censuses in a row. The swarm carries
// no crawl ID, so "the crawl" is everything the swarm is crawling: a
// crawl seeded by someone else at the same time is waited for too. With
// an estimate (a swarm too large to walk) only the sampled members are
// known idle; the output says so. It fails with errCrawlFailed when the
// swarm's dead letters grew since before (the URLs given up).
func waitCrawl(ctx context.Context, h host.Host, addr string, before node.SwarmStatus, poll time.Duration, stdout io.Writer, progress *progressLine) error {
	defer progress.clear()
	var prev *node.SwarmStatus
	t := time.NewTicker(poll)
	defer t.Stop()
	// The first census is one poll after seeding, so that a member's
	// census from before (served again for a second) is never taken.
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait: the crawl is not complete: %w", ctx.Err())
		case <-t.C:
		}
		st, err := node.AskSwarmStatus(ctx, h, addr)
		switch {
		case err != nil && ctx.Err() != nil:
			return fmt.Errorf("wait: %w", err)
		case err != nil:
			progress.show(false, "waiting: %v", err) // a member may be busy or restarting
		default:
			fetched := st.Totals["fetched"].Value
			if !st.Work && prev != nil && !prev.Work && prev.Totals["fetched"].Value == fetched {
				progress.clear()
				dead := st.Totals["dead_letters"].Value - before.Totals["dead_letters"].Value
				note := ""
				if st.Method != census.Exact {
					note = fmt.Sprintf(" (estimated: %d members sampled, none with work)", st.Asked)
				}
				fmt.Fprintf(stdout, "crawl complete%s: %.0f pages fetched, %.0f new dead letters, %.0f errors\n", note, fetched, max(dead, 0), st.Totals["errors"].Value)
				if dead > 0 {
					return fmt.Errorf("%w: %.0f URLs given up (see swarmcrawl dlq on the members)", errCrawlFailed, dead)
				}
				return nil
			}
			prev = &st
			progress.show(false, "waiting: %.0f pages fetched, %.0f queued, %.0f in flight (%s)", fetched, st.Totals["queued"].Value, st.Totals["in_flight"].Value, st.Method)
		}
	}
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

// signSeeds returns key's signed statement for each of seeds, over its
// normal form (which the member computes too); an empty one for a URL
// that does not normalise (the member rejects it).
func signSeeds(key crypto.PrivKey, seeds []string, at time.Time) ([]*pb.SeedProof, error) {
	out := make([]*pb.SeedProof, len(seeds))
	for i, raw := range seeds {
		out[i] = &pb.SeedProof{}
		u, err := urls.Normalize(nil, strings.TrimSpace(raw))
		if err != nil {
			continue
		}
		b, err := seedsig.Sign(key, u, at)
		if err != nil {
			return nil, err
		}
		if out[i], err = seedsig.Decode(b); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// submitInChunks submits urls (with their signed statements, if any) a
// chunk at a time, showing on progress how many were sent, and sums the
// results.
func submitInChunks(ctx context.Context, h host.Host, addr string, urls []string, proofs []*pb.SeedProof, progress *progressLine) (p2p.SeedResult, error) {
	defer progress.clear()
	var total p2p.SeedResult
	for sent := 0; sent < len(urls); {
		n := min(seedChunk, len(urls)-sent)
		var signed []*pb.SeedProof
		if len(proofs) > 0 {
			signed = proofs[sent : sent+n]
		}
		res, err := p2p.SubmitSignedSeeds(ctx, h, addr, urls[sent:sent+n], signed)
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
