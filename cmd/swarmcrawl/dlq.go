package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p/node"
)

// apiTokenEnv names the environment variable that may hold a node's API
// token, for mutating calls through --api without --api-token.
const apiTokenEnv = "SWARMCRAWL_API_TOKEN"

// runDLQ lists a running node's dead letters — URLs that failed every
// retry — and can put them back in the queue.
func runDLQ(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("dlq", stderr)
	api := fs.String("api", "", "HOST:PORT of the node's HTTP API")
	data := fs.String("data", "", "data directory of a running node (reads its api and api.token files)")
	tokenFile := fs.String("api-token", "", "file holding the node's API token, needed to requeue (default: DATA/"+node.APITokenFile+" with --data, else $"+apiTokenEnv+")")
	asJSON := fs.Bool("json", false, "print dead letters as JSON")
	requeueAll := fs.Bool("requeue-all", false, "put every dead letter back in the queue")
	var requeue listFlag
	fs.Var(&requeue, "requeue", "put these URLs (comma-separated or repeated) back in the queue")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	addr, err := apiAddr(*api, *data)
	if err != nil {
		return err
	}
	if *requeueAll || len(requeue) > 0 {
		if *requeueAll && len(requeue) > 0 {
			return usageErr("give --requeue or --requeue-all, not both")
		}
		token, err := apiToken(*tokenFile, *data)
		if err != nil {
			return err
		}
		if *requeueAll {
			n, err := requeueAllDeadLetters(addr, token, newProgressLine(stderr))
			if err != nil {
				return fmt.Errorf("after requeueing %d dead letters: %w", n, err)
			}
			fmt.Fprintf(stdout, "requeued %d dead letters\n", n)
			return nil
		}
		body, _ := json.Marshal(node.RequeueRequest{URLs: requeue})
		var res node.RequeueResult
		if err := postAPI(addr, token, "/dlq/requeue", body, &res); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "requeued %d dead letters\n", res.Requeued)
		return nil
	}
	var list node.DeadLetters
	if err := callAPI(addr, http.MethodGet, "/dlq", nil, &list); err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	for _, d := range list.Items {
		fmt.Fprintf(stdout, "%s\t%d attempts\t%s\t%s\n", d.URL, d.Attempts, d.At.Format(time.RFC3339), d.LastError)
	}
	fmt.Fprintf(stdout, "%d dead letters\n", list.Total)
	return nil
}

// apiToken finds the node's API token for a call that changes something:
// in --api-token FILE, else in the data dir given with --data, else in
// $SWARMCRAWL_API_TOKEN.
func apiToken(file, data string) (string, error) {
	if file == "" && data != "" {
		file = filepath.Join(data, node.APITokenFile)
	}
	if file != "" {
		token, err := node.ReadAPIToken(file)
		if err != nil {
			return "", fmt.Errorf("read the node's API token: %w", err)
		}
		return token, nil
	}
	if token := strings.TrimSpace(os.Getenv(apiTokenEnv)); token != "" {
		return token, nil
	}
	return "", usageErr("changing a node through --api needs its API token: give --api-token FILE (the node's DATA/%s) or set %s", node.APITokenFile, apiTokenEnv)
}

// callAPI sends one request to a node's HTTP API without the API token,
// which reads (GET) need not, and decodes its JSON answer into out.
func callAPI(addr, method, path string, body []byte, out any) error {
	return sendAPI(addr, method, path, "", body, out)
}

// postAPI asks a node's HTTP API for a change: it POSTs body as JSON with
// the API token and decodes the JSON answer into out.
func postAPI(addr, token, path string, body []byte, out any) error {
	return sendAPI(addr, http.MethodPost, path, token, body, out)
}

// sendAPI sends one request to a node's HTTP API, with the token when
// there is one, and decodes its JSON answer into out.
func sendAPI(addr, method, path, token string, body []byte, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, bytes.NewReader(body))
	if err != nil {
		return usageErr("--api %q: %v", addr, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("no node answers at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(raw))
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// requeueBatch is how many dead letters --requeue-all moves per request.
const requeueBatch = 1000

// requeueAllDeadLetters moves every dead letter the node holds when it
// starts back into the queue, requeueBatch at a time, showing on progress
// how far it is. Letters that die meanwhile may be moved too; it stops once
// it moved as many as there were, or a round moves none.
func requeueAllDeadLetters(addr, token string, progress *progressLine) (int, error) {
	defer progress.clear()
	var first node.DeadLetters
	if err := callAPI(addr, http.MethodGet, "/dlq?limit=0", nil, &first); err != nil {
		return 0, err
	}
	total, moved := int(first.Total), 0
	if total == 0 {
		// Nothing to move; the request still says whether the token is
		// good, as an operator scripting it would expect.
		body, _ := json.Marshal(node.RequeueRequest{All: true})
		var res node.RequeueResult
		err := postAPI(addr, token, "/dlq/requeue", body, &res)
		return res.Requeued, err
	}
	for moved < total {
		var list node.DeadLetters
		if err := callAPI(addr, http.MethodGet, fmt.Sprintf("/dlq?limit=%d", requeueBatch), nil, &list); err != nil {
			return moved, err
		}
		urls := make([]string, len(list.Items))
		for i, d := range list.Items {
			urls[i] = d.URL
		}
		if len(urls) == 0 {
			break
		}
		body, _ := json.Marshal(node.RequeueRequest{URLs: urls})
		var res node.RequeueResult
		if err := postAPI(addr, token, "/dlq/requeue", body, &res); err != nil {
			return moved, err
		}
		if res.Requeued == 0 {
			break
		}
		moved += res.Requeued
		progress.show(moved >= total, "requeueing: %d of %d dead letters (%.0f%%)", moved, total, 100*float64(min(moved, total))/float64(total))
	}
	return moved, nil
}
