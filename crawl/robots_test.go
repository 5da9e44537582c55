package crawl

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/temoto/robotstxt"
)

func TestChooseGroup(t *testing.T) {
	const txt = `
User-agent: *
Disallow: /star

User-agent: example
Disallow: /prefix

User-agent: ExampleBot
User-agent: otherbot
Disallow: /exact
Crawl-delay: 2.5
`
	data, err := robotstxt.FromString(txt)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		token      string
		disallowed string
		allowed    string
		delay      time.Duration
	}{
		{"examplebot", "/exact", "/star", 2500 * time.Millisecond}, // exact match beats "*"
		{"otherbot", "/exact", "/prefix", 2500 * time.Millisecond}, // second user-agent of a group
		{"example", "/prefix", "/exact", 0},
		{"examplebotx", "/star", "/exact", 0}, // "examplebot" is only a prefix of the token: RFC 9309 says "*"
		{"unknown", "/star", "/exact", 0},
	}
	for _, tt := range tests {
		g := chooseGroup(data, tt.token)
		if g.Test(tt.disallowed) {
			t.Errorf("%s: %s allowed, want disallowed", tt.token, tt.disallowed)
		}
		if !g.Test(tt.allowed) {
			t.Errorf("%s: %s disallowed, want allowed", tt.token, tt.allowed)
		}
		if g.CrawlDelay != tt.delay {
			t.Errorf("%s: crawl-delay %v, want %v", tt.token, g.CrawlDelay, tt.delay)
		}
	}
}

func TestRobotsFromResponse(t *testing.T) {
	now := time.Now()
	const ttl, retry = 24 * time.Hour, time.Minute
	body := []byte("User-agent: *\nDisallow: /private/\nAllow: /private/open/\nDisallow: /*.pdf$\n")
	tests := []struct {
		name        string
		status      int
		body        []byte
		allowed     []string
		denied      []string
		unavailable bool
		expires     time.Duration
	}{
		{"200 parsed", 200, body, []string{"/", "/private/open/x", "/a.pdf?x"}, []string{"/private/x", "/a.pdf"}, false, ttl},
		{"200 empty", 200, nil, []string{"/", "/private/"}, nil, false, ttl},
		{"404 allows all", 404, nil, []string{"/", "/private/x"}, nil, false, ttl},
		{"403 allows all", 403, nil, []string{"/private/x"}, nil, false, ttl},
		{"500 disallows all", 500, body, nil, []string{"/", "/public"}, true, retry},
		{"503 disallows all", 503, nil, nil, []string{"/"}, true, retry},
		{"429 disallows all", 429, nil, nil, []string{"/"}, true, retry},
		{"network error", 0, nil, nil, []string{"/"}, true, retry},
		{"rules before user-agent skipped", 200, []byte("Disallow: /x\nCrawl-delay: soon\nUser-agent: *\nDisallow: /y\n"),
			[]string{"/x"}, []string{"/y"}, false, ttl},
		{"percent-encoding normalised", 200, []byte("User-agent: *\nDisallow: /%7euser/\nDisallow: /a%2fb\n"),
			[]string{"/a/b"}, []string{"/~user/x", "/a%2Fb"}, false, ttl},
		{"CR line endings", 200, []byte("User-agent: *\rDisallow: /x\r"), []string{"/"}, []string{"/x"}, false, ttl},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := robotsFromResponse(tt.status, tt.body, "swarmcrawl", now, ttl, retry)
			for _, p := range tt.allowed {
				if !r.allowed(p) {
					t.Errorf("%s disallowed, want allowed", p)
				}
			}
			for _, p := range tt.denied {
				if r.allowed(p) {
					t.Errorf("%s allowed, want disallowed", p)
				}
			}
			if r.unavailable != tt.unavailable {
				t.Errorf("unavailable = %v, want %v", r.unavailable, tt.unavailable)
			}
			if got := r.expires.Sub(now); got != tt.expires {
				t.Errorf("expires after %v, want %v", got, tt.expires)
			}
		})
	}
}

func TestRobotsNotFoundAllows(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, "ok")
	})
	rec := newRecorder()
	c := newTestCrawler(t, testConfig(), rec, rec)
	c.Enqueue(Task{URL: srv.URL + "/a"}, Task{URL: srv.URL + "/b"})
	crawlUntilIdle(t, c, 5*time.Second)

	if got := rec.pageURLs(); len(got) != 2 {
		t.Fatalf("pages %q, want /a and /b", got)
	}
	log := srv.log()
	if log[0].path != "/robots.txt" {
		t.Errorf("first request %s, want /robots.txt before any page", log[0].path)
	}
	if n := srv.count("/robots.txt"); n != 1 {
		t.Errorf("robots.txt fetched %d times, want once per origin", n)
	}
	if s := c.Stats(); s.RobotsFetched != 1 || s.RobotsDenied != 0 || s.Errors != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestRobotsServerErrorDisallows(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.Error(w, "oops", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, "page")
	})
	rec := newRecorder()
	c := newTestCrawler(t, testConfig(), rec, rec)
	c.robotsRetry = 30 * time.Millisecond
	c.Enqueue(Task{URL: srv.URL + "/a"}, Task{URL: srv.URL + "/b"})
	crawlUntilIdle(t, c, 5*time.Second)

	for _, h := range srv.log() {
		if h.path != "/robots.txt" {
			t.Errorf("%s fetched although robots.txt answered 500", h.path)
		}
	}
	// Retried after the short TTL, then the tasks are given up.
	if n := srv.count("/robots.txt"); n != maxRobotsAttempts {
		t.Errorf("robots.txt fetched %d times, want %d attempts", n, maxRobotsAttempts)
	}
	s := c.Stats()
	if s.RobotsDenied != 2 || s.Fetched != 0 || s.ErrorsByKind["http_5xx"] != maxRobotsAttempts {
		t.Errorf("stats %+v, want 2 denied, 0 fetched, %d http_5xx", s, maxRobotsAttempts)
	}
}

// TestRobotsOutageRecovers checks that a passing robots.txt outage delays
// the host's tasks instead of dropping them.
func TestRobotsOutageRecovers(t *testing.T) {
	var robotsCalls atomic.Int32
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			if robotsCalls.Add(1) == 1 {
				http.Error(w, "busy", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprint(w, "User-agent: *\nDisallow: /private\n")
			return
		}
		fmt.Fprint(w, "page")
	})
	rec := newRecorder()
	c := newTestCrawler(t, testConfig(), rec, rec)
	c.robotsRetry = 30 * time.Millisecond
	c.Enqueue(Task{URL: srv.URL + "/a"}, Task{URL: srv.URL + "/private"})
	crawlUntilIdle(t, c, 5*time.Second)

	if rec.page(srv.URL+"/a") == nil {
		t.Error("/a not fetched after robots.txt recovered")
	}
	if srv.count("/private") != 0 {
		t.Error("/private fetched against robots.txt")
	}
	if n := srv.count("/robots.txt"); n != 2 {
		t.Errorf("robots.txt fetched %d times, want 2", n)
	}
}

func TestRobotsGroupsAndCrawlDelay(t *testing.T) {
	const robots = `User-agent: *
Disallow: /everyone-else

User-agent: ExampleBot
Disallow: /private
Allow: /private/open
Crawl-delay: 0.15
`
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, robots)
			return
		}
		fmt.Fprint(w, "page")
	})
	rec := newRecorder()
	c := newTestCrawler(t, testConfig(), rec, rec) // Delay 10ms: the Crawl-delay must win
	for _, p := range []string{"/private/x", "/everyone-else", "/public", "/private/open/y", "/private"} {
		c.Enqueue(Task{URL: srv.URL + p})
	}
	crawlUntilIdle(t, c, 5*time.Second)

	for _, p := range []string{"/private/x", "/private"} {
		if srv.count(p) != 0 {
			t.Errorf("%s fetched although our group disallows it", p)
		}
	}
	// Our own group applies, so the "*" rules do not.
	for _, p := range []string{"/everyone-else", "/public", "/private/open/y"} {
		if srv.count(p) != 1 {
			t.Errorf("%s fetched %d times, want 1", p, srv.count(p))
		}
	}
	if s := c.Stats(); s.RobotsDenied != 2 {
		t.Errorf("RobotsDenied = %d, want 2", s.RobotsDenied)
	}
	log := srv.log()
	if len(log) != 4 {
		t.Fatalf("%d requests, want robots.txt + 3 pages", len(log))
	}
	for i, g := range gaps(log) {
		if g < 150*time.Millisecond {
			t.Errorf("gap before %s is %v, want at least the 150ms Crawl-delay", log[i+1].path, g)
		}
	}
	for _, h := range log {
		if !strings.HasPrefix(h.ua, "ExampleBot/1.0") {
			t.Errorf("User-Agent %q", h.ua)
		}
	}
}

func TestRobotsTTL(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "User-agent: *\nDisallow:\n")
	})
	var offset atomic.Int64 // the clock runs with real time, shifted by offset
	cfg := testConfig()
	cfg.Clock = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	c := newTestCrawler(t, cfg, nil, nil)

	c.Enqueue(Task{URL: srv.URL + "/1"})
	crawlUntilIdle(t, c, 5*time.Second)
	c.Enqueue(Task{URL: srv.URL + "/2"})
	crawlUntilIdle(t, c, 5*time.Second)
	if n := srv.count("/robots.txt"); n != 1 {
		t.Fatalf("robots.txt fetched %d times within its TTL, want 1", n)
	}
	offset.Store(int64(25 * time.Hour))
	c.Enqueue(Task{URL: srv.URL + "/3"})
	crawlUntilIdle(t, c, 5*time.Second)
	if n := srv.count("/robots.txt"); n != 2 {
		t.Fatalf("robots.txt fetched %d times after its TTL, want 2", n)
	}
}

func TestRobotsRedirectFollowed(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			http.Redirect(w, r, "/real-robots.txt", http.StatusMovedPermanently)
		case "/real-robots.txt":
			fmt.Fprint(w, "User-agent: *\nDisallow: /x\n")
		default:
			fmt.Fprint(w, "page")
		}
	})
	c := newTestCrawler(t, testConfig(), nil, nil)
	c.Enqueue(Task{URL: srv.URL + "/x"}, Task{URL: srv.URL + "/y"})
	crawlUntilIdle(t, c, 5*time.Second)
	if srv.count("/x") != 0 || srv.count("/y") != 1 {
		t.Errorf("requests %v: want /y only, per the redirected robots.txt", srv.log())
	}
	if s := c.Stats(); s.RobotsFetched != 2 || s.RobotsDenied != 1 {
		t.Errorf("stats %+v, want 2 robots requests (one redirect) and 1 denied", s)
	}
}
