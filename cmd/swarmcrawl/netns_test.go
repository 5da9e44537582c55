//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A network of Linux network namespaces for the NAT test (nat_test.go):
//
//	             public segment 7.0.0.0/24 (bridge br0 in namespace "pub",
//	             which also holds 7.0.0.1, where the synthetic web listens)
//	   ┌──────────────┬──────────────┼───────────────┐
//	 boot .10       relay .11      nat1 .21         nat2 .22   (wan)
//	                                 │ masquerade      │ masquerade
//	                           10.1.0.0/24 (br0)  10.2.0.0/24 (br0)
//	                            l1a .2   l1b .3    l2a .2   l2b .3   l2c .4
//
// The public addresses are ordinary unicast ones (libp2p hole punches only
// towards addresses manet.IsPublicAddr accepts), but no packet to them
// leaves the test's namespaces: none has a link to the machine's own
// network, and the NAT routers have no default route.
//
// Each NAT router behaves like a home router: its masquerade keeps a
// connection's source port when it is free (every LAN peer listens, and
// dials with SO_REUSEPORT, from its own port), so the mapping is
// endpoint-independent; its filter lets in only replies to connections
// from the LAN, and drops everything else silently (no RST, no ICMP), so
// a SYN that arrives before the router has seen its own side's SYN goes
// unanswered and the retransmitted one passes. Linux conntrack takes a
// SYN in the reply direction of a connection in SYN_SENT as a TCP
// simultaneous open (state SYN_SENT2), which is what DCUtR over TCP needs.
//
// Except for the .4 host of a LAN (l2c): its connections get a random
// source port each, an endpoint-dependent ("symmetric") mapping that
// defeats hole punching, as some carrier-grade NATs do.

// natPrefix starts the name of every namespace the NAT test makes,
// followed by the test process's PID, so that leftovers of a test that
// was killed are recognised and removed.
const natPrefix = "scnat"

// netTopo is the network of namespaces of one test.
type netTopo struct {
	t      *testing.T
	prefix string
	made   []string
}

// Namespaces of the topology, by role.
const (
	nsPub   = "pub"
	nsBoot  = "boot"
	nsRelay = "relay"
	nsNAT1  = "nat1"
	nsNAT2  = "nat2"
	nsL1A   = "l1a"
	nsL1B   = "l1b"
	nsL2A   = "l2a"
	nsL2B   = "l2b"
	nsL2C   = "l2c"
)

// Addresses of the topology.
const (
	webIP   = "7.0.0.1"
	bootIP  = "7.0.0.10"
	relayIP = "7.0.0.11"
	nat1IP  = "7.0.0.21"
	nat2IP  = "7.0.0.22"
)

// needNetns skips the test where network namespaces cannot be made (not
// root, no ip or nft), and fails it there under CI=true, where they must be.
func needNetns(t *testing.T) {
	t.Helper()
	missing := ""
	switch {
	case runtime.GOOS != "linux":
		missing = "Linux"
	case os.Geteuid() != 0:
		missing = "root"
	default:
		for _, tool := range []string{"ip", "nft"} {
			if _, err := exec.LookPath(tool); err != nil {
				missing = "the " + tool + " command"
				break
			}
		}
	}
	if missing == "" {
		return
	}
	msg := fmt.Sprintf("network namespaces need %s (as root: apt-get install -y iproute2 nftables)", missing)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + "; CI=true, so this is a failure, not a skip")
	}
	t.Skip(msg)
}

// newNetTopo builds the topology; every namespace (and with it every
// interface and rule in it) is removed when the test ends, and leftovers
// of earlier runs whose process is gone are removed first.
func newNetTopo(t *testing.T) *netTopo {
	t.Helper()
	needNetns(t)
	removeLeftovers(t)
	n := &netTopo{t: t, prefix: fmt.Sprintf("%s%d-", natPrefix, os.Getpid())}
	t.Cleanup(n.remove)
	for _, ns := range []string{nsPub, nsBoot, nsRelay, nsNAT1, nsNAT2, nsL1A, nsL1B, nsL2A, nsL2B, nsL2C} {
		n.ip("netns", "add", n.ns(ns))
		n.made = append(n.made, n.ns(ns))
		n.ip("-n", n.ns(ns), "link", "set", "lo", "up")
	}
	n.ip("-n", n.ns(nsPub), "link", "add", "br0", "type", "bridge")
	n.ip("-n", n.ns(nsPub), "addr", "add", webIP+"/24", "dev", "br0")
	n.ip("-n", n.ns(nsPub), "link", "set", "br0", "up")
	n.plug(nsBoot, "eth0", bootIP+"/24", nsPub, "boot", "")
	n.plug(nsRelay, "eth0", relayIP+"/24", nsPub, "relay", "")
	n.plug(nsNAT1, "wan", nat1IP+"/24", nsPub, "nat1", "")
	n.plug(nsNAT2, "wan", nat2IP+"/24", nsPub, "nat2", "")
	for i, lan := range []struct{ router, a, b, c string }{{nsNAT1, nsL1A, nsL1B, ""}, {nsNAT2, nsL2A, nsL2B, nsL2C}} {
		subnet := fmt.Sprintf("10.%d.0.", i+1)
		n.ip("-n", n.ns(lan.router), "link", "add", "br0", "type", "bridge")
		n.ip("-n", n.ns(lan.router), "addr", "add", subnet+"1/24", "dev", "br0")
		n.ip("-n", n.ns(lan.router), "link", "set", "br0", "up")
		n.plug(lan.a, "eth0", subnet+"2/24", lan.router, "lana", subnet+"1")
		n.plug(lan.b, "eth0", subnet+"3/24", lan.router, "lanb", subnet+"1")
		if lan.c != "" {
			n.plug(lan.c, "eth0", subnet+"4/24", lan.router, "lanc", subnet+"1")
		}
		n.run(lan.router, nil, "sysctl", "-qw", "net.ipv4.ip_forward=1")
		n.run(lan.router, strings.NewReader(fmt.Sprintf(natRules, subnet+"4")), "nft", "-f", "-")
	}
	return n
}

// natRules are a NAT router's nftables rules: masquerade towards the
// public segment (with a random port for each connection of the address
// in %s), and a stateful filter that admits from it only replies.
const natRules = `
table ip nat {
	chain postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		ip saddr %s oifname "wan" masquerade random
		oifname "wan" masquerade
	}
}
table ip filter {
	chain forward {
		type filter hook forward priority filter; policy drop;
		ct state established,related accept
		iifname "br0" accept
	}
	chain input {
		type filter hook input priority filter; policy accept;
		iifname "wan" ct state established,related accept
		iifname "wan" drop
	}
}
`

// ns returns the full name of the topology's namespace of a role.
func (n *netTopo) ns(role string) string { return n.prefix + role }

// plug links namespace role to namespace hub with a veth pair (ifname in
// role, with address addr; hubIf in hub, on hub's bridge br0), and routes
// role's traffic through gw when it is set.
func (n *netTopo) plug(role, ifname, addr, hub, hubIf, gw string) {
	n.ip("link", "add", ifname, "netns", n.ns(role), "type", "veth", "peer", "name", hubIf, "netns", n.ns(hub))
	n.ip("-n", n.ns(hub), "link", "set", hubIf, "master", "br0", "up")
	n.ip("-n", n.ns(role), "addr", "add", addr, "dev", ifname)
	n.ip("-n", n.ns(role), "link", "set", ifname, "up")
	if gw != "" {
		n.ip("-n", n.ns(role), "route", "add", "default", "via", gw)
	}
}

// ip runs the ip command, failing the test if it fails.
func (n *netTopo) ip(args ...string) {
	n.t.Helper()
	if out, err := runTool(nil, "ip", args...); err != nil {
		n.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// run runs a command in the namespace of role, failing the test if it
// fails.
func (n *netTopo) run(role string, stdin io.Reader, args ...string) {
	n.t.Helper()
	if out, err := runTool(stdin, "ip", append([]string{"netns", "exec", n.ns(role)}, args...)...); err != nil {
		n.t.Fatalf("in %s: %s: %v\n%s", role, strings.Join(args, " "), err, out)
	}
}

// runTool runs a short command, bounded to 20 seconds.
func runTool(stdin io.Reader, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = stdin
	return cmd.CombinedOutput()
}

// remove kills what still runs in the topology's namespaces and deletes
// them.
func (n *netTopo) remove() {
	for _, ns := range n.made {
		if err := deleteNetns(ns); err != nil {
			n.t.Errorf("removing namespace %s: %v", ns, err)
		}
	}
}

// deleteNetns kills the processes in namespace ns and deletes it.
func deleteNetns(ns string) error {
	out, _ := runTool(nil, "ip", "netns", "pids", ns)
	for _, f := range strings.Fields(string(out)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if out, err := runTool(nil, "ip", "netns", "del", ns); err != nil {
		return fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// removeLeftovers deletes the namespaces of earlier NAT tests whose
// process no longer runs (a test killed before its cleanup).
func removeLeftovers(t *testing.T) {
	t.Helper()
	out, err := runTool(nil, "ip", "netns", "list")
	if err != nil {
		t.Fatalf("ip netns list: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], natPrefix) {
			continue
		}
		pidText, _, _ := strings.Cut(strings.TrimPrefix(f[0], natPrefix), "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue // its test still runs
		}
		if err := deleteNetns(f[0]); err != nil {
			t.Logf("removing leftover namespace %s: %v", f[0], err)
		} else {
			t.Logf("removed leftover namespace %s", f[0])
		}
	}
}

// inNetns runs fn on an OS thread that has joined namespace ns: the
// sockets fn makes belong to ns for good. The thread goes back to the
// test's namespace afterwards, or, if it cannot, ends with its goroutine.
func (n *netTopo) inNetns(role string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer home.Close()
		target, err := os.Open(filepath.Join("/run/netns", n.ns(role)))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", role, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns back from %s: %w", role, err) // the thread stays locked and ends
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// listen opens a TCP listener in the namespace of role.
func (n *netTopo) listen(role, addr string) (net.Listener, error) {
	var ln net.Listener
	err := n.inNetns(role, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	return ln, err
}

// client returns an HTTP client whose connections are made in the
// namespace of role (to reach a node's API on that namespace's loopback).
func (n *netTopo) client(role string) *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DisableKeepAlives: true,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				var c net.Conn
				err := n.inNetns(role, func() (err error) {
					c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
					return err
				})
				return c, err
			},
		},
	}
}

// status reads the status of the node on data dir data, running in the
// namespace of role.
func (n *netTopo) status(role, data string) (nodeStatus, error) {
	var st nodeStatus
	addr, err := apiAddr("", data)
	if err != nil {
		return st, err
	}
	resp, err := n.client(role).Get("http://" + addr + "/status")
	if err != nil {
		return st, fmt.Errorf("status in %s: %w", role, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return st, fmt.Errorf("status in %s: %w", role, err)
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("status in %s: %s", role, resp.Status)
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, fmt.Errorf("status in %s: %w", role, err)
	}
	return st, nil
}

// command returns cmd run in the namespace of role; the process is
// killed if the test process dies first.
func (n *netTopo) command(role string, env []string, name string, args ...string) *exec.Cmd {
	cmd := exec.Command("ip", append([]string{"netns", "exec", n.ns(role), name}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}
