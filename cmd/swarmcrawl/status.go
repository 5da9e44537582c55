package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p"
)

func runStatus(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", stderr)
	api := fs.String("api", "", "HOST:PORT of the node's HTTP API")
	data := fs.String("data", "", "data directory of a running node (reads its api file)")
	asJSON := fs.Bool("json", false, "print the raw JSON status")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if (*api == "") == (*data == "") {
		return usageErr("give exactly one of --api or --data")
	}
	addr := *api
	if *data != "" {
		raw, err := os.ReadFile(filepath.Join(*data, p2p.APIFile))
		if err != nil {
			return fmt.Errorf("is a node running on %s? %w", *data, err)
		}
		addr = strings.TrimSpace(string(raw))
	}
	body, err := fetchStatus(addr)
	if err != nil {
		return err
	}
	if *asJSON {
		_, err := stdout.Write(body)
		return err
	}
	var st p2p.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("status from %s: %w", addr, err)
	}
	printStatus(stdout, &st)
	return nil
}

func fetchStatus(addr string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/status", nil)
	if err != nil {
		return nil, usageErr("--api %q: %v", addr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("no node answers at %s: %w", addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("status from %s: %w", addr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status from %s: %s", addr, resp.Status)
	}
	return body, nil
}

func printStatus(w io.Writer, st *p2p.Status) {
	fmt.Fprintf(w, "peer        %s\n", st.PeerID)
	fmt.Fprintf(w, "ring id     %s   owns (%s, %s]  %.1f%% of the ring\n", st.RingID, st.Range.From, st.Range.To, 100*st.Range.Share)
	fmt.Fprintf(w, "uptime      %s\n", st.Uptime)
	if st.Predecessor != nil {
		fmt.Fprintf(w, "predecessor %s  %s\n", st.Predecessor.RingID, st.Predecessor.PeerID)
	} else {
		fmt.Fprintf(w, "predecessor (unknown)\n")
	}
	for i, s := range st.Successors {
		fmt.Fprintf(w, "successor %d %s  %s\n", i+1, s.RingID, s.PeerID)
	}
	fmt.Fprintf(w, "fingers     %d distinct peers\n", st.Fingers)
	c := st.Crawl
	fmt.Fprintf(w, "seen        %d URLs\n", st.Seen)
	fmt.Fprintf(w, "queued      %d URLs on %d hosts, %d in flight\n", c.Queued, c.Hosts, c.InFlight)
	fmt.Fprintf(w, "fetched     %d pages (%d stored), %d errors, %d denied by robots.txt\n", c.Fetched, st.Pages, c.Errors, c.RobotsDenied)
	fmt.Fprintf(w, "routing     %d tasks routed, %d waiting, %d lookups (%.2f hops mean), %d send errors\n", st.Routed, st.Outbox, st.Lookups, st.MeanLookupHops, st.SendErrors)
	for _, a := range st.Addrs {
		fmt.Fprintf(w, "listening   %s\n", a)
	}
}
