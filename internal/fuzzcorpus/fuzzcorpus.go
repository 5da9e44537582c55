// Package fuzzcorpus writes the committed seed corpora of the fuzz
// targets. Tests only: a target builds its seeds from real inputs (the
// package's own encoders, fixtures, synthetic web pages) and passes them
// to Write, which writes them only under `make fuzz-corpus`, so that a
// change of format is followed by regenerating the corpus rather than by
// editing files by hand. Package protocol, which imports no other project
// package, keeps its own copy.
package fuzzcorpus

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Env is the variable `make fuzz-corpus` sets to have Write write.
const Env = "SWARMCRAWL_WRITE_CORPUS"

// Write writes the seeds build returns (file name to the target's
// arguments, in order) as testdata/fuzz/<f's name>/<file name> in the
// `go test fuzz v1` format, when Env is set; otherwise it does nothing and
// build is not called.
func Write(f *testing.F, build func() map[string][]any) {
	f.Helper()
	if os.Getenv(Env) == "" {
		return
	}
	dir := filepath.Join("testdata", "fuzz", f.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.Fatal(err)
	}
	for name, vals := range build() {
		b, err := Encode(vals...)
		if err != nil {
			f.Fatalf("seed %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			f.Fatal(err)
		}
	}
}

// Encode returns the `go test fuzz v1` file of one input.
func Encode(vals ...any) ([]byte, error) {
	b := []byte("go test fuzz v1\n")
	for _, v := range vals {
		switch v := v.(type) {
		case []byte:
			b = fmt.Appendf(b, "[]byte(%q)\n", v)
		case string:
			b = fmt.Appendf(b, "string(%q)\n", v)
		case byte:
			b = fmt.Appendf(b, "byte(%q)\n", v)
		case bool, int, int8, int16, int32, int64, uint, uint16, uint32, uint64:
			b = fmt.Appendf(b, "%T(%v)\n", v, v)
		default:
			return nil, fmt.Errorf("type %T is not a fuzz argument", v)
		}
	}
	return b, nil
}
