package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/swarmcrawl/swarmcrawl/p2p"
)

// runSwarmKey prints a new pre-shared key for a private swarm, in the
// kubo swarm.key format, or writes it to a new file readable by its owner
// only.
func runSwarmKey(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("swarm-key", stderr)
	out := fs.String("out", "", "write the key to this new file (mode 0600) instead of printing it")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	key, err := p2p.NewSwarmKey()
	if err != nil {
		return err
	}
	if *out == "" {
		_, err := stdout.Write(key)
		return err
	}
	return writeNewSecret(*out, key)
}

// writeNewSecret writes data to a new file of mode 0600, refusing to
// overwrite one: replacing a swarm's key by accident cuts a node off.
func writeNewSecret(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return usageErr("%s exists; not overwriting it", path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
