package frontier

import (
	"flag"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/swarmcrawl/swarmcrawl/internal/memstat"
	"github.com/swarmcrawl/swarmcrawl/store"
)

// BenchmarkFrontierRSS pushes queued URLs over 10,000 hosts into a durable
// frontier and reports the Go heap and the resident memory of the process
// per million queued URLs, at a tenth of the pushes and at the end: flat
// memory shows as a heap that does not grow with the queue. queued=1M runs
// by default; queued=10M only when -bench names it (it writes about 1 GB).
func BenchmarkFrontierRSS(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("queued=%dM", n/1_000_000), func(b *testing.B) {
			if n > 1_000_000 && !strings.Contains(flag.Lookup("test.bench").Value.String(), "10M") {
				b.Skip("run with -bench 'FrontierRSS/queued=10M'")
			}
			for b.Loop() {
				frontierRSS(b, n, 10_000)
			}
		})
	}
}

func frontierRSS(b *testing.B, total, hosts int) {
	db, err := store.Open(b.TempDir(), store.Options{BloomExpected: 1000})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	f, err := New(db, Config{})
	if err != nil {
		b.Fatal(err)
	}
	base := heapInUse()
	var heapTenth, rssTenth uint64
	start := time.Now()
	const batch = 10_000
	tasks := make([]Task, batch)
	for pushed := 0; pushed < total; {
		for i := range tasks {
			tasks[i] = Task{URL: fmt.Sprintf("http://h%05d.example/articles/%d/index.html", pushed%hosts, pushed), Depth: 1 + pushed%5}
			pushed++
		}
		if _, err := f.Push(tasks...); err != nil {
			b.Fatal(err)
		}
		if pushed == total/10 {
			heapTenth, rssTenth = heapInUse(), memstat.ResidentBytes()
		}
	}
	elapsed := time.Since(start)
	heap, rss := heapInUse(), memstat.ResidentBytes()
	if f.Len() != total {
		b.Fatalf("Len = %d, want %d", f.Len(), total)
	}
	// One task per host is served, so every host's head is in memory.
	m := float64(total) / 1e6
	b.ReportMetric(float64(heap-base)/m, "heap-B/M-queued")
	b.ReportMetric(float64(rss)/m, "rss-B/M-queued")
	b.ReportMetric(float64(heapTenth-base)/(1<<20), "heap-MB@10%")
	b.ReportMetric(float64(heap-base)/(1<<20), "heap-MB@100%")
	b.ReportMetric(float64(rssTenth)/(1<<20), "rss-MB@10%")
	b.ReportMetric(float64(rss)/(1<<20), "rss-MB@100%")
	b.ReportMetric(float64(total)/elapsed.Seconds(), "pushes/s")
}

// heapInUse returns the live Go heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkResume measures one Resume, which the node calls every 250ms,
// with 10,000 hosts queued and one of them parked by the ownership gate and still
// not owned: the cost of asking again about the parked hosts.
func BenchmarkResume(b *testing.B) {
	const hosts = 10_000
	f, err := New(openStore(b), Config{Delay: 10 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	const parked = "parked.example"
	parkHost(b, f, "http://"+parked+"/")
	tasks := make([]Task, 0, hosts-1)
	for i := range hosts - 1 {
		tasks = append(tasks, Task{URL: fmt.Sprintf("http://h%05d.example/", i)})
	}
	push(b, f, tasks...)
	owns := func(uint64) bool { return false }
	for b.Loop() {
		if err := f.Resume(owns); err != nil {
			b.Fatal(err)
		}
	}
	f.mu.Lock()
	still := f.hosts[parked].parked
	f.mu.Unlock()
	if !still {
		b.Fatal("Resume unparked a host Owns refuses")
	}
}
