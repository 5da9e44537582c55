// Package protocol defines the swarmcrawl wire protocols: their libp2p
// protocol IDs, the protobuf messages they carry (package pb) and the
// framing that puts those messages on a stream.
//
// Every exchange is one request and one response on a fresh stream. Each
// message is framed as an unsigned varint length followed by that many
// bytes of protobuf. Readers refuse frames above a per-protocol size cap
// before allocating, so a hostile peer cannot make a node buffer an
// arbitrary amount of memory.
//
// This package knows nothing about the ring, the crawler or libp2p hosts;
// it only says what is on the wire.
package protocol
