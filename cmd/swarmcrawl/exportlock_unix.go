//go:build linux || darwin || freebsd

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockExportDir holds dir for one swarm export at a time (flock on
// DIR/export.lock, released when the process ends, however it ends), and
// returns its release.
func lockExportDir(dir string) (release func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, "export.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, usageErr("another export is writing %s", dir)
		}
		return nil, fmt.Errorf("export: lock %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}
