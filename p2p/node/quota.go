package node

import (
	"container/list"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Quota bounds what one peer may hand the node: Rate units a second on
// average, Burst at once. A request beyond it is refused whole, and the
// sender is told when to try again, so nothing it sent is lost. A zero
// field takes its default; a negative Rate means no quota.
type Quota struct {
	Rate  int
	Burst int
}

// orDefault fills q's zero fields from d.
func (q Quota) orDefault(d Quota) Quota {
	if q.Rate == 0 {
		q.Rate = d.Rate
	}
	if q.Burst <= 0 {
		q.Burst = d.Burst
	}
	return q
}

// quotaPeers bounds the peers whose use of a quota is remembered; beyond
// it the one heard from least recently is forgotten, and starts again
// with a full bucket when it comes back.
const quotaPeers = 4096

// quota is a token bucket per peer, in a bounded map (least recently used
// peers are forgotten first).
type quota struct {
	rate  float64 // tokens a second; 0: no quota
	burst float64
	max   int // peers remembered
	now   func() time.Time

	mu    sync.Mutex
	peers map[peer.ID]*list.Element // of *bucket
	lru   *list.List                // most recently used first

	refused atomic.Int64 // requests refused
}

// bucket is one peer's tokens as of at.
type bucket struct {
	id     peer.ID
	tokens float64
	at     time.Time
}

// newQuota returns the quota q (with its defaults filled in), remembering
// at most peers peers.
func newQuota(q Quota, peers int) *quota {
	out := &quota{max: peers, now: time.Now, peers: map[peer.ID]*list.Element{}, lru: list.New()}
	if q.Rate > 0 {
		out.rate, out.burst = float64(q.Rate), float64(max(q.Burst, 1))
	}
	return out
}

// take takes n units of id's quota, all or none. It takes them when the
// peer's bucket holds them, or is full (so a request larger than the
// burst passes once the bucket has filled, and leaves it in debt);
// otherwise it returns how long until it would.
func (q *quota) take(id peer.ID, n int) (ok bool, retryAfter time.Duration) {
	if q == nil || q.rate == 0 {
		return true, 0
	}
	now := q.now()
	q.mu.Lock()
	defer q.mu.Unlock()
	var b *bucket
	if e, found := q.peers[id]; found {
		q.lru.MoveToFront(e)
		b = e.Value.(*bucket)
		if elapsed := now.Sub(b.at).Seconds(); elapsed > 0 {
			b.tokens = math.Min(q.burst, b.tokens+elapsed*q.rate)
		}
		b.at = now
	} else {
		b = &bucket{id: id, tokens: q.burst, at: now}
		q.peers[id] = q.lru.PushFront(b)
		for q.lru.Len() > q.max {
			old := q.lru.Remove(q.lru.Back()).(*bucket)
			delete(q.peers, old.id)
		}
	}
	need := math.Min(float64(n), q.burst)
	if b.tokens >= need {
		b.tokens -= float64(n)
		return true, 0
	}
	q.refused.Add(1)
	wait := time.Duration((need - b.tokens) / q.rate * float64(time.Second))
	return false, max(wait, time.Millisecond)
}

// remembered is the number of peers the quota holds buckets for.
func (q *quota) remembered() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.peers)
}
