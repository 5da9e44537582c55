package protocol

// Protocol IDs. The version is part of the ID so that an incompatible
// change gets a new ID and old and new peers fail to negotiate instead of
// misreading each other.
const (
	// RingID carries Chord maintenance and lookup RPCs (RingRequest/RingResponse).
	RingID = "/swarmcrawl/ring/1.0.0"
	// TasksID carries URL batches to their owner (TaskBatch/TaskBatchResult).
	TasksID = "/swarmcrawl/tasks/1.0.0"
	// SeedID lets a client submit seed URLs to any member (SeedRequest/SeedResponse).
	SeedID = "/swarmcrawl/seed/1.0.0"
	// ReplicateID carries an owner's writes and heartbeats to its successor
	// replicas (WriteRequest/WriteReply).
	ReplicateID = "/swarmcrawl/replicate/2.0.0"
	// HandoffID moves a key range's state to its new owner, or merges
	// records after a partition (HandoffRequest/HandoffReply).
	HandoffID = "/swarmcrawl/handoff/2.0.0"
	// DigestID compares a range's records by bucket digests
	// (DigestRequest/DigestReply).
	DigestID = "/swarmcrawl/digest/1.0.0"
	// PullID fetches the state a node holds of a range (PullRequest/PullReply).
	PullID = "/swarmcrawl/pull/2.0.0"
	// FetchID hands a hot host's fetch batch from its owner to a helper
	// (FetchBatchRequest/FetchBatchReply).
	FetchID = "/swarmcrawl/fetch/1.0.0"
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
	// MaxFetchTasks bounds the tasks of one fetch batch.
	MaxFetchTasks = 64
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
