package node

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
	"github.com/swarmcrawl/swarmcrawl/store"
	"github.com/swarmcrawl/swarmcrawl/store/warc"
)

// Get states, as GetReply.State carries them.
const (
	getFound             = 0
	getNotKnown          = 1
	getQueued            = 2
	getHolderUnreachable = 3
	getFailed            = 4
	getOutOfScope        = 5
)

// Errors of Get, one per way a get can end without the page; each has its
// own exit code in the command line.
var (
	// ErrNotKnown: the URL's owner has no record of it: never crawled.
	ErrNotKnown = errors.New("never crawled")
	// ErrQueued: the owner knows the URL but has not fetched it yet.
	ErrQueued = errors.New("queued, not fetched yet")
	// ErrHolderUnreachable: the node holding the capture did not answer.
	ErrHolderUnreachable = errors.New("holder unreachable")
	// ErrOutOfScope: the URL's owner would not crawl it (--scope).
	ErrOutOfScope = errors.New("out of scope")
	// ErrDigestMismatch: the records the member returned do not match the
	// owner's capture record (payload digest or record ID).
	ErrDigestMismatch = errors.New("payload digest mismatch")
)

// maxExchangeBytes caps the exchange a holder reads and sends, leaving
// room in a reply for its other fields.
const maxExchangeBytes = protocol.MaxCaptureMsgBytes - 64<<10

// serveCaptures answers the get and capture protocols.
func (n *Node) serveCaptures() {
	n.streams.Handle(protocol.GetID, func() proto.Message { return &pb.GetRequest{} },
		func(ctx context.Context, _ p2p.Inbound, m proto.Message) proto.Message {
			return n.serveGet(ctx, m.(*pb.GetRequest))
		})
	n.streams.Handle(protocol.CaptureID, func() proto.Message { return &pb.CaptureRequest{} },
		func(_ context.Context, _ p2p.Inbound, m proto.Message) proto.Message {
			b, err := n.readCapture(m.(*pb.CaptureRequest).RecordId)
			if err != nil {
				return &pb.CaptureReply{Error: err.Error()}
			}
			return &pb.CaptureReply{Warc: b}
		})
}

// readCapture returns the records of the exchange this node archived
// whose response record is id.
func (n *Node) readCapture(id string) ([]byte, error) {
	if id == "" || len(id) > store.MaxRecordIDLen {
		return nil, fmt.Errorf("record ID of %d bytes", len(id))
	}
	loc, ok, err := n.db.RecordLocationOf(id)
	if err != nil {
		return nil, fmt.Errorf("capture %.60q: %w", id, err)
	}
	if !ok {
		return nil, fmt.Errorf("capture %.60q: not held here", id)
	}
	b, err := warc.ReadExchange(n.archiveDir(), warc.Location{File: loc.File, Offset: loc.Offset, Length: loc.Length}, maxExchangeBytes)
	if err != nil {
		return nil, fmt.Errorf("capture %.60q: %w", id, err)
	}
	return b, nil
}

func (n *Node) serveGet(ctx context.Context, req *pb.GetRequest) *pb.GetReply {
	if len(req.Url) > protocol.MaxURLBytes || req.Url == "" {
		return &pb.GetReply{State: getFailed, Error: fmt.Sprintf("URL of %d bytes", len(req.Url))}
	}
	at := time.Time{}
	if req.AtNs > 0 {
		at = time.Unix(0, req.AtNs)
	}
	if req.Local {
		return n.localGet(req.Url, at)
	}
	u, err := urls.Normalize(nil, req.Url)
	if err != nil {
		return &pb.GetReply{State: getFailed, Error: fmt.Sprintf("bad URL: %v", err)}
	}
	key, err := urls.TaskKey(u, n.crawlCfg.KeyMode)
	if err != nil {
		return &pb.GetReply{State: getFailed, Url: u, Error: fmt.Sprintf("bad URL: %v", err)}
	}
	owner, _, err := n.ring.Lookup(ctx, ring.ID(key))
	if err != nil {
		return &pb.GetReply{State: getFailed, Url: u, Error: fmt.Sprintf("owner lookup: %v", err)}
	}
	var where *pb.GetReply
	if owner.Machine() == n.host.ID().String() {
		where = n.localGet(u, at)
	} else {
		id, err := peer.Decode(owner.Machine())
		if err != nil {
			return &pb.GetReply{State: getFailed, Url: u, Error: fmt.Sprintf("owner %q: %v", owner.Addr, err)}
		}
		where = &pb.GetReply{}
		if err := n.streams.Call(ctx, id, protocol.GetID, &pb.GetRequest{Url: u, AtNs: req.AtNs, Local: true}, where); err != nil {
			return &pb.GetReply{State: getFailed, Url: u, Error: fmt.Sprintf("ask owner %s: %v", p2p.ShortID(id), err)}
		}
	}
	if where.State != getFound {
		return &pb.GetReply{State: where.State, Url: u, Error: where.Error}
	}
	caps := decodeCaptures([]*pb.Capture{where.Capture})
	if len(caps) != 1 {
		return &pb.GetReply{State: getFailed, Url: u, Error: "owner sent a malformed capture"}
	}
	c := caps[0]
	out := &pb.GetReply{State: getFound, Url: u, Capture: where.Capture}
	if c.Holder == n.host.ID().String() {
		b, err := n.readCapture(c.RecordID)
		if err != nil {
			return &pb.GetReply{State: getHolderUnreachable, Url: u, Capture: where.Capture, Error: err.Error()}
		}
		out.Warc = b
		return out
	}
	hid, err := peer.Decode(c.Holder)
	if err != nil {
		return &pb.GetReply{State: getFailed, Url: u, Error: fmt.Sprintf("holder %q: %v", c.Holder, err)}
	}
	rep := &pb.CaptureReply{}
	if err := n.streams.Call(ctx, hid, protocol.CaptureID, &pb.CaptureRequest{RecordId: c.RecordID}, rep); err != nil {
		return &pb.GetReply{State: getHolderUnreachable, Url: u, Capture: where.Capture, Error: fmt.Sprintf("holder %s: %v", p2p.ShortID(hid), err)}
	}
	if rep.Error != "" {
		return &pb.GetReply{State: getHolderUnreachable, Url: u, Capture: where.Capture, Error: fmt.Sprintf("holder %s: %s", p2p.ShortID(hid), rep.Error)}
	}
	out.Warc = rep.Warc
	return out
}

// localGet answers from this node's own shard records where raw's capture
// nearest at is.
func (n *Node) localGet(raw string, at time.Time) *pb.GetReply {
	c, err := n.LocalCaptures(raw)
	if err != nil {
		return &pb.GetReply{State: getFailed, Error: err.Error()}
	}
	switch {
	case !c.Known:
		if r, err := n.crawler.Scope().Check(c.URL); err == nil && r != crawl.InScope {
			return &pb.GetReply{State: getOutOfScope, Url: c.URL, Error: r.String()}
		}
		return &pb.GetReply{State: getNotKnown, Url: c.URL}
	case len(c.Captures) == 0 && !c.Done:
		return &pb.GetReply{State: getQueued, Url: c.URL}
	case len(c.Captures) == 0:
		return &pb.GetReply{State: getFailed, Url: c.URL, Error: "finished without a capture (dropped, or fetched before captures were recorded)"}
	}
	best, _ := store.NearestCapture(c.Captures, at)
	return &pb.GetReply{State: getFound, Url: c.URL, Capture: &pb.Capture{
		Holder: best.Holder, RecordId: best.RecordID, PayloadDigest: best.Digest, FetchedNs: unixNanos(best.Time)}}
}

// GetResult is a verified capture: the owner's record of it and the
// exchange's WARC records as the holder keeps them.
type GetResult struct {
	// URL is the normalised URL.
	URL string
	// Capture is the owner's record of the capture.
	Capture store.Capture
	// WARC holds the exchange's records (gzip members), ready to append
	// to a .warc.gz file.
	WARC []byte
	// Records are WARC parsed; Response is the response record among them.
	Records  []*warc.Record
	Response *warc.Record
	// Body is the response's payload, as received (possibly
	// content-coded), whose digest matched the capture's.
	Body []byte
}

// Get asks the member at addr (a full /p2p/ multiaddr), from the client
// host h, for rawURL's capture nearest at (zero: the newest), and verifies
// what comes back against the owner's capture record: the response record
// must carry the capture's record ID and URL, and its payload must hash to
// the capture's payload digest. Errors: ErrNotKnown, ErrQueued,
// ErrHolderUnreachable, ErrDigestMismatch, p2p.ErrNoConnection, or another
// failure.
func Get(ctx context.Context, h host.Host, addr, rawURL string, at time.Time) (*GetResult, error) {
	infos, err := p2p.ParseAddrInfos([]string{addr})
	if err != nil {
		return nil, fmt.Errorf("get: %w", err)
	}
	if len(infos) != 1 {
		return nil, fmt.Errorf("get: peer %q: need exactly one /p2p/ address", addr)
	}
	if err := h.Connect(ctx, infos[0]); err != nil {
		return nil, fmt.Errorf("get: %w: %s: %w", p2p.ErrNoConnection, addr, err)
	}
	req := &pb.GetRequest{Url: rawURL}
	if !at.IsZero() {
		req.AtNs = at.UnixNano()
	}
	rep := &pb.GetReply{}
	if err := p2p.NewStreams(h, 0, p2p.NoRingWork).Call(ctx, infos[0].ID, protocol.GetID, req, rep); err != nil {
		return nil, fmt.Errorf("get %s: %w", truncURL(rawURL), err)
	}
	return resultOf(rep, rawURL)
}

// resultOf turns a member's reply into a verified result, or the error
// of its state.
func resultOf(rep *pb.GetReply, rawURL string) (*GetResult, error) {
	u := rep.Url
	if u == "" {
		u = rawURL
	}
	switch rep.State {
	case getFound:
	case getNotKnown:
		return nil, fmt.Errorf("get %s: %w", truncURL(u), ErrNotKnown)
	case getQueued:
		return nil, fmt.Errorf("get %s: %w", truncURL(u), ErrQueued)
	case getOutOfScope:
		return nil, fmt.Errorf("get %s: %w (%s)", truncURL(u), ErrOutOfScope, rep.Error)
	case getHolderUnreachable:
		return nil, fmt.Errorf("get %s: %w: %s", truncURL(u), ErrHolderUnreachable, rep.Error)
	default:
		return nil, fmt.Errorf("get %s: %s", truncURL(u), rep.Error)
	}
	caps := decodeCaptures([]*pb.Capture{rep.Capture})
	if len(caps) != 1 {
		return nil, fmt.Errorf("get %s: the member sent a malformed capture record", truncURL(u))
	}
	res := &GetResult{URL: u, Capture: caps[0], WARC: rep.Warc}
	if err := res.verify(); err != nil {
		return nil, fmt.Errorf("get %s: %w", truncURL(u), err)
	}
	return res, nil
}

// handleGet is the HTTP API's get: GET /get?url=URL[&at=RFC3339][&format=warc]
// answers the page's body as captured (the response's Content-Type and
// Content-Encoding, X-Swarmcrawl-Capture naming the record, holder and
// digest), or with format=warc the records (application/warc). A URL
// never crawled is 404, out of scope 403, queued 409, an unreachable
// holder or a digest mismatch 502.
func (n *Node) handleGet(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := &pb.GetRequest{Url: q.Get("url")}
	if s := q.Get("at"); s != "" {
		at, err := time.Parse(time.RFC3339, s)
		if err != nil {
			http.Error(w, fmt.Sprintf("at %q: want RFC 3339", s), http.StatusBadRequest)
			return
		}
		req.AtNs = at.UnixNano()
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	res, err := resultOf(n.serveGet(ctx, req), req.Url)
	if err != nil {
		code := http.StatusInternalServerError
		switch {
		case errors.Is(err, ErrNotKnown):
			code = http.StatusNotFound
		case errors.Is(err, ErrOutOfScope):
			code = http.StatusForbidden
		case errors.Is(err, ErrQueued):
			code = http.StatusConflict
		case errors.Is(err, ErrHolderUnreachable), errors.Is(err, ErrDigestMismatch):
			code = http.StatusBadGateway
		}
		http.Error(w, err.Error(), code)
		return
	}
	c := res.Capture
	w.Header().Set("X-Swarmcrawl-Capture", fmt.Sprintf("record=%s holder=%s digest=%s time=%s",
		c.RecordID, c.Holder, c.Digest, c.Time.UTC().Format(time.RFC3339)))
	if q.Get("format") == "warc" {
		w.Header().Set("Content-Type", "application/warc")
		_, _ = w.Write(res.WARC)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	i := bytes.Index(res.Response.Content, []byte("\r\n\r\n"))
	if hr, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(res.Response.Content[:i+4])), nil); err == nil {
		// The page as the server sent it: its type and coding.
		for _, k := range []string{"Content-Type", "Content-Encoding"} {
			if v := hr.Header.Get(k); v != "" {
				w.Header().Set(k, v)
			}
		}
	}
	_, _ = w.Write(res.Body)
}

// verify checks the records against the capture record and fills in
// Records, Response and Body.
func (r *GetResult) verify() error {
	recs, err := warc.ParseExchange(r.WARC)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrDigestMismatch, err)
	}
	for _, rec := range recs {
		if rec.Type == "response" && rec.ID == r.Capture.RecordID {
			r.Response = rec
		}
	}
	if r.Response == nil {
		return fmt.Errorf("%w: no response record %s among %d records", ErrDigestMismatch, r.Capture.RecordID, len(recs))
	}
	if r.Response.TargetURI != r.URL {
		return fmt.Errorf("%w: the response record is of %s", ErrDigestMismatch, truncURL(r.Response.TargetURI))
	}
	i := bytes.Index(r.Response.Content, []byte("\r\n\r\n"))
	if i < 0 {
		return fmt.Errorf("%w: the response record has no HTTP header", ErrDigestMismatch)
	}
	body := r.Response.Content[i+4:]
	if d := warc.PayloadDigest(body); d != r.Capture.Digest {
		return fmt.Errorf("%w: records hash to %s, the owner recorded %s", ErrDigestMismatch, d, r.Capture.Digest)
	}
	r.Records, r.Body = recs, body
	return nil
}

// archiveDir is the directory of the node's WARC files.
func (n *Node) archiveDir() string { return filepath.Join(n.cfg.DataDir, WARCDir) }
