package node

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// APITokenFile holds, in the data dir, the bearer token the node's HTTP
// API requires on every request that changes something. The node creates
// it on first start with mode 0600; a tool that can read it may act on
// the node.
const APITokenFile = "api.token"

// minAPITokenLen is the shortest token accepted: the hex text of 16
// random bytes. A node creates 32.
const minAPITokenLen = 32

// LoadOrCreateAPIToken returns the API token in path, creating a random
// one (32 bytes, hex, mode 0600) when the file does not exist. A file
// group or others may read or write is refused: the token would no longer
// tell the node's operator from the machine's other users.
func LoadOrCreateAPIToken(path string) (string, error) {
	token, err := ReadAPIToken(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return token, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("api token: %w", err)
	}
	token = hex.EncodeToString(raw)
	// CreateTemp makes the file 0600 and exclusively; the rename means a
	// crash never leaves a truncated token behind.
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return "", fmt.Errorf("api token: %w", err)
	}
	_, werr := f.WriteString(token + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), path)
	}
	if werr != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("api token %s: %w", path, werr)
	}
	return token, nil
}

// ReadAPIToken reads the API token in path. It refuses a file that group
// or others may read or write, and a token too short or holding
// characters an HTTP header cannot carry. A missing file is an error
// matching fs.ErrNotExist.
func ReadAPIToken(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("api token: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("api token %s is open to group or others (mode %04o); run chmod 600 %s", path, perm, path)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("api token: %w", err)
	}
	token := strings.TrimSpace(string(raw))
	if len(token) < minAPITokenLen {
		return "", fmt.Errorf("api token %s is too short (%d characters, want at least %d)", path, len(token), minAPITokenLen)
	}
	for _, c := range []byte(token) {
		if c <= ' ' || c > '~' {
			return "", fmt.Errorf("api token %s holds a space or a non-ASCII character", path)
		}
	}
	return token, nil
}
