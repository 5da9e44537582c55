package protocol

// Protocol IDs. The version is part of the ID so that an incompatible
// change gets a new ID and old and new peers fail to negotiate instead of
// misreading each other; docs/protocol.md, "Versions", says what
// changed in each version.
const (
	// RingID carries Chord maintenance and lookup RPCs (RingRequest/RingResponse).
	// 2.0.0: ring positions (Peer.position, RingRequest.to_position and
	// from_position) for virtual nodes.
	RingID = "/swarmcrawl/ring/2.0.0"
	// TasksID carries URL batches to their owner (TaskBatch/TaskBatchResult).
	TasksID = "/swarmcrawl/tasks/1.0.0"
	// SeedID lets a client submit seed URLs to any member (SeedRequest/SeedResponse).
	SeedID = "/swarmcrawl/seed/1.0.0"
	// ReplicateID carries an owner's writes and heartbeats to its successor
	// replicas (WriteRequest/WriteReply). 3.0.0: WriteRequest names the
	// ring positions it is for and from (fields 60, 61).
	ReplicateID = "/swarmcrawl/replicate/3.0.0"
	// HandoffID moves a key range's state to its new owner, or merges
	// records after a partition (HandoffRequest/HandoffReply). 3.0.0:
	// HandoffRequest names its ring positions (60, 61) and carries reroute
	// (70).
	HandoffID = "/swarmcrawl/handoff/3.0.0"
	// DigestID compares a range's records by bucket digests
	// (DigestRequest/DigestReply). 2.0.0: DigestRequest names its ring
	// positions (60, 61).
	DigestID = "/swarmcrawl/digest/2.0.0"
	// PullID fetches the state a node holds of a range (PullRequest/PullReply).
	// 3.0.0: PullRequest names its ring positions (60, 61).
	PullID = "/swarmcrawl/pull/3.0.0"
	// FetchID hands a hot host's fetch batch from its owner to a helper
	// (FetchBatchRequest/FetchBatchReply), and carries a helper's
	// question to the owner of how long it still holds the host's key.
	// 1.1.0: the reply carries the helper's load (20) and the answer to
	// a lease query (request 20, reply 21); the request carries the
	// owner's load (21).
	FetchID = "/swarmcrawl/fetch/1.1.0"
	// ArchiveID lets a client list a member's WARC files and fetch byte
	// ranges of them (ArchiveRequest/ArchiveResponse): the swarm export.
	ArchiveID = "/swarmcrawl/archive/1.0.0"
	// GetID lets a client ask any member for a URL's capture, and a member
	// ask the URL's owner where it is (GetRequest/GetReply).
	GetID = "/swarmcrawl/get/1.0.0"
	// CaptureID fetches a capture's WARC records from the node that holds
	// them, by record ID (CaptureRequest/CaptureReply).
	CaptureID = "/swarmcrawl/capture/1.0.0"
	// StatusID asks a member for its own status, or for a census of the
	// whole swarm that it runs (StatusRequest/StatusReply).
	StatusID = "/swarmcrawl/status/1.0.0"
	// DHTPrefix is the protocol prefix of the Kademlia DHT used for peer
	// discovery, which makes it /swarmcrawl/kad/1.0.0: swarmcrawl peers
	// never join the public IPFS DHT.
	DHTPrefix = "/swarmcrawl"
	// Rendezvous is the DHT namespace members advertise to find each other.
	Rendezvous = "swarmcrawl/members/1"
)

// Size caps per message. A ring message holds at most a successor list of
// peers with their addresses; a task batch holds at most MaxBatchTasks URLs.
const (
	MaxRingMsgBytes = 64 << 10
	MaxTaskMsgBytes = 4 << 20
	MaxSeedMsgBytes = 4 << 20
	// MaxShardMsgBytes bounds replication, handoff, digest and pull
	// messages: MaxShardRecords records of URLs up to a few KB each.
	MaxShardMsgBytes = 16 << 20
	// MaxShardRecords bounds the records (and host states) of one shard message.
	MaxShardRecords = 2000
	// MaxBatchTasks bounds how many tasks one TaskBatch may carry.
	MaxBatchTasks = 1000
	// MaxSeedURLs bounds how many URLs one SeedRequest may carry.
	MaxSeedURLs = 10000
	// MaxURLBytes bounds a URL in any message: no node normalises a
	// longer one (crawl/urls.MaxURLLength is this value).
	MaxURLBytes = 2048
	// MaxFetchMsgBytes bounds fetch batch requests and replies: at most
	// MaxFetchTasks tasks with their URL metadata and outcomes.
	// Pages never travel: the helper stores them itself.
	MaxFetchMsgBytes = 4 << 20
	// MaxCaptureMsgBytes caps a GetReply or CaptureReply: one exchange's
	// records, each a gzip member (a body is at most
	// crawl.Config.MaxBodyBytes, 10 MiB by default, before its text). At
	// three times the cap (FrameMemory) a reader's share of a peer's 64 MiB
	// holds one reply.
	MaxCaptureMsgBytes = 16 << 20
	// MaxFetchTasks bounds the tasks of one fetch batch.
	MaxFetchTasks = 64
	// MaxArchiveChunk bounds the bytes of one archive range.
	MaxArchiveChunk = 1 << 20
	// MaxArchiveFiles bounds the files of one archive list.
	MaxArchiveFiles = 10000
	// MaxArchiveMsgBytes bounds archive requests and responses: a chunk,
	// or a list of MaxArchiveFiles files with names up to
	// MaxArchiveNameBytes, with room for framing.
	MaxArchiveMsgBytes = 2 << 20
	// MaxArchiveNameBytes bounds a WARC file name in an archive message.
	MaxArchiveNameBytes = 128
	// MaxStatusMsgBytes bounds status requests and replies: a census
	// lists at most MaxStatusMembers members' reports.
	MaxStatusMsgBytes = 4 << 20
	// MaxStatusCounters bounds the counters of one member's report, and
	// the totals of a census.
	MaxStatusCounters = 64
	// MaxStatusPositions bounds the ring positions of one member's report.
	MaxStatusPositions = 64
	// MaxStatusMembers bounds the member reports of one census reply.
	MaxStatusMembers = 256
)

// FrameMemory is the most memory reading one honest frame of at most max
// bytes holds at once: its bytes, and what decoding them allocates
// (DecodedBytes), at most twice the frame's cap for a message whose lists
// are within their caps. A stream's memory limit, and each peer's share of
// a protocol's, admit at least this much, so that no honest frame is
// refused, while a frame that would decode into more is (a frame of many
// empty records decodes into some sixty times its size).
func FrameMemory(max int) int64 { return 3 * int64(max) }
