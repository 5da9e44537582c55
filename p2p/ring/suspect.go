package ring

import (
	"context"
	"time"
)

// suspects is the set of peers that recently failed to answer. It is an
// overlay on the routing tables rather than an edit of them: routing skips
// suspects, but fingers and successor lists keep their entries, so a peer
// that merely lost a message becomes usable again the moment it answers.
// Suspects are re-probed one at a time, oldest probe first; a probe that
// succeeds can splice the peer back in as successor, which is how two rings
// that formed on either side of a partition find each other again.
type suspects struct {
	max   int
	byKey map[string]suspect
	// queue is the probe order; it may hold addresses no longer suspected,
	// which are skipped when reached.
	queue []string
}

type suspect struct {
	peer  Peer
	since time.Time
}

func newSuspects(max int) suspects {
	return suspects{max: max, byKey: make(map[string]suspect)}
}

func (s *suspects) has(addr string) bool {
	_, ok := s.byKey[addr]
	return ok
}

// mark records p as suspect since now, keeping the original time if it was
// already suspect so that retention counts from the first failure.
func (s *suspects) mark(p Peer, now time.Time) {
	if s.has(p.Addr) {
		return
	}
	s.byKey[p.Addr] = suspect{peer: p, since: now}
	s.queue = append(s.queue, p.Addr)
	for len(s.byKey) > s.max && len(s.queue) > 0 {
		// Forget the suspect probed longest ago; it had its chances.
		delete(s.byKey, s.queue[0])
		s.queue = s.queue[1:]
	}
}

func (s *suspects) clear(addr string) {
	if !s.has(addr) {
		return // the common case: a healthy peer answered
	}
	delete(s.byKey, addr)
	for i, a := range s.queue {
		if a == addr {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			break
		}
	}
}

// nextProbe returns the suspect to probe now and moves it to the back of
// the queue; suspects older than retention are forgotten on the way.
func (s *suspects) nextProbe(now time.Time, retention time.Duration) (Peer, bool) {
	for len(s.queue) > 0 {
		addr := s.queue[0]
		s.queue = s.queue[1:]
		e, ok := s.byKey[addr]
		if !ok {
			continue
		}
		if now.Sub(e.since) > retention {
			delete(s.byKey, addr)
			continue
		}
		s.queue = append(s.queue, addr)
		return e.peer, true
	}
	return Peer{}, false
}

func (s *suspects) list() []Peer {
	var out []Peer
	for _, a := range s.queue {
		if e, ok := s.byKey[a]; ok {
			out = append(out, e.peer)
		}
	}
	return out
}

// reviveSuspect probes one suspect. If it answers it is no longer suspect
// (call clears it), and if it lies between us and our successor it becomes
// our successor: either it came back, or we are seeing it for the first time
// since a partition healed. The next Stabilize checks it properly.
func (n *Node) reviveSuspect(ctx context.Context) {
	n.mu.Lock()
	p, ok := n.suspects.nextProbe(n.cfg.Clock.Now(), n.cfg.SuspectRetention)
	n.mu.Unlock()
	if !ok || n.ping(ctx, p) != nil {
		return
	}
	n.mu.Lock()
	w := n.watchLocked()
	n.offerSuccessorLocked(p)
	snap := n.commitLocked(w)
	n.mu.Unlock()
	n.emit(snap)
}
