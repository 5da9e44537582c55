package p2p

import (
	"container/list"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// learnedAddrTTL is how long addresses of peers learned from ring messages
// are kept; ring maintenance hears of live neighbours far more often than
// this.
const learnedAddrTTL = 30 * time.Minute

// maxAddrsPerPeer bounds the addresses accepted per peer in a message.
const maxAddrsPerPeer = 16

// maxLearnedPeers bounds the peers whose addresses learnedAddrs keeps: a
// node talks to its successors, predecessor, fingers and the owners of
// the keys it routes, a few hundred peers even in a swarm of 10,000 nodes.
const maxLearnedPeers = 8192

// learnedAddrs is the book of the addresses ring messages named for peers
// this node has not necessarily met: any peer can name any number of
// peers, so they stay out of libp2p's peerstore (one bound for the whole
// host, shared with identify and the DHT) until this node dials one of
// them. It keeps the most recently named maxLearnedPeers peers, each for
// learnedAddrTTL: a flood of made-up peers pushes out older entries here,
// which the next ring message names again, and nothing else.
type learnedAddrs struct {
	mu    sync.Mutex
	max   int
	peers map[peer.ID]*list.Element // of *learnedEntry
	order list.List                 // most recently learned first
}

type learnedEntry struct {
	id    peer.ID
	addrs []ma.Multiaddr
	at    time.Time
	// added is set once the addresses went into the peerstore, so that
	// each dial does not add them again.
	added bool
}

func newLearnedAddrs(max int) *learnedAddrs {
	return &learnedAddrs{max: max, peers: make(map[peer.ID]*list.Element)}
}

// learn records addrs (at most maxAddrsPerPeer of them) for id.
func (b *learnedAddrs) learn(id peer.ID, addrs []ma.Multiaddr, now time.Time) {
	if len(addrs) == 0 {
		return
	}
	addrs = addrs[:min(len(addrs), maxAddrsPerPeer)]
	b.mu.Lock()
	defer b.mu.Unlock()
	if el, ok := b.peers[id]; ok {
		e := el.Value.(*learnedEntry)
		e.addrs, e.at, e.added = addrs, now, false
		b.order.MoveToFront(el)
		return
	}
	b.peers[id] = b.order.PushFront(&learnedEntry{id: id, addrs: addrs, at: now})
	for b.order.Len() > b.max {
		last := b.order.Back()
		delete(b.peers, last.Value.(*learnedEntry).id)
		b.order.Remove(last)
	}
}

// lookup returns the addresses learned for id within learnedAddrTTL, and
// whether they went into the peerstore already.
func (b *learnedAddrs) lookup(id peer.ID, now time.Time) (addrs []ma.Multiaddr, added bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	el, ok := b.peers[id]
	if !ok {
		return nil, false
	}
	e := el.Value.(*learnedEntry)
	if now.Sub(e.at) > learnedAddrTTL {
		delete(b.peers, id)
		b.order.Remove(el)
		return nil, false
	}
	return e.addrs, e.added
}

// markAdded records that id's addresses went into the peerstore.
func (b *learnedAddrs) markAdded(id peer.ID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if el, ok := b.peers[id]; ok {
		el.Value.(*learnedEntry).added = true
	}
}

// len returns the number of peers in the book.
func (b *learnedAddrs) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.order.Len()
}
