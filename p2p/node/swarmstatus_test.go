package node

import (
	"math"
	"strings"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/p2p/census"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

func testPeerID(t *testing.T) peer.ID {
	t.Helper()
	_, pub, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestMemberReportRoundTripAndHostileInput: a member's report survives
// the wire, and every malformed report a peer could send is refused.
func TestMemberReportRoundTripAndHostileInput(t *testing.T) {
	self, succ := testPeerID(t), testPeerID(t)
	r := census.Report{Machine: self.String(), Work: true,
		Positions: []census.Position{{ID: 10, Pred: 5, Succ: ring.Peer{ID: 20, Addr: succ.String()}}},
		Counters:  map[string]float64{"fetched": 7, "queued": 3}}
	m := encodeReport(nil, r)
	got, err := decodeReport(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	if got.Machine != r.Machine || !got.Work || got.Positions[0] != r.Positions[0] || got.Counters["fetched"] != 7 || got.Counters["queued"] != 3 {
		t.Fatalf("round trip: %+v, want %+v", got, r)
	}
	for name, mutate := range map[string]func(m *pb.MemberStatus){
		"bad peer id":        func(m *pb.MemberStatus) { m.PeerId = []byte("x") },
		"no positions":       func(m *pb.MemberStatus) { m.Positions = nil },
		"too many positions": func(m *pb.MemberStatus) { m.Positions = make([]*pb.StatusPosition, 65) },
		"no successor":       func(m *pb.MemberStatus) { m.Positions[0].Succ = nil },
		"bad successor":      func(m *pb.MemberStatus) { m.Positions[0].Succ.PeerId = nil },
		"NaN":                func(m *pb.MemberStatus) { m.Counters[0].Value = math.NaN() },
		"infinite":           func(m *pb.MemberStatus) { m.Counters[0].Value = math.Inf(1) },
		"negative":           func(m *pb.MemberStatus) { m.Counters[0].Value = -1 },
		"empty name":         func(m *pb.MemberStatus) { m.Counters[0].Name = "" },
		"long name":          func(m *pb.MemberStatus) { m.Counters[0].Name = strings.Repeat("a", 65) },
		"duplicate name":     func(m *pb.MemberStatus) { m.Counters[1].Name = m.Counters[0].Name },
		"too many counters": func(m *pb.MemberStatus) {
			for i := range 64 {
				m.Counters = append(m.Counters, &pb.StatusCounter{Name: strings.Repeat("c", i+1)})
			}
		},
	} {
		bad := proto.Clone(m).(*pb.MemberStatus)
		mutate(bad)
		if _, err := decodeReport(nil, bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A census reply is checked too, its member reports included.
	c := encodeCensus(nil, census.Result{Method: census.Exact, Members: census.Total{Value: 1, Low: 1, High: 1},
		Totals: map[string]census.Total{"fetched": {Value: 7, Low: 7, High: 7}}, Reports: []census.Report{r}})
	if st, err := decodeCensus(c); err != nil || st.Totals["fetched"].Value != 7 || len(st.Reports) != 1 {
		t.Fatalf("census round trip: %+v, %v", st, err)
	}
	for name, mutate := range map[string]func(c *pb.SwarmCensus){
		"bad method":     func(c *pb.SwarmCensus) { c.Method = "guess" },
		"no members":     func(c *pb.SwarmCensus) { c.Members = nil },
		"negative total": func(c *pb.SwarmCensus) { c.Totals[0].High = -1 },
		"bad report":     func(c *pb.SwarmCensus) { c.Reports[0].PeerId = nil },
		"too many reports": func(c *pb.SwarmCensus) {
			for range 256 {
				c.Reports = append(c.Reports, c.Reports[0])
			}
		},
	} {
		bad := proto.Clone(c).(*pb.SwarmCensus)
		mutate(bad)
		if _, err := decodeCensus(bad); err == nil {
			t.Errorf("census %s: accepted", name)
		}
	}
}
