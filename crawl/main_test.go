package crawl

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: every
// worker, timer wait and keep-alive connection must be owned and stopped.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
