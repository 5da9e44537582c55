package node

import (
	"context"
	"fmt"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
	"github.com/swarmcrawl/swarmcrawl/store/warc"
)

// pageStore archives every fetch in the node's WARC files (request,
// response and extracted text) and keeps a small record of it in the store,
// keyed like the seen set so a key range's records move with it. Bodies
// live only in the WARC files.
type pageStore struct {
	db      *store.DB
	archive *warc.Writer
	mode    urls.KeyMode
}

var _ crawl.PageSink = pageStore{}

func (s pageStore) StorePage(_ context.Context, p *crawl.Page) error {
	key, err := urls.TaskKey(p.Task.URL, s.mode)
	if err != nil {
		return fmt.Errorf("store page %s: %w", p.Task.URL, err)
	}
	loc, err := s.archive.WriteExchangeAt(p.WARCExchange())
	if err != nil {
		return fmt.Errorf("archive %s: %w", p.Task.URL, err)
	}
	// The capture the URL's metadata names is found by its response
	// record's ID, written with the page.
	return s.db.PutPage(&store.Page{
		Key: key, URLHash: urls.URLHash(p.Task.URL), URL: p.Task.URL, FinalURL: p.FinalURL,
		Status: p.Status, ContentType: p.ContentType, Header: p.Header, FetchedAt: p.FetchedAt,
		Duration: p.Duration, Depth: p.Task.Depth, Links: len(p.Links),
		ResponseID: p.ResponseID, Location: store.RecordLocation{File: loc.File, Offset: loc.Offset, Length: loc.Length},
	})
}
