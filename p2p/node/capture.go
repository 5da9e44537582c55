package node

import (
	"fmt"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// URLCaptures is what one node's shard records say about a URL's
// captures.
type URLCaptures struct {
	// URL is the normalised URL.
	URL string
	// Known is set when the node has a shard record of the URL (it owns or
	// replicates it, or did), Done when that record is marked done.
	Known, Done bool
	// Captures are where the URL's archived fetches are, newest first
	// (see store.Capture); empty for a URL never archived.
	Captures []store.Capture
}

// LocalCaptures returns what this node's shard records say about raw's
// captures: the fetching node (owner or hot-host helper) adds one to the
// URL's metadata with each archived fetch, and the metadata travels with
// the shard record to the owner's replicas and its next owners.
func (n *Node) LocalCaptures(raw string) (URLCaptures, error) {
	u, err := urls.Normalize(nil, raw)
	if err != nil {
		return URLCaptures{}, fmt.Errorf("captures of %s: %w", truncURL(raw), err)
	}
	key, err := urls.TaskKey(u, n.crawlCfg.KeyMode)
	if err != nil {
		return URLCaptures{}, fmt.Errorf("captures of %s: %w", truncURL(u), err)
	}
	out := URLCaptures{URL: u}
	rec, ok, err := n.db.ShardRecord(key, urls.URLHash(u))
	if err != nil {
		return out, fmt.Errorf("captures of %s: %w", truncURL(u), err)
	}
	if !ok {
		return out, nil
	}
	out.Known, out.Done = true, rec.Done
	if len(rec.Meta) > 0 {
		m, err := decodeRecordState(rec.Meta)
		if err != nil {
			return out, fmt.Errorf("captures of %s: %w", truncURL(u), err)
		}
		out.Captures = m.Captures
	}
	return out, nil
}
