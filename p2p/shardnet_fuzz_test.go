package p2p

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/internal/fuzzcorpus"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// shardMessages are the messages of the replicate, handoff, digest and
// pull protocols, in the order a fuzz input's kind byte picks them.
var shardMessages = []func() proto.Message{
	func() proto.Message { return &pb.WriteRequest{} },
	func() proto.Message { return &pb.WriteReply{} },
	func() proto.Message { return &pb.HandoffRequest{} },
	func() proto.Message { return &pb.HandoffReply{} },
	func() proto.Message { return &pb.DigestRequest{} },
	func() proto.Message { return &pb.DigestReply{} },
	func() proto.Message { return &pb.PullRequest{} },
	func() proto.Message { return &pb.PullReply{} },
}

// FuzzShardMessages decodes arbitrary bytes as each message of the shard
// protocols (kind picks it) and then as ShardTransport does, server side
// (Serve) for requests and client side for replies: claims, records and
// host states through decodeClaims, decodeRecords and decodeHosts. Those
// refuse a whole message or accept only what docs/protocol.md allows (at
// most MaxShardRecords of each; claims with range and epoch; records with
// a URL of 1 to MaxURLBytes bytes, no negative depth or redirects, metadata
// of at most shard.MaxMetaBytes that is a UrlMeta, no version without
// metadata; host states of a 1 to 255-byte host with a politeness state of
// at most 1 MiB), and what they accept encodes back (encodeClaims,
// encodeRecords, encodeHosts) to messages that decode to the same values.
func FuzzShardMessages(f *testing.F) {
	for i, m := range sampleShardMessages() {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), b)
	}
	f.Add(uint8(0), []byte("\x12\x02\x1a\x00")) // a record without a URL
	fuzzcorpus.Write(f, func() map[string][]any {
		seeds := map[string][]any{}
		for i, m := range sampleShardMessages() {
			b, err := proto.Marshal(m)
			if err != nil {
				f.Fatal(err)
			}
			name := strings.ToLower(string(m.ProtoReflect().Descriptor().Name()))
			seeds[name] = []any{uint8(i), b}
		}
		return seeds
	})
	f.Fuzz(func(t *testing.T, kind uint8, body []byte) {
		m := shardMessages[int(kind)%len(shardMessages)]()
		if err := proto.Unmarshal(body, m); err != nil {
			return
		}
		switch m := m.(type) {
		case *pb.WriteRequest:
			checkClaims(t, m.Claims)
			checkRecords(t, m.Records)
			checkHosts(t, m.Hosts)
		case *pb.WriteReply:
			checkClaims(t, m.Rejected)
		case *pb.HandoffRequest:
			if m.Range != nil {
				checkRecords(t, m.Records)
				checkHosts(t, m.Hosts)
				checkRange(t, m.Range)
			}
			_ = decodeEpoch(m.Epoch)
		case *pb.HandoffReply:
			if m.HasOwned {
				checkRange(t, m.Owned)
			}
			if e := decodeEpoch(m.Epoch); !reflect.DeepEqual(decodeEpoch(encodeEpoch(e)), e) {
				t.Fatalf("epoch %v does not survive a round trip", e)
			}
		case *pb.DigestRequest:
			if m.Range != nil {
				checkRange(t, m.Range)
			}
		case *pb.DigestReply:
			checkClaims(t, m.Witnessed)
		case *pb.PullRequest:
			if m.Range != nil {
				checkRange(t, m.Range)
			}
		case *pb.PullReply:
			checkRecords(t, m.Records)
			checkHosts(t, m.Hosts)
			checkClaims(t, m.Epochs)
		}
	})
}

func checkRange(t *testing.T, r *pb.ShardRange) {
	t.Helper()
	got := decodeRange(r)
	if uint64(got.From) != r.GetFrom() || uint64(got.To) != r.GetTo() || decodeRange(encodeRange(got)) != got {
		t.Fatalf("range %v decoded as %v", r, got)
	}
}

func checkClaims(t *testing.T, cs []*pb.Claim) {
	t.Helper()
	claims, err := decodeClaims(cs)
	if err != nil {
		return
	}
	if len(claims) != len(cs) || len(claims) > protocol.MaxShardRecords {
		t.Fatalf("%d claims decoded from %d (cap %d)", len(claims), len(cs), protocol.MaxShardRecords)
	}
	for i, c := range cs {
		if c.Range == nil || c.Epoch == nil {
			t.Fatalf("claim %d without range or epoch accepted: %v", i, c)
		}
		if want := (shard.Claim{Range: decodeRange(c.Range), Epoch: decodeEpoch(c.Epoch)}); claims[i] != want {
			t.Fatalf("claim %d decoded as %v, want %v", i, claims[i], want)
		}
	}
	back, err := decodeClaims(encodeClaims(claims))
	if err != nil || !reflect.DeepEqual(back, claims) {
		t.Fatalf("claims do not survive a round trip: %v, %v != %v", err, back, claims)
	}
}

func checkRecords(t *testing.T, rs []*pb.ShardRecord) {
	t.Helper()
	recs, err := decodeRecords(rs)
	if err != nil {
		return
	}
	if len(recs) != len(rs) || len(recs) > protocol.MaxShardRecords {
		t.Fatalf("%d records decoded from %d (cap %d)", len(recs), len(rs), protocol.MaxShardRecords)
	}
	for i, r := range recs {
		switch {
		case r.URL == "" || len(r.URL) > protocol.MaxURLBytes:
			t.Fatalf("record %d with a URL of %d bytes accepted", i, len(r.URL))
		case r.Depth < 0 || r.Redirects < 0:
			t.Fatalf("record %d with depth %d, redirects %d accepted", i, r.Depth, r.Redirects)
		case len(r.Meta) > shard.MaxMetaBytes:
			t.Fatalf("record %d with %d bytes of metadata accepted", i, len(r.Meta))
		case len(r.Meta) == 0 && r.MetaVersion != 0:
			t.Fatalf("record %d with metadata version %d and no metadata accepted", i, r.MetaVersion)
		case r.Key != rs[i].Key || r.Hash != rs[i].Hash || r.URL != rs[i].Url || r.Done != rs[i].Done ||
			r.Depth != int(rs[i].Depth) || r.Redirects != int(rs[i].Redirects) || r.MetaVersion != rs[i].MetaVersion:
			t.Fatalf("record %d decoded as %+v from %v", i, r, rs[i])
		}
		if len(r.Meta) > 0 {
			var m pb.UrlMeta
			if err := proto.Unmarshal(r.Meta, &m); err != nil || !proto.Equal(&m, rs[i].Meta) {
				t.Fatalf("record %d: metadata %x is not the record's UrlMeta %v: %v", i, r.Meta, rs[i].Meta, err)
			}
		}
	}
	back, err := decodeRecords(encodeRecords(recs))
	if err != nil || !slices.EqualFunc(back, recs, sameRecord) {
		t.Fatalf("records do not survive a round trip: %v\n got %+v\nwant %+v", err, back, recs)
	}
}

// sameRecord compares records, an empty Meta equal to a nil one: both
// mean "never fetched".
func sameRecord(a, b shard.Record) bool {
	ma, mb := a.Meta, b.Meta
	a.Meta, b.Meta = nil, nil
	return reflect.DeepEqual(a, b) && bytes.Equal(ma, mb)
}

func checkHosts(t *testing.T, hs []*pb.HostState) {
	t.Helper()
	hosts, err := decodeHosts(hs)
	if err != nil {
		return
	}
	if len(hosts) != len(hs) || len(hosts) > protocol.MaxShardRecords {
		t.Fatalf("%d host states decoded from %d (cap %d)", len(hosts), len(hs), protocol.MaxShardRecords)
	}
	for i, h := range hosts {
		if h.Host == "" || len(h.Host) > 255 || len(h.Data) > maxHostStateBytes || h.Key != hs[i].Key || h.Host != hs[i].Host {
			t.Fatalf("host state %d decoded as %q (key %x, %d bytes of state) from %v", i, h.Host, h.Key, len(h.Data), hs[i])
		}
		var p pb.HostPoliteness
		if err := proto.Unmarshal(h.Data, &p); err != nil || !proto.Equal(&p, hs[i].Politeness) {
			t.Fatalf("host state %d: state %x is not the politeness state %v: %v", i, h.Data, hs[i].Politeness, err)
		}
	}
	back, err := decodeHosts(encodeHosts(hosts))
	if err != nil || !reflect.DeepEqual(back, hosts) {
		t.Fatalf("host states do not survive a round trip: %v\n got %+v\nwant %+v", err, back, hosts)
	}
}

// sampleShardMessages are messages of the shard protocols as nodes send
// them, one of each type of shardMessages, in that order.
func sampleShardMessages() []proto.Message {
	claims := []shard.Claim{
		{Range: shard.Range{From: 1 << 62, To: 1 << 63}, Epoch: shard.Epoch{N: 7, Owner: "12D3KooWGzxzKZYveHXtpG6AsrUJBcWxHBFS2HsEoGTxrMLvKXtf"}},
		{Range: shard.Range{From: 1<<64 - 10, To: 10}, Epoch: shard.Epoch{N: 1, Owner: "12D3KooWB"}},
	}
	meta, err := proto.Marshal(&pb.UrlMeta{Url: "http://a.test/page", Etag: `"e1"`, LastFetchNs: 1767366245000000000,
		NextCrawlNs: 1767452645000000000, IntervalNs: 86400e9, Status: 200, Changes: 1, Fetches: 3, Fingerprint: 0x0123456789abcdef})
	if err != nil {
		panic(err)
	}
	recs := []shard.Record{
		{Key: 1<<62 + 5, Hash: 0xaf63bd4c8601b7df, URL: "http://a.test/page", Depth: 2, Redirects: 1, Done: true, Meta: meta, MetaVersion: 1767366245000000000},
		{Key: 1<<62 + 5, Hash: 0x3f1c, URL: "http://a.test/next?q=1", Depth: 3},
		{Key: 1<<62 + 5, Hash: 0x51ed, URL: "http://a.test/", Seed: true},
	}
	politeness, err := proto.Marshal(&pb.HostPoliteness{NotBeforeNs: 1767366246000000000, RobotsOrigin: "http://a.test", RobotsStatus: 200,
		RobotsFetchedNs: 1767366240000000000, Robots: []byte("User-agent: *\nDisallow: /private/\n")})
	if err != nil {
		panic(err)
	}
	hosts := []shard.HostState{{Key: 1<<62 + 5, Host: "a.test", Data: politeness}}
	rng := encodeRange(claims[0].Range)
	return []proto.Message{
		&pb.WriteRequest{Claims: encodeClaims(claims), Records: encodeRecords(recs), Hosts: encodeHosts(hosts)},
		&pb.WriteReply{Rejected: encodeClaims(claims[:1]), StoreError: "no space left on device"},
		&pb.HandoffRequest{Range: rng, Epoch: encodeEpoch(claims[0].Epoch), Records: encodeRecords(recs), Hosts: encodeHosts(hosts), Final: true},
		&pb.HandoffReply{Accepted: true, Owned: rng, HasOwned: true, Epoch: encodeEpoch(shard.Epoch{N: 8, Owner: "12D3KooWB"})},
		&pb.DigestRequest{Range: rng, Buckets: 64},
		&pb.DigestReply{Sums: []uint64{1, 2, 3}},
		&pb.PullRequest{Range: rng, AfterKey: 5, AfterHash: 6, HasAfter: true},
		&pb.PullReply{Records: encodeRecords(recs), Hosts: encodeHosts(hosts), Epochs: encodeClaims(claims), More: true, NextKey: 1<<62 + 5, NextHash: 0x3f1c},
	}
}
