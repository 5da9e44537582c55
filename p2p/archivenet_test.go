package p2p_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/protocol"
	"github.com/swarmcrawl/swarmcrawl/protocol/pb"
)

// A hostile member's archive answers are refused by the export client: a
// file name that would leave the export's directory, a repeated name, a
// digest of the wrong length, an endless size, and a range longer than
// asked. An honest answer passes.
func TestArchiveClientRefusesHostileAnswers(t *testing.T) {
	client, server := pair(t)
	digest := make([]byte, 32)
	good := &pb.ArchiveFile{Name: "swarmcrawl-1-00001.warc.gz", Size: 10, Sha256: digest}
	cases := []struct {
		name string
		resp *pb.ArchiveResponse
		want string // "" for accepted
	}{
		{"honest", &pb.ArchiveResponse{Files: []*pb.ArchiveFile{good}}, ""},
		{"path escape", &pb.ArchiveResponse{Files: []*pb.ArchiveFile{{Name: "../../.bashrc.warc.gz", Size: 1, Sha256: digest}}}, "bad or repeated"},
		{"directory", &pb.ArchiveResponse{Files: []*pb.ArchiveFile{{Name: "/etc/x.warc.gz", Size: 1, Sha256: digest}}}, "bad or repeated"},
		{"repeated", &pb.ArchiveResponse{Files: []*pb.ArchiveFile{good, good}}, "bad or repeated"},
		{"short digest", &pb.ArchiveResponse{Files: []*pb.ArchiveFile{{Name: good.Name, Size: 1, Sha256: digest[:8]}}}, "out of bounds"},
		{"endless", &pb.ArchiveResponse{Files: []*pb.ArchiveFile{{Name: good.Name, Size: 1 << 62, Sha256: digest}}}, "out of bounds"},
		{"long range", &pb.ArchiveResponse{Data: make([]byte, 100)}, "asked for 10"},
	}
	var answer *pb.ArchiveResponse
	ss := p2p.NewStreams(server, 0, p2p.NoRingWork)
	defer ss.Close()
	ss.Handle(protocol.ArchiveID, func() proto.Message { return &pb.ArchiveRequest{} },
		func(context.Context, p2p.Inbound, proto.Message) proto.Message { return answer })
	cs := p2p.NewStreams(client, 0, p2p.NoRingWork)
	for _, c := range cases {
		answer = c.resp
		var err error
		if c.resp.Data != nil {
			_, err = p2p.FetchArchiveRange(context.Background(), cs, server.ID(), good.Name, 0, 10)
		} else {
			_, _, err = p2p.ListArchive(context.Background(), cs, server.ID())
		}
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}
