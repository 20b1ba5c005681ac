package ratelimitgrpc_test

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/sluicehq/ratelimit"
	ratelimitgrpc "github.com/sluicehq/ratelimit/adapters/grpc"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// The interceptor alone, called directly with an RPC's context (peer and
// metadata): what the adapter and the limiter cost per admitted call,
// without the network. The transport stream is a stub that keeps the
// header metadata it is given, as gRPC's does until it sends them.
func BenchmarkUnaryInterceptorAllowed(b *testing.B) {
	for _, bc := range []struct {
		name string
		key  ratelimit.KeyFunc
	}{
		{"ByIP", ratelimit.ByIP()},
		{"ByAPIKey", ratelimit.ByAPIKey("x-api-key")},
	} {
		b.Run(bc.name+"/gRPC", func(b *testing.B) {
			l := ratelimit.NewLimiter(ratelimit.PerSecond(100_000_000), bc.key)
			ic := ratelimitgrpc.UnaryServerInterceptor(l)
			ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 4000}})
			ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("x-api-key", "k-123", "user-agent", "grpc-go/1.84.0", "content-type", "application/grpc"))
			ctx = grpc.NewContextWithServerTransportStream(ctx, &stubStream{})
			info := &grpc.UnaryServerInfo{FullMethod: ping}
			handler := func(context.Context, any) (any, error) { return nil, nil }
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := ic(ctx, nil, info, handler); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
		// The same limiter on the same request over HTTP, for comparison.
		b.Run(bc.name+"/HTTP", func(b *testing.B) {
			l := ratelimit.NewLimiter(ratelimit.PerSecond(100_000_000), bc.key)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				r := ratelimittest.NewRequest(http.MethodPost, ping, "192.0.2.1:4000", "X-Api-Key", "k-123", "User-Agent", "grpc-go/1.84.0", "Content-Type", "application/grpc")
				w := ratelimittest.NewDiscardWriter()
				for pb.Next() {
					w.Reset()
					done, ok := l.Admit(w, r)
					if !ok {
						b.Fatal("denied")
					}
					done()
				}
			})
		})
	}
}

// stubStream is a grpc.ServerTransportStream that records header metadata.
type stubStream struct {
	mu  sync.Mutex
	hdr metadata.MD
}

func (s *stubStream) Method() string { return ping }

func (s *stubStream) SetHeader(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hdr = md // replaced, not merged: one call's worth is kept
	return nil
}

func (s *stubStream) SendHeader(md metadata.MD) error { return s.SetHeader(md) }
func (s *stubStream) SetTrailer(metadata.MD) error    { return nil }
