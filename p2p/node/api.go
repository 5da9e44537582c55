package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// startAPI serves the HTTP API (status, dead letters, health) on
// Config.APIAddr.
func (n *Node) startAPI() error {
	ln, err := net.Listen("tcp", n.cfg.APIAddr)
	if err != nil {
		return fmt.Errorf("api listen %s: %w", n.cfg.APIAddr, err)
	}
	n.apiAddr = ln.Addr().String()
	n.api = &http.Server{Handler: n.apiHandler(), ReadHeaderTimeout: 5 * time.Second}
	n.goRun("api", func() {
		if err := n.api.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("api stopped", "err", err)
		}
	})
	return nil
}

func (n *Node) apiHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, n.Status())
	})
	mux.HandleFunc("GET /dlq", n.handleDeadLetters)
	mux.HandleFunc("POST /dlq/requeue", n.handleRequeue)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
