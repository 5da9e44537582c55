package node_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/crawl/synthweb"
	"github.com/swarmcrawl/swarmcrawl/p2p/localswarm"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
)

// chromium finds a headless-capable Chromium (Debian's chromium package);
// without one the test skips, or fails under CI=true, where .ci/run
// installs it.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not installed (apt-get install -y chromium); CI must run the dashboard test")
	}
	t.Skip("chromium not installed (apt-get install -y chromium): the dashboard test needs a headless browser")
	return ""
}

// browse runs headless Chromium on url for a few seconds of the page's
// time and returns the DOM it ended with; with screenshot set it saves a
// picture of the page there instead.
func browse(t *testing.T, bin, url, screenshot string) string {
	t.Helper()
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-dev-shm-usage", "--user-data-dir=" + t.TempDir(), "--virtual-time-budget=3000", "--window-size=1400,900"}
	if screenshot != "" {
		args = append(args, "--screenshot="+screenshot)
	} else {
		args = append(args, "--dump-dom")
	}
	// The browser itself crashed once in CI (a segmentation fault, while
	// another package's test ran Chromium too): a crash of the browser
	// is tried once more; any other failure fails the test.
	var out []byte
	var err error
	for try := 0; try < 2; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		out, err = exec.CommandContext(ctx, bin, append(args, url)...).Output()
		cancel()
		if err == nil || !strings.Contains(err.Error(), "signal: ") {
			break
		}
		t.Logf("chromium crashed (%v); trying once more", err)
	}
	if err != nil {
		t.Fatalf("chromium %s: %v", url, err)
	}
	return string(out)
}

// busiestNode waits until a node has fetched a page and has more queued,
// and returns the one with the most queued then.
func busiestNode(ctx context.Context, t *testing.T, swarm *localswarm.Swarm) *node.Node {
	t.Helper()
	for {
		var best *node.Node
		var most int64
		for _, n := range swarm.Nodes {
			c := n.Status().Crawl
			if c.Fetched > 0 && len(c.TopHosts) > 0 && c.Queued > most {
				best, most = n, c.Queued
			}
		}
		if best != nil {
			return best
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no node fetched a page and has more queued: %v", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

var synthHost = regexp.MustCompile(`h[0-9]+\.synth\.test`)

var fetchedFigure = regexp.MustCompile(`id="fetched">([0-9,]+)<`)

func fetchedOn(t *testing.T, dom string) int {
	t.Helper()
	m := fetchedFigure.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no pages-fetched figure on the dashboard:\n%.2000s", dom)
	}
	n, err := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDashboardInChromium loads a crawling node's dashboard (/ on its API)
// in headless Chromium: the page draws the node's figures, its top hosts,
// its ring view and its owned ranges from /status, the pages-fetched
// figure grows between two loads while the crawl runs, and a screenshot is
// left in the test's artifacts (go test -artifacts; make test keeps them
// in bin/artifacts).
func TestDashboardInChromium(t *testing.T) {
	bin := chromium(t)
	cfg := synthweb.DefaultConfig()
	cfg.Seed, cfg.Hosts, cfg.Seeds, cfg.PagesPerHost = 3, 16, 4, 24
	web, err := synthweb.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cc := crawl.DefaultConfig()
	cc.Delay = 300 * time.Millisecond // a crawl that lasts while the browser looks
	swarm := startTaggedSwarm(ctx, t, localswarm.Options{Nodes: 2, Crawl: cc, Proxy: web.Proxy()})
	if res := swarm.Nodes[0].Seed(ctx, web.Seeds()); len(res.Rejected) > 0 || res.Accepted+res.Duplicates+res.Pending != len(web.Seeds()) {
		t.Fatalf("seeding: %+v", res)
	}
	// Hosts are owned by their key, and a node's share of the ring is
	// random: one of the two may own few hosts or none. Look at a node that
	// has fetched a page and still has the most work queued, so that it
	// has top hosts to draw and goes on crawling between the two looks.
	n := busiestNode(ctx, t, swarm)
	url := "http://" + n.APIAddr() + "/"

	first := browse(t, bin, url, "")
	for _, want := range []string{n.ID().String(), `id="rate-chart"`, "successor"} {
		if !strings.Contains(first, want) {
			t.Errorf("dashboard without %q", want)
		}
	}
	if !synthHost.MatchString(first) {
		t.Errorf("dashboard draws no top host (no synthetic host name on it)")
	}
	if strings.Contains(first, "no answer from the node") {
		t.Fatalf("the dashboard could not read /status:\n%.2000s", first)
	}
	before := fetchedOn(t, first)
	time.Sleep(1500 * time.Millisecond)
	after := fetchedOn(t, browse(t, bin, url, ""))
	if after <= before || after == 0 {
		t.Fatalf("pages fetched on the dashboard: %d, then %d; the figures do not follow the crawl", before, after)
	}
	if missing := web.Missing(crawl.ProductToken(cc.UserAgent)); len(missing) == 0 {
		t.Log("the crawl finished before the second look; the figure still grew")
	}

	shot := filepath.Join(t.ArtifactDir(), "dashboard.png")
	browse(t, bin, url, shot)
	if st, err := os.Stat(shot); err != nil || st.Size() < 10_000 {
		t.Fatalf("screenshot %s: %v (%d bytes)", shot, err, st.Size())
	}
	t.Logf("pages fetched %d then %d; screenshot %s", before, after, shot)
}
