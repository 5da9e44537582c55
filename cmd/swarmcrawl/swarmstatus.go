package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/census"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
)

// runSwarmStatus prints a census of the swarm, asked of a member over
// the status protocol (--peer) or through a node's HTTP API (/swarm).
func runSwarmStatus(peerAddr, api, data, swarmKey string, timeout time.Duration, asJSON bool, stdout io.Writer) error {
	var st node.SwarmStatus
	if peerAddr != "" {
		if api != "" || data != "" {
			return usageErr("give one of --peer, --api or --data")
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		var err error
		if st, err = askSwarm(ctx, peerAddr, swarmKey); err != nil {
			return err
		}
	} else {
		if swarmKey != "" {
			if _, err := p2p.LoadSwarmKey(swarmKey); err != nil {
				return usageErr("--swarm-key: %v", err)
			}
		}
		addr, err := apiAddr(api, data)
		if err != nil {
			return err
		}
		if err := callAPI(addr, http.MethodGet, "/swarm", nil, &st); err != nil {
			return err
		}
	}
	if asJSON {
		b, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			return err
		}
		_, err = stdout.Write(append(b, '\n'))
		return err
	}
	printSwarmStatus(stdout, &st)
	return nil
}

// askSwarm asks the member at peerAddr for a census from a throwaway
// client host.
func askSwarm(ctx context.Context, peerAddr, swarmKey string) (node.SwarmStatus, error) {
	if _, err := p2p.ParseAddrInfos([]string{peerAddr}); err != nil {
		return node.SwarmStatus{}, usageErr("--peer: %v", err)
	}
	var psk []byte
	if swarmKey != "" {
		var err error
		if psk, err = p2p.LoadSwarmKey(swarmKey); err != nil {
			return node.SwarmStatus{}, usageErr("--swarm-key: %v", err)
		}
	}
	h, err := p2p.NewClientHost(nil, psk)
	if err != nil {
		return node.SwarmStatus{}, err
	}
	defer h.Close()
	st, err := node.AskSwarmStatus(ctx, h, peerAddr)
	if errors.Is(err, p2p.ErrNoConnection) && swarmKey == "" {
		return st, fmt.Errorf("%w (if the swarm is private, give its key with --swarm-key)", err)
	}
	return st, err
}

// swarmCounters are the totals printed, in order; others follow sorted.
var swarmCounters = []string{"fetched", "queued", "retrying", "scheduled", "in_flight", "outbox", "errors", "dead_letters", "hosts", "pages_per_s", "seen"}

func printSwarmStatus(w io.Writer, st *node.SwarmStatus) {
	if st.Method == census.Exact {
		fmt.Fprintf(w, "swarm       %d members, counted exactly (every member asked)\n", int(st.Members.Value))
	} else {
		fmt.Fprintf(w, "swarm       about %s members, estimated from %d windows of the ring (%d members asked); intervals at %.0f%% confidence\n",
			fmtTotal(st.Members, false), st.Samples, st.Asked, 100*st.Confidence)
	}
	names := slices.Clone(swarmCounters)
	var rest []string
	for k := range st.Totals {
		if !slices.Contains(names, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	for _, k := range append(names, rest...) {
		t, ok := st.Totals[k]
		if !ok {
			continue
		}
		fmt.Fprintf(w, "%-24s %s\n", strings.ReplaceAll(k, "_", " "), fmtTotal(t, k == "pages_per_s"))
	}
	switch {
	case st.Work:
		fmt.Fprintln(w, "crawl       still running: some member has work queued, retrying, in flight or undelivered")
	case st.Method == census.Exact:
		fmt.Fprintln(w, "crawl       idle: no member has work")
	default:
		fmt.Fprintln(w, "crawl       no sampled member has work (members not sampled may)")
	}
}

func fmtTotal(t census.Total, frac bool) string {
	f := "%.0f"
	if frac {
		f = "%.1f"
	}
	if t.Low == t.High {
		return fmt.Sprintf(f, t.Value)
	}
	return fmt.Sprintf(f+" ["+f+", "+f+"]", t.Value, t.Low, t.High)
}
