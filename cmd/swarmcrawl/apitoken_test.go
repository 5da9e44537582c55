package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDLQTokenSources: `dlq --requeue-all` through --api finds the node's
// token in --api-token FILE or $SWARMCRAWL_API_TOKEN, and without either
// fails with one line saying how to give it; listing needs no token; a
// wrong token is refused by the node.
func TestDLQTokenSources(t *testing.T) {
	bin := binary(t)
	running := startNode(t, bin, nil, "--discovery=false")
	rawAddr, err := os.ReadFile(filepath.Join(running.data, "api"))
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimSpace(string(rawAddr))
	tokenFile := filepath.Join(running.data, "api.token")
	rawToken, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(rawToken))
	// A token copied elsewhere, 0600 as the node's own.
	copied := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(copied, rawToken, 0o600); err != nil {
		t.Fatal(err)
	}
	loose := filepath.Join(t.TempDir(), "loose-token")
	if err := os.WriteFile(loose, rawToken, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name    string
		args    []string
		env     string // SWARMCRAWL_API_TOKEN
		wantOK  bool
		wantOut string
	}{
		{"list needs no token", []string{"--api", addr}, "", true, "0 dead letters"},
		{"data dir token", []string{"--data", running.data, "--requeue-all"}, "", true, "requeued 0 dead letters"},
		{"token file", []string{"--api", addr, "--api-token", copied, "--requeue-all"}, "", true, "requeued 0 dead letters"},
		{"token in environment", []string{"--api", addr, "--requeue-all"}, token, true, "requeued 0 dead letters"},
		{"token file wins over environment", []string{"--api", addr, "--api-token", copied, "--requeue-all"}, strings.Repeat("0", 64), true, "requeued 0 dead letters"},
		{"no token", []string{"--api", addr, "--requeue-all"}, "", false, "--api-token FILE"},
		{"wrong token", []string{"--api", addr, "--requeue-all"}, strings.Repeat("0", 64), false, "401"},
		{"token file open to others", []string{"--api", addr, "--api-token", loose, "--requeue-all"}, "", false, "chmod 600"},
		{"missing token file", []string{"--api", addr, "--api-token", filepath.Join(t.TempDir(), "none"), "--requeue", "http://a.test/"}, "", false, "no such file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"dlq"}, c.args...)...)
			cmd.Env = append(os.Environ(), "SWARMCRAWL_API_TOKEN="+c.env)
			out, err := cmd.CombinedOutput()
			if (err == nil) != c.wantOK || !strings.Contains(string(out), c.wantOut) {
				t.Fatalf("err %v, output %q; want success %v and %q", err, out, c.wantOK, c.wantOut)
			}
			if !c.wantOK && strings.Count(strings.TrimSpace(string(out)), "\n") > 0 {
				t.Fatalf("failure takes more than one line:\n%s", out)
			}
		})
	}
}

// TestNodeTokenFile: the node creates DATA/api.token with mode 0600, and
// refuses to start, in one line naming the file, on a token file group or
// others can read.
func TestNodeTokenFile(t *testing.T) {
	bin := binary(t)
	running := startNode(t, bin, nil, "--discovery=false")
	path := filepath.Join(running.data, "api.token")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Fatalf("%s has mode %04o, want 0600", path, mode)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	data := t.TempDir()
	loose := filepath.Join(data, "api.token")
	if err := os.WriteFile(loose, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o640); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "node", "--data", data, "--listen", "/ip4/127.0.0.1/tcp/0", "--api", "127.0.0.1:0", "--nat=false", "--discovery=false", "--log-level", "error", "--ring-work", testRingWork)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("node started with a group-readable token file:\n%s", out)
	}
	msg := strings.TrimSpace(string(out))
	if !strings.Contains(msg, loose) || !strings.Contains(msg, "chmod 600") || strings.Contains(msg, "\n") {
		t.Fatalf("want one line naming %s and chmod 600, got:\n%s", loose, msg)
	}
}
