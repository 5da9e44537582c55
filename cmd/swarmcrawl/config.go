package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// applyConfigFile sets every flag named in the file that was not given on
// the command line, so the command line always wins. The file is YAML: a
// mapping from the options' names (the flags' names, without dashes) to
// their values, a list for an option that takes several (listen: [a, b]).
// Every error names the file, the line and the option.
func applyConfigFile(fs *flag.FlagSet, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	values, err := parseConfig(data)
	if err != nil {
		return fmt.Errorf("config %s%w", path, err)
	}
	explicit := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { explicit[fl.Name] = true })
	for _, v := range values {
		switch {
		case v.name == "config":
			return fmt.Errorf("config %s:%d: a config file cannot name another config file", path, v.line)
		case fs.Lookup(v.name) == nil:
			return fmt.Errorf("config %s:%d: unknown option %q", path, v.line, v.name)
		case explicit[v.name]:
			continue
		}
		// A repeatable option takes a list item by item: its values may
		// hold commas.
		values := []string{v.value}
		if _, ok := fs.Lookup(v.name).Value.(*patternFlag); ok && v.items != nil {
			values = v.items
		}
		for _, value := range values {
			if err := fs.Set(v.name, value); err != nil {
				return fmt.Errorf("config %s:%d: %s: invalid value %q: %w", path, v.line, v.name, value, err)
			}
		}
	}
	return nil
}

// configValue is one option of a config file, as a flag value: a list's
// items joined with commas, as a list flag takes them, and the items.
type configValue struct {
	name, value string
	items       []string // a list's items; nil for a scalar
	line        int
}

// parseConfig reads a YAML config file: a mapping of option names to
// scalars or lists of scalars (joined with commas, as a list flag takes
// them). An error starts with ":LINE: " for the file name to go before.
func parseConfig(data []byte) ([]configValue, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf(": %w", err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, nil // empty, or comments only
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		if root.Kind == yaml.ScalarNode && strings.Contains(root.Value, "=") {
			return nil, fmt.Errorf(":%d: the config file is YAML: write `name: value`, not `name = value`", root.Line)
		}
		return nil, fmt.Errorf(":%d: want a mapping of option names to values", root.Line)
	}
	seen := map[string]int{}
	var out []configValue
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf(":%d: an option name must be a plain word", k.Line)
		}
		name := k.Value
		if first, dup := seen[name]; dup {
			return nil, fmt.Errorf(":%d: option %q given twice (first on line %d)", k.Line, name, first)
		}
		seen[name] = k.Line
		var value string
		var items []string
		switch v.Kind {
		case yaml.ScalarNode:
			value = v.Value
		case yaml.SequenceNode:
			parts := make([]string, 0, len(v.Content))
			for _, item := range v.Content {
				if item.Kind != yaml.ScalarNode {
					return nil, fmt.Errorf(":%d: %s: a list of plain values only", item.Line, name)
				}
				parts = append(parts, item.Value)
			}
			value, items = strings.Join(parts, ","), parts
		default:
			return nil, fmt.Errorf(":%d: %s: want a value or a list of values", v.Line, name)
		}
		out = append(out, configValue{name: name, value: value, items: items, line: k.Line})
	}
	return out, nil
}

// writeConfig writes every option of fs but config as a YAML config file
// that applyConfigFile reads back to the same values: each with its usage
// as a comment, lists as YAML lists, values quoted where YAML would read
// them otherwise.
func writeConfig(w io.Writer, fs *flag.FlagSet) error {
	var b strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "config" {
			return
		}
		_, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(&b, "# %s\n", strings.ReplaceAll(usage, "\n", " "))
		var list []string
		switch l := f.Value.(type) {
		case *listFlag:
			list = *l
		case *patternFlag:
			list = *l
		}
		if isList(f.Value) {
			items := make([]string, len(list))
			for i, item := range list {
				items[i] = yamlFlowScalar(item)
			}
			fmt.Fprintf(&b, "%s: [%s]\n", f.Name, strings.Join(items, ", "))
			return
		}
		value := yamlScalar(f.Value.String())
		if g, ok := f.Value.(flag.Getter); ok {
			switch g.Get().(type) {
			case bool, int, int64, uint, uint64, float64:
				value = f.Value.String() // a YAML bool or number, read back as written
			}
		}
		fmt.Fprintf(&b, "%s: %s\n", f.Name, value)
	})
	_, err := io.WriteString(w, b.String())
	return err
}

// yamlScalar writes s so that YAML reads it back as the same string.
func yamlScalar(s string) string {
	out, err := yaml.Marshal(s)
	if err != nil {
		return strconv.Quote(s)
	}
	return strings.TrimSuffix(string(out), "\n")
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

// yamlFlowScalar writes s so that YAML reads it back as the same string
// inside a flow list ([a, b]), where commas and brackets end a plain
// value: such a value is double-quoted.
func yamlFlowScalar(s string) string {
	plain := yamlScalar(s)
	if !strings.ContainsAny(plain, ",[]{}") || strings.HasPrefix(plain, "'") || strings.HasPrefix(plain, `"`) {
		return plain
	}
	out, err := yaml.Marshal(&yaml.Node{Kind: yaml.ScalarNode, Style: yaml.DoubleQuotedStyle, Value: s})
	if err != nil {
		return strconv.Quote(s)
	}
	return strings.TrimSuffix(string(out), "\n")
}

// isList reports whether a flag takes a list of values.
func isList(v flag.Value) bool {
	switch v.(type) {
	case *listFlag, *patternFlag:
		return true
	}
	return false
}

// patternFlag is an option given once per value, each taken whole: a
// regular expression may hold commas. In a config file it is a YAML list.
type patternFlag []string

func (p *patternFlag) String() string { return strings.Join(*p, ",") }

func (p *patternFlag) Set(s string) error {
	*p = append(*p, s)
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

// runConfig prints the effective configuration of `swarmcrawl node` with
// the same arguments: every option, from the defaults, the --config file
// and the flags given (which win), as a YAML config file.
func runConfig(args []string, stdout, stderr io.Writer) error {
	fs, _, err := parseNodeOptions("config", args, stderr)
	if err != nil {
		return err
	}
	return writeConfig(stdout, fs)
}

// parseNodeOptions parses the options of `swarmcrawl node` (for the
// command name) from args and, with --config, from the file, the command
// line winning.
func parseNodeOptions(name string, args []string, stderr io.Writer) (*flag.FlagSet, *nodeOptions, error) {
	fs := newFlagSet(name, stderr)
	o := &nodeOptions{}
	o.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return nil, nil, err
	}
	if fs.NArg() > 0 {
		return nil, nil, usageErr("unexpected argument %q", fs.Arg(0))
	}
	if o.config != "" {
		if err := applyConfigFile(fs, o.config); err != nil {
			return nil, nil, usageErr("%v", err)
		}
	}
	return fs, o, nil
}
