package ratelimitgrpc_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	ratelimitgrpc "github.com/sluicehq/ratelimit/adapters/grpc"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// oneSlot is a limiter allowing one call in flight per client. Its clock
// never moves, so a slot comes back only when released.
func oneSlot() *ratelimit.Limiter {
	return ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.Limit{Rate: 1, Period: time.Hour}, Key: ratelimit.ByIP(), Algorithm: ratelimit.Concurrency, Name: "inflight"}}, ratelimit.WithClock(ratelimittest.NewClock(time.Time{})))
}

func TestConcurrencySlotHeldWhileUnaryRunsAndReleasedOnReturn(t *testing.T) {
	e := newEnv(t, oneSlot())
	conn := e.dial(peerAddr(1))
	first := make(chan error, 1)
	go func() { // no t.Fatal off the test goroutine: Invoke, not call
		first <- conn.Invoke(ctx(t), ping, wrapperspb.String("block"), new(wrapperspb.StringValue))
	}()
	select {
	case <-e.svc.entered:
	case err := <-first:
		t.Fatalf("the first call ended before its handler ran: %v", err)
	}
	_, err := call(t, conn, ping, "x")
	mustCode(t, err, codes.ResourceExhausted)
	_, _, err = openChat(t, conn) // one slot for unary and stream calls alike
	mustCode(t, err, codes.ResourceExhausted)
	if _, err := call(t, e.dial(peerAddr(2)), ping, "x"); err != nil {
		t.Fatalf("another client's slot: %v", err)
	}
	close(e.svc.proceed)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // each call returns its slot
		if _, err := call(t, conn, ping, "x"); err != nil {
			t.Fatalf("call %d after the first returned: %v", i, err)
		}
	}
}

func TestConcurrencySlotReleasedWhenStreamEnds(t *testing.T) {
	e := newEnv(t, oneSlot())
	conn := e.dial(peerAddr(1))
	cs, _, err := openChat(t, conn)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = openChat(t, conn)
	mustCode(t, err, codes.ResourceExhausted)
	_, err = call(t, conn, ping, "x")
	mustCode(t, err, codes.ResourceExhausted)
	if err := closeChat(t, cs); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		cs, _, err := openChat(t, conn)
		if err != nil {
			t.Fatalf("stream %d after the first ended: %v", i, err)
		}
		if err := closeChat(t, cs); err != nil {
			t.Fatal(err)
		}
	}
}

// The client cancelling the stream ends it too; the slot is released
// although the RPC's context is cancelled.
func TestConcurrencySlotReleasedWhenClientCancelsStream(t *testing.T) {
	e := newEnv(t, oneSlot())
	conn := e.dial(peerAddr(1))
	c, cancel := context.WithCancel(ctx(t))
	if _, _, err := openChatCtx(t, c, conn); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-e.ended
	if _, err := call(t, conn, ping, "x"); err != nil {
		t.Fatalf("after the cancelled stream ended: %v", err)
	}
}

func TestConcurrencySlotReleasedOnHandlerPanic(t *testing.T) {
	e := newEnv(t, oneSlot())
	conn := e.dial(peerAddr(1))
	for i := range 3 {
		_, err := call(t, conn, ping, "panic")
		mustCode(t, err, codes.Internal) // the recovery interceptor's
		if i == 0 {
			continue
		}
		cs, _, err := openChat(t, conn)
		if err != nil {
			t.Fatalf("stream after %d panics: %v", i, err)
		}
		if err := cs.SendMsg(wrapperspb.String("panic")); err != nil {
			t.Fatal(err)
		}
		mustCode(t, closeChat(t, cs), codes.Internal)
	}
	if _, err := call(t, conn, ping, "x"); err != nil {
		t.Fatalf("after panics: %v", err)
	}
}

// A denied call holds no slot: denials do not leak slots.
func TestConcurrencyDenialsHoldNoSlot(t *testing.T) {
	e := newEnv(t, oneSlot())
	conn := e.dial(peerAddr(1))
	cs, _, err := openChat(t, conn)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		_, err := call(t, conn, ping, "x")
		mustCode(t, err, codes.ResourceExhausted)
	}
	if err := closeChat(t, cs); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, conn, ping, "x"); err != nil {
		t.Fatal(err)
	}
}

func TestHealthServiceExemptByDefault(t *testing.T) {
	l := ratelimit.NewLimiter(ratelimit.PerMinute(1), ratelimit.ByIP(), ratelimit.WithClock(ratelimittest.NewClock(time.Time{})))
	conn := newEnv(t, l).dial(peerAddr(1))
	client := healthpb.NewHealthClient(conn)
	for i := range 5 {
		res, err := client.Check(ctx(t), &healthpb.HealthCheckRequest{})
		if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("check %d: %v, %v", i, res, err)
		}
		w, err := client.Watch(ctx(t), &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if res, err := w.Recv(); err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("watch %d: %v, %v", i, res, err)
		}
		if hdr, _ := w.Header(); len(hdr.Get("ratelimit")) != 0 {
			t.Fatalf("exempt call has rate-limit fields: %v", hdr)
		}
	}
	// The health checks consumed nothing.
	if _, err := call(t, conn, ping, "x"); err != nil {
		t.Fatal(err)
	}
}

// TestHealthMethodsCannotBeChanged: HealthMethods returns a new slice, so
// that an importer editing it changes no interceptor's default.
func TestHealthMethodsCannotBeChanged(t *testing.T) {
	m := ratelimitgrpc.HealthMethods()
	if !slices.Equal(m, []string{"/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch"}) {
		t.Fatalf("HealthMethods() = %q", m)
	}
	m[0], m[1] = pong, pong
	if got := ratelimitgrpc.HealthMethods(); got[0] != "/grpc.health.v1.Health/Check" {
		t.Fatalf("after editing a returned slice: %q", got)
	}
	l := ratelimit.NewLimiter(ratelimit.PerMinute(1), ratelimit.ByIP(), ratelimit.WithClock(ratelimittest.NewClock(time.Time{})))
	client := healthpb.NewHealthClient(newEnv(t, l).dial(peerAddr(1)))
	for i := range 3 {
		if _, err := client.Check(ctx(t), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("check %d after editing a returned slice: %v", i, err)
		}
	}
}

// Exemptions match the full method name exactly: a method of another
// service named like the health service is limited.
func TestHealthLookalikeMethodsLimited(t *testing.T) {
	for _, svc := range []string{"grpc.health.v1.HealthX", "grpc.health.v1.health", "evil.grpc.health.v1.Health"} {
		t.Run(svc, func(t *testing.T) {
			l := ratelimit.NewLimiter(ratelimit.PerMinute(1), ratelimit.ByIP(), ratelimit.WithClock(ratelimittest.NewClock(time.Time{})))
			conn := newEnv(t, l).dial(peerAddr(1))
			method := "/" + svc + "/Check"
			if _, err := call(t, conn, method, "x"); err != nil {
				t.Fatal(err)
			}
			_, err := call(t, conn, method, "x")
			mustCode(t, err, codes.ResourceExhausted)
		})
	}
}

func TestWithExemptMethodsReplacesDefault(t *testing.T) {
	l := ratelimit.NewLimiter(ratelimit.PerMinute(1), ratelimit.ByIP(), ratelimit.WithClock(ratelimittest.NewClock(time.Time{})))
	conn := newEnv(t, l, ratelimitgrpc.WithExemptMethods(pong)).dial(peerAddr(1))
	client := healthpb.NewHealthClient(conn)
	if _, err := client.Check(ctx(t), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err := client.Check(ctx(t), &healthpb.HealthCheckRequest{})
	mustCode(t, err, codes.ResourceExhausted)
	for range 3 {
		if _, err := call(t, conn, pong, "x"); err != nil {
			t.Fatalf("exempt method limited: %v", err)
		}
	}
	_, err = call(t, conn, ping, "x")
	mustCode(t, err, codes.ResourceExhausted)
}

func TestWithExemptMethodsPanicsOnBadName(t *testing.T) {
	for _, m := range []string{"", "/", "grpc.health.v1.Health/Check", "/grpc.health.v1.Health", "/grpc.health.v1.Health/", "//Check", "/a/b/c"} {
		t.Run(m, func(t *testing.T) {
			defer func() {
				if p, _ := recover().(string); !strings.HasPrefix(p, "ratelimit: ") {
					t.Fatalf("panic %q, want a ratelimit: message", p)
				}
			}()
			ratelimitgrpc.WithExemptMethods(m)
		})
	}
}
