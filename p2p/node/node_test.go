package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	libp2pproto "github.com/libp2p/go-libp2p/core/protocol"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/localswarm"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// noWeb is a crawl configuration whose fetches never leave the process.
func noWeb() crawl.Config {
	cc := crawl.DefaultConfig()
	cc.Proxy = crawl.NoProxy
	cc.Transport = failingTransport{}
	return cc
}

func startSwarm(t *testing.T, n int) *localswarm.Swarm {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := localswarm.Start(ctx, localswarm.Options{Nodes: n, Dir: t.TempDir(), Crawl: noWeb()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

func newClient(t *testing.T) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.NoListenAddrs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	return h
}

func connect(t *testing.T, h host.Host, n *node.Node) peer.ID {
	t.Helper()
	infos, err := p2p.ParseAddrInfos(n.Addrs())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Connect(context.Background(), infos[0]); err != nil {
		t.Fatal(err)
	}
	return infos[0].ID
}

func TestIdentitySurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := node.DefaultConfig()
	cfg.DataDir = dir
	cfg.Host = p2p.Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, DisableNAT: true}
	cfg.RingWork = p2p.NoRingWork
	cfg.Crawl = noWeb()
	first, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	id := first.ID()
	placed := selves(first)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "identity.key"))
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Errorf("identity key mode %o, want 600", mode)
	}
	// Restarted as a member of a swarm, whose ring would place its
	// positions elsewhere.
	swarm := startSwarm(t, 2)
	cfg.Bootstrap = swarm.Nodes[0].Addrs()
	second, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if second.ID() != id {
		t.Fatalf("peer ID changed across restart: %s then %s", id, second.ID())
	}
	if p2p.RingID(id) != second.Ring().Self().ID {
		t.Fatal("ring position is not derived from the peer ID")
	}
	// The positions placed at the first start are kept: a restarted node
	// takes back its own ranges, not new ones.
	if got := selves(second); !slices.Equal(got, placed) {
		t.Fatalf("positions moved across restart:\n%v\nthen\n%v", placed, got)
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}
	// With another --vnodes they are placed again, position 0 where the
	// peer ID puts it.
	cfg.VNodes, cfg.Bootstrap = 4, nil
	third, err := node.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	if got := selves(third); len(got) != 4 || got[0] != placed[0] {
		t.Fatalf("4 positions after 16: %v", got)
	}
}

// selves lists the ring members of n's positions, position 0 first.
func selves(n *node.Node) []ring.Peer {
	var out []ring.Peer
	for _, r := range n.Positions() {
		out = append(out, r.Self())
	}
	return out
}

func TestCorruptIdentityIsAnError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "identity.key"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := node.DefaultConfig()
	cfg.DataDir = dir
	cfg.Host = p2p.Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, DisableNAT: true}
	cfg.RingWork = p2p.NoRingWork
	if _, err := node.New(cfg); err == nil || !strings.Contains(err.Error(), "identity") {
		t.Fatalf("corrupt identity: got %v, want an identity error (a silent new key would move the node on the ring)", err)
	}
}

// TestLookupsOverLibp2p: on a ring of real hosts, every node resolves
// every key to its true successor (a position of some node) through the
// wire protocol.
func TestLookupsOverLibp2p(t *testing.T) {
	s := startSwarm(t, 6)
	var members []ring.Peer
	for _, n := range s.Nodes {
		for _, pos := range n.Positions() {
			members = append(members, pos.Self())
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ctx := context.Background()
	for _, n := range s.Nodes {
		for i := 0; i < 30; i++ {
			key := ring.ID(rng.Uint64())
			got, _, err := n.Ring().Lookup(ctx, key)
			if err != nil {
				t.Fatalf("lookup %s from %s: %v", key, n.Ring().Self(), err)
			}
			if want := ring.OwnerOf(members, key); got != want {
				t.Fatalf("lookup %s from %s = %s, want %s", key, n.Ring().Self(), got, want)
			}
		}
	}
}

// TestForgedRingPositionRefused: a peer cannot claim a ring position other
// than the one its peer ID gives, and so cannot make itself predecessor
// of (and owner of keys just before) a node of its choosing.
func TestForgedRingPositionRefused(t *testing.T) {
	s := startSwarm(t, 2)
	target := s.Nodes[0]
	client := newClient(t)
	id := connect(t, client, target)
	before := target.Ring().Predecessor()
	forged := &pb.Peer{RingId: uint64(target.Ring().Self().ID - 1), PeerId: []byte(client.ID())}
	resp := &pb.RingResponse{}
	err := p2p.NewStreams(client, 0, p2p.NoRingWork).Call(context.Background(), id, protocol.RingID,
		&pb.RingRequest{Body: &pb.RingRequest_Notify{Notify: &pb.Notify{Candidate: forged}}}, resp)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(resp.Error, "claims ring position") {
		t.Fatalf("forged notify answered %q, want a refusal", resp.Error)
	}
	if after := target.Ring().Predecessor(); after != before {
		t.Fatalf("forged notify changed the predecessor from %s to %s", before, after)
	}
}

// TestHostileStreamsDoNotHurtNode sends garbage, oversized frames and
// half-written frames on every protocol; the node must refuse each and keep
// serving.
func TestHostileStreamsDoNotHurtNode(t *testing.T) {
	s := startSwarm(t, 2)
	target := s.Nodes[1]
	client := newClient(t)
	id := connect(t, client, target)
	payloads := map[string][]byte{
		"garbage":     []byte("\x05\xff\xff\xff\xff\xff"),
		"huge length": {0xff, 0xff, 0xff, 0xff, 0x0f},
		"truncated":   {0x40, 1, 2, 3},
	}
	for _, pid := range []string{protocol.RingID, protocol.TasksID, protocol.SeedID} {
		for name, data := range payloads {
			st, err := client.NewStream(context.Background(), id, libp2pproto.ID(pid))
			if err != nil {
				t.Fatal(err)
			}
			_ = st.SetDeadline(time.Now().Add(15 * time.Second))
			_, _ = st.Write(data)
			_ = st.CloseWrite()
			buf := make([]byte, 64)
			n, err := st.Read(buf)
			if err == nil && n > 0 {
				t.Errorf("%s %s: node answered %q to a broken frame", pid, name, buf[:n])
			}
			_ = st.Reset()
		}
	}
	// Still alive and serving.
	resp := &pb.RingResponse{}
	if err := p2p.NewStreams(client, 0, p2p.NoRingWork).Call(context.Background(), id, protocol.RingID,
		&pb.RingRequest{Body: &pb.RingRequest_Ping{Ping: &pb.Ping{}}}, resp); err != nil || resp.GetAck() == nil {
		t.Fatalf("node stopped serving after hostile streams: %v %v", err, resp)
	}
}

// TestTaskBatchAccounting: an owner accounts for every task it is sent:
// its own keys accepted or duplicate, foreign keys handed back untouched,
// malformed URLs rejected with a reason.
func TestTaskBatchAccounting(t *testing.T) {
	s := startSwarm(t, 3)
	target := s.Nodes[0]
	var mine, foreign []string
	for i := 0; len(mine) < 3 || len(foreign) < 3; i++ {
		u := "http://host" + string(rune('a'+i%26)) + strings.Repeat("x", i/26) + ".test/page"
		key, err := urls.TaskKey(u, urls.KeyHost)
		if err != nil {
			t.Fatal(err)
		}
		if target.Owns(ring.ID(key)) {
			mine = append(mine, u)
		} else {
			foreign = append(foreign, u)
		}
	}
	mine, foreign = mine[:3], foreign[:3]
	batch := &pb.TaskBatch{}
	for _, u := range append(append(slices.Clone(mine), mine[0]), foreign...) {
		batch.Tasks = append(batch.Tasks, &pb.Task{Url: u, Depth: 2})
	}
	batch.Tasks = append(batch.Tasks, &pb.Task{Url: "gopher://old.test/"}, &pb.Task{Url: "http://deep.test/", Depth: 1 << 20})

	client := newClient(t)
	id := connect(t, client, target)
	resp := &pb.TaskBatchResult{}
	if err := p2p.NewStreams(client, 0, p2p.NoRingWork).Call(context.Background(), id, protocol.TasksID, batch, resp); err != nil {
		t.Fatal(err)
	}
	if resp.Error != "" || resp.Accepted != 3 || resp.Duplicates != 1 || len(resp.NotOwned) != 3 || len(resp.Rejected) != 2 {
		t.Fatalf("got accepted=%d duplicates=%d not_owned=%d rejected=%v error=%q; want 3/1/3/2",
			resp.Accepted, resp.Duplicates, len(resp.NotOwned), resp.Rejected, resp.Error)
	}
	for i, task := range resp.NotOwned {
		if task.Url != foreign[i] || task.Depth != 2 {
			t.Errorf("not-owned task %d came back changed: %v, want %s at depth 2", i, task, foreign[i])
		}
	}
	for _, r := range resp.Rejected {
		if r.Reason == "" {
			t.Errorf("rejection of %s has no reason", r.Url)
		}
	}
	if got := target.Status().Seen; got != 3 {
		t.Errorf("seen set holds %d URLs, want 3", got)
	}
}

// TestDiscoveryMergesLoneNodes: two nodes started apart, each alone on its
// own ring, find each other through the discovery DHT once their hosts are
// connected, and end up on one ring.
func TestDiscoveryMergesLoneNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for DHT discovery")
	}
	var nodes []*node.Node
	for i := 0; i < 2; i++ {
		cfg := node.DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.Host = p2p.Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, DisableNAT: true}
		cfg.RingWork = p2p.NoRingWork
		cfg.Crawl = noWeb()
		cfg.Logger = slog.New(slog.DiscardHandler)
		n, err := node.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		if err := n.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	connect(t, nodes[1].Host(), nodes[0])
	// One ring: every position of either node has its true neighbours
	// among the positions of both.
	merged := &localswarm.Swarm{Nodes: nodes}
	deadline := time.Now().Add(45 * time.Second)
	for !merged.Converged() {
		if time.Now().After(deadline) {
			t.Fatalf("lone nodes never merged: successors %v and %v", nodes[0].Ring().Successors(), nodes[1].Ring().Successors())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A node helps the owners it replicates for whether or not it delegates
// its own hot hosts: with host keys it serves the fetch protocol even with
// HotQueue None; with URL keys no owner delegates, and it does not.
func TestNodeServesFetchWhateverItsHotQueue(t *testing.T) {
	for _, c := range []struct {
		name  string
		mode  urls.KeyMode
		serve bool
	}{{"host keys", urls.KeyHost, true}, {"url keys", urls.KeyURL, false}} {
		cfg := node.DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.Host = p2p.Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, DisableNAT: true}
		cfg.RingWork = p2p.NoRingWork
		cfg.DisableDiscovery = true
		cfg.Logger = slog.New(slog.DiscardHandler)
		cfg.Crawl = noWeb()
		cfg.Crawl.HotQueue = crawl.None
		cfg.Crawl.KeyMode = c.mode
		n, err := node.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		served := slices.Contains(n.Host().Mux().Protocols(), libp2pproto.ID(protocol.FetchID))
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
		if served != c.serve {
			t.Errorf("%s, HotQueue None: fetch protocol served %v, want %v", c.name, served, c.serve)
		}
	}
}

// TestMergeFromStrangerCannotInjectURLs is the attack of a peer that hands
// a node "merged" records of its own making: an unnormalised URL, and a
// URL filed under a ring key the node owns although its host hashes
// elsewhere. Neither reaches the node's seen set or queue, when a member
// of the ring sends them; a well-formed record of the node's own range
// still merges from the member. A stranger, which the node's ring does
// not place, merges nothing, not even the well-formed record (issue 29).
func TestMergeFromStrangerCannotInjectURLs(t *testing.T) {
	s := startSwarm(t, 3)
	target := s.Nodes[0]
	self := target.Ring().Self().ID
	key := uint64(self) // the node owns its own point of the ring
	var mine string
	for i := 0; mine == ""; i++ {
		u := fmt.Sprintf("http://own%d.test/", i)
		if k, _ := urls.TaskKey(u, urls.KeyHost); target.Ring().Owns(ring.ID(k)) {
			mine = u
		}
	}
	mineKey, _ := urls.TaskKey(mine, urls.KeyHost)
	forged := []*pb.ShardRecord{
		{Key: key, Hash: urls.URLHash("http://victim.test/x"), Url: "http://victim.test/x"}, // key of another host
		{Key: key, Hash: 1, Url: "HTTP://Victim.test:80/a/../b"},                            // not normalised
		{Key: mineKey, Hash: urls.URLHash(mine), Url: mine, Depth: 1 << 20},                 // depth unbounded
		{Key: mineKey, Hash: urls.URLHash(mine) + 1, Url: mine},                             // hash not the URL's
	}
	good := &pb.ShardRecord{Key: mineKey, Hash: urls.URLHash(mine), Url: mine, Depth: 1}
	merge := func(from host.Host, rec *pb.ShardRecord) *pb.HandoffReply {
		t.Helper()
		req := &pb.HandoffRequest{Range: &pb.ShardRange{From: rec.Key - 1, To: rec.Key}, Epoch: &pb.Epoch{N: 1, Owner: from.ID().String()},
			Records: []*pb.ShardRecord{rec}, Merge: true, Final: true}
		reply := &pb.HandoffReply{}
		if err := p2p.NewStreams(from, 0, p2p.NoRingWork).Call(context.Background(), target.ID(), protocol.HandoffID, req, reply); err != nil {
			t.Fatal(err)
		}
		return reply
	}
	before := target.Status().Seen
	client := newClient(t)
	connect(t, client, target)
	if reply := merge(client, good); reply.Reason == "" {
		t.Errorf("the stranger's merge was taken")
	}
	if got := target.Status().Seen; got != before {
		t.Fatalf("seen set went from %d to %d after the stranger's merge: want it unchanged", before, got)
	}
	member := s.Nodes[1].Host()
	for _, rec := range append(forged, good) {
		merge(member, rec)
	}
	if got := target.Status().Seen; got != before+1 {
		t.Fatalf("seen set went from %d to %d after the member's merges: want only the well-formed record (+1)", before, got)
	}
}
