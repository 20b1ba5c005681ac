package main

import (
	"context"
	"net"
	"testing"

	rlpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// The floor answers SERVING to health checks and OK to every call, over
// the limit or not, empty or not: it does no rate-limiting work at all.
func TestFloorAnswersEveryCallOK(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer()
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", h, err)
	}
	client := pb.NewRateLimitServiceClient(conn)
	d := &rlpb.RateLimitDescriptor{Entries: []*rlpb.RateLimitDescriptor_Entry{{Key: "user", Value: "1"}}}
	for _, req := range []*pb.RateLimitRequest{
		{},
		{Domain: "deny", Descriptors: []*rlpb.RateLimitDescriptor{d}, HitsAddend: 1 << 30},
	} {
		for range 2 {
			resp, err := client.ShouldRateLimit(ctx, req)
			if err != nil || resp.OverallCode != pb.RateLimitResponse_OK {
				t.Fatalf("ShouldRateLimit(%v): %v %v, want OK", req, resp, err)
			}
		}
	}
}
