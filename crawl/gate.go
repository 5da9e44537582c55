package crawl

import (
	"context"
	"crypto/tls"
	"net"
	"sync/atomic"
)

// Ownership is checked once more right before a request's first byte is
// written. The HTTP transport tells the crawler which connection a request
// got (httptrace GotConn) and then writes the request on it from a
// goroutine of its own, so cancelling the request at GotConn races with
// that write. Every connection the crawler's transports dial is therefore
// a gatedConn: GotConn arms it with the request's gate, and its next write
// asks the gate first and fails, writing nothing, if the node no longer
// owns the request's key.

// gatedConn is a connection whose next write, once armed, is made only
// if the gate still allows it.
type gatedConn struct {
	net.Conn
	gate atomic.Pointer[func() bool]
}

// Write writes b unless an armed gate refuses: then nothing is written
// and the connection is closed (the transport would not reuse it anyway).
func (c *gatedConn) Write(b []byte) (int, error) {
	if g := c.gate.Swap(nil); g != nil && !(*g)() {
		_ = c.Conn.Close()
		return 0, errNotOwned
	}
	return c.Conn.Write(b)
}

// gateDial makes dial return gatedConns.
func gateDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &gatedConn{Conn: c}, nil
	}
}

// armGate arms conn (a gatedConn, or a TLS connection over one) with gate
// and reports whether it could.
func armGate(conn net.Conn, gate func() bool) bool {
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	gc, ok := conn.(*gatedConn)
	if ok {
		gc.gate.Store(&gate)
	}
	return ok
}
