package crawl

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// HostSnapshot is the politeness state of one host, to hand to a new owner:
// when the host may next be contacted, and the robots.txt this node uses
// for it. MarshalBinary gives the opaque blob a node stores and ships;
// Restore installs it on the receiving crawler.
type HostSnapshot struct {
	// Host is the hostname (lowercase, no port) and Key its host key,
	// urls.HostKey(Host).
	Host string
	Key  uint64
	// NotBefore is when the host may next be contacted: no request to it
	// before this time (zero: no constraint).
	NotBefore time.Time
	// Robots is the raw robots.txt body as fetched (nil if none cached or
	// the answer was not a 2xx, whose body does not matter).
	Robots []byte
	// RobotsStatus is the HTTP status of the robots.txt fetch (0 = none
	// cached; a network failure is not handed over either).
	RobotsStatus int
	// RobotsFetched is when robots.txt was fetched: the receiver trusts it
	// until RobotsFetched plus its own Config.RobotsTTL.
	RobotsFetched time.Time
	// Origin is the scheme://host[:port] the robots.txt belongs to, as RFC
	// 9309 scopes it; "" when RobotsStatus is 0. (An addition to the plan's
	// fields: without it the receiver could not tell an http robots.txt
	// from an https one.)
	Origin string
}

// snapshotVersion1 is the first byte of a marshalled HostSnapshot. Its
// fields are the store's primitive encodings (store.AppendBytes,
// store.AppendTime), read back with a store.Decoder.
//
//	version         byte = 1
//	host            uvarint length, bytes
//	key             8 bytes BE
//	not before      time (presence byte, then varint Unix seconds and uvarint nanoseconds)
//	origin          uvarint length, bytes
//	robots status   uvarint
//	robots fetched  time
//	robots          presence byte, then uvarint length, bytes
const snapshotVersion1 = 1

// maxSnapshotHost bounds the host names accepted (DNS allows 253 bytes).
const maxSnapshotHost = 255

// check reports what makes s unusable, if anything.
func (s *HostSnapshot) check() error {
	switch {
	case s.Host == "" || len(s.Host) > maxSnapshotHost:
		return fmt.Errorf("host %q: empty or longer than %d bytes", urls.Truncate(s.Host, 80), maxSnapshotHost)
	case s.Key != urls.HostKey(s.Host):
		return fmt.Errorf("host %s: key %016x is not its host key %016x", s.Host, s.Key, urls.HostKey(s.Host))
	case s.RobotsStatus < 0 || s.RobotsStatus > 999 || s.RobotsStatus > 0 && s.RobotsStatus < 100:
		return fmt.Errorf("host %s: robots.txt status %d", s.Host, s.RobotsStatus)
	case len(s.Robots) > maxRobotsBytes:
		return fmt.Errorf("host %s: robots.txt of %d bytes, more than %d", s.Host, len(s.Robots), maxRobotsBytes)
	case s.RobotsStatus == 0 && (s.Robots != nil || s.Origin != ""):
		return fmt.Errorf("host %s: robots.txt without a status", s.Host)
	}
	if s.Origin != "" {
		host, err := urls.HostOf(s.Origin)
		if err != nil || host != s.Host || s.Origin != originOf(s.Origin) {
			return fmt.Errorf("host %s: bad robots.txt origin %q", s.Host, urls.Truncate(s.Origin, 80))
		}
	} else if s.RobotsStatus != 0 {
		return fmt.Errorf("host %s: robots.txt without an origin", s.Host)
	}
	return nil
}

// originOf returns the scheme://authority part of an absolute URL.
func originOf(u string) string {
	origin, _ := urls.SplitOrigin(u)
	return origin
}

// MarshalBinary encodes s in a versioned binary form. It fails for a
// snapshot UnmarshalBinary would reject: an empty host, a Key that is not
// urls.HostKey(Host), robots.txt data that does not fit together.
func (s HostSnapshot) MarshalBinary() ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("host snapshot: %w", err)
	}
	b := make([]byte, 0, 64+len(s.Host)+len(s.Origin)+len(s.Robots))
	b = append(b, snapshotVersion1)
	b = store.AppendBytes(b, []byte(s.Host))
	b = binary.BigEndian.AppendUint64(b, s.Key)
	b = store.AppendTime(b, s.NotBefore)
	b = store.AppendBytes(b, []byte(s.Origin))
	b = binary.AppendUvarint(b, uint64(s.RobotsStatus))
	b = store.AppendTime(b, s.RobotsFetched)
	if s.Robots == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = store.AppendBytes(b, s.Robots)
	}
	return b, nil
}

// UnmarshalBinary decodes what MarshalBinary encoded. It rejects an
// unknown version, truncated or trailing bytes, and contents that do not
// fit together (see MarshalBinary), leaving s unchanged then.
func (s *HostSnapshot) UnmarshalBinary(data []byte) error {
	d := store.NewDecoder(data)
	if v := d.Byte(); d.Err() == nil && v != snapshotVersion1 {
		return fmt.Errorf("host snapshot: unknown version %d", v)
	}
	var out HostSnapshot
	out.Host = string(d.Bytes(maxSnapshotHost))
	out.Key = d.Fixed64()
	out.NotBefore = d.Time()
	out.Origin = string(d.Bytes(maxSnapshotHost + len("https://[]:65535")))
	status := d.Uvarint()
	out.RobotsFetched = d.Time()
	switch d.Byte() {
	case 0:
	case 1:
		out.Robots = slices.Clone(d.Bytes(maxRobotsBytes))
		if out.Robots == nil {
			out.Robots = []byte{}
		}
	default:
		d.Fail("bad robots.txt presence byte")
	}
	if err := d.Finish(); err != nil {
		return fmt.Errorf("host snapshot: %w", err)
	}
	if status > 999 {
		return fmt.Errorf("host snapshot: robots.txt status %d", status)
	}
	out.RobotsStatus = int(status)
	if err := out.check(); err != nil {
		return fmt.Errorf("host snapshot: %w", err)
	}
	*s = out
	return nil
}
