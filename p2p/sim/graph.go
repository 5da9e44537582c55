package sim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"github.com/swarmcrawl/swarmcrawl/p2p/ring"
)

// Graph is a web to crawl: pages numbered from 0, each on one host, with
// its links. It is read-only once built.
type Graph struct {
	off       []int64 // page p's links are to[off[p]:off[p+1]]
	to        []int32
	host      []int32 // host index of each page
	hostNames []string
	hostKeys  []ring.ID
}

// Pages returns the number of pages.
func (g *Graph) Pages() int { return len(g.host) }

// Hosts returns the number of hosts.
func (g *Graph) Hosts() int { return len(g.hostNames) }

// Links returns the number of links.
func (g *Graph) Links() int { return len(g.to) }

// links returns page p's links.
func (g *Graph) links(p int32) []int32 { return g.to[g.off[p]:g.off[p+1]] }

// HostKey returns the task key of a host: the first 8 bytes of the
// SHA-256 of its name, as urls.HostKey computes it for a real host.
func (g *Graph) hostKey(h int32) ring.ID { return g.hostKeys[h] }

// url returns a page's URL, as the shard records carry it.
func (g *Graph) url(p int32) string {
	return "http://" + g.hostNames[g.host[p]] + "/p" + strconv.Itoa(int(p))
}

// finish computes the host keys.
func (g *Graph) finish() {
	g.hostKeys = make([]ring.ID, len(g.hostNames))
	for i, n := range g.hostNames {
		g.hostKeys[i] = ring.HashID([]byte(strings.ToLower(n)))
	}
}

// ReadGraph reads an adjacency list: line i lists, separated by blanks,
// the numbers of the pages page i links to, as LAW's WebGraph tools print
// a graph (ASCIIGraph; its first line, the page count, is recognised and
// skipped). hosts, if not nil, gives each page's host, one name a line in
// page order; without it consecutive page numbers are grouped into hosts
// of pagesPerHost pages, since LAW graphs are sorted by URL.
func ReadGraph(adj io.Reader, hosts io.Reader, pagesPerHost int) (*Graph, error) {
	g := &Graph{off: []int64{0}}
	sc := bufio.NewScanner(adj)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var first []int32
	firstSingle := false
	line := 0
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for _, f := range fields {
			v, err := strconv.ParseInt(f, 10, 32)
			if err != nil || v < 0 {
				return nil, fmt.Errorf("sim: graph line %d: bad page number %q", line+1, f)
			}
			g.to = append(g.to, int32(v))
		}
		if line == 0 {
			firstSingle = len(fields) == 1
			first = append(first, g.to...)
		}
		g.off = append(g.off, int64(len(g.to)))
		line++
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("sim: read graph: %w", err)
	}
	pages := line
	if firstSingle && int64(first[0]) == int64(line-1) {
		// ASCIIGraph's header: the page count.
		g.to = g.to[1:]
		g.off = g.off[1:]
		for i := range g.off {
			g.off[i]--
		}
		pages--
	}
	if pages == 0 {
		return nil, errors.New("sim: graph has no pages")
	}
	for _, t := range g.to {
		if int(t) >= pages {
			return nil, fmt.Errorf("sim: graph links to page %d, but it has %d pages", t, pages)
		}
	}
	g.host = make([]int32, pages)
	if hosts != nil {
		index := map[string]int32{}
		sc := bufio.NewScanner(hosts)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		p := 0
		for sc.Scan() {
			name := strings.TrimSpace(sc.Text())
			if p >= pages {
				return nil, fmt.Errorf("sim: hosts file has more than %d lines, one per page", pages)
			}
			if name == "" {
				return nil, fmt.Errorf("sim: hosts file line %d is empty", p+1)
			}
			h, ok := index[name]
			if !ok {
				h = int32(len(g.hostNames))
				index[name] = h
				g.hostNames = append(g.hostNames, name)
			}
			g.host[p] = h
			p++
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("sim: read hosts: %w", err)
		}
		if p != pages {
			return nil, fmt.Errorf("sim: hosts file has %d lines for %d pages", p, pages)
		}
	} else {
		if pagesPerHost <= 0 {
			pagesPerHost = 16
		}
		for p := range g.host {
			h := int32(p / pagesPerHost)
			if int(h) == len(g.hostNames) {
				g.hostNames = append(g.hostNames, "h"+strconv.Itoa(int(h))+".sim")
			}
			g.host[p] = h
		}
	}
	g.finish()
	return g, nil
}

// ReadGraphFiles is ReadGraph on files; hostsPath may be empty.
func ReadGraphFiles(adjPath, hostsPath string, pagesPerHost int) (*Graph, error) {
	adj, err := os.Open(adjPath)
	if err != nil {
		return nil, fmt.Errorf("sim: graph: %w", err)
	}
	defer adj.Close()
	var hosts io.Reader
	if hostsPath != "" {
		f, err := os.Open(hostsPath)
		if err != nil {
			return nil, fmt.Errorf("sim: hosts: %w", err)
		}
		defer f.Close()
		hosts = f
	}
	return ReadGraph(adj, hosts, pagesPerHost)
}

// GenerateGraph makes a web-like graph of about pages pages from seed.
// Host sizes follow a Pareto law (α 1.2, at least 2 pages, at most
// maxHostPages); each host's pages form a random tree from its front page
// (every page has a link from an earlier page of its host) and each
// host's front page is linked from a page of an earlier host, so every
// page is reachable from page 0. Every page has a lognormal number of
// further links (median 6, at most 100): 70% to a random page of its own
// host, the rest to other hosts chosen with a strong bias towards the
// first (popular) ones, half of those to the host's front page.
func GenerateGraph(pages int, maxHostPages int, seed uint64) *Graph {
	if maxHostPages < 2 {
		maxHostPages = 300
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e4a))
	g := &Graph{}
	var base []int32 // first page of each host
	for len(g.host) < pages {
		size := int(math.Ceil(2 / math.Pow(1-rng.Float64(), 1/1.2)))
		size = min(size, maxHostPages, pages-len(g.host))
		h := int32(len(g.hostNames))
		base = append(base, int32(len(g.host)))
		g.hostNames = append(g.hostNames, "h"+strconv.Itoa(int(h))+".sim")
		for range size {
			g.host = append(g.host, h)
		}
	}
	base = append(base, int32(len(g.host)))
	hosts := len(g.hostNames)
	var src, dst []int32
	edge := func(a, b int32) {
		if a != b {
			src, dst = append(src, a), append(dst, b)
		}
	}
	for h := range hosts {
		b, size := base[h], base[h+1]-base[h]
		if h > 0 {
			from := base[rng.IntN(h)]
			edge(from+int32(rng.IntN(int(base[h]-from))), b)
		}
		for k := int32(1); k < size; k++ {
			edge(b+int32(rng.IntN(int(k))), b+k)
		}
	}
	for p := range int32(len(g.host)) {
		h := g.host[p]
		b, size := base[h], base[h+1]-base[h]
		deg := min(int(math.Exp(math.Log(6)+0.8*rng.NormFloat64())), 100)
		for range deg {
			if rng.Float64() < 0.7 {
				edge(p, b+int32(rng.IntN(int(size))))
				continue
			}
			u := rng.Float64()
			t := int(float64(hosts) * u * u * u)
			tb, ts := base[t], base[t+1]-base[t]
			if rng.IntN(2) == 0 {
				edge(p, tb)
			} else {
				edge(p, tb+int32(rng.IntN(int(ts))))
			}
		}
	}
	// Counting sort of the edges by source into the link lists.
	g.off = make([]int64, len(g.host)+1)
	for _, a := range src {
		g.off[a+1]++
	}
	for i := 1; i < len(g.off); i++ {
		g.off[i] += g.off[i-1]
	}
	g.to = make([]int32, len(src))
	fill := make([]int64, len(g.host))
	copy(fill, g.off)
	for i, a := range src {
		g.to[fill[a]] = dst[i]
		fill[a]++
	}
	g.finish()
	return g
}

// reachable marks the pages reachable from seeds and returns how many.
func (g *Graph) reachable(seeds []int32) ([]bool, int) {
	seen := make([]bool, g.Pages())
	stack := make([]int32, 0, len(seeds))
	n := 0
	for _, s := range seeds {
		if !seen[s] {
			seen[s] = true
			n++
			stack = append(stack, s)
		}
	}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, q := range g.links(p) {
			if !seen[q] {
				seen[q] = true
				n++
				stack = append(stack, q)
			}
		}
	}
	return seen, n
}
