package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p/localswarm"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
	"github.com/swarmcrawl/swarmcrawl/store/warc"
)

// Where each capture is, end to end: four peers crawl a few hosts hot
// enough that owners hand batches to helpers. Afterwards the URL's owner
// and a replica know the capture of every ground-truth page, and it names
// a record that is in the named holder's WARC files, for that URL, with
// that payload digest; and some captures are held by helpers, which the
// owner learnt from their results.
func TestCapturesNameTheirHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("crawls a synthetic web")
	}
	cfg := synthweb.DefaultConfig()
	cfg.Seed = 7
	// Two hosts on four peers: at least two peers own none, so an
	// owner's batch is worth moving to one of them (neither owner nor
	// helper moves a batch that would leave the helper busier than the
	// owner, route.Worth).
	cfg.Hosts = 2
	cfg.Seeds = 2
	cfg.PagesPerHost = 60
	cfg.LinksPerPage = 6
	cfg.PageBytes = 1024
	web, err := synthweb.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	truth := web.GroundTruth(token)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cc := crawl.DefaultConfig()
	cc.Delay = 5 * time.Millisecond
	cc.MaxDepth = 1000
	cc.HotQueue = 5
	dir := t.TempDir()
	swarm, err := localswarm.Start(ctx, localswarm.Options{Nodes: 4, Crawl: cc, Proxy: web.Proxy(), Dir: dir,
		Configure: func(i int, c *node.Config) {
			if i == 2 {
				c.APIAddr = "127.0.0.1:0"
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { swarm.Close() })
	if err := swarm.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	swarm.Nodes[0].Seed(ctx, web.Seeds())
	for len(web.Missing(token)) > 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("crawl incomplete: %d of %d pages missing", len(web.Missing(token)), len(truth))
		case <-time.After(100 * time.Millisecond):
		}
	}
	settle := time.Now().Add(10 * time.Second)
	for !swarm.Idle() && time.Now().Before(settle) {
		time.Sleep(100 * time.Millisecond)
	}
	// Replication of the last done marks is asynchronous.
	time.Sleep(2 * time.Second)

	// Every response record in each node's WARC files, by holder and ID.
	type rec struct{ url, digest string }
	held := map[string]map[string]rec{}
	for i, n := range swarm.Nodes {
		files, err := warc.Files(filepath.Join(dir, fmt.Sprintf("node-%02d", i), node.WARCDir), true)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]rec{}
		for _, f := range files {
			fh, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			r := warc.NewReader(fh)
			for {
				wr, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					break // the open file's tail may be half written
				}
				if wr.Type == "response" {
					m[wr.ID] = rec{wr.TargetURI, wr.Header.Get("WARC-Payload-Digest")}
				}
			}
			fh.Close()
		}
		held[n.ID().String()] = m
	}

	holders := map[string]map[string]bool{}
	for _, u := range truth {
		nu, _ := urls.Normalize(nil, u)
		knowers, newest := 0, time.Time{}
		var holder, id, digest string
		for _, n := range swarm.Nodes {
			c, err := n.LocalCaptures(u)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Captures) == 0 {
				continue
			}
			knowers++
			if c.Captures[0].Time.After(newest) {
				newest, holder, id, digest = c.Captures[0].Time, c.Captures[0].Holder, c.Captures[0].RecordID, c.Captures[0].Digest
			}
		}
		if knowers < 2 {
			t.Errorf("%s: %d nodes know a capture, want the owner and a replica", u, knowers)
			continue
		}
		r, ok := held[holder][id]
		if !ok {
			t.Errorf("%s: capture %s not in holder %s's WARC files", u, id, holder)
			continue
		}
		if r.url != nu || r.digest != digest {
			t.Errorf("%s: capture %s is of %s with digest %s, want %s", u, id, r.url, r.digest, digest)
		}
		h, _ := urls.HostOf(nu)
		if holders[h] == nil {
			holders[h] = map[string]bool{}
		}
		holders[h][holder] = true
	}
	// A host has one owner: a second holder of its pages is a helper.
	shared := 0
	for h, hs := range holders {
		t.Logf("%s: %d holders", h, len(hs))
		if len(hs) > 1 {
			shared++
		}
	}
	if shared == 0 {
		t.Error("every host's captures have one holder: the owners did not learn their helpers' captures")
	}

	// A client that is no member gets every page through one member, its
	// digest verified against the owner's record, and the body is the
	// page the web served.
	client, err := libp2p.New(libp2p.NoListenAddrs)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	member := swarm.Nodes[2].Addrs()[0]
	for i, u := range truth {
		res, err := node.Get(ctx, client, member, u, time.Time{})
		if err != nil {
			t.Errorf("get %s: %v", u, err)
			continue
		}
		if i%10 == 0 {
			// The same through the HTTP API.
			resp, err := http.Get("http://" + swarm.Nodes[2].APIAddr() + "/get?url=" + url.QueryEscape(u))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !bytes.Equal(body, res.Body) {
				t.Errorf("GET /get?url=%s: %s, %d bytes; want the %d bytes get returned", u, resp.Status, len(body), len(res.Body))
			}
		}
		if res.Response.TargetURI != res.URL || strings.Contains(u, "/p/") && !strings.Contains(string(res.Body), "</html>") {
			t.Errorf("get %s: body of %d bytes, record of %s", u, len(res.Body), res.Response.TargetURI)
		}
	}
	for _, tc := range []struct {
		url  string
		want error
	}{
		{"http://" + web.Hosts()[0] + "/never-linked-page", node.ErrNotKnown},
		{"http://nowhere.invalid/", node.ErrNotKnown},
	} {
		if _, err := node.Get(ctx, client, member, tc.url, time.Time{}); !errors.Is(err, tc.want) {
			t.Errorf("get %s: %v, want %v", tc.url, err, tc.want)
		}
		resp, err := http.Get("http://" + swarm.Nodes[2].APIAddr() + "/get?url=" + url.QueryEscape(tc.url))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET /get?url=%s: %s, want 404", tc.url, resp.Status)
		}
	}
}
