package redisstore

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// faultProxy is a TCP proxy in front of a Redis server that can turn
// silent (accept connections and never answer) or slow (delay every reply
// chunk), to test what clients see when Redis hangs or crawls.
type faultProxy struct {
	l        net.Listener
	upstream string
	silent   atomic.Bool
	delay    atomic.Int64                  // ns added before every chunk sent to the client
	drops    atomic.Int64                  // reply chunks still to drop, closing their connection
	dropped  chan struct{}                 // receives once per dropped chunk
	gate     atomic.Pointer[chan struct{}] // while set, replies wait for it to close
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	wg       sync.WaitGroup
}

// startProxy starts a proxy to upstream, closed by t.Cleanup (or Close).
func startProxy(t testing.TB, upstream string) *faultProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{l: l, upstream: upstream, conns: map[net.Conn]struct{}{}, dropped: make(chan struct{}, 16)}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

func (p *faultProxy) Addr() string { return p.l.Addr().String() }

// SetSilent makes new and existing connections hang (true), or drops the
// hung connections and forwards new ones again (false).
func (p *faultProxy) SetSilent(on bool) {
	p.silent.Store(on)
	p.dropConns()
}

// DropReplies makes the proxy discard the next n reply chunks, each
// closing its client connection: the command ran, its reply is lost.
func (p *faultProxy) DropReplies(n int) { p.drops.Store(int64(n)) }

// Hold makes replies wait until Release.
func (p *faultProxy) Hold() {
	ch := make(chan struct{})
	p.gate.Store(&ch)
}

// Release lets held replies through.
func (p *faultProxy) Release() {
	if ch := p.gate.Swap(nil); ch != nil {
		close(*ch)
	}
}

// SetDelay delays every reply chunk by d (0: none).
func (p *faultProxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

func (p *faultProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *faultProxy) dropConns() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *faultProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *faultProxy) serve(c net.Conn) {
	defer p.wg.Done()
	if p.silent.Load() {
		io.Copy(io.Discard, c) // hold it, never answer, until dropped
		return
	}
	u, err := net.Dial("tcp", p.upstream)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(u) {
		u.Close()
		return
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		io.Copy(u, c)
		u.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := u.Read(buf)
		if n > 0 {
			if d := p.delay.Load(); d > 0 {
				time.Sleep(time.Duration(d))
			}
			if g := p.gate.Load(); g != nil {
				<-*g
			}
			if p.drops.Add(-1) >= 0 {
				select {
				case p.dropped <- struct{}{}:
				default:
				}
				break
			}
			p.drops.Add(1)
			if p.silent.Load() {
				break
			}
			if _, werr := c.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	c.Close()
}

// Close stops the proxy and every connection through it, and waits for its
// goroutines.
func (p *faultProxy) Close() {
	p.Release()
	p.l.Close()
	p.dropConns()
	p.mu.Lock()
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
}
