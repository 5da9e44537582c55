package node

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/peerstore"
	ma "github.com/multiformats/go-multiaddr"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/census"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// The swarm status protocol (/swarmcrawl/status/1.0.0): a member answers
// with its own counters and ring position, or runs a census of the whole
// swarm (package census) and answers with it. A census asks many members,
// so a node runs one at a time and answers a census asked for within
// censusReuse of the last one with that one.

// censusReuse is how long a census is served again instead of run anew;
// `seed --wait` polls at least twice as far apart.
const censusReuse = time.Second

// maxCounterName bounds a counter's name in a member's report.
const maxCounterName = 64

// maxSuccAddrs bounds the addresses read of a reported successor.
const maxSuccAddrs = 16

// swarmStatus is the node's side of the status protocol.
type swarmStatus struct {
	n *Node

	rateMu   sync.Mutex
	rateAt   time.Time // when the last rate sample was taken
	rateN    int64     // pages fetched then
	lastRate float64

	mu      sync.Mutex // one census at a time
	lastAt  time.Time
	last    census.Result
	lastErr error
}

// CensusConfig bounds the census a node runs for `status --swarm` and the
// swarm page (census.Config; zero fields mean its defaults).
type CensusConfig = census.Config

// handle serves the status protocol on the node's streams.
func (s *swarmStatus) handle() {
	s.n.streams.Handle(protocol.StatusID, func() proto.Message { return &pb.StatusRequest{} },
		func(ctx context.Context, _ p2p.Inbound, req proto.Message) proto.Message {
			return s.serve(ctx, req.(*pb.StatusRequest))
		})
}

// serve answers one status request.
func (s *swarmStatus) serve(ctx context.Context, req *pb.StatusRequest) *pb.StatusReply {
	if !req.Swarm {
		return &pb.StatusReply{Member: encodeReport(s.n.host, s.report())}
	}
	res, err := s.census(ctx)
	if err != nil {
		return &pb.StatusReply{Error: err.Error()}
	}
	return &pb.StatusReply{Census: encodeCensus(s.n.host, res)}
}

// report is the node's own census report.
func (s *swarmStatus) report() census.Report {
	st := s.n.ring.State()
	c := s.n.crawler.Stats()
	outbox := s.n.outbox.Pending()
	// Retries waiting for their time are work left; recrawls are not (a
	// crawl with recrawls on always has some scheduled).
	var retrying int64
	if qc, err := s.n.db.QueueCounts(); err == nil {
		retrying = qc.Retrying
	} else {
		retrying = c.Scheduled // cannot tell them apart: count all as work
	}
	var positions []census.Position
	for i, p := range s.n.pos {
		if i > 0 {
			st = p.ring.State()
		}
		pos := census.Position{ID: st.Self.ID, Pred: st.Self.ID}
		if !st.Predecessor.IsZero() {
			pos.Pred = st.Predecessor.ID
		}
		if len(st.Successors) > 0 {
			pos.Succ = st.Successors[0]
		} else {
			pos.Succ = st.Self
		}
		positions = append(positions, pos)
	}
	counters := map[string]float64{
		"fetched":      float64(c.Fetched),
		"queued":       float64(c.Queued),
		"scheduled":    float64(c.Scheduled),
		"in_flight":    float64(c.InFlight),
		"retrying":     float64(retrying),
		"outbox":       float64(outbox),
		"errors":       float64(c.Errors),
		"dead_letters": float64(c.DeadLetters),
		"hosts":        float64(c.Hosts),
		"seen":         float64(s.n.db.SeenCount()),
		"pages_per_s":  s.rate(c.Fetched),
	}
	for k, v := range c.ErrorsByKind {
		if len(counters) >= protocol.MaxStatusCounters {
			break
		}
		counters["errors."+k] = float64(v)
	}
	return census.Report{
		Machine:   s.n.ring.Self().Machine(),
		Positions: positions,
		Counters:  counters,
		Work:      c.Queued+retrying+c.InFlight+int64(outbox) > 0,
	}
}

// rate is the pages fetched per second between the last two samples at
// least 5 s apart (the samples are the status answers themselves).
func (s *swarmStatus) rate(fetched int64) float64 {
	s.rateMu.Lock()
	defer s.rateMu.Unlock()
	now := time.Now()
	if s.rateAt.IsZero() {
		s.rateAt, s.rateN = s.n.started, 0
	}
	if dt := now.Sub(s.rateAt); dt >= 5*time.Second {
		s.lastRate = math.Max(float64(fetched-s.rateN), 0) / dt.Seconds()
		s.rateAt, s.rateN = now, fetched
	}
	return s.lastRate
}

// census runs a census of the swarm, or returns one run within
// censusReuse.
func (s *swarmStatus) census(ctx context.Context) (census.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.lastAt.IsZero() && time.Since(s.lastAt) < censusReuse {
		return s.last, s.lastErr
	}
	src := statusSource{s: s}
	self := s.n.ring.Self()
	res, err := census.Count(ctx, src, self, rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())), s.n.cfg.Census)
	if err != nil {
		err = fmt.Errorf("swarm status: %w", err)
	}
	s.last, s.lastErr, s.lastAt = res, err, time.Now()
	return res, err
}

// statusSource is census.Source over the status protocol.
type statusSource struct{ s *swarmStatus }

// Status implements census.Source.
func (c statusSource) Status(ctx context.Context, p ring.Peer) (census.Report, error) {
	n := c.s.n
	if p.Machine() == n.ring.Self().Machine() {
		return c.s.report(), nil
	}
	id, err := peer.Decode(p.Machine())
	if err != nil {
		return census.Report{}, fmt.Errorf("status of %s: %w", p.Machine(), err)
	}
	resp := &pb.StatusReply{}
	if err := n.streams.Call(ctx, id, protocol.StatusID, &pb.StatusRequest{}, resp); err != nil {
		return census.Report{}, fmt.Errorf("status of %s: %w", p2p.ShortID(id), err)
	}
	if resp.Error != "" {
		return census.Report{}, fmt.Errorf("status of %s: %s", p2p.ShortID(id), resp.Error)
	}
	r, err := decodeReport(n.host, resp.Member)
	if err != nil {
		return census.Report{}, fmt.Errorf("status of %s: %w", p2p.ShortID(id), err)
	}
	return r, nil
}

// Lookup implements census.Source.
func (c statusSource) Lookup(ctx context.Context, key ring.ID) (ring.Peer, error) {
	owner, _, err := c.s.n.ring.Lookup(ctx, key)
	return owner, err
}

func encodeReport(h host.Host, r census.Report) *pb.MemberStatus {
	m := &pb.MemberStatus{Work: r.Work}
	if id, err := peer.Decode(r.Machine); err == nil {
		m.PeerId = []byte(id)
	}
	for _, p := range r.Positions {
		sp := &pb.StatusPosition{RingId: uint64(p.ID), Pred: uint64(p.Pred)}
		if id, err := peer.Decode(p.Succ.Machine()); err == nil {
			succ := &pb.Peer{RingId: uint64(p.Succ.ID), PeerId: []byte(id)}
			if h != nil {
				for _, a := range h.Peerstore().Addrs(id) {
					if len(succ.Addrs) < maxSuccAddrs {
						succ.Addrs = append(succ.Addrs, a.Bytes())
					}
				}
			}
			sp.Succ = succ
		}
		m.Positions = append(m.Positions, sp)
	}
	names := make([]string, 0, len(r.Counters))
	for k := range r.Counters {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		m.Counters = append(m.Counters, &pb.StatusCounter{Name: k, Value: r.Counters[k]})
	}
	return m
}

// decodeReport checks a member's report as hostile input: a peer ID,
// 1 to MaxStatusPositions positions each with a successor, at most
// MaxStatusCounters distinct, short-named, finite, non-negative counters.
// The successors' addresses (at most maxSuccAddrs each) are remembered
// for a while, so that a walk can reach the next member. h may be nil.
func decodeReport(h host.Host, m *pb.MemberStatus) (census.Report, error) {
	if m == nil {
		return census.Report{}, errors.New("no report")
	}
	id, err := peer.IDFromBytes(m.PeerId)
	if err != nil {
		return census.Report{}, fmt.Errorf("report: peer id: %w", err)
	}
	if len(m.Positions) == 0 || len(m.Positions) > protocol.MaxStatusPositions {
		return census.Report{}, fmt.Errorf("report: %d positions, want 1 to %d", len(m.Positions), protocol.MaxStatusPositions)
	}
	if len(m.Counters) > protocol.MaxStatusCounters {
		return census.Report{}, fmt.Errorf("report: %d counters, want at most %d", len(m.Counters), protocol.MaxStatusCounters)
	}
	r := census.Report{Machine: id.String(), Counters: map[string]float64{}, Work: m.Work}
	for _, p := range m.Positions {
		if p.Succ == nil {
			return census.Report{}, errors.New("report: a position without a successor")
		}
		sid, err := peer.IDFromBytes(p.Succ.PeerId)
		if err != nil {
			return census.Report{}, fmt.Errorf("report: successor: %w", err)
		}
		if h != nil && sid != h.ID() {
			var addrs []ma.Multiaddr
			for _, b := range p.Succ.Addrs[:min(len(p.Succ.Addrs), maxSuccAddrs)] {
				if a, err := ma.NewMultiaddrBytes(b); err == nil {
					addrs = append(addrs, a)
				}
			}
			h.Peerstore().AddAddrs(sid, addrs, peerstore.TempAddrTTL)
		}
		r.Positions = append(r.Positions, census.Position{ID: ring.ID(p.RingId), Pred: ring.ID(p.Pred), Succ: ring.Peer{ID: ring.ID(p.Succ.RingId), Addr: sid.String()}})
	}
	for _, c := range m.Counters {
		if c.Name == "" || len(c.Name) > maxCounterName {
			return census.Report{}, fmt.Errorf("report: counter name of %d bytes", len(c.Name))
		}
		if math.IsNaN(c.Value) || math.IsInf(c.Value, 0) || c.Value < 0 {
			return census.Report{}, fmt.Errorf("report: counter %q = %v", c.Name, c.Value)
		}
		if _, dup := r.Counters[c.Name]; dup {
			return census.Report{}, fmt.Errorf("report: counter %q twice", c.Name)
		}
		r.Counters[c.Name] = c.Value
	}
	return r, nil
}

func encodeTotal(name string, t census.Total) *pb.CensusTotal {
	return &pb.CensusTotal{Name: name, Value: t.Value, Low: t.Low, High: t.High}
}

func encodeCensus(h host.Host, r census.Result) *pb.SwarmCensus {
	c := &pb.SwarmCensus{Method: r.Method, Members: encodeTotal("members", r.Members), Work: r.Work,
		Asked: uint32(r.Asked), Samples: uint32(r.Samples), Confidence: r.Confidence}
	names := make([]string, 0, len(r.Totals))
	for k := range r.Totals {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names[:min(len(names), protocol.MaxStatusCounters)] {
		c.Totals = append(c.Totals, encodeTotal(k, r.Totals[k]))
	}
	for _, rep := range r.Reports[:min(len(r.Reports), protocol.MaxStatusMembers)] {
		m := encodeReport(nil, rep)
		c.Reports = append(c.Reports, m)
	}
	return c
}

// SwarmStatus is a census of the swarm as `status --swarm` and the swarm
// page show it: exact (every member asked; Members lists them) or an
// estimate whose totals carry their interval at the stated confidence.
type SwarmStatus struct {
	Method     string                  `json:"method"`
	Members    census.Total            `json:"members"`
	Totals     map[string]census.Total `json:"totals"`
	Work       bool                    `json:"work"`
	Asked      int                     `json:"asked"`
	Samples    int                     `json:"samples,omitempty"`
	Confidence float64                 `json:"confidence,omitempty"`
	Reports    []MemberReport          `json:"member_reports,omitempty"`
}

// MemberReport is one member's counters in an exact census.
type MemberReport struct {
	PeerID   string             `json:"peer_id"`
	Counters map[string]float64 `json:"counters"`
	Work     bool               `json:"work"`
}

func swarmStatusOf(r census.Result) SwarmStatus {
	s := SwarmStatus{Method: r.Method, Members: r.Members, Totals: r.Totals, Work: r.Work, Asked: r.Asked, Samples: r.Samples, Confidence: r.Confidence}
	for _, rep := range r.Reports {
		s.Reports = append(s.Reports, MemberReport{PeerID: rep.Machine, Counters: rep.Counters, Work: rep.Work})
	}
	return s
}

// decodeCensus checks a census reply as hostile input.
func decodeCensus(c *pb.SwarmCensus) (SwarmStatus, error) {
	if c == nil {
		return SwarmStatus{}, errors.New("no census")
	}
	if c.Method != census.Exact && c.Method != census.Estimate {
		return SwarmStatus{}, fmt.Errorf("census: method %q", c.Method)
	}
	if len(c.Totals) > protocol.MaxStatusCounters || len(c.Reports) > protocol.MaxStatusMembers {
		return SwarmStatus{}, fmt.Errorf("census: %d totals, %d reports", len(c.Totals), len(c.Reports))
	}
	total := func(t *pb.CensusTotal) (census.Total, error) {
		if t == nil {
			return census.Total{}, errors.New("census: a missing total")
		}
		for _, v := range []float64{t.Value, t.Low, t.High} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return census.Total{}, fmt.Errorf("census: total %q: %v", t.Name, v)
			}
		}
		return census.Total{Value: t.Value, Low: t.Low, High: t.High}, nil
	}
	s := SwarmStatus{Method: c.Method, Totals: map[string]census.Total{}, Work: c.Work, Asked: int(c.Asked), Samples: int(c.Samples), Confidence: c.Confidence}
	var err error
	if s.Members, err = total(c.Members); err != nil {
		return SwarmStatus{}, err
	}
	for _, t := range c.Totals {
		if t == nil || t.Name == "" || len(t.Name) > maxCounterName {
			return SwarmStatus{}, errors.New("census: a total without a valid name")
		}
		if s.Totals[t.Name], err = total(t); err != nil {
			return SwarmStatus{}, err
		}
	}
	for _, m := range c.Reports {
		r, err := decodeReport(nil, m)
		if err != nil {
			return SwarmStatus{}, fmt.Errorf("census: %w", err)
		}
		s.Reports = append(s.Reports, MemberReport{PeerID: r.Machine, Counters: r.Counters, Work: r.Work})
	}
	slices.SortFunc(s.Reports, func(a, b MemberReport) int {
		if a.PeerID < b.PeerID {
			return -1
		}
		if a.PeerID > b.PeerID {
			return 1
		}
		return 0
	})
	return s, nil
}

// AskSwarmStatus asks the member at addr (a full multiaddr) for a census
// of the swarm, from h, a client host that need not be a member.
func AskSwarmStatus(ctx context.Context, h host.Host, addr string) (SwarmStatus, error) {
	infos, err := p2p.ParseAddrInfos([]string{addr})
	if err != nil {
		return SwarmStatus{}, fmt.Errorf("swarm status: %w", err)
	}
	if len(infos) != 1 {
		return SwarmStatus{}, fmt.Errorf("swarm status: peer %q: need exactly one /p2p/ address", addr)
	}
	if err := h.Connect(ctx, infos[0]); err != nil {
		return SwarmStatus{}, fmt.Errorf("swarm status: %w: %s: %w", p2p.ErrNoConnection, addr, err)
	}
	s := p2p.NewStreams(h, 0, p2p.NoRingWork)
	defer s.Close()
	resp := &pb.StatusReply{}
	if err := s.Call(ctx, infos[0].ID, protocol.StatusID, &pb.StatusRequest{Swarm: true}, resp); err != nil {
		return SwarmStatus{}, fmt.Errorf("swarm status: %w", err)
	}
	if resp.Error != "" {
		return SwarmStatus{}, fmt.Errorf("swarm status: %s", resp.Error)
	}
	st, err := decodeCensus(resp.Census)
	if err != nil {
		return SwarmStatus{}, fmt.Errorf("swarm status: %w", err)
	}
	return st, nil
}

// SwarmStatus runs (or reuses) a census of the swarm from this node.
func (n *Node) SwarmStatus(ctx context.Context) (SwarmStatus, error) {
	res, err := n.swarm.census(ctx)
	if err != nil {
		return SwarmStatus{}, err
	}
	return swarmStatusOf(res), nil
}

// handleSwarmStatus serves GET /swarm: the census as JSON (the swarm
// page's data). A census that fails is a 503 with the reason.
func (n *Node) handleSwarmStatus(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
	defer cancel()
	st, err := n.SwarmStatus(ctx)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, st)
}
