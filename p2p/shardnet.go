package p2p

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/p2p/seedsig"
	"github.com/swarmcrawl/swarmcrawl/p2p/shard"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// maxDigestBuckets bounds the digest buckets a peer may ask for.
const maxDigestBuckets = 4096

// ShardTransport carries replication, handoff, digest and pull messages
// over libp2p streams. It implements shard.Transport for one of the
// node's ring positions (Position gives the others): every request names
// the position it comes from and the one it is for, so that a node with
// several positions (virtual nodes) serves each with that position's
// manager, and judges the sender as the position it speaks for. A call
// from one of the node's positions to another is served in process, with
// the checks a remote call gets, and no stream: a range that moves
// between two positions of one node crosses no network.
type ShardTransport struct {
	streams *Streams
	self    peer.ID
	// from is the position this view speaks for.
	from uint32
	// local holds the handlers of the node's positions once Serve ran;
	// every view of the transport shares it.
	local *atomic.Pointer[[]shard.Handler]
}

var _ shard.Transport = (*ShardTransport)(nil)

// NewShardTransport returns the shard transport over s of the node h, for
// its first position (the one its peer ID gives).
func NewShardTransport(h host.Host, s *Streams) *ShardTransport {
	return &ShardTransport{streams: s, self: h.ID(), local: new(atomic.Pointer[[]shard.Handler])}
}

// Position returns the transport as position i of the node speaks
// through it: the same streams and handlers, requests sent as from i.
func (t *ShardTransport) Position(i int) *ShardTransport {
	if i < 0 || i >= MaxPositions {
		panic(fmt.Sprintf("shard transport: position %d, want 0 to %d", i, MaxPositions-1))
	}
	v := *t
	v.from = uint32(i)
	return &v
}

// positioned is a shard request that names its positions.
type positioned interface {
	proto.Message
	GetToPosition() uint32
	GetFromPosition() uint32
}

// call sends req to the position to, and serves it here when to is one of
// the node's own positions.
func (t *ShardTransport) call(ctx context.Context, to ring.Peer, pid string, req positioned, resp proto.Message) error {
	id, _, err := PositionOf(to)
	if err != nil {
		return fmt.Errorf("%s: peer %q: %w", pid, to.Addr, err)
	}
	if id != t.self {
		return t.streams.Call(ctx, id, pid, req, resp)
	}
	hs := t.local.Load()
	if hs == nil {
		return fmt.Errorf("%s: position %s: %w", pid, to, ErrNotDelivered)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// The reply is copied as a stream would: the caller owns what it gets.
	out := serveShard(ctx, *hs, id, pid, req)
	proto.Reset(resp)
	proto.Merge(resp, out)
	return nil
}

// Replicate sends an owner's writes to a replica.
func (t *ShardTransport) Replicate(ctx context.Context, to ring.Peer, req *shard.WriteRequest) (*shard.WriteReply, error) {
	resp := &pb.WriteReply{}
	msg := &pb.WriteRequest{Claims: encodeClaims(req.Claims), Records: encodeRecords(req.Records), Hosts: encodeHosts(req.Hosts),
		Held: encodeRecordIDs(req.Held), WantReceipt: req.WantReceipt, Watched: encodeRecords(req.Watched),
		ToPosition: positionIndex(to), FromPosition: t.from}
	if err := t.call(ctx, to, protocol.ReplicateID, msg, resp); err != nil {
		return nil, err
	}
	if resp.Error != "" {
		return nil, fmt.Errorf("replicate to %s: %s", to, resp.Error)
	}
	rejected, err := decodeClaims(resp.Rejected)
	if err != nil {
		return nil, fmt.Errorf("replicate to %s: %w", to, err)
	}
	out := &shard.WriteReply{Rejected: rejected, StoreError: resp.StoreError, Refused: resp.Refused}
	if n := len(resp.Receipt); n > 0 && n <= shard.MaxReceiptSig {
		out.Receipt = resp.Receipt
	}
	return out, nil
}

func encodeRecordIDs(ids []shard.RecordID) []*pb.RecordId {
	if len(ids) == 0 {
		return nil
	}
	out := make([]*pb.RecordId, len(ids))
	for i, id := range ids {
		out[i] = &pb.RecordId{Key: id.Key, Hash: id.Hash}
	}
	return out
}

func decodeRecordIDs(ids []*pb.RecordId) ([]shard.RecordID, error) {
	if len(ids) > protocol.MaxShardRecords {
		return nil, fmt.Errorf("%d held records exceed %d", len(ids), protocol.MaxShardRecords)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	out := make([]shard.RecordID, len(ids))
	for i, id := range ids {
		out[i] = shard.RecordID{Key: id.GetKey(), Hash: id.GetHash()}
	}
	return out, nil
}

// Handoff sends one chunk of a range's state to its new owner.
func (t *ShardTransport) Handoff(ctx context.Context, to ring.Peer, req *shard.HandoffRequest) (*shard.HandoffReply, error) {
	resp := &pb.HandoffReply{}
	msg := &pb.HandoffRequest{
		Range: encodeRange(req.Range), Epoch: encodeEpoch(req.Epoch),
		Records: encodeRecords(req.Records), Hosts: encodeHosts(req.Hosts),
		Final: req.Final, Merge: req.Merge, Reroute: req.Reroute,
		ToPosition: positionIndex(to), FromPosition: t.from,
	}
	if err := t.call(ctx, to, protocol.HandoffID, msg, resp); err != nil {
		return nil, err
	}
	if resp.Error != "" {
		return nil, fmt.Errorf("handoff to %s: %s", to, resp.Error)
	}
	out := &shard.HandoffReply{Accepted: resp.Accepted, HasOwned: resp.HasOwned, Reason: resp.Reason, Epoch: decodeEpoch(resp.Epoch)}
	if resp.HasOwned {
		out.Owned = decodeRange(resp.Owned)
	}
	return out, nil
}

// Digest asks for the bucket digests of a range, and with req.Witness for
// the claims the peer witnessed over it.
func (t *ShardTransport) Digest(ctx context.Context, to ring.Peer, req *shard.DigestRequest) (*shard.DigestReply, error) {
	resp := &pb.DigestReply{}
	msg := &pb.DigestRequest{Range: encodeRange(req.Range), Buckets: uint32(max(req.Buckets, 0)), Witness: req.Witness,
		ToPosition: positionIndex(to), FromPosition: t.from}
	if err := t.call(ctx, to, protocol.DigestID, msg, resp); err != nil {
		return nil, err
	}
	if resp.Error != "" {
		return nil, fmt.Errorf("digest from %s: %s", to, resp.Error)
	}
	if len(resp.Sums) != max(req.Buckets, 0) {
		return nil, fmt.Errorf("digest from %s: %d sums for %d buckets", to, len(resp.Sums), req.Buckets)
	}
	witnessed, err := decodeClaims(resp.Witnessed)
	if err != nil {
		return nil, fmt.Errorf("digest from %s: %w", to, err)
	}
	return &shard.DigestReply{Sums: resp.Sums, Witnessed: witnessed}, nil
}

// Pull asks for a page of the state a peer holds of a range.
func (t *ShardTransport) Pull(ctx context.Context, to ring.Peer, req *shard.PullRequest) (*shard.PullReply, error) {
	resp := &pb.PullReply{}
	msg := &pb.PullRequest{Range: encodeRange(req.Range), AfterKey: req.AfterKey, AfterHash: req.AfterHash, HasAfter: req.HasAfter,
		ToPosition: positionIndex(to), FromPosition: t.from}
	if err := t.call(ctx, to, protocol.PullID, msg, resp); err != nil {
		return nil, err
	}
	if resp.Error != "" {
		return nil, fmt.Errorf("pull from %s: %s", to, resp.Error)
	}
	recs, err := decodeRecords(resp.Records)
	if err != nil {
		return nil, fmt.Errorf("pull from %s: %w", to, err)
	}
	hosts, err := decodeHosts(resp.Hosts)
	if err != nil {
		return nil, fmt.Errorf("pull from %s: %w", to, err)
	}
	epochs, err := decodeClaims(resp.Epochs)
	if err != nil {
		return nil, fmt.Errorf("pull from %s: %w", to, err)
	}
	return &shard.PullReply{Owner: resp.Owner, Records: recs, Hosts: hosts, Epochs: epochs, More: resp.More, NextKey: resp.NextKey, NextHash: resp.NextHash}, nil
}

// Serve answers the four shard protocols for the node's ring positions:
// hs[i] serves the requests for position i (RingPeerAt), nil where the
// node holds no position i, hs[0] those for the position its peer ID
// gives. A request for a position the node does
// not have, or from a sender position of no peer, is refused, and so is
// one that does not decode into valid records.
func (t *ShardTransport) Serve(hs ...shard.Handler) {
	if len(hs) == 0 || len(hs) > MaxPositions {
		panic(fmt.Sprintf("shard transport: %d positions, want 1 to %d", len(hs), MaxPositions))
	}
	t.local.Store(&hs)
	for _, pid := range []string{protocol.ReplicateID, protocol.HandoffID, protocol.DigestID, protocol.PullID} {
		t.streams.Handle(pid, func() proto.Message { return newShardRequest(pid) },
			func(ctx context.Context, in Inbound, m proto.Message) proto.Message {
				return serveShard(ctx, hs, in.From, pid, m.(positioned))
			})
	}
}

// newShardRequest is an empty request of the shard protocol pid.
func newShardRequest(pid string) positioned {
	switch pid {
	case protocol.ReplicateID:
		return &pb.WriteRequest{}
	case protocol.HandoffID:
		return &pb.HandoffRequest{}
	case protocol.DigestID:
		return &pb.DigestRequest{}
	default:
		return &pb.PullRequest{}
	}
}

// serveShard answers one shard request from sender with the handler of
// the position it names.
func serveShard(ctx context.Context, hs []shard.Handler, sender peer.ID, pid string, m positioned) proto.Message {
	var bad string
	switch {
	case m.GetToPosition() >= uint32(len(hs)) || hs[m.GetToPosition()] == nil:
		bad = fmt.Sprintf("%s: no ring position %d here", pid, m.GetToPosition())
	case m.GetFromPosition() >= MaxPositions:
		bad = fmt.Sprintf("%s: sender position %d, at most %d", pid, m.GetFromPosition(), MaxPositions-1)
	}
	var h shard.Handler
	var from ring.Peer
	if bad == "" {
		h, from = hs[m.GetToPosition()], RingPeerAt(sender, int(m.GetFromPosition()))
	}
	switch req := m.(type) {
	case *pb.WriteRequest:
		if bad != "" {
			return &pb.WriteReply{Error: bad}
		}
		claims, err := decodeClaims(req.Claims)
		recs, err2 := decodeRecords(req.Records)
		hosts, err3 := decodeHosts(req.Hosts)
		watched, err4 := decodeRecords(req.Watched)
		held, err5 := decodeRecordIDs(req.Held)
		if err := errors.Join(err, err2, err3, err4, err5); err != nil {
			return &pb.WriteReply{Error: err.Error()}
		}
		r := h.HandleReplicate(ctx, from, &shard.WriteRequest{Claims: claims, Records: recs, Hosts: hosts,
			Held: held, WantReceipt: req.WantReceipt, Watched: watched})
		return &pb.WriteReply{Rejected: encodeClaims(r.Rejected), StoreError: r.StoreError, Refused: r.Refused, Receipt: r.Receipt}
	case *pb.HandoffRequest:
		if bad != "" {
			return &pb.HandoffReply{Error: bad}
		}
		if req.Range == nil {
			return &pb.HandoffReply{Error: "handoff: no range"}
		}
		recs, err := decodeRecords(req.Records)
		hosts, err2 := decodeHosts(req.Hosts)
		if err := errors.Join(err, err2); err != nil {
			return &pb.HandoffReply{Error: err.Error()}
		}
		r := h.HandleHandoff(ctx, from, &shard.HandoffRequest{
			Range: decodeRange(req.Range), Epoch: decodeEpoch(req.Epoch),
			Records: recs, Hosts: hosts, Final: req.Final, Merge: req.Merge, Reroute: req.Reroute,
		})
		out := &pb.HandoffReply{Accepted: r.Accepted, HasOwned: r.HasOwned, Reason: r.Reason, Epoch: encodeEpoch(r.Epoch)}
		if r.HasOwned {
			out.Owned = encodeRange(r.Owned)
		}
		return out
	case *pb.DigestRequest:
		if bad != "" {
			return &pb.DigestReply{Error: bad}
		}
		if req.Range == nil || (req.Buckets == 0 && !req.Witness) || req.Buckets > maxDigestBuckets {
			return &pb.DigestReply{Error: fmt.Sprintf("digest: need a range and 1..%d buckets (or none, with witness)", maxDigestBuckets)}
		}
		r := h.HandleDigest(ctx, from, &shard.DigestRequest{Range: decodeRange(req.Range), Buckets: int(req.Buckets), Witness: req.Witness})
		return &pb.DigestReply{Sums: r.Sums, Witnessed: encodeClaims(r.Witnessed)}
	case *pb.PullRequest:
		if bad != "" {
			return &pb.PullReply{Error: bad}
		}
		if req.Range == nil {
			return &pb.PullReply{Error: "pull: no range"}
		}
		r := h.HandlePull(ctx, from, &shard.PullRequest{Range: decodeRange(req.Range), AfterKey: req.AfterKey, AfterHash: req.AfterHash, HasAfter: req.HasAfter})
		return &pb.PullReply{
			Owner: r.Owner, Records: encodeRecords(r.Records), Hosts: encodeHosts(r.Hosts),
			Epochs: encodeClaims(r.Epochs), More: r.More, NextKey: r.NextKey, NextHash: r.NextHash,
		}
	default:
		panic(fmt.Sprintf("shard transport: %T is no shard request", m))
	}
}

func encodeRange(r shard.Range) *pb.ShardRange {
	return &pb.ShardRange{From: uint64(r.From), To: uint64(r.To)}
}

func decodeRange(r *pb.ShardRange) shard.Range {
	return shard.Range{From: ring.ID(r.GetFrom()), To: ring.ID(r.GetTo())}
}

func encodeEpoch(e shard.Epoch) *pb.Epoch { return &pb.Epoch{N: e.N, Owner: e.Owner} }

func decodeEpoch(e *pb.Epoch) shard.Epoch { return shard.Epoch{N: e.GetN(), Owner: e.GetOwner()} }

func encodeClaims(cs []shard.Claim) []*pb.Claim {
	out := make([]*pb.Claim, len(cs))
	for i, c := range cs {
		out[i] = &pb.Claim{Range: encodeRange(c.Range), Epoch: encodeEpoch(c.Epoch)}
	}
	return out
}

func decodeClaims(cs []*pb.Claim) ([]shard.Claim, error) {
	if len(cs) > protocol.MaxShardRecords {
		return nil, fmt.Errorf("%d claims exceed %d", len(cs), protocol.MaxShardRecords)
	}
	out := make([]shard.Claim, len(cs))
	for i, c := range cs {
		if c.GetRange() == nil || c.GetEpoch() == nil {
			return nil, fmt.Errorf("claim %d: missing range or epoch", i)
		}
		out[i] = shard.Claim{Range: decodeRange(c.Range), Epoch: decodeEpoch(c.Epoch)}
	}
	return out, nil
}

// Shard records and host states hold their URL metadata and politeness
// state as the encoded protocol messages (pb.UrlMeta, pb.HostPoliteness)
// the node writes: the shard layer stores and forwards them without
// reading them, and here they become typed fields of the wire messages.

// encodeRecords puts records on the wire. A stored Meta that is not a
// UrlMeta (written by an older version, or damaged) is left out, with its
// version, so that it cannot displace a good one at the receiver.
func encodeRecords(rs []shard.Record) []*pb.ShardRecord {
	out := make([]*pb.ShardRecord, len(rs))
	for i, r := range rs {
		rec := &pb.ShardRecord{Key: r.Key, Hash: r.Hash, Url: r.URL, Depth: int32(r.Depth), Redirects: int32(r.Redirects), Done: r.Done, Seed: r.Seed}
		if r.Seed {
			rec.SeedProof, _ = seedsig.Decode(r.SeedProof) // a damaged one travels as none
		}
		if len(r.Meta) > 0 {
			m := &pb.UrlMeta{}
			if err := proto.Unmarshal(r.Meta, m); err == nil {
				rec.Meta, rec.MetaVersion = m, r.MetaVersion
			}
		}
		out[i] = rec
	}
	return out
}

// decodeRecords refuses the whole message when any record is malformed:
// a replica that stored part of a bad write would disagree with its owner.
// A metadata version without metadata is malformed too: it would erase
// the URL's metadata wherever it merged.
func decodeRecords(rs []*pb.ShardRecord) ([]shard.Record, error) {
	if len(rs) > protocol.MaxShardRecords {
		return nil, fmt.Errorf("%d records exceed %d", len(rs), protocol.MaxShardRecords)
	}
	out := make([]shard.Record, len(rs))
	for i, r := range rs {
		var meta []byte // an empty UrlMeta encodes to nothing: no metadata
		if r.Meta != nil {
			var err error
			if meta, err = proto.Marshal(r.Meta); err != nil {
				return nil, fmt.Errorf("record %d: meta: %w", i, err)
			}
		}
		var proof []byte
		if r.Seed {
			var err error
			if proof, err = seedsig.Encode(r.SeedProof); err != nil {
				return nil, fmt.Errorf("record %d: %w", i, err)
			}
		}
		if r.Url == "" || len(r.Url) > protocol.MaxURLBytes || r.Depth < 0 || r.Redirects < 0 ||
			len(meta) > shard.MaxMetaBytes || len(meta) == 0 && r.MetaVersion != 0 {
			return nil, fmt.Errorf("record %d: malformed (url %d bytes, depth %d, redirects %d, meta %d bytes, meta version %d)",
				i, len(r.Url), r.Depth, r.Redirects, len(meta), r.MetaVersion)
		}
		out[i] = shard.Record{Key: r.Key, Hash: r.Hash, URL: r.Url, Depth: int(r.Depth), Redirects: int(r.Redirects), Done: r.Done, Seed: r.Seed, SeedProof: proof, Meta: meta, MetaVersion: r.MetaVersion}
	}
	return out, nil
}

// encodeHosts puts host states on the wire, leaving out any whose stored
// state is not a HostPoliteness.
func encodeHosts(hs []shard.HostState) []*pb.HostState {
	out := make([]*pb.HostState, 0, len(hs))
	for _, h := range hs {
		p := &pb.HostPoliteness{}
		if err := proto.Unmarshal(h.Data, p); err != nil {
			continue
		}
		out = append(out, &pb.HostState{Key: h.Key, Host: h.Host, Politeness: p})
	}
	return out
}

// maxHostStateBytes bounds one host's state: its clock and robots.txt
// (which the crawler caps well below this).
const maxHostStateBytes = 1 << 20

func decodeHosts(hs []*pb.HostState) ([]shard.HostState, error) {
	if len(hs) > protocol.MaxShardRecords {
		return nil, fmt.Errorf("%d host states exceed %d", len(hs), protocol.MaxShardRecords)
	}
	out := make([]shard.HostState, len(hs))
	for i, h := range hs {
		if h.Host == "" || len(h.Host) > 255 || h.Politeness == nil {
			return nil, fmt.Errorf("host state %d: malformed", i)
		}
		data, err := proto.Marshal(h.Politeness)
		if err != nil || len(data) > maxHostStateBytes {
			return nil, fmt.Errorf("host state %d: politeness state malformed or above %d bytes", i, maxHostStateBytes)
		}
		out[i] = shard.HostState{Key: h.Key, Host: h.Host, Data: data}
	}
	return out, nil
}
