package memstat

import (
	"runtime"
	"testing"
)

// TestResidentBytes: on Linux the process has some resident memory, and
// touching 64 MiB more shows in it.
func TestResidentBytes(t *testing.T) {
	if runtime.GOOS != "linux" {
		if got := ResidentBytes(); got != 0 {
			t.Logf("ResidentBytes = %d outside Linux", got)
		}
		t.Skip("VmRSS is Linux only")
	}
	before := ResidentBytes()
	if before == 0 {
		t.Fatal("ResidentBytes = 0")
	}
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	after := ResidentBytes()
	runtime.KeepAlive(buf)
	if after < before+32<<20 {
		t.Errorf("ResidentBytes grew from %d to %d after touching 64 MiB", before, after)
	}
}
