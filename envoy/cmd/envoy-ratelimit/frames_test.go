package main

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// The command's server sends no PING of its own while it answers calls:
// a server with a dynamic flow-control window sends one (and reads its
// ack) for nearly every call, to estimate a bandwidth that calls of a few
// hundred bytes never need.
func TestCommandSendsNoPingPerCall(t *testing.T) {
	dir := t.TempDir()
	cfg := "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: minute\n      requests_per_unit: 1000\n"
	if err := os.WriteFile(filepath.Join(dir, "d.yaml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrc, errc := make(chan string, 1), make(chan error, 1)
	go func() {
		errc <- run(ctx, []string{"-config", dir, "-grpc-addr", "127.0.0.1:0"}, io.Discard, func(a string) { addrc <- a })
	}()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-errc:
		t.Fatalf("run: %v", err)
	}
	frames := &frameCounter{}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", a)
			return &countingConn{Conn: c, frames: frames}, err
		}))
	if err != nil {
		t.Fatal(err)
	}
	client := pb.NewRateLimitServiceClient(conn)
	req := &pb.RateLimitRequest{Domain: "d", Descriptors: []*rlpb.RateLimitDescriptor{{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}}}}
	const calls = 20
	for i := range calls {
		if _, err := client.ShouldRateLimit(ctx, req); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	defer conn.Close()
	// Each call's DATA frames were read before it returned, and a server
	// that pings sends its PING on reading a call's request.
	if n, d := frames.counts(); d < calls || n != 0 {
		t.Fatalf("the server sent %d PING frames of its own (and %d DATA frames) over %d calls, want none", n, d, calls)
	}
}

// countingConn is a client's connection that parses the HTTP/2 frames the
// server sends it.
type countingConn struct {
	net.Conn
	frames *frameCounter
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.frames.feed(p[:n])
	return n, err
}

// frameCounter counts, in a stream of HTTP/2 frames, the PING frames that
// are not acks and the DATA frames.
type frameCounter struct {
	mu          sync.Mutex
	buf         []byte
	pings, data int
}

func (f *frameCounter) feed(p []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf = append(f.buf, p...)
	for len(f.buf) >= 9 { // a frame header: length (3), type, flags, stream (4)
		size := 9 + int(binary.BigEndian.Uint32(append([]byte{0}, f.buf[:3]...)))
		if len(f.buf) < size {
			return
		}
		switch typ, flags := f.buf[3], f.buf[4]; {
		case typ == 0x6 && flags&0x1 == 0: // PING, not ACK
			f.pings++
		case typ == 0x0:
			f.data++
		}
		f.buf = f.buf[size:]
	}
}

func (f *frameCounter) counts() (pings, data int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pings, f.data
}
