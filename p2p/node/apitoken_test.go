package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl/urls"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// deadURL is the dead letter every API test node holds.
const deadURL = "http://dead.example/p"

// apiNode is a started node with one dead letter, and what a client of its
// HTTP API needs.
type apiNode struct {
	n     *node.Node
	dir   string
	port  string
	token string // empty when the test did not read it
	logs  *syncBuffer
}

// startAPINode starts a lone node whose API listens on apiAddr, and stores
// one dead letter in it.
func startAPINode(t *testing.T, dir, apiAddr string) (*apiNode, error) {
	t.Helper()
	logs := &syncBuffer{}
	cfg := node.DefaultConfig()
	cfg.DataDir = dir
	cfg.Host = p2p.Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, DisableNAT: true}
	cfg.RingWork = p2p.NoRingWork
	cfg.DisableDiscovery = true
	cfg.APIAddr = apiAddr
	cfg.Crawl = noWeb()
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	n, err := node.New(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		_ = n.Close()
		return nil, err
	}
	t.Cleanup(func() { _ = n.Close() })
	k := urls.HostKey("dead.example")
	d := store.DeadLetter{URL: deadURL, RingKey: k, URLHash: urls.URLHash(deadURL), HostKey: k, Attempts: 4, Kind: "http_5xx", LastError: "HTTP 500"}
	if err := node.PutDeadLetter(n, d); err != nil {
		t.Fatal(err)
	}
	_, port, err := net.SplitHostPort(n.APIAddr())
	if err != nil {
		t.Fatal(err)
	}
	return &apiNode{n: n, dir: dir, port: port, logs: logs}, nil
}

// mustStartAPINode is startAPINode on a new data dir and loopback, with
// the token the node created read from its data dir.
func mustStartAPINode(t *testing.T) *apiNode {
	t.Helper()
	a, err := startAPINode(t, t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(a.dir, node.APITokenFile))
	if err != nil {
		t.Fatal(err)
	}
	a.token = strings.TrimSpace(string(raw))
	return a
}

// apiRequest is one request to the API: Host, Origin, Content-Type and
// Authorization are sent as given, none when empty.
type apiRequest struct {
	method, path, host, origin, contentType, auth, body string
}

// do sends r to the node's API on 127.0.0.1 and returns the status code
// and the body.
func (a *apiNode) do(t *testing.T, r apiRequest) (int, string) {
	t.Helper()
	req, err := http.NewRequest(r.method, "http://127.0.0.1:"+a.port+r.path, strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	if r.host != "" {
		req.Host = r.host
	}
	for k, v := range map[string]string{"Origin": r.origin, "Content-Type": r.contentType, "Authorization": r.auth} {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// deadLetters returns how many dead letters the node lists at GET /dlq.
func (a *apiNode) deadLetters(t *testing.T) int64 {
	t.Helper()
	code, body := a.do(t, apiRequest{method: http.MethodGet, path: "/dlq"})
	if code != http.StatusOK {
		t.Fatalf("GET /dlq: %d %s", code, body)
	}
	var list node.DeadLetters
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("GET /dlq: %v\n%s", err, body)
	}
	return list.Total
}

// TestCrossSiteRequeueRefused replays the attack measured on the API: a
// web page anywhere makes the operator's browser POST a "simple" request
// (text/plain, so no CORS preflight) to the loopback API. It must be
// refused and requeue nothing.
func TestCrossSiteRequeueRefused(t *testing.T) {
	a := mustStartAPINode(t)
	code, body := a.do(t, apiRequest{
		method: http.MethodPost, path: "/dlq/requeue",
		origin: "http://evil.example", contentType: "text/plain",
		body: `{"all":true}`,
	})
	if code < 400 || code >= 500 {
		t.Errorf("cross-site requeue answered %d %q, want a 4xx refusal", code, body)
	}
	if got := a.deadLetters(t); got != 1 {
		t.Fatalf("after the cross-site request the node holds %d dead letters, want 1: it was requeued", got)
	}
}

// TestAPIGuard: each way a request can lack what the API requires is
// refused with its own status and changes nothing; the requests an
// operator's tools send are served.
func TestAPIGuard(t *testing.T) {
	a := mustStartAPINode(t)
	own := "127.0.0.1:" + a.port
	bearer := "Bearer " + a.token
	requeue := func(mod func(*apiRequest)) apiRequest {
		r := apiRequest{method: http.MethodPost, path: "/dlq/requeue", contentType: "application/json", auth: bearer, body: `{"all":true}`}
		mod(&r)
		return r
	}
	refused := []struct {
		name string
		req  apiRequest
		want int
	}{
		{"no token", requeue(func(r *apiRequest) { r.auth = "" }), http.StatusUnauthorized},
		{"wrong token", requeue(func(r *apiRequest) { r.auth = "Bearer " + strings.Repeat("0", len(a.token)) }), http.StatusUnauthorized},
		{"token prefix", requeue(func(r *apiRequest) { r.auth = bearer[:len(bearer)-1] }), http.StatusUnauthorized},
		{"token not bearer", requeue(func(r *apiRequest) { r.auth = "Basic " + a.token }), http.StatusUnauthorized},
		{"text/plain body", requeue(func(r *apiRequest) { r.contentType = "text/plain" }), http.StatusUnsupportedMediaType},
		{"form body", requeue(func(r *apiRequest) { r.contentType = "application/x-www-form-urlencoded" }), http.StatusUnsupportedMediaType},
		{"no content type", requeue(func(r *apiRequest) { r.contentType = "" }), http.StatusUnsupportedMediaType},
		{"foreign origin", requeue(func(r *apiRequest) { r.origin = "http://evil.example" }), http.StatusForbidden},
		{"foreign origin, own port", requeue(func(r *apiRequest) { r.origin = "http://evil.example:" + a.port }), http.StatusForbidden},
		{"null origin", requeue(func(r *apiRequest) { r.origin = "null" }), http.StatusForbidden},
		{"rebinding host", requeue(func(r *apiRequest) { r.host = "evil.example:" + a.port; r.origin = "http://evil.example:" + a.port }), http.StatusMisdirectedRequest},
		{"status, rebinding host", apiRequest{method: http.MethodGet, path: "/status", host: "evil.example:" + a.port}, http.StatusMisdirectedRequest},
		{"dlq, rebinding host", apiRequest{method: http.MethodGet, path: "/dlq", host: "evil.example:" + a.port}, http.StatusMisdirectedRequest},
		{"healthz, rebinding host", apiRequest{method: http.MethodGet, path: "/healthz", host: "evil.example"}, http.StatusMisdirectedRequest},
		{"status, loopback name on another port", apiRequest{method: http.MethodGet, path: "/status", host: "localhost:1"}, http.StatusMisdirectedRequest},
		{"status, localhost subdomain", apiRequest{method: http.MethodGet, path: "/status", host: "evil.localhost:" + a.port}, http.StatusMisdirectedRequest},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			code, body := a.do(t, c.req)
			if code != c.want {
				t.Fatalf("answered %d %q, want %d", code, body, c.want)
			}
			if got := a.deadLetters(t); got != 1 {
				t.Fatalf("the node holds %d dead letters, want 1: the refused request requeued", got)
			}
		})
	}
	for _, host := range []string{own, "localhost:" + a.port, "LocalHost:" + a.port, "[::1]:" + a.port} {
		t.Run("status, host "+host, func(t *testing.T) {
			code, body := a.do(t, apiRequest{method: http.MethodGet, path: "/status", host: host})
			var st node.Status
			if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil || st.PeerID != a.n.ID().String() {
				t.Fatalf("answered %d %q, want the status", code, body)
			}
		})
	}
	// The operator's request, from a tool (no Origin) or from a page the
	// API serves itself (its own Origin), with a charset parameter.
	t.Run("requeue from own origin", func(t *testing.T) {
		code, body := a.do(t, requeue(func(r *apiRequest) {
			r.origin = "http://" + own
			r.contentType = "application/json; charset=utf-8"
			r.auth = "bearer " + a.token
		}))
		var res node.RequeueResult
		if code != http.StatusOK || json.Unmarshal([]byte(body), &res) != nil || res.Requeued != 1 {
			t.Fatalf("answered %d %q, want 1 requeued", code, body)
		}
		if got := a.deadLetters(t); got != 0 {
			t.Fatalf("%d dead letters left after requeue, want 0", got)
		}
	})
}

// TestPublicAPIAcceptsAnyHost: an API bound beyond loopback on purpose
// warns at start and serves any Host (it is reached by name), and its
// mutating endpoints still need the token.
func TestPublicAPIAcceptsAnyHost(t *testing.T) {
	a, err := startAPINode(t, t.TempDir(), "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(a.logs.String(), "level=WARN") || !strings.Contains(a.logs.String(), "loopback") {
		t.Errorf("no warning about the non-loopback API in the log:\n%s", a.logs)
	}
	host := "crawler.example:" + a.port
	if code, body := a.do(t, apiRequest{method: http.MethodGet, path: "/status", host: host}); code != http.StatusOK {
		t.Fatalf("GET /status with Host %s: %d %q, want 200", host, code, body)
	}
	post := apiRequest{method: http.MethodPost, path: "/dlq/requeue", host: host, contentType: "application/json", body: `{"all":true}`}
	if code, body := a.do(t, post); code != http.StatusUnauthorized {
		t.Fatalf("requeue without token: %d %q, want 401", code, body)
	}
	if got := a.deadLetters(t); got != 1 {
		t.Fatalf("%d dead letters after a refused requeue, want 1", got)
	}
	token, err := node.ReadAPIToken(filepath.Join(a.dir, node.APITokenFile))
	if err != nil {
		t.Fatal(err)
	}
	post.auth = "Bearer " + token
	post.origin = "http://" + host
	if code, body := a.do(t, post); code != http.StatusOK {
		t.Fatalf("requeue with token: %d %q, want 200", code, body)
	}
}

// TestAPITokenFile: a node creates its token 0600 and keeps it across
// restarts; it refuses to start on a token file group or others can read,
// naming the file in one line.
func TestAPITokenFile(t *testing.T) {
	dir := t.TempDir()
	a, err := startAPINode(t, dir, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, node.APITokenFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Errorf("token file mode %04o, want 0600", mode)
	}
	first, err := node.ReadAPIToken(path)
	if err != nil || len(first) != 64 {
		t.Fatalf("token %q, %v: want 64 hex characters", first, err)
	}
	if err := a.n.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := startAPINode(t, dir, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	if again, err := node.ReadAPIToken(path); err != nil || again != first {
		t.Fatalf("token changed across a restart: %q then %q (%v)", first, again, err)
	}

	for _, mode := range []os.FileMode{0o640, 0o604, 0o620} {
		dir := t.TempDir()
		path := filepath.Join(dir, node.APITokenFile)
		if err := os.WriteFile(path, []byte(first+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		_, err := startAPINode(t, dir, "127.0.0.1:0")
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "chmod 600") || strings.Contains(err.Error(), "\n") {
			t.Fatalf("token file mode %04o: start error %v, want one line naming %s and chmod 600", mode, err, path)
		}
	}
}

// TestReadAPIToken: a missing token file is told apart (the node creates
// one); a short or malformed token is refused.
func TestReadAPIToken(t *testing.T) {
	dir := t.TempDir()
	if _, err := node.ReadAPIToken(filepath.Join(dir, "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v, want fs.ErrNotExist", err)
	}
	for name, content := range map[string]string{
		"empty":  "",
		"short":  "abc123\n",
		"spaces": strings.Repeat("ab cd ", 8),
		"utf8":   strings.Repeat("é", 20),
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if tok, err := node.ReadAPIToken(path); err == nil {
			t.Errorf("%s token accepted as %q", name, tok)
		}
	}
	created, err := node.LoadOrCreateAPIToken(filepath.Join(dir, "new"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := node.ReadAPIToken(filepath.Join(dir, "new")); err != nil || got != created {
		t.Fatalf("created %q, read back %q, %v", created, got, err)
	}
}

// syncBuffer is a bytes.Buffer a logger may write from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
