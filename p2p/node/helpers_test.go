package node_test

import (
	"errors"
	"net/http"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// failingTransport makes every fetch fail at once: the tests here are
// about the swarm, not the web.
type failingTransport struct{}

func (failingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("no web in this test")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		// Every node was closed by its test: nothing it started may still run.
		if err := goleak.Find(goleakIgnores()...); err != nil {
			os.Stderr.WriteString("goroutine leak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}
