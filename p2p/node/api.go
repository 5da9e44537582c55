package node

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// startAPI serves the HTTP API (status, dead letters, health) on
// Config.APIAddr, behind apiGuard. It creates the API token in the data
// dir on first start.
func (n *Node) startAPI() error {
	ln, err := net.Listen("tcp", n.cfg.APIAddr)
	if err != nil {
		return fmt.Errorf("api listen %s: %w", n.cfg.APIAddr, err)
	}
	n.apiAddr = ln.Addr().String()
	guard := newAPIGuard(n.apiToken, ln.Addr(), n.log)
	if guard.anyHost {
		n.log.Warn("HTTP API listens beyond loopback: anyone who reaches it can read the node's status and dead letters, and it answers to any Host name; changes still need the token in "+APITokenFile,
			"api", n.apiAddr)
	}
	n.api = &http.Server{Handler: guard.wrap(n.apiHandler()), ReadHeaderTimeout: 5 * time.Second}
	n.goRun("api", func() {
		if err := n.api.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("api stopped", "err", err)
		}
	})
	return nil
}

// apiHandler routes the API. Every method but GET and HEAD changes
// something and goes through apiGuard's token check: a new mutating
// endpoint needs nothing more than its route here.
func (n *Node) apiHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, n.Status())
	})
	mux.HandleFunc("GET /swarm", n.handleSwarmStatus)
	mux.Handle("GET /metrics", metricsHandler(n.metrics))
	dash := dashboardHandler()
	mux.Handle("GET /{$}", dash)
	mux.Handle("GET /dashboard.js", dash)
	mux.Handle("GET /dashboard.css", dash)
	mux.Handle("GET /swarm.html", dash)
	mux.Handle("GET /swarm.js", dash)
	mux.HandleFunc("GET /dlq", n.handleDeadLetters)
	mux.HandleFunc("POST /dlq/requeue", n.handleRequeue)
	mux.HandleFunc("GET /get", n.handleGet)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// apiGuard keeps web pages the node's operator visits from using the
// API through the operator's browser.
//
// Every request must name the API by a loopback Host when the API listens
// on loopback: a page whose DNS name is rebound to 127.0.0.1 reaches the
// port, but its requests still carry its own name (DNS rebinding).
//
// A request that changes something (any method but GET and HEAD) must
// also carry the token (Authorization: Bearer), which a page cannot read;
// a JSON body, which a page cannot send cross-origin without a CORS
// preflight the API never grants; and no Origin but the API's own.
type apiGuard struct {
	token []byte
	// port is the API's port, which a loopback Host must name.
	port string
	// anyHost is set when the API listens beyond loopback: it is reached
	// by names the node cannot know, and the token alone guards changes.
	anyHost bool
	log     *slog.Logger
}

func newAPIGuard(token string, listen net.Addr, log *slog.Logger) *apiGuard {
	g := &apiGuard{token: []byte(token), log: log}
	ap, err := netip.ParseAddrPort(listen.String())
	if err != nil || !ap.Addr().IsLoopback() {
		g.anyHost = true
		return g
	}
	g.port = fmt.Sprint(ap.Port())
	return g
}

// wrap applies the guard to every request next serves.
func (g *apiGuard) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.anyHost && !g.loopbackHost(r.Host) {
			g.refuse(w, r, http.StatusMisdirectedRequest,
				fmt.Sprintf("Host %q refused: this API listens on loopback and answers only to localhost, 127.0.0.1 or [::1] with port %s", r.Host, g.port))
			return
		}
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r.Host) {
			g.refuse(w, r, http.StatusForbidden, fmt.Sprintf("Origin %q refused: only the API's own pages may change things", o))
			return
		}
		if !g.bearer(r.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="swarmcrawl"`)
			g.refuse(w, r, http.StatusUnauthorized, "missing or wrong API token: send Authorization: Bearer <the token in DATA/"+APITokenFile+">")
			return
		}
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			g.refuse(w, r, http.StatusUnsupportedMediaType, "the body must be Content-Type: application/json")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// loopbackHost reports whether host (a Host header) names the API on
// loopback: localhost or a loopback address, with the API's port (80 may
// be left out). Loopback addresses are literals no DNS answer can rebind.
func (g *apiGuard) loopbackHost(host string) bool {
	name, port, err := net.SplitHostPort(host)
	if err != nil {
		name, port = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), "80"
	}
	if port != g.port {
		return false
	}
	if strings.EqualFold(name, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(name)
	return err == nil && ip.IsLoopback()
}

// bearer reports whether an Authorization header carries the token; the
// comparison takes the same time wherever the first difference is.
func (g *apiGuard) bearer(auth string) bool {
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(token)), g.token) == 1
}

// sameOrigin reports whether origin (an Origin header) is the API itself
// as reached through host: a page it served, directly or behind a TLS
// proxy that keeps the Host.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return strings.EqualFold(u.Host, host)
}

// refuse answers a request the guard turns away, and logs it: a refusal
// is either a misconfigured tool or a web page trying to use the API.
func (g *apiGuard) refuse(w http.ResponseWriter, r *http.Request, code int, msg string) {
	g.log.Warn("api request refused", "method", r.Method, "path", r.URL.Path, "host", r.Host, "origin", r.Header.Get("Origin"), "status", code, "reason", msg)
	http.Error(w, "api: "+msg, code)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
