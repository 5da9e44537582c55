package crawl

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
)

// Issue 31 item 4, a refetch without churn: the ownership gate refused a
// request's write on a reused keep-alive connection (a lease lapsing for a
// moment under load), the HTTP transport retried the request on a fresh
// connection, where the gate, asked again, let it through, and the server
// answered; the crawler took the request for unsent (errNotOwned), put
// the page back and fetched it again later. Now a request the gate let
// through once is sent: the answer counts, and the server sees the page
// once. A request the gate refuses at every attempt is still never sent.
// Before the fix: "a request refused once and then sent: crawl: task no
// longer owned; request not sent; the server saw it 1 time".
func TestGateRefusalThenRetrySent(t *testing.T) {
	srv := newLogServer(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("<html><body>page</body></html>"))
	})
	c := newTestCrawler(t, testConfig(), newRecorder(), newRecorder())
	ctx := context.Background()
	// An idle keep-alive connection in the pool, which the next request
	// reuses.
	if _, err := c.get(ctx, srv.URL+"/warm", 1<<20, nil, func() bool { return true }); err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int32
	onceClosed := func() bool { return asked.Add(1) > 1 }
	resp, err := c.get(ctx, srv.URL+"/page", 1<<20, nil, onceClosed)
	if err != nil || resp.status != http.StatusOK || srv.count("/page") != 1 {
		t.Fatalf("a request refused once and then sent: %v; the server saw it %d times", err, srv.count("/page"))
	}
	if asked.Load() < 2 {
		t.Fatalf("the gate was asked %d times: the transport did not retry, the test proves nothing", asked.Load())
	}
	if _, err := c.get(ctx, srv.URL+"/never", 1<<20, nil, func() bool { return false }); !errors.Is(err, errNotOwned) || srv.count("/never") != 0 {
		t.Fatalf("a request refused at every attempt: %v; the server saw it %d times", err, srv.count("/never"))
	}
}
