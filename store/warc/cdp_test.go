package warc

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/websocket"
)

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
