package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// applyConfigFile sets every flag named in the file that was not given on
// the command line, so the command line always wins. The file holds the
// same option names as the flags, one `name = value` a line; blank lines
// and lines starting with # are ignored.
func applyConfigFile(fs *flag.FlagSet, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	explicit := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { explicit[fl.Name] = true })
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		name, value, ok := strings.Cut(text, "=")
		if !ok {
			return fmt.Errorf("config %s:%d: want name = value, got %q", path, line, text)
		}
		name = strings.TrimPrefix(strings.TrimSpace(name), "--")
		value = strings.Trim(strings.TrimSpace(value), `"`)
		if name == "config" {
			return fmt.Errorf("config %s:%d: a config file cannot name another config file", path, line)
		}
		if fs.Lookup(name) == nil {
			return fmt.Errorf("config %s:%d: unknown option %q", path, line, name)
		}
		if explicit[name] {
			continue
		}
		if err := fs.Set(name, value); err != nil {
			return fmt.Errorf("config %s:%d: %s: %w", path, line, name, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("config %s: %w", path, err)
	}
	return nil
}

// listFlag is a comma-separated list option that may also be repeated.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*l = append(*l, part)
		}
	}
	return nil
}

// sizeFlag is a byte count written as a number with an optional unit: B,
// kB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024),
// case-insensitive, e.g. "512MiB", "2GB", "1073741824".
type sizeFlag int64

// sizeUnits are the units sizeFlag takes, lower-cased.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}

func (s sizeFlag) String() string {
	v := int64(s)
	for _, u := range []struct {
		name string
		n    int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if v != 0 && v%u.n == 0 {
			return fmt.Sprintf("%d%s", v/u.n, u.name)
		}
	}
	return strconv.FormatInt(v, 10)
}

func (s *sizeFlag) Set(v string) error {
	v = strings.TrimSpace(v)
	i := strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(v)
	}
	n, err := strconv.ParseFloat(v[:i], 64)
	if err != nil {
		return fmt.Errorf("size %q: want a number and a unit, e.g. 1GiB", v)
	}
	unit, ok := sizeUnits[strings.ToLower(strings.TrimSpace(v[i:]))]
	if !ok {
		return fmt.Errorf("size %q: unknown unit (want B, kB, MB, GB, TB, KiB, MiB, GiB or TiB)", v)
	}
	b := n * float64(unit)
	if b >= 1<<63 {
		return fmt.Errorf("size %q: too large", v)
	}
	*s = sizeFlag(b)
	return nil
}
