// Package memstat reads the memory the operating system has given the
// process, for benchmarks that report resident memory next to the Go heap.
package memstat

import (
	"os"
	"strconv"
	"strings"
)

// ResidentBytes returns the resident set size of the process (VmRSS in
// /proc/self/status), or 0 where that is not available (outside Linux).
// Go returns freed memory to the OS lazily, so the difference of two
// readings bounds what the work between them made resident.
func ResidentBytes() uint64 { return statusBytes("VmRSS:") }

// PeakResidentBytes returns the peak resident set size of the process so
// far (VmHWM in /proc/self/status), or 0 where that is not available.
func PeakResidentBytes() uint64 { return statusBytes("VmHWM:") }

// statusBytes reads one "Name: N kB" line of /proc/self/status.
func statusBytes(field string) uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
