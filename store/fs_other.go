//go:build !(linux || darwin || freebsd)

package store

import (
	"errors"
	"fmt"
)

// statfsFree is not implemented here: DiskSpace reports the error and
// never says the disk is low.
func statfsFree(dir string) (uint64, error) {
	return 0, fmt.Errorf("store: free space of %s: %w", dir, errors.ErrUnsupported)
}

// isLocked cannot tell leveldb's lock errors apart on this platform.
func isLocked(error) bool { return false }
