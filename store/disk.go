package store

import (
	"sync"
	"time"
)

// diskCheckInterval is how long the default free-space check reuses its
// last statfs: the owner asks on every batch it accepts.
const diskCheckInterval = time.Second

// DiskSpace is the free space of the filesystem that holds a store, as
// DB.DiskSpace read it.
type DiskSpace struct {
	// Free is the number of bytes the store may still use.
	Free uint64
	// MinFree is Options.MinFreeBytes, the threshold; 0 when the check is
	// off (then the other fields are zero too).
	MinFree uint64
	// Low is set when Free is below MinFree.
	Low bool
	// Err is set when the free space could not be read. Low is then
	// false: a node that cannot tell keeps accepting, as it would without
	// the check.
	Err error
}

// diskCache keeps the last statfs of the default check.
type diskCache struct {
	mu     sync.Mutex
	statfs func(dir string) (uint64, error) // statfsFree; tests replace it
	now    func() time.Time                 // time.Now; tests replace it
	at     time.Time                        // when free and err were read
	free   uint64
	err    error
}

func (c *diskCache) init() {
	c.statfs = statfsFree
	c.now = time.Now
}

// read returns the free space of dir, from a statfs at most
// diskCheckInterval old.
func (c *diskCache) read(dir string) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.at.IsZero() || now.Sub(c.at) >= diskCheckInterval || now.Before(c.at) {
		c.free, c.err = c.statfs(dir)
		c.at = now
	}
	return c.free, c.err
}

// DiskSpace reports the free space of the filesystem holding the store and
// whether it is below Options.MinFreeBytes. It is cheap enough to call for
// every batch of writes: by default it reads the filesystem at most once a
// second (see Options.FreeSpace).
func (db *DB) DiskSpace() DiskSpace {
	if db.opts.MinFreeBytes < 0 {
		return DiskSpace{}
	}
	var free uint64
	var err error
	if f := db.opts.FreeSpace; f != nil {
		free, err = f(db.dir)
	} else {
		free, err = db.disk.read(db.dir)
	}
	d := DiskSpace{Free: free, MinFree: uint64(db.opts.MinFreeBytes), Err: err}
	d.Low = err == nil && free < d.MinFree
	return d
}
