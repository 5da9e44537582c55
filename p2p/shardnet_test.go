package p2p

import (
	"strings"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// A shard message with one malformed record or host state is refused
// whole: a replica that stored part of a bad write would disagree with its
// owner, and a record that claims a metadata version without metadata
// would erase the good metadata of the URL wherever it merged.
func TestShardDecodeRefusesMalformed(t *testing.T) {
	good := func() *pb.ShardRecord {
		return &pb.ShardRecord{Key: 1, Hash: 2, Url: "http://a.test/", Depth: 1, Done: true,
			Meta: &pb.UrlMeta{Url: "http://a.test/", LastFetchNs: 5}, MetaVersion: 5}
	}
	if _, err := decodeRecords([]*pb.ShardRecord{good()}); err != nil {
		t.Fatalf("a good record: %v", err)
	}
	for name, mutate := range map[string]func(r *pb.ShardRecord){
		"no url":                  func(r *pb.ShardRecord) { r.Url = "" },
		"long url":                func(r *pb.ShardRecord) { r.Url += strings.Repeat("a", protocol.MaxURLBytes) },
		"negative depth":          func(r *pb.ShardRecord) { r.Depth = -1 },
		"negative redirects":      func(r *pb.ShardRecord) { r.Redirects = -1 },
		"huge meta":               func(r *pb.ShardRecord) { r.Meta.Etag = strings.Repeat("e", 17<<10) },
		"version without meta":    func(r *pb.ShardRecord) { r.Meta = nil },
		"version with empty meta": func(r *pb.ShardRecord) { r.Meta = &pb.UrlMeta{} },
	} {
		r := good()
		mutate(r)
		if recs, err := decodeRecords([]*pb.ShardRecord{good(), r}); err == nil {
			t.Errorf("%s: accepted %+v", name, recs)
		}
	}
	hosts := []*pb.HostState{{Key: 1, Host: "a.test", Politeness: &pb.HostPoliteness{RobotsStatus: 200}}}
	if _, err := decodeHosts(hosts); err != nil {
		t.Fatalf("a good host state: %v", err)
	}
	for name, h := range map[string]*pb.HostState{
		"no host":       {Key: 1, Politeness: &pb.HostPoliteness{}},
		"no politeness": {Key: 1, Host: "a.test"},
		"huge robots":   {Key: 1, Host: "a.test", Politeness: &pb.HostPoliteness{Robots: make([]byte, 2<<20)}},
	} {
		if hs, err := decodeHosts(append(hosts, h)); err == nil {
			t.Errorf("%s: accepted %+v", name, hs)
		}
	}
}
