package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// TestDemoReadsWell runs `swarmcrawl demo` (what `make run` runs) on a small
// web and checks that it reads well to the end: the crawl completes, every
// check is ok, the errors are named by kind, and the normal stop prints no
// warning (a whole swarm stopping hands nothing off).
func TestDemoReadsWell(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 3-node swarm")
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"demo", "--nodes", "3", "--hosts", "20", "--delay", "20ms"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("demo: exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	text := out.String()
	if !strings.Contains(text, "crawl complete:") || strings.Count(text, " ok\n") != 3 {
		t.Fatalf("demo output:\n%s", text)
	}
	if unnamed := regexp.MustCompile(`(?m)errors [1-9][0-9]*$`); unnamed.MatchString(text) {
		t.Errorf("errors counted without their kinds:\n%s", text)
	}
	if strings.Contains(errOut.String(), "level=WARN") || strings.Contains(errOut.String(), "level=ERROR") {
		t.Fatalf("the demo's normal stop warned:\n%s", errOut.String())
	}
}
