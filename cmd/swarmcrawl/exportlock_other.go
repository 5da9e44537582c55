//go:build !(linux || darwin || freebsd)

package main

// lockExportDir does nothing where flock is not to be had: two exports
// into one directory at once are the user's to avoid.
func lockExportDir(string) (func(), error) { return func() {}, nil }
