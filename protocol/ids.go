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
	// MaxBatchTasks bounds how many tasks one TaskBatch may carry.
	MaxBatchTasks = 1000
	// MaxSeedURLs bounds how many URLs one SeedRequest may carry.
	MaxSeedURLs = 10000
)
