package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
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
