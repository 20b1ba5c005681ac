package ratelimitgrpc_test

import (
	"context"
	"fmt"
	"net"

	"github.com/sluicehq/ratelimit"
	ratelimitgrpc "github.com/sluicehq/ratelimit/adapters/grpc"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
)

// testService implements grpc.testing.TestService's EmptyCall.
type testService struct {
	testpb.UnimplementedTestServiceServer
}

func (testService) EmptyCall(context.Context, *testpb.Empty) (*testpb.Empty, error) {
	return &testpb.Empty{}, nil
}

// Two calls a minute per API key and method, on unary and streaming RPCs;
// the health service stays exempt. A client reads the rate-limit fields
// from the header metadata and, once denied, the delay from RetryInfo.
func Example() {
	l := ratelimit.NewLimiter(ratelimit.PerMinute(2),
		ratelimit.Keys(ratelimit.ByAPIKey("x-api-key"), ratelimit.ByRoute()),
		ratelimit.WithName("rpc"))
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(ratelimitgrpc.UnaryServerInterceptor(l)),
		grpc.ChainStreamInterceptor(ratelimitgrpc.StreamServerInterceptor(l)),
	)
	testpb.RegisterTestServiceServer(srv, testService{})
	healthpb.RegisterHealthServer(srv, health.NewServer())

	lis := bufconn.Listen(1 << 20) // an in-memory listener; use net.Listen
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient("passthrough:///example",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		panic(err)
	}
	defer conn.Close()

	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", "k-123")
	client := testpb.NewTestServiceClient(conn)
	for range 3 {
		var hdr metadata.MD
		_, err := client.EmptyCall(ctx, &testpb.Empty{}, grpc.Header(&hdr))
		st := status.Convert(err)
		fmt.Println(st.Code(), hdr.Get("ratelimit"))
		for _, d := range st.Details() {
			switch d := d.(type) {
			case *errdetails.RetryInfo:
				fmt.Println("  retry in", d.GetRetryDelay().AsDuration())
			case *errdetails.QuotaFailure:
				fmt.Println("  violated", d.GetViolations()[0].GetQuotaId())
			}
		}
	}
	_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	fmt.Println("health check:", status.Code(err))
	// Output:
	// OK ["rpc";r=1;t=30]
	// OK ["rpc";r=0;t=30]
	// ResourceExhausted ["rpc";r=0;t=30]
	//   retry in 30s
	//   violated rpc
	// health check: OK
}
