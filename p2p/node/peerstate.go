package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
)

// State a peer hands over (shard records and host states, in replicate
// writes, handoffs, merges and pull pages) is treated like a discovered
// link before the shard manager sees it: every URL normalised, its ring
// key and URL hash recomputed, its depth bounded, its metadata and its
// host's politeness state decoded and checked. The wire codec (package
// p2p) bounds sizes; only the node knows the crawler's rules, so it checks
// meaning here, on both paths state arrives by: requests this node serves
// (checkedHandler) and pages it pulls (checkedTransport).

// maxRedirects bounds a record's redirect count: far above any chain the
// crawler follows, far below what would overflow an encoding.
const maxRedirects = 1000

// peerState checks records and host states from peers.
type peerState struct {
	keyMode  urls.KeyMode
	maxDepth int
}

// record reports what makes r unusable, if anything.
func (c peerState) record(r shard.Record) error {
	u, err := urls.Normalize(nil, r.URL)
	switch {
	case err != nil:
		return fmt.Errorf("record %q: %w", truncURL(r.URL), err)
	case u != r.URL:
		return fmt.Errorf("record %q: not normalised", truncURL(r.URL))
	case r.Depth < 0 || r.Depth > c.maxDepth:
		return fmt.Errorf("record %q: depth %d outside 0..%d", truncURL(r.URL), r.Depth, c.maxDepth)
	case r.Redirects < 0 || r.Redirects > maxRedirects:
		return fmt.Errorf("record %q: %d redirects", truncURL(r.URL), r.Redirects)
	case urls.URLHash(u) != r.Hash:
		return fmt.Errorf("record %q: hash %016x is not the URL's", truncURL(r.URL), r.Hash)
	case r.Seed && (r.Depth != 0 || r.Redirects != 0):
		// A seed is submitted at depth 0, and merges keep the smaller
		// depth: a deeper seed is no record an honest node writes.
		return fmt.Errorf("record %q: a seed at depth %d after %d redirects", truncURL(r.URL), r.Depth, r.Redirects)
	}
	if key, err := urls.TaskKey(u, c.keyMode); err != nil || key != r.Key {
		return fmt.Errorf("record %q: ring key %s is not the URL's", truncURL(r.URL), ring.ID(r.Key))
	}
	if len(r.Meta) > 0 {
		m, err := decodeRecordState(r.Meta)
		if err != nil {
			return fmt.Errorf("record %q: %w", truncURL(r.URL), err)
		}
		if m.URL != "" && m.URL != r.URL {
			return fmt.Errorf("record %q: metadata of another URL", truncURL(r.URL))
		}
	}
	return nil
}

// host reports what makes h unusable, if anything.
func (c peerState) host(h shard.HostState) error {
	want, ok := urls.HostRingKey(h.Host, c.keyMode)
	if !ok {
		want = urls.HostKey(h.Host) // URL keys: host states go by host key
	}
	if h.Key != want {
		return fmt.Errorf("host state %q: ring key %s is not the host's", h.Host, ring.ID(h.Key))
	}
	_, err := decodeHostState(h)
	return err
}

// filter returns the usable records and host states, and an error naming
// how many were dropped and why the first was, or nil.
func (c peerState) filter(recs []shard.Record, hosts []shard.HostState) ([]shard.Record, []shard.HostState, error) {
	var errs []error
	okRecs := recs[:0:0]
	for _, r := range recs {
		if err := c.record(r); err != nil {
			errs = append(errs, err)
			continue
		}
		okRecs = append(okRecs, r)
	}
	okHosts := hosts[:0:0]
	for _, h := range hosts {
		if err := c.host(h); err != nil {
			errs = append(errs, err)
			continue
		}
		okHosts = append(okHosts, h)
	}
	if len(errs) == 0 {
		return recs, hosts, nil
	}
	return okRecs, okHosts, fmt.Errorf("refused %d malformed records or host states, first: %w", len(errs), errs[0])
}

// checkedHandler serves the shard protocols with the state in each request
// checked: what is malformed is dropped before the manager sees it, the
// rest is served as usual, and the sender is told (a write with dropped
// records is not acknowledged: its owner counts it degraded).
type checkedHandler struct {
	shard.Handler
	check peerState
	log   *slog.Logger
}

// HandleReplicate implements shard.Handler.
func (h checkedHandler) HandleReplicate(ctx context.Context, from ring.Peer, req *shard.WriteRequest) *shard.WriteReply {
	recs, hosts, err := h.check.filter(req.Records, req.Hosts)
	if err == nil {
		return h.Handler.HandleReplicate(ctx, from, req)
	}
	h.log.Warn("replicate write with malformed state", "from", from.Addr, "err", err)
	in := *req
	in.Records, in.Hosts = recs, hosts
	reply := h.Handler.HandleReplicate(ctx, from, &in)
	reply.StoreError = errors.Join(errOrNil(reply.StoreError), err).Error()
	return reply
}

// HandleHandoff implements shard.Handler.
func (h checkedHandler) HandleHandoff(ctx context.Context, from ring.Peer, req *shard.HandoffRequest) *shard.HandoffReply {
	recs, hosts, err := h.check.filter(req.Records, req.Hosts)
	if err == nil {
		return h.Handler.HandleHandoff(ctx, from, req)
	}
	h.log.Warn("handoff with malformed state", "from", from.Addr, "range", req.Range.String(), "merge", req.Merge, "err", err)
	in := *req
	in.Records, in.Hosts = recs, hosts
	return h.Handler.HandleHandoff(ctx, from, &in)
}

// errOrNil turns a reply's error text back into an error, nil for none.
func errOrNil(s string) error {
	if s == "" {
		return nil
	}
	return errors.New(s)
}

// checkedTransport pulls pages of state with their records and host states
// checked: what is malformed is dropped, with a warning.
type checkedTransport struct {
	shard.Transport
	check peerState
	log   *slog.Logger
}

// Pull implements shard.Transport.
func (t checkedTransport) Pull(ctx context.Context, to ring.Peer, req *shard.PullRequest) (*shard.PullReply, error) {
	reply, err := t.Transport.Pull(ctx, to, req)
	if err != nil {
		return nil, err
	}
	recs, hosts, err := t.check.filter(reply.Records, reply.Hosts)
	if err != nil {
		t.log.Warn("pulled malformed state", "from", to.Addr, "err", err)
		reply.Records, reply.Hosts = recs, hosts
	}
	return reply, nil
}
