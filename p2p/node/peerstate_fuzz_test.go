package node

import (
	"reflect"
	"slices"
	"testing"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/internal/fuzzcorpus"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// fuzzPeerRecord is a shard record as an honest owner replicates it.
func fuzzPeerRecord(tb testing.TB, u string, mode urls.KeyMode, depth int, m *store.URLMeta) shard.Record {
	tb.Helper()
	key, err := urls.TaskKey(u, mode)
	if err != nil {
		tb.Fatal(err)
	}
	r := shard.Record{Key: key, Hash: urls.URLHash(u), URL: u, Depth: depth, Redirects: depth / 2}
	if m != nil {
		if r.Meta, r.MetaVersion, err = recordState(*m); err != nil {
			tb.Fatal(err)
		}
	}
	return r
}

// FuzzPeerState runs the checks a node applies to state a peer hands over
// (peerState: replicate writes, handoffs, merges, pulled pages) on one
// record and one host state built from the input, next to an honest
// record and host state, in either key mode (mode's low bit). A record is
// accepted only with its URL normalised (Normalize leaves it as it is, at
// most MaxURLLength bytes), its hash and ring key the URL's, depth and
// redirects within bounds, and metadata, if any, that decodes, is valid
// and is about that URL. A host state is accepted only with its key the
// host's and a politeness state that decodes and passes its check. filter
// keeps exactly the accepted ones, in order, the honest ones included, and
// reports an error exactly when it dropped something.
func FuzzPeerState(f *testing.F) {
	const maxDepth = 16
	fetched := fuzzMeta("http://a.test/page")
	type seed struct {
		rec  shard.Record
		host shard.HostState
	}
	hostState := func(s crawl.HostSnapshot) shard.HostState {
		hs, err := hostStates([]crawl.HostSnapshot{s})
		if err != nil {
			f.Fatal(err)
		}
		return hs[0]
	}
	robots := hostState(crawl.HostSnapshot{Host: "a.test", Key: urls.HostKey("a.test"), Origin: "http://a.test", RobotsStatus: 200,
		RobotsFetched: fuzzFetched, Robots: []byte("User-agent: *\nDisallow: /private/\n")})
	seeds := map[string]seed{
		"fetched-with-robots": {fuzzPeerRecord(f, fetched.URL, urls.KeyHost, 2, &fetched), robots},
		"seed-clock-only": {fuzzPeerRecord(f, "https://b.test/", urls.KeyHost, 0, nil),
			hostState(crawl.HostSnapshot{Host: "b.test", Key: urls.HostKey("b.test"), NotBefore: fuzzFetched})},
		"not-normalised": {shard.Record{Key: urls.HostKey("a.test"), Hash: urls.URLHash("HTTP://A.test:80/x"), URL: "HTTP://A.test:80/x", Depth: 1}, robots},
		"ipv6-robots-404": {fuzzPeerRecord(f, "http://[::1]:8080/a?b=c", urls.KeyHost, 5, nil),
			hostState(crawl.HostSnapshot{Host: "::1", Key: urls.HostKey("::1"), Origin: "http://[::1]:8080", RobotsStatus: 404, RobotsFetched: fuzzFetched})},
	}
	args := func(s seed, mode uint8) []any {
		r, h := s.rec, s.host
		return []any{mode, r.URL, r.Key, r.Hash, int64(r.Depth), int64(r.Redirects), r.Meta, r.MetaVersion, h.Key, h.Host, h.Data}
	}
	for _, s := range seeds {
		r, h := s.rec, s.host
		f.Add(uint8(0), r.URL, r.Key, r.Hash, int64(r.Depth), int64(r.Redirects), r.Meta, r.MetaVersion, h.Key, h.Host, h.Data)
	}
	fuzzcorpus.Write(f, func() map[string][]any {
		out := map[string][]any{}
		for name, s := range seeds {
			out[name] = args(s, 0)
		}
		return out
	})
	f.Fuzz(func(t *testing.T, mode uint8, u string, key, hash uint64, depth, redirects int64, meta []byte, version uint64,
		hostKey uint64, host string, data []byte) {
		keyMode := urls.KeyMode(mode & 1)
		c := peerState{keyMode: keyMode, maxDepth: maxDepth}
		rec := shard.Record{Key: key, Hash: hash, URL: u, Depth: int(depth), Redirects: int(redirects), Done: mode&2 != 0, Meta: meta, MetaVersion: version}
		hs := shard.HostState{Key: hostKey, Host: host, Data: data}

		recOK := c.record(rec) == nil
		if recOK {
			n, err := urls.Normalize(nil, u)
			switch {
			case err != nil || n != u || len(u) > urls.MaxURLLength:
				t.Fatalf("record of %q (normalised %q, %v) accepted", u, n, err)
			case urls.URLHash(u) != hash:
				t.Fatalf("record of %q with hash %x accepted", u, hash)
			case int64(rec.Depth) != depth || rec.Depth < 0 || rec.Depth > maxDepth || int64(rec.Redirects) != redirects || rec.Redirects < 0 || rec.Redirects > maxRedirects:
				t.Fatalf("record with depth %d, %d redirects accepted", depth, redirects)
			}
			if k, err := urls.TaskKey(u, keyMode); err != nil || k != key {
				t.Fatalf("record of %q with key %x accepted in %v mode (key %x, %v)", u, key, keyMode, k, err)
			}
			if keyMode == urls.KeyHost {
				if h, err := urls.HostOf(u); err != nil || urls.HostKey(h) != key {
					t.Fatalf("record of %q: key %x is not its host's", u, key)
				}
			}
			if len(meta) > 0 {
				m, err := decodeRecordState(meta)
				if err != nil {
					t.Fatalf("record with undecodable metadata accepted: %v", err)
				}
				checkMeta(t, "record metadata", m)
				if m.URL != "" && m.URL != u {
					t.Fatalf("metadata of %q accepted for %q", m.URL, u)
				}
			}
		}
		hostOK := c.host(hs) == nil
		if hostOK {
			if hostKey != urls.HostKey(host) {
				t.Fatalf("host state of %q with key %x accepted", host, hostKey)
			}
			s, err := decodeHostState(hs)
			if err != nil {
				t.Fatalf("host state accepted that does not decode: %v", err)
			}
			if err := s.Check(); err != nil {
				t.Fatalf("host state accepted that fails its check: %v", err)
			}
		}

		// filter: the honest record and host state first and last, the
		// fuzzed ones between them.
		honest := seeds["fetched-with-robots"]
		honestRec := honest.rec
		if keyMode == urls.KeyURL {
			honestRec = fuzzPeerRecord(t, fetched.URL, urls.KeyURL, 2, &fetched)
		}
		recs := []shard.Record{honestRec, rec, honestRec}
		hosts := []shard.HostState{honest.host, hs, honest.host}
		wantRecs, wantHosts := []shard.Record{honestRec, honestRec}, []shard.HostState{honest.host, honest.host}
		if recOK {
			wantRecs = slices.Insert(wantRecs, 1, rec)
		}
		if hostOK {
			wantHosts = slices.Insert(wantHosts, 1, hs)
		}
		gotRecs, gotHosts, err := c.filter(recs, hosts)
		if (err == nil) != (recOK && hostOK) {
			t.Fatalf("filter error %v with record accepted %v, host state accepted %v", err, recOK, hostOK)
		}
		if !reflect.DeepEqual(gotRecs, wantRecs) || !reflect.DeepEqual(gotHosts, wantHosts) {
			t.Fatalf("filter kept %d records and %d host states, want %d and %d", len(gotRecs), len(gotHosts), len(wantRecs), len(wantHosts))
		}
	})
}
