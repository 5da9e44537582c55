package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/swarmcrawl/swarmcrawl/crawl"
	"github.com/swarmcrawl/swarmcrawl/p2p"
	"github.com/swarmcrawl/swarmcrawl/p2p/node"
)

func runStatus(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("status", stderr)
	api := fs.String("api", "", "HOST:PORT of the node's HTTP API")
	data := fs.String("data", "", "data directory of a running node (reads its api file)")
	asJSON := fs.Bool("json", false, "print the raw JSON status")
	watch := fs.Duration("watch", 0, "print the status again every `interval` (e.g. 2s) until interrupted; on a terminal each one replaces the last")
	swarmKey := fs.String("swarm-key", "", "the private swarm's key file, as the node was given it; status reads the node's HTTP API, so the key is only checked, for scripts that pass every command the same flags (with --swarm --peer it is used to reach the member)")
	swarmWide := fs.Bool("swarm", false, "the whole swarm's crawl, counted by the member at --peer: exact for a small swarm (every member asked), an estimate with its interval for a large one")
	peerAddr := fs.String("peer", "", "with --swarm: full multiaddr of any swarm member (instead of --api/--data)")
	timeout := fs.Duration("timeout", time.Minute, "with --swarm --peer: give up after this long")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *swarmWide {
		return runSwarmStatus(*peerAddr, *api, *data, *swarmKey, *timeout, *asJSON, stdout)
	}
	if *peerAddr != "" {
		return usageErr("--peer needs --swarm")
	}
	if *swarmKey != "" {
		if _, err := p2p.LoadSwarmKey(*swarmKey); err != nil {
			return usageErr("--swarm-key: %v", err)
		}
	}
	addr, err := apiAddr(*api, *data)
	if err != nil {
		return err
	}
	if *watch < 0 || *watch > 0 && *watch < 100*time.Millisecond {
		return usageErr("--watch %v: want an interval of at least 100ms", *watch)
	}
	if *watch == 0 {
		return showStatus(addr, *asJSON, stdout)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	watchStatus(ctx, addr, *asJSON, *watch, stdout)
	return nil
}

// watchStatus prints the status every interval until ctx ends; on a
// terminal each print replaces the last. A node that does not answer is a
// line with the error, and the watch goes on.
func watchStatus(ctx context.Context, addr string, asJSON bool, interval time.Duration, stdout io.Writer) {
	screen := newProgressLine(stdout).on // a terminal: redraw in place
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		var out bytes.Buffer
		err := showStatus(addr, asJSON, &out)
		if screen {
			fmt.Fprint(stdout, "\x1b[H\x1b[2J") // home, clear
		}
		if err != nil {
			fmt.Fprintf(stdout, "%s  %v\n", time.Now().Format(time.TimeOnly), err) // the node may come back
		} else {
			stdout.Write(out.Bytes())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// showStatus prints a node's status once: as the node's JSON, or as text.
func showStatus(addr string, asJSON bool, stdout io.Writer) error {
	var body json.RawMessage
	if err := callAPI(addr, http.MethodGet, "/status", nil, &body); err != nil {
		return err
	}
	if asJSON {
		_, err := stdout.Write(append(body, '\n'))
		return err
	}
	var st node.Status
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("status from %s: %w", addr, err)
	}
	printStatus(stdout, &st)
	return nil
}

// apiAddr resolves the node API address from --api or a data dir's api file.
func apiAddr(api, data string) (string, error) {
	if (api == "") == (data == "") {
		return "", usageErr("give exactly one of --api or --data")
	}
	if api != "" {
		return api, nil
	}
	raw, err := os.ReadFile(filepath.Join(data, node.APIFile))
	if err != nil {
		return "", fmt.Errorf("is a node running on %s? %w", data, err)
	}
	return strings.TrimSpace(string(raw)), nil
}

func printStatus(w io.Writer, st *node.Status) {
	fmt.Fprintf(w, "peer        %s\n", st.PeerID)
	fmt.Fprintf(w, "ring id     %s   owns (%s, %s]  %.1f%% of the ring\n", st.RingID, st.Range.From, st.Range.To, 100*st.Range.Share)
	if len(st.Positions) > 1 {
		fmt.Fprintf(w, "positions   %d (virtual nodes)  together %.1f%% of the ring  owning %d hosts\n", len(st.Positions), 100*st.RingShare, st.OwnedHosts)
	} else {
		fmt.Fprintf(w, "hosts       %d owned\n", st.OwnedHosts)
	}
	fmt.Fprintf(w, "uptime      %s\n", st.Uptime)
	if st.Predecessor != nil {
		fmt.Fprintf(w, "predecessor %s  %s%s\n", st.Predecessor.RingID, st.Predecessor.PeerID, connNote(st.Predecessor.Conn))
	} else {
		fmt.Fprintf(w, "predecessor (unknown)\n")
	}
	if st.Isolated {
		fmt.Fprintf(w, "isolated    no neighbour answers: claiming nothing new, rejoining\n")
	}
	for i, s := range st.Successors {
		fmt.Fprintf(w, "successor %d %s  %s%s\n", i+1, s.RingID, s.PeerID, connNote(s.Conn))
	}
	printNAT(w, st.NAT)
	fmt.Fprintf(w, "fingers     %d distinct peers\n", st.Fingers)
	c := st.Crawl
	fmt.Fprintf(w, "seen        %d URLs\n", st.Seen)
	fmt.Fprintf(w, "queued      %d URLs on %d hosts, %d in flight\n", c.Queued, c.Hosts, c.InFlight)
	fmt.Fprintf(w, "fetched     %d pages (%d stored), %d errors, %d denied by robots.txt\n", c.Fetched, st.Pages, c.Errors, c.RobotsDenied)
	if c.TrapPatterns > 0 {
		fmt.Fprintf(w, "traps       %d URL patterns judged traps, %d links not followed\n", c.TrapPatterns, c.TrapLinks)
		for _, tr := range c.Traps[max(0, len(c.Traps)-3):] {
			fmt.Fprintf(w, "            %s%s: %s\n", tr.Host, tr.Pattern, tr.Reason)
		}
	}
	fmt.Fprintf(w, "routing     %d tasks routed, %d waiting, %d lookups (%.2f hops mean), %d send errors", st.Routed, st.Outbox, st.Lookups, st.MeanLookupHops, st.SendErrors)
	if st.RoutePasses > 0 {
		fmt.Fprintf(w, "; %d passes of %.1f batches, %.0f ms mean", st.RoutePasses, float64(st.RouteBatches)/float64(st.RoutePasses), st.RoutePassMS)
	}
	fmt.Fprintln(w)
	if d := st.DoneMarks; d.WaitingLinks > 0 || d.Unsent > 0 {
		fmt.Fprintf(w, "done marks  %d waiting for their pages' links, %d for the replicas; the oldest finished %s ago\n",
			d.WaitingLinks, d.Unsent, (time.Duration(d.OldestMS) * time.Millisecond).String())
	}
	if d := st.Delegation; d.HotQueue > 0 || d.Delegated > 0 || d.Helped > 0 {
		fmt.Fprintf(w, "hot hosts   %d tasks fetched by helpers (%d batches, %d failed), %d fetched for other owners\n",
			d.Delegated, d.BatchesSent, d.DelegateFails, d.Helped)
	}
	switch d := st.Disk; {
	case d.Error != "":
		fmt.Fprintf(w, "disk        free space unknown (%s): new URLs accepted\n", d.Error)
	case d.Low:
		fmt.Fprintf(w, "disk        LOW: %s free, below %s: not accepting new URLs (%d refused)\n", formatBytes(d.FreeBytes), formatBytes(d.MinFreeBytes), d.Refused)
	case d.MinFreeBytes > 0:
		fmt.Fprintf(w, "disk        %s free (new URLs refused below %s)\n", formatBytes(d.FreeBytes), formatBytes(d.MinFreeBytes))
	}
	if sc := st.Scope; sc.Mode != "any" || len(sc.Include)+len(sc.Exclude) > 0 || sc.Dropped > 0 || sum(sc.OutOfScope) > 0 {
		fmt.Fprintf(w, "scope       %s", sc.Mode)
		if n := len(sc.Include) + len(sc.Exclude); n > 0 {
			fmt.Fprintf(w, " with %d include and %d exclude patterns", len(sc.Include), len(sc.Exclude))
		}
		fmt.Fprintf(w, ": %d URLs refused as out of scope", sum(sc.OutOfScope))
		var parts []string
		for _, r := range crawl.ScopeReasons {
			if v := sc.OutOfScope[r.String()]; v > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", r, v))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(w, " (%s)", strings.Join(parts, ", "))
		}
		fmt.Fprintf(w, ", %d queued tasks dropped\n", sc.Dropped)
	}
	if r := st.Resources; r.TasksRefused > 0 || r.SeedsRefused > 0 || r.Throttled > 0 || r.OutboxSpilled > 0 {
		fmt.Fprintf(w, "quotas      %d task batches and %d seed requests refused for now, %d of this node's batches held back by owners, %d waiting tasks in the store only\n",
			r.TasksRefused, r.SeedsRefused, r.Throttled, r.OutboxSpilled)
	}
	if lc := st.LostCaptures; lc.Suspect > 0 || lc.Gone > 0 || lc.Requeued > 0 {
		fmt.Fprintf(w, "captures    %d holders gone past the %s grace, %d gone for less; %d URLs queued again for lost captures, %d not fetched yet\n",
			lc.Gone, lc.Grace, lc.Suspect, lc.Requeued, lc.Pending)
	}
	for _, a := range st.Addrs {
		fmt.Fprintf(w, "listening   %s\n", a)
	}
}

// sum adds up a map's counts.
func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// connNote names a neighbour's connection kind, when there is one.
func connNote(kind string) string {
	if kind == "" {
		return ""
	}
	return "  (" + kind + ")"
}

// printNAT prints the node's reachability, relays and hole punching.
func printNAT(w io.Writer, n node.NATStatus) {
	how := "AutoNAT"
	if n.Forced {
		how = "--reachability"
	}
	line := fmt.Sprintf("reachable   %s (%s)", n.Reachability, how)
	if n.RelayService {
		line += ", serving as a relay"
	}
	if len(n.Relays) > 0 {
		line += fmt.Sprintf(", reservations on %d of %d relays", len(n.Reservations), len(n.Relays))
	}
	fmt.Fprintln(w, line)
	if n.Unreachable != "" {
		fmt.Fprintf(w, "            %s\n", n.Unreachable)
	}
	for _, a := range n.RelayAddrs {
		fmt.Fprintf(w, "relayed at  %s\n", a)
	}
	if h := n.HolePunch; h.Attempts > 0 || h.DirectDials > 0 || h.ProtocolErrors > 0 {
		fmt.Fprintf(w, "hole punch  %d attempts, %d direct, %d failed; %d dials back (%d failed), %d protocol errors; %d peers failed 3 times in a row\n",
			h.Attempts, h.Successes, h.Failures, h.DirectDials, h.DirectDialFailures, h.ProtocolErrors, h.Unpunched)
	}
}

// formatBytes writes a byte count for a person: 512 B, 3.2 MiB, 1.0 GiB.
func formatBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}
