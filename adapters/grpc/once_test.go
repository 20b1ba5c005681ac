package ratelimitgrpc_test

import (
	"context"
	"net"
	"testing"

	"github.com/sluicehq/ratelimit"
	ratelimitgrpc "github.com/sluicehq/ratelimit/adapters/grpc"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"github.com/sluicehq/ratelimit/stores/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// TestInterceptorDecidesEachCallOnce: a call is decided by one store call
// when it is admitted, when it is denied and when its store fails and it
// is let through, whether or not the limiter settles costs.
func TestInterceptorDecidesEachCallOnce(t *testing.T) {
	clock := ratelimittest.NewClock(ratelimittest.Epoch())
	for _, tc := range []struct {
		name  string
		store ratelimit.Store
		codes []codes.Code
	}{
		{"admitted", memory.New(memory.WithClock(clock)), []codes.Code{codes.OK, codes.OK}},
		{"denied", memory.New(memory.WithClock(clock)), []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted}},
		{"failed open", ratelimittest.FailingStore{}, []codes.Code{codes.OK, codes.OK}},
	} {
		for _, settled := range []bool{false, true} {
			cs := &ratelimittest.CountingStore{Store: tc.store}
			rule := ratelimit.Rule{Name: "once", Limit: ratelimit.PerMinute(2), Key: ratelimit.ByIP(), Settled: settled}
			ic := ratelimitgrpc.UnaryServerInterceptor(ratelimit.NewRulesLimiter([]ratelimit.Rule{rule}, ratelimit.WithStore(cs), ratelimit.WithClock(clock)))
			ip := net.IPv4(192, 0, 2, 7)
			if settled {
				ip = net.IPv4(192, 0, 2, 8)
			}
			ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: ip, Port: 4000}})
			ctx = grpc.NewContextWithServerTransportStream(ctx, &stubStream{})
			info := &grpc.UnaryServerInfo{FullMethod: ping}
			handled := 0
			handler := func(context.Context, any) (any, error) { handled++; return nil, nil }
			for i, want := range tc.codes {
				if _, err := ic(ctx, nil, info, handler); status.Code(err) != want {
					t.Fatalf("%s, settled %v: call %d: %v, want %v", tc.name, settled, i+1, err, want)
				}
			}
			if got := cs.Calls(); got != int64(len(tc.codes)) {
				t.Errorf("%s, settled %v: %d store calls for %d RPCs, want one each", tc.name, settled, got, len(tc.codes))
			}
			if handled != 2 {
				t.Errorf("%s, settled %v: the handler ran %d times, want 2", tc.name, settled, handled)
			}
		}
	}
}
