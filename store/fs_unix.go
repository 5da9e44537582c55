//go:build linux || darwin || freebsd

package store

import (
	"errors"
	"fmt"
	"syscall"
)

// statfsFree returns the bytes of the filesystem holding dir that an
// unprivileged process may still use.
func statfsFree(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("store: statfs %s: %w", dir, err)
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}

// isLocked reports whether err is leveldb's file lock held by another
// process (flock with LOCK_NB).
func isLocked(err error) bool { return errors.Is(err, syscall.EWOULDBLOCK) }
