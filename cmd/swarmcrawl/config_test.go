package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// otherValue returns a value for a node option that is valid and differs
// from its default, so that a config file setting it shows whether it
// was taken.
func otherValue(t *testing.T, f *flag.Flag) string {
	t.Helper()
	g, ok := f.Value.(flag.Getter)
	if !ok {
		switch f.Value.(type) {
		case *listFlag:
			return "/ip4/127.0.0.1/tcp/7001,/ip4/127.0.0.1/tcp/7002"
		case *sizeFlag:
			return "3GiB"
		case *patternFlag:
			// One pattern, commas and all: a list item is taken whole.
			return `^https?://[a-z]+\.example/(a|b){1,3}$`
		}
		t.Fatalf("option %s: no value to try for %T", f.Name, f.Value)
	}
	switch v := g.Get().(type) {
	case bool:
		return fmt.Sprint(!v)
	case int:
		return fmt.Sprint(v + 3)
	case int64:
		return fmt.Sprint(v + 3)
	case time.Duration:
		return (v + 3*time.Second).String()
	case string:
		switch f.Name {
		case "key":
			return "url"
		case "scope":
			return "seed-hosts"
		case "log-level":
			return "debug"
		}
		return "value: with # and 'quotes', of " + f.Name
	}
	t.Fatalf("option %s: no value to try for %T", f.Name, g.Get())
	return ""
}

// TestConfigFileRoundTrip sets every option of `swarmcrawl node` to a
// value other than its default in a YAML file, and checks that
// `swarmcrawl config --config FILE` prints each of them as set, that its
// output read back prints the same, and that a flag on the command line
// wins over the file.
func TestConfigFileRoundTrip(t *testing.T) {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	var o nodeOptions
	o.register(fs)
	want := map[string]string{}
	var file strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "config" {
			return
		}
		v := otherValue(t, f)
		check := flag.NewFlagSet("check", flag.ContinueOnError)
		var oo nodeOptions
		oo.register(check)
		if err := check.Set(f.Name, v); err != nil {
			t.Fatalf("option %s: %q: %v", f.Name, v, err)
		}
		want[f.Name] = check.Lookup(f.Name).Value.String()
		if want[f.Name] == f.DefValue {
			t.Fatalf("option %s: %q is its default", f.Name, v)
		}
		if _, isList := f.Value.(*listFlag); isList {
			fmt.Fprintf(&file, "%s:\n", f.Name)
			for _, item := range strings.Split(v, ",") {
				fmt.Fprintf(&file, "  - %s\n", item)
			}
			return
		}
		fmt.Fprintf(&file, "%s: %s\n", f.Name, yamlScalar(v))
	})
	path := filepath.Join(t.TempDir(), "node.yaml")
	if err := os.WriteFile(path, []byte(file.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	effective := func(args ...string) map[string]string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(append([]string{"config"}, args...), nil, &out, &errOut); code != 0 {
			t.Fatalf("config %v: exit %d: %s", args, code, errOut.String())
		}
		printed := filepath.Join(t.TempDir(), "printed.yaml")
		if err := os.WriteFile(printed, out.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		vals, err := parseConfig(out.Bytes())
		if err != nil {
			t.Fatalf("config output does not parse: %v\n%s", err, out.String())
		}
		got := map[string]string{}
		for _, v := range vals {
			got[v.name] = v.value
		}
		// Read back: the printed file gives the same configuration.
		var again bytes.Buffer
		if code := run([]string{"config", "--config", printed}, nil, &again, &errOut); code != 0 || again.String() != out.String() {
			t.Fatalf("printed config read back differs (exit %d, %s):\n%s\nvs\n%s", code, errOut.String(), again.String(), out.String())
		}
		return got
	}
	got := effective("--config", path)
	for name, w := range want {
		if got[name] != w {
			t.Errorf("option %s: %q, want %q from the file", name, got[name], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("config printed %d options, want %d", len(got), len(want))
	}
	if got := effective("--config", path, "--workers", "7"); got["workers"] != "7" {
		t.Errorf("workers %q with --workers 7 on the command line, want 7", got["workers"])
	}
}

// TestLogFormat checks --log-format: json gives one JSON object a line with
// the level, message and attributes; text gives key=value; anything else
// is refused with one line.
func TestLogFormat(t *testing.T) {
	var b bytes.Buffer
	log, err := newLogger(&b, "info", "json")
	if err != nil {
		t.Fatal(err)
	}
	log.Debug("hidden")
	log.Info("range acquired", "range", "(a, b]", "urls", 3)
	var rec map[string]any
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil || rec["level"] != "INFO" || rec["msg"] != "range acquired" || rec["urls"] != float64(3) {
		t.Fatalf("json log line %q: %v %v", b.String(), rec, err)
	}
	b.Reset()
	if log, err = newLogger(&b, "info", "text"); err != nil {
		t.Fatal(err)
	}
	log.Info("range acquired", "urls", 3)
	if !strings.Contains(b.String(), `msg="range acquired" urls=3`) {
		t.Fatalf("text log line %q", b.String())
	}
	if _, err := newLogger(&b, "info", "xml"); err == nil || !strings.Contains(err.Error(), "want text or json") {
		t.Fatalf("--log-format xml: %v", err)
	}
}
