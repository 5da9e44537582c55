package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/swarmcrawl/swarmcrawl/store"
)

// DeadLetters is the answer of GET /dlq.
type DeadLetters struct {
	// Total counts every dead letter; Items holds at most the requested limit.
	Total int64            `json:"total"`
	Items []DeadLetterInfo `json:"items"`
}

// DeadLetterInfo is one URL that failed every retry.
type DeadLetterInfo struct {
	URL       string    `json:"url"`
	Depth     int       `json:"depth"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error"`
	At        time.Time `json:"at"`
}

// RequeueRequest is the body of POST /dlq/requeue: every dead letter, or
// the listed URLs. Like every request that changes the node, it is sent
// as application/json with the API token (see APITokenFile).
type RequeueRequest struct {
	All  bool     `json:"all,omitempty"`
	URLs []string `json:"urls,omitempty"`
}

// RequeueResult is the answer of POST /dlq/requeue.
type RequeueResult struct {
	Requeued int `json:"requeued"`
}

// errStopScan ends a dead-letter scan early once the limit is reached.
var errStopScan = errors.New("limit reached")

func (n *Node) handleDeadLetters(w http.ResponseWriter, r *http.Request) {
	limit := 1000
	if s := r.URL.Query().Get("limit"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			http.Error(w, fmt.Sprintf("limit %q: want a non-negative integer", s), http.StatusBadRequest)
			return
		}
		limit = v
	}
	out := DeadLetters{Total: n.db.DeadLetterCount(), Items: []DeadLetterInfo{}}
	err := n.db.DeadLetters(func(d store.DeadLetter) error {
		if len(out.Items) >= limit {
			return errStopScan
		}
		out.Items = append(out.Items, DeadLetterInfo{URL: d.URL, Depth: d.Depth, Attempts: d.Attempts, LastError: d.LastError, At: d.At})
		return nil
	})
	if err != nil && !errors.Is(err, errStopScan) {
		http.Error(w, "read dead letters: "+err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, out)
}

func (n *Node) handleRequeue(w http.ResponseWriter, r *http.Request) {
	var req RequeueRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<20)).Decode(&req); err != nil {
		http.Error(w, "requeue: bad request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !req.All && len(req.URLs) == 0 {
		http.Error(w, "requeue: name URLs or set all", http.StatusBadRequest)
		return
	}
	want := make(map[string]bool, len(req.URLs))
	for _, u := range req.URLs {
		want[u] = true
	}
	count, err := n.crawler.RequeueDeadLetters(func(d store.DeadLetter) bool { return req.All || want[d.URL] })
	if err != nil {
		http.Error(w, "requeue: "+err.Error(), http.StatusInternalServerError)
		return
	}
	n.log.Info("dead letters requeued", "count", count)
	writeJSON(w, RequeueResult{Requeued: count})
}
