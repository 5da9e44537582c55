package crawl

import (
	"fmt"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
)

// HostSnapshot is the politeness state of one host, to hand to a new owner:
// when the host may next be contacted, and the robots.txt this node uses
// for it. The node puts it on the wire (a protocol HostPoliteness) and
// Restore installs it on the receiving crawler, after Check.
type HostSnapshot struct {
	// Host is the hostname (lowercase, no port) and Key the ring key its
	// state travels under: urls.HostKey(Host), or with domain keys
	// urls.DomainKey(Host).
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

// maxSnapshotHost bounds the host names accepted (DNS allows 253 bytes).
const maxSnapshotHost = 255

// Check reports what makes s unusable, if anything: an empty or overlong
// host, a Key that is neither urls.HostKey(Host) nor urls.DomainKey(Host)
// (the node checks which one its key mode wants), a robots.txt status out of
// range, a body above the robots.txt cap, or robots.txt data that does not
// fit together (a body or origin without a status, an origin of another
// host). Restore skips snapshots that fail it.
func (s *HostSnapshot) Check() error {
	switch {
	case s.Host == "" || len(s.Host) > maxSnapshotHost:
		return fmt.Errorf("host %q: empty or longer than %d bytes", urls.Truncate(s.Host, 80), maxSnapshotHost)
	case s.Key != urls.HostKey(s.Host) && s.Key != urls.DomainKey(s.Host):
		return fmt.Errorf("host %s: key %016x is neither its host key %016x nor its domain key", s.Host, s.Key, urls.HostKey(s.Host))
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
