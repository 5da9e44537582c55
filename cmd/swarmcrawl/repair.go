package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/swarmcrawl/swarmcrawl/p2p/node"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// runRepair recovers the store of a stopped node (store.Repair) and
// prints what it found and what was lost.
func runRepair(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("repair", stderr)
	data := fs.String("data", "", "data directory of a stopped node whose store to repair (required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *data == "" {
		return usageErr("--data is required")
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	rep, err := store.Repair(filepath.Join(*data, node.StoreDir), store.DefaultOptions())
	if err != nil {
		return err
	}
	printRepair(stdout, rep)
	return nil
}

// printRepair writes a repair report for a person: what was damaged, each
// table's entries before and after, and what was lost.
func printRepair(w io.Writer, rep *store.RepairReport) {
	fmt.Fprintf(w, "store       %s (seen set: %s)\n", rep.Dir, rep.Mode)
	if rep.TornTail > 0 {
		fmt.Fprintf(w, "cut off     %d bytes of a write a crash left unfinished (it was never acknowledged)\n", rep.TornTail)
	}
	uncounted := false
	for _, j := range rep.Journals {
		lost := fmt.Sprintf("%d writes lost", j.LostWrites)
		if j.TailLost {
			lost += ", and the writes at its end, which cannot be counted"
			uncounted = true
		}
		fmt.Fprintf(w, "journal     %s: %d bytes unreadable (%s); %s\n", j.File, j.DroppedBytes, strings.Join(j.Reasons, ", "), lost)
	}
	if rep.Saved != "" {
		fmt.Fprintf(w, "kept        a copy of the damaged journal in %s\n", rep.Saved)
	}
	fmt.Fprintf(w, "tables      %d files read, %d rebuilt, %d dropped (%d blocks, %d keys unreadable)\n",
		rep.TableFiles, rep.TablesRebuilt, rep.TablesDropped, rep.BadBlocks, rep.BadKeys)
	if rep.Malformed > 0 {
		fmt.Fprintf(w, "malformed   %d entries deleted\n", rep.Malformed)
	}
	if rep.BloomRebuilt {
		fmt.Fprintf(w, "seen.bloom  rebuilt from %d entries (%s)\n", rep.BloomFrom, rep.BloomErr)
	}
	fmt.Fprintf(w, "%-12s %10s %10s %10s\n", "entries", "before", "after", "lost")
	var lost []string
	for _, c := range rep.Tables {
		n, ok := c.Lost()
		if !ok {
			fmt.Fprintf(w, "%-12s %10s %10d %10s\n", c.Table, "?", c.Found, "?")
			continue
		}
		fmt.Fprintf(w, "%-12s %10d %10d %10d\n", c.Table, c.Recorded, c.Found, n)
		if n > 0 {
			lost = append(lost, fmt.Sprintf("%d %s", n, c.Table))
		}
	}
	if uncounted {
		fmt.Fprintln(w, "note        the damage reaches the end of a journal: the counters of what was written there were lost with it, so \"before\" and \"lost\" may be too low")
	}
	switch {
	case !rep.Damaged():
		fmt.Fprintln(w, "result      nothing was damaged")
	case len(lost) > 0:
		fmt.Fprintf(w, "result      repaired; lost at least %s entries (? = not counted before the damage).\n", strings.Join(lost, ", "))
		fmt.Fprintln(w, "            The node restores the seen set and queue of its ranges from its shard records and its replicas when it rejoins.")
	default:
		fmt.Fprintln(w, "result      repaired; no counted entry was lost: the lost writes updated entries, or went to tables marked ? (not counted before the damage)")
	}
}
