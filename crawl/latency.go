package crawl

import (
	"encoding/json"
	"sync/atomic"
	"time"
)

// LatencyBuckets are the upper bounds of the fetch latency histogram
// (Stats.FetchLatency): from a loopback answer to the request timeout.
var LatencyBuckets = []time.Duration{
	5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second, 30 * time.Second,
}

// Histogram is a latency distribution: Counts[i] requests took at most
// LatencyBuckets[i] (and more than the bound before), the last count the
// requests beyond every bound; Sum is their total time.
type Histogram struct {
	Counts []uint64        `json:"counts"`
	Sum    time.Duration   `json:"sum_ns"`
	Bounds []time.Duration `json:"bounds_ns"`
}

// Count is the number of observations.
func (h Histogram) Count() uint64 {
	var n uint64
	for _, c := range h.Counts {
		n += c
	}
	return n
}

// latencyHistogram counts observations into LatencyBuckets, lock-free.
type latencyHistogram struct {
	counts [13]atomic.Uint64 // len(LatencyBuckets)+1
	sum    atomic.Int64
}

func (h *latencyHistogram) observe(d time.Duration) {
	i := 0
	for i < len(LatencyBuckets) && d > LatencyBuckets[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(int64(d))
}

func (h *latencyHistogram) snapshot() Histogram {
	out := Histogram{Counts: make([]uint64, len(h.counts)), Sum: time.Duration(h.sum.Load()), Bounds: LatencyBuckets}
	for i := range h.counts {
		out.Counts[i] = h.counts[i].Load()
	}
	return out
}

// statusClasses counts responses by status class: index 1 for 1xx up to
// 5 for 5xx, 0 for anything else.
type statusClasses [6]atomic.Int64

func (s *statusClasses) add(status int) {
	i := status / 100
	if i < 1 || i > 5 {
		i = 0
	}
	s[i].Add(1)
}

func (s *statusClasses) snapshot() map[string]int64 {
	out := map[string]int64{}
	for i := range s {
		if n := s[i].Load(); n > 0 {
			name := "other"
			if i > 0 {
				name = string(rune('0'+i)) + "xx"
			}
			out[name] = n
		}
	}
	return out
}

// statsJSON is Stats on the wire: the latency percentiles in milliseconds.
type statsJSON struct {
	plainStats
	FetchP50Ms float64 `json:"fetch_p50_ms"`
	FetchP99Ms float64 `json:"fetch_p99_ms"`
}

// plainStats is Stats without its JSON methods.
type plainStats Stats

// MarshalJSON writes Stats with snake_case keys and the latency
// percentiles as fetch_p50_ms and fetch_p99_ms.
func (s Stats) MarshalJSON() ([]byte, error) {
	return json.Marshal(statsJSON{plainStats(s), ms(s.FetchP50), ms(s.FetchP99)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *Stats) UnmarshalJSON(b []byte) error {
	var v statsJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = Stats(v.plainStats)
	s.FetchP50 = time.Duration(v.FetchP50Ms * float64(time.Millisecond))
	s.FetchP99 = time.Duration(v.FetchP99Ms * float64(time.Millisecond))
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
