// Command grpcfloor is the service-side floor of the side-by-side
// benchmark (BenchmarkSideBySide's "grpc-floor" row): a gRPC server with
// the envoy-ratelimit command's settings (grpcserve.ServerOptions and
// grpcserve.TuneGC, the same grpc-go) whose ShouldRateLimit answers OK
// without reading its request. The CPU its process spends per call is
// what the gRPC stack costs any service of the protocol on this machine,
// below the work of deciding. The benchmark builds and starts it; it is
// not part of the module's API.
//
//	grpcfloor -grpc-addr 127.0.0.1:8081
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/sluicehq/ratelimit/envoy/internal/grpcserve"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func main() {
	grpcserve.TuneGC(os.Getenv)
	addr := flag.String("grpc-addr", "127.0.0.1:8081", "host:port to serve gRPC on")
	flag.Parse()
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ratelimit: -grpc-addr:", err)
		os.Exit(2)
	}
	if err := newServer().Serve(lis); err != nil {
		fmt.Fprintln(os.Stderr, "ratelimit:", err)
		os.Exit(2)
	}
}

// newServer is the floor's gRPC server: the command's settings, the floor
// as its RateLimitService, and a health service that answers SERVING.
func newServer() *grpc.Server {
	srv := grpc.NewServer(grpcserve.ServerOptions()...)
	pb.RegisterRateLimitServiceServer(srv, floor{})
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	return srv
}

// floor answers every call OK, with no work.
type floor struct {
	pb.UnimplementedRateLimitServiceServer
}

var okResponse = &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_OK}

func (floor) ShouldRateLimit(context.Context, *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	return okResponse, nil
}
