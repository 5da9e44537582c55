//go:build unix

// Package replaytest opens a WACZ package in ReplayWeb.page (npm
// replaywebpage, served on loopback) in headless Chromium driven over the
// DevTools protocol, and checks that an archived page replays with its
// text. It is for tests only: store/warc's replay test and the swarm
// export's.
package replaytest

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/websocket"
)

// Replay serves ReplayWeb.page and the WACZ package at wacz from a
// loopback HTTP server, opens the capture of target nearest ts
// (yyyyMMddHHmmss) in headless Chromium, and fails t unless want appears
// in the replayed page's text within 90 s. A screenshot is kept in the
// test's artifacts as shot (go test -artifacts). Without Chromium or npm
// the test skips, or fails under CI, where .ci/run installs them.
func Replay(t *testing.T, wacz, target, ts, want, shot string) {
	t.Helper()
	bin := chromiumPath(t)
	rwp := replayWebPageDir(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/crawl.wacz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/wacz")
		http.ServeFile(w, r, wacz) // answers range requests
	})
	mux.Handle("/", http.FileServer(http.Dir(rwp)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln) // owned: ends with srv.Close
	defer srv.Close()

	b := startBrowser(t, bin)
	defer b.close()
	base := "http://" + ln.Addr().String()
	page := base + "/?source=" + url.QueryEscape(base+"/crawl.wacz") + "#view=replay&url=" + url.QueryEscape(target) + "&ts=" + ts
	if err := b.navigate(page); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	text, ok := b.waitForText(ctx, want)
	shotPath := filepath.Join(t.ArtifactDir(), shot)
	if err := b.screenshot(shotPath); err != nil {
		t.Errorf("screenshot: %v", err)
	}
	if !ok {
		t.Fatalf("the archived page's text did not appear in ReplayWeb.page in 90 s; the page shows:\n%.3000s", text)
	}
	if st, err := os.Stat(shotPath); err != nil || st.Size() < 10_000 {
		t.Errorf("screenshot %s: %v", shotPath, err)
	}
	t.Logf("ReplayWeb.page %s replayed %s from the WACZ; screenshot %s", ReplayWebPageVersion, target, shotPath)
}

// repoRoot returns the repository's root: the nearest directory up from
// the test's that holds go.mod.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("repository root (go.mod) not found above the test's directory")
		}
		dir = parent
	}
}

// ReplayWebPageVersion is the version of the npm package replaywebpage
// (ReplayWeb.page, https://github.com/webrecorder/replayweb.page) the
// replay test serves. Its dependencies are bundled into ui.js and sw.js,
// so the package is fetched alone with npm pack, which .ci/run does:
//
//	npm pack --pack-destination .cache/npm replaywebpage@2.5.3
const ReplayWebPageVersion = "2.5.3"

// replayWebPageDir returns the directory of the replaywebpage package,
// unpacked under .cache/npm (or $SWARMCRAWL_NPM_DIR), fetching it with npm
// pack when it is not there. Without npm the test skips, or fails under
// CI.
func replayWebPageDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("SWARMCRAWL_NPM_DIR")
	if dir == "" {
		dir = filepath.Join(repoRoot(t), ".cache", "npm")
	}
	pkg := filepath.Join(dir, "replaywebpage-"+ReplayWebPageVersion)
	if _, err := os.Stat(filepath.Join(pkg, "sw.js")); err == nil {
		return pkg
	}
	tgz := filepath.Join(dir, "replaywebpage-"+ReplayWebPageVersion+".tgz")
	if _, err := os.Stat(tgz); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("the replay test needs npm on PATH in CI: %v", err)
			}
			t.Skip("skipping the replay test: npm is not on PATH (with CI set this is a failure)")
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "pack", "--pack-destination", dir, "replaywebpage@"+ReplayWebPageVersion)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
		}
	}
	if err := untarPackage(tgz, pkg); err != nil {
		t.Fatalf("unpack %s: %v", tgz, err)
	}
	return pkg
}

// untarPackage unpacks the files under package/ of an npm tarball into
// dst, through a temporary directory renamed into place.
func untarPackage(tgz, dst string) error {
	f, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dst), ".unpack-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		rel, ok := strings.CutPrefix(path.Clean(h.Name), "package/")
		if h.Typeflag != tar.TypeReg || !ok || !filepath.IsLocal(rel) {
			continue
		}
		p := filepath.Join(tmp, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		out, err := os.Create(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(out, io.LimitReader(tr, 64<<20))
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return os.Rename(tmp, dst)
}

// chromiumPath finds a headless-capable Chromium (Debian's chromium);
// without one the test skips, or fails under CI, where .ci/run installs
// it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium not installed (apt-get install -y chromium); CI must run the replay test")
	}
	t.Skip("chromium not installed (apt-get install -y chromium): the replay test needs a headless browser")
	return ""
}

// browser is a headless Chromium driven over the DevTools protocol: one
// page, navigated and inspected with JavaScript.
type browser struct {
	cmd     *exec.Cmd
	ws      *websocket.Conn
	id      int
	profile string // the browser's user data dir, removed by close
	t       *testing.T
}

var devtoolsURL = regexp.MustCompile(`DevTools listening on (ws://\S+)`)

// startBrowser starts Chromium with a fresh profile and connects to its
// first page. Stop it with close.
func startBrowser(t *testing.T, bin string) *browser {
	t.Helper()
	// The profile is not a t.TempDir: Chromium's helper processes may
	// still write to it as the test's cleanup removes it. close kills the
	// whole process group first, then removes it.
	profile, err := os.MkdirTemp("", "chromium-profile-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-dev-shm-usage", "--user-data-dir="+profile, "--remote-debugging-port=0", "--remote-allow-origins=*",
		"--window-size=1400,900", "about:blank")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	b := &browser{cmd: cmd, profile: profile, t: t}
	found := make(chan string, 1)
	go func() { // owned: ends when chromium closes its stderr
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := devtoolsURL.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	var wsURL string
	select {
	case wsURL = <-found:
	case <-time.After(30 * time.Second):
		b.close()
		t.Fatal("chromium did not open its DevTools port in 30 s")
	}
	// The page targets are listed on the same port over HTTP.
	host := strings.TrimPrefix(wsURL, "ws://")
	host = host[:strings.IndexByte(host, '/')]
	var targets []struct{ Type, WebSocketDebuggerURL string }
	resp, err := http.Get("http://" + host + "/json/list")
	if err == nil {
		err = json.NewDecoder(resp.Body).Decode(&targets)
		resp.Body.Close()
	}
	if err != nil {
		b.close()
		t.Fatalf("list chromium's pages: %v", err)
	}
	for _, tg := range targets {
		if tg.Type == "page" {
			if b.ws, err = websocket.Dial(tg.WebSocketDebuggerURL, "", "http://127.0.0.1/"); err != nil {
				b.close()
				t.Fatalf("connect to chromium's page: %v", err)
			}
			return b
		}
	}
	b.close()
	t.Fatalf("chromium has no page: %+v", targets)
	return nil
}

func (b *browser) close() {
	if b.ws != nil {
		b.ws.Close()
	}
	// The browser and its helpers are one process group.
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	_ = b.cmd.Wait()
	var err error
	for try := 0; try < 20; try++ {
		if err = os.RemoveAll(b.profile); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.t.Logf("chromium profile %s left behind: %v", b.profile, err)
}

// call sends one DevTools command and decodes its result into result (if
// not nil), skipping the events that come in between.
func (b *browser) call(method string, params, result any) error {
	b.id++
	if err := websocket.JSON.Send(b.ws, map[string]any{"id": b.id, "method": method, "params": params}); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	b.ws.SetReadDeadline(time.Now().Add(60 * time.Second))
	for {
		var msg struct {
			ID     int
			Result json.RawMessage
			Error  *struct{ Message string }
		}
		if err := websocket.JSON.Receive(b.ws, &msg); err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		if msg.ID != b.id {
			continue
		}
		if msg.Error != nil {
			return fmt.Errorf("%s: %s", method, msg.Error.Message)
		}
		if result != nil {
			return json.Unmarshal(msg.Result, result)
		}
		return nil
	}
}

// navigate loads url in the page.
func (b *browser) navigate(url string) error {
	return b.call("Page.navigate", map[string]any{"url": url}, nil)
}

// eval evaluates a JavaScript expression in the page and returns its
// value as a string.
func (b *browser) eval(expr string) (string, error) {
	var res struct {
		Result struct {
			Value any
		}
		ExceptionDetails *struct{ Text string }
	}
	if err := b.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &res); err != nil {
		return "", err
	}
	if res.ExceptionDetails != nil {
		return "", fmt.Errorf("evaluate: %s", res.ExceptionDetails.Text)
	}
	return fmt.Sprint(res.Result.Value), nil
}

// screenshot saves a PNG of the page at path.
func (b *browser) screenshot(path string) error {
	var res struct{ Data string }
	if err := b.call("Page.captureScreenshot", map[string]any{"format": "png"}, &res); err != nil {
		return err
	}
	png, err := base64.StdEncoding.DecodeString(res.Data)
	if err != nil {
		return fmt.Errorf("screenshot: %w", err)
	}
	return os.WriteFile(path, png, 0o644)
}

// allText is JavaScript that returns the text of the page and of every
// same-origin frame and shadow root in it, however deeply nested.
const allText = `(() => {
  const out = [];
  const seen = new Set();
  const walk = (root) => {
    if (!root || seen.has(root)) return;
    seen.add(root);
    if (root.body) out.push(root.body.innerText || "");
    for (const el of root.querySelectorAll("*")) {
      if (el.shadowRoot) { out.push(el.shadowRoot.textContent || ""); walk(el.shadowRoot); }
      if (el.tagName === "IFRAME") { try { walk(el.contentDocument); } catch (e) {} }
    }
  };
  walk(document);
  return out.join("\n");
})()`

// waitForText polls the page's text until it holds want, or ctx ends;
// it returns the last text seen.
func (b *browser) waitForText(ctx context.Context, want string) (string, bool) {
	var text string
	for {
		if s, err := b.eval(allText); err == nil {
			text = s
			if strings.Contains(text, want) {
				return text, true
			}
		}
		select {
		case <-ctx.Done():
			return text, false
		case <-time.After(500 * time.Millisecond):
		}
	}
}
