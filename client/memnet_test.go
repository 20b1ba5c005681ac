package ratelimitclient_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// memListener is an in-memory net.Listener: connections are net.Pipe pairs,
// so that an httptest.Server runs inside a synctest bubble (goroutines
// blocked on pipes are durably blocked; on sockets they are not).
type memListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

type memAddr struct{}

func (memAddr) Network() string { return "mem" }
func (memAddr) String() string  { return "api.test:80" }

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr{} }

func (l *memListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	c1, c2 := net.Pipe()
	select {
	case l.conns <- c2:
		return c1, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// memServer starts an httptest.Server serving h over an in-memory network
// and returns it with a transport that reaches it. It is shut down when the
// test ends, inside its bubble.
func memServer(t *testing.T, h http.Handler) (*httptest.Server, *http.Transport) {
	t.Helper()
	ml := &memListener{conns: make(chan net.Conn), done: make(chan struct{})}
	ts := httptest.NewUnstartedServer(h)
	ts.Listener.Close()
	ts.Listener = ml
	ts.Start()
	tr := &http.Transport{DialContext: ml.dial, MaxIdleConnsPerHost: 64}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		ts.Close()
	})
	return ts, tr
}
