package node

import (
	"context"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// handoffCatcher is a shard handler that keeps the handoff it is sent.
type handoffCatcher struct{ got chan *shard.HandoffRequest }

func (h handoffCatcher) HandleReplicate(context.Context, ring.Peer, *shard.WriteRequest) *shard.WriteReply {
	return &shard.WriteReply{StoreError: "no space left on device"}
}

func (h handoffCatcher) HandleHandoff(_ context.Context, _ ring.Peer, req *shard.HandoffRequest) *shard.HandoffReply {
	h.got <- req
	return &shard.HandoffReply{Accepted: true}
}

// HandleDigest answers a witness question with one claim over the range.
func (h handoffCatcher) HandleDigest(_ context.Context, _ ring.Peer, req *shard.DigestRequest) *shard.DigestReply {
	if !req.Witness {
		return &shard.DigestReply{}
	}
	return &shard.DigestReply{Witnessed: []shard.Claim{{Range: req.Range, Epoch: shard.Epoch{N: 7, Owner: "w"}}}}
}

func (h handoffCatcher) HandlePull(context.Context, ring.Peer, *shard.PullRequest) *shard.PullReply {
	return &shard.PullReply{}
}

// A range's state crosses the wire as typed protocol messages and comes
// back as it left: a fetched URL's metadata (zero times included), a
// host's politeness clock and robots.txt (an empty 2xx body stays an empty
// body, a 404 carries none), and a record never fetched stays without
// metadata.
func TestRangeStateWireRoundTrip(t *testing.T) {
	client, server := newTestHost(t), newTestHost(t)
	if err := client.Connect(context.Background(), server.Peerstore().PeerInfo(server.ID())); err != nil {
		t.Fatal(err)
	}
	srv := p2p.NewStreams(server, 0, p2p.NoRingWork)
	t.Cleanup(srv.Close)
	catcher := handoffCatcher{got: make(chan *shard.HandoffRequest, 1)}
	p2p.NewShardTransport(server, srv).Serve(catcher)

	fetched := time.Unix(0, 1_700_000_000_123_456_789)
	meta := store.URLMeta{URL: "http://a.test/p", ETag: `"v1"`, Fingerprint: 0xfeed, ContentHash: 0xbeef,
		LastFetch: fetched, Interval: time.Hour, Status: 200, Changes: 1, Fetches: 3} // NextCrawl: the zero time
	rawMeta, version, err := recordState(meta)
	if err != nil {
		t.Fatal(err)
	}
	key := urls.HostKey("a.test")
	records := []shard.Record{
		{Key: key, Hash: urls.URLHash(meta.URL), URL: meta.URL, Depth: 2, Redirects: 1, Done: true, Meta: rawMeta, MetaVersion: version},
		{Key: key, Hash: urls.URLHash("http://a.test/new"), URL: "http://a.test/new", Depth: 3},
	}
	snaps := []crawl.HostSnapshot{
		{Host: "a.test", Key: key, NotBefore: fetched.Add(time.Minute), Origin: "http://a.test",
			RobotsStatus: 200, RobotsFetched: fetched, Robots: []byte("User-agent: *\nDisallow: /x\n")},
		{Host: "b.test", Key: urls.HostKey("b.test"), Origin: "https://b.test", RobotsStatus: 200, RobotsFetched: fetched, Robots: []byte{}},
		{Host: "c.test", Key: urls.HostKey("c.test"), Origin: "http://c.test", RobotsStatus: 404, RobotsFetched: fetched},
		{Host: "d.test", Key: urls.HostKey("d.test"), NotBefore: fetched},
	}
	hosts, err := hostStates(snaps)
	if err != nil {
		t.Fatal(err)
	}
	req := &shard.HandoffRequest{Range: shard.Range{From: 1, To: 2}, Epoch: shard.Epoch{N: 3, Owner: "x"}, Records: records, Hosts: hosts, Final: true}
	if _, err := p2p.NewShardTransport(client, p2p.NewStreams(client, 0, p2p.NoRingWork)).Handoff(context.Background(), p2p.RingPeer(server.ID()), req); err != nil {
		t.Fatal(err)
	}
	// A replica's failure to store reaches the owner over the wire.
	wr, err := p2p.NewShardTransport(client, p2p.NewStreams(client, 0, p2p.NoRingWork)).Replicate(context.Background(), p2p.RingPeer(server.ID()), &shard.WriteRequest{Records: records})
	if err != nil || wr.StoreError != "no space left on device" {
		t.Fatalf("replicate to a replica whose store fails: %+v, %v", wr, err)
	}
	// A witness question, with no buckets, and its answer cross the wire.
	wq := shard.Range{From: 5, To: 9}
	dr, err := p2p.NewShardTransport(client, p2p.NewStreams(client, 0, p2p.NoRingWork)).Digest(context.Background(), p2p.RingPeer(server.ID()), &shard.DigestRequest{Range: wq, Witness: true})
	if want := []shard.Claim{{Range: wq, Epoch: shard.Epoch{N: 7, Owner: "w"}}}; err != nil || len(dr.Sums) != 0 || !reflect.DeepEqual(dr.Witnessed, want) {
		t.Fatalf("witness question: %+v, %v; want witnessed %v", dr, err, want)
	}
	got := <-catcher.got
	if len(got.Records) != 2 || len(got.Hosts) != len(snaps) {
		t.Fatalf("got %d records and %d hosts, want 2 and %d", len(got.Records), len(got.Hosts), len(snaps))
	}
	back, err := decodeRecordState(got.Records[0].Meta)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, meta) || got.Records[0].MetaVersion != version {
		t.Fatalf("URL state round trip:\n got %+v (version %d)\nwant %+v (version %d)", back, got.Records[0].MetaVersion, meta, version)
	}
	if got.Records[1].Meta != nil || got.Records[1].MetaVersion != 0 {
		t.Fatalf("a record never fetched came back with state %x, version %d", got.Records[1].Meta, got.Records[1].MetaVersion)
	}
	for i, h := range got.Hosts {
		s, err := decodeHostState(h)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(s, snaps[i]) {
			t.Errorf("host %d round trip:\n got %+v\nwant %+v", i, s, snaps[i])
		}
	}
}

// A host state that does not fit together is refused, whatever its bytes:
// garbage, a politeness state naming another host's robots.txt, a status
// out of range. Nothing decoded is unusable.
func TestHostStateDecodeRefusesMalformed(t *testing.T) {
	key := urls.HostKey("a.test")
	for name, p := range map[string]*pb.HostPoliteness{
		"origin of another host": {RobotsOrigin: "http://b.test", RobotsStatus: 200},
		"status out of range":    {RobotsOrigin: "http://a.test", RobotsStatus: 1000},
		"origin without status":  {RobotsOrigin: "http://a.test"},
	} {
		data, err := proto.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if s, err := decodeHostState(shard.HostState{Key: key, Host: "a.test", Data: data}); err == nil {
			t.Errorf("%s: accepted %+v", name, s)
		}
	}
	if s, err := decodeHostState(shard.HostState{Key: key + 1, Host: "a.test"}); err == nil {
		t.Errorf("a key that is not the host's: accepted %+v", s)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		b := make([]byte, rng.IntN(64))
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		s, err := decodeHostState(shard.HostState{Key: key, Host: "a.test", Data: b})
		if err == nil {
			if cerr := s.Check(); cerr != nil {
				t.Fatalf("random bytes %x decoded to an unusable snapshot: %v", b, cerr)
			}
		}
	}
}

// State from peers is held to the crawler's rules: a record's URL
// normalised, its key and hash the URL's, its depth within the crawl's and
// its metadata its own; a host state's key the host's and its politeness
// state consistent. What is malformed is dropped, the rest kept.
func TestPeerStateChecks(t *testing.T) {
	c := peerState{keyMode: urls.KeyHost, maxDepth: 16}
	u := "http://a.test/p"
	key, _ := urls.TaskKey(u, urls.KeyHost)
	meta, version, err := recordState(store.URLMeta{URL: u, LastFetch: time.Unix(5, 0), Status: 200, Fetches: 1})
	if err != nil {
		t.Fatal(err)
	}
	otherMeta, otherVersion, _ := recordState(store.URLMeta{URL: "http://a.test/q", LastFetch: time.Unix(5, 0), Status: 200, Fetches: 1})
	good := shard.Record{Key: key, Hash: urls.URLHash(u), URL: u, Depth: 3, Redirects: 1, Done: true, Meta: meta, MetaVersion: version}
	if err := c.record(good); err != nil {
		t.Fatalf("a good record: %v", err)
	}
	for name, mutate := range map[string]func(r *shard.Record){
		"not normalised":      func(r *shard.Record) { r.URL = "HTTP://A.test:80/p" },
		"not a URL":           func(r *shard.Record) { r.URL = "mailto:x@a.test" },
		"key of another host": func(r *shard.Record) { r.Key++ },
		"hash of another URL": func(r *shard.Record) { r.Hash++ },
		"too deep":            func(r *shard.Record) { r.Depth = 17 },
		"negative depth":      func(r *shard.Record) { r.Depth = -1 },
		"endless redirects":   func(r *shard.Record) { r.Redirects = maxRedirects + 1 },
		"metadata garbage":    func(r *shard.Record) { r.Meta = []byte{0xff, 0xff} },
		"metadata of another": func(r *shard.Record) { r.Meta, r.MetaVersion = otherMeta, otherVersion },
		"a deep seed":         func(r *shard.Record) { r.Seed = true },
		"a redirected seed":   func(r *shard.Record) { r.Seed, r.Depth = true, 0 },
	} {
		r := good
		mutate(&r)
		if err := c.record(r); err == nil {
			t.Errorf("%s: accepted %+v", name, r)
		}
	}
	seed := good
	seed.Seed, seed.Depth, seed.Redirects = true, 0, 0
	if err := c.record(seed); err != nil {
		t.Errorf("a seed record: %v", err)
	}
	hosts, err := hostStates([]crawl.HostSnapshot{{Host: "a.test", Key: urls.HostKey("a.test"), Origin: "http://a.test", RobotsStatus: 404, RobotsFetched: time.Unix(5, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	bad := hosts[0]
	bad.Key++
	recs, kept, err := c.filter([]shard.Record{good, {URL: "junk"}}, []shard.HostState{hosts[0], bad})
	if err == nil || len(recs) != 1 || recs[0].URL != u || len(kept) != 1 || kept[0].Key != urls.HostKey("a.test") {
		t.Fatalf("filter kept %v and %v (%v): want the good record and host state only, with an error", recs, kept, err)
	}
}
