// Package store is the persistent state of one swarmcrawl node: the set of
// URLs it has seen (for deduplication), the pages it has fetched, the
// crawler's durable frontier (queues, schedule of retries and recrawls, URL
// metadata for conditional requests, per-host state, dead letters), the
// near-duplicate index, the router's outbox, and small named metadata
// values. It is backed by a goleveldb database plus an in-memory Bloom
// filter in front of the seen set.
//
// # Identifiers
//
// Every URL is identified by two opaque 64-bit numbers computed by the caller:
// the ring key (which node on the Chord ring owns the URL, by default a hash
// of the hostname) and the URL hash (a hash of the normalised URL). The pair
// (ring key, URL hash) is the identity of a URL inside the store; the URL
// text is stored only as payload.
//
// # On-disk layout
//
// A database directory holds:
//
//	<dir>/leveldb/     the goleveldb database
//	<dir>/seen.bloom   the persisted Bloom filter (SeenBloomOnly mode only)
//
// Every leveldb key starts with a one-byte table prefix. Tables that hold
// per-URL data are laid out by ring key, so that all records of a range of
// ring keys form one contiguous leveldb key range per table (two ranges when
// the ring range wraps around 0). This is what lets a range of the ring be
// scanned, handed off or replicated cheaply.
//
//	table     prefix  key                                         value
//	seen      's'     's' | ring key (8, BE) | URL hash (8, BE)   seen record
//	pages     'p'     'p' | ring key (8, BE) | URL hash (8, BE)   page record
//	journal   'j'     'j' | ring key (8, BE) | URL hash (8, BE)   empty
//	meta      'm'     'm' | name (UTF-8 bytes, any length)         raw bytes
//	queue     'q'     'q' | host key (8) | priority (1) | seq (8)  queue record
//	schedule  'w'     'w' | due (8, Unix ns) | seq (8)             schedule record
//	urlmeta   'u'     'u' | ring key (8, BE) | URL hash (8, BE)   URL metadata record
//	dead      'x'     'x' | ring key (8, BE) | URL hash (8, BE)   dead letter record
//	hosts     'h'     'h' | host key (8, BE)                      host record
//	finger-   'f'     'f' | 'u' | ring key | URL hash              fingerprint record
//	print
//	content   'c'     'c' | hash (8, BE) | check (8, BE)          content record
//	outbox    'o'     'o' | sequence (8, BE)                      outbox record
//	shard     'r'     'r' | ring key (8, BE) | URL hash (8, BE)   shard record
//	shardhost 'g'     'g' | host key (8, BE) | name hash (8, BE)  shard host record
//	seeds     'e'     'e' | ring key (8, BE) | URL hash (8, BE)   seed record
//
// The fingerprint table (simindex.go) backs the near-duplicate index,
// which is kept in memory and built from it at Open; the
// content table (content.go) remembers, per exact content, whose links
// were followed; the outbox (outbox.go) holds links not yet delivered to
// their owners. The URL metadata of a fetched page keeps its links
// (urlmeta.go), so that a shorter path to it found later has them
// followed again without a new request.
//
// The shard tables (shard.go) are the replicated state of ring ranges that
// package p2p/shard keeps on each replica: the shard records say which URLs
// of a range must be crawled (or need no more crawling, with the crawler's
// state of each fetched URL so its recrawls follow it), the shard host
// records carry each host's politeness state, an opaque blob of the
// crawler, to the range's next owner. Both are laid out by ring key (for a
// host, its host key), so a range of the ring is one contiguous key range
// per table, as for the per-URL tables. The name hash is the 64-bit FNV-1a
// hash of the host name: it keeps apart hosts whose host keys collide.
// The values of the shard records written or read last (up to 32,768, some
// 8 MB) are kept in memory for the next merge into them, which is the
// usual case: a URL's record is written when its owner accepts it and
// again when its fetch is done.
//
// A key filter in memory (keyfilter.go) answers the single-key lookups of
// the shard, urlmeta, pages and content tables that would find nothing,
// the usual case for a URL met for the first time, without a leveldb read:
// it holds every key written since Open and, once a scan Open starts in
// the background has finished, every key there was at Open.
// The seeds table indexes the shard records marked seed (submitted by a
// client allowed to seed), by which a node judges a crawl scoped to its
// seeds' hosts or domains; it is written in the same batch as the records,
// and Repair rebuilds it from them. Their record formats are documented at
// the top of shard.go.
//
// The crawl state tables (queue, schedule, urlmeta, dead, hosts) hold the
// durable frontier of the crawler; their record formats are documented at
// the top of queue.go, urlmeta.go, dlq.go and hosts.go. The queue is laid
// out by host key (the ring key in the default host-key mode), so one
// host's queue is one contiguous range ordered by (priority, sequence); the
// schedule is ordered by due time, so due entries are its first keys. The
// counters store/queue_count, store/schedule_count, store/retry_count,
// store/dead_count and the sequence store/queue_seq are written in the same
// batch as the records.
//
// BE means big-endian, so lexicographic key order equals numeric order of
// (ring key, URL hash). The seen table is used in SeenExact mode only; the
// journal table is used in SeenBloomOnly mode only.
//
// # Record formats
//
// All records start with a format version byte (currently 1) so that fields
// can be added later: a new layout gets a new version number and decoders keep
// reading the old ones. A decoder rejects unknown versions, truncated records
// and trailing bytes with an error wrapping [ErrCorrupt]. Integers are
// encoded with encoding/binary: "uvarint" is an unsigned and "varint" a
// zig-zag signed LEB128 varint; "bytes" is a uvarint length followed by that
// many bytes.
//
// Seen record, version 1:
//
//	version   byte = 1
//	depth     varint
//	url       bytes
//
// Page record, version 1 (ring key and URL hash come from the key):
//
//	version       byte = 1
//	url           bytes
//	final url     bytes
//	status        varint
//	content type  bytes
//	header        uvarint count of names, then per name (in sorted order):
//	              name bytes, uvarint count of values, value bytes...
//	fetched at    varint Unix seconds, uvarint nanoseconds (< 1e9)
//	duration      varint nanoseconds
//	depth         varint
//	links         varint
//	body codec    byte: 0 = stored raw, 1 = raw DEFLATE (compress/flate)
//	body length   uvarint length of the uncompressed body
//	body          bytes (compressed with the codec above)
//
// The body is stored raw when compression would not make it smaller.
//
// Journal records (SeenBloomOnly mode) have an empty value: the key alone
// says that the URL was added to the Bloom filter after the filter was last
// written to seen.bloom. Open replays the journal into the filter, and each
// checkpoint (on Close, and whenever the journal grows past a limit) writes
// seen.bloom and then empties the journal, so a crash loses no seen URLs.
//
// Meta table: names beginning with "store/" are reserved for the store
// itself and cannot be written with [DB.PutMeta]:
//
//	store/schema      uvarint schema version (currently 1)
//	store/seen_mode   one byte, the SeenMode the database was created with
//	store/seen_count  8-byte big-endian count of seen URLs
//	store/page_count  8-byte big-endian count of stored pages
//	store/queue_count, store/schedule_count, store/retry_count,
//	store/dead_count, store/queue_seq
//	                  8-byte big-endian counters of the crawl state tables
//
// The counters are written in the same leveldb batch as the records they
// count, so they never disagree with the tables after a crash.
//
// # seen.bloom
//
//	magic     8 bytes "SWCBLOOM"
//	version   byte = 1
//	m         uint64 BE, number of bits
//	k         uint64 BE, number of hash functions
//	words     ceil(m/64) uint64 little-endian words of the bit set
//	crc       uint32 BE, CRC-32C (Castagnoli) of everything before it
//
// The file is written to a temporary name, synced, and renamed into place.
//
// The Bloom filter hashes the 16 bytes ring key (BE) | URL hash (BE) with the
// hashing of github.com/bits-and-blooms/bloom/v3.
//
// # Durability
//
// Every write reaches leveldb's journal (the operating system's page
// cache) before the method returns, so all of the store survives the
// crash of the process. Only [DB.PutShardRecords] is synced (fsync) before
// it returns: the shard records are what an owner and its replicas store
// before a new URL is acknowledged, so an acknowledged URL survives a
// power loss (or kernel crash) of the machine as well. It syncs leveldb's
// journal files itself, after its write and outside leveldb's write lock,
// so that the node's other writes go on while the disk works; concurrent
// calls share a sync, and a journal file is synced as leveldb closes it.
// A call whose records were already stored syncs too, since they may be
// those of a concurrent call still waiting for its sync.
// [DB.PutShardRecordsNoSync] writes shard records without a sync, for
// records that an earlier write, removed by a later one, stands for in the
// meantime: a power loss keeps a prefix of the journal, so it keeps the
// records or the write that stands for them. A sync covers every
// earlier write to the journal, but the other tables (seen set,
// queue, schedule, pages, URL metadata, outbox, meta) make no promise of
// their own about a power loss: a node rebuilds its seen set and queue
// from the shard records when it takes a range over. seen.bloom is
// written to a temporary file, synced and renamed.
//
// # Damage and repair
//
// Open checks leveldb's journal and manifest strictly
// (opt.StrictJournal, opt.StrictManifest): a record that fails its
// checksum makes Open fail with an error wrapping [ErrCorrupt], where
// leveldb would drop the rest of its 32 KiB block and open without a word.
// Only a write cut short at the very end of the newest journal or of the
// manifest (a crash during a write, which therefore was never
// acknowledged; or the zeros a power loss leaves where unsynced bytes
// were) is cut off, and counted in [DB.JournalTailTrimmed]. [Repair]
// recovers a damaged store, losing only the damaged records, and reports
// what was lost.
//
// # Free space
//
// [DB.DiskSpace] compares the free space of the store's filesystem with
// [Options.MinFreeBytes]; a node stops accepting new URLs below it, so that
// the space left serves what it already accepted.
package store
