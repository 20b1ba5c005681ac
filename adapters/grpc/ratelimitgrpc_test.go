package ratelimitgrpc_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/ratelimit"
	ratelimitgrpc "github.com/sluicehq/ratelimit/adapters/grpc"
	"github.com/sluicehq/ratelimit/ratelimittest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

func details(st *status.Status) (*errdetails.RetryInfo, *errdetails.QuotaFailure) {
	var ri *errdetails.RetryInfo
	var qf *errdetails.QuotaFailure
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			ri = d
		case *errdetails.QuotaFailure:
			qf = d
		}
	}
	return ri, qf
}

func TestUnaryDeniedAsResourceExhaustedWithRetryInfoAndQuotaFailure(t *testing.T) {
	clock := ratelimittest.NewClock(time.Time{})
	l := ratelimit.NewLimiter(ratelimit.PerMinute(2), ratelimit.ByIP(),
		ratelimit.WithClock(clock), ratelimit.WithName("rpc"))
	conn := newEnv(t, l).dial(peerAddr(1))

	for i := range 2 {
		hdr, err := call(t, conn, ping, "hi")
		if err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
		rl, err := ratelimittest.ParseRateLimit(header(hdr))
		if err != nil || rl.Policy != "rpc" || rl.Remaining != 1-i {
			t.Fatalf("call %d: RateLimit %+v (%v), want policy rpc with %d remaining; metadata %v", i+1, rl, err, 1-i, hdr)
		}
		if p, err := ratelimittest.ParsePolicies(header(hdr)); err != nil || len(p) != 1 || p[0].Quota != 2 {
			t.Fatalf("call %d: RateLimit-Policy %+v (%v)", i+1, p, err)
		}
		if v := hdr.Get("retry-after"); len(v) != 0 {
			t.Fatalf("call %d: allowed call has retry-after %v", i+1, v)
		}
	}

	hdr, err := call(t, conn, ping, "hi")
	st := mustCode(t, err, codes.ResourceExhausted)
	ri, qf := details(st)
	if ri == nil || ri.GetRetryDelay().AsDuration() < time.Second {
		t.Fatalf("RetryInfo %v, want a delay of at least 1s", ri)
	}
	retry := ri.GetRetryDelay().AsDuration()
	if got := hdr.Get("retry-after"); len(got) != 1 || got[0] != strconv.Itoa(int(retry/time.Second)) {
		t.Fatalf("retry-after metadata %v, want [%d] as in RetryInfo", got, retry/time.Second)
	}
	if retry != 30*time.Second { // 2 a minute: one more fits after 30s
		t.Fatalf("RetryInfo delay %v, want 30s", retry)
	}
	if qf == nil || len(qf.GetViolations()) != 1 || qf.GetViolations()[0].GetQuotaId() != "rpc" {
		t.Fatalf("QuotaFailure %v, want one violation of policy rpc", qf)
	}
	if rl, err := ratelimittest.ParseRateLimit(header(hdr)); err != nil || rl.Remaining != 0 {
		t.Fatalf("denied call: RateLimit %+v (%v)", rl, err)
	}
	if len(hdr.Get("ratelimit-policy")) != 1 {
		t.Fatalf("denied call: no ratelimit-policy in %v", hdr)
	}
	for _, k := range []string{"cache-control"} {
		if v := hdr.Get(k); len(v) != 0 {
			t.Fatalf("HTTP-only field %s leaked into metadata: %v", k, v)
		}
	}
	if ct := hdr.Get("content-type"); len(ct) != 1 || !strings.HasPrefix(ct[0], "application/grpc") {
		t.Fatalf("content-type %v, want gRPC's own", ct)
	}

	clock.Advance(retry - time.Nanosecond)
	_, err = call(t, conn, ping, "hi")
	mustCode(t, err, codes.ResourceExhausted)
	clock.Advance(time.Nanosecond)
	if _, err := call(t, conn, ping, "hi"); err != nil {
		t.Fatalf("after RetryInfo's delay: %v", err)
	}
}

// The metadata carries the same fields, with the same values, as the HTTP
// middleware writes for the same sequence of requests.
func TestMetadataMatchesHTTPFields(t *testing.T) {
	newLimiter := func(clock ratelimit.Clock) *ratelimit.Limiter {
		return ratelimit.NewRulesLimiter([]ratelimit.Rule{
			{Name: "burst", Limit: ratelimit.Limit{Rate: 3, Period: time.Second, Burst: 3}, Key: ratelimit.ByIP()},
			{Name: "minute", Limit: ratelimit.PerMinute(5), Key: ratelimit.ByIP()},
		}, ratelimit.WithClock(clock), ratelimit.WithHeaders(ratelimit.HeadersIETF|ratelimit.HeadersLegacy))
	}
	httpClock, grpcClock := ratelimittest.NewClock(time.Time{}), ratelimittest.NewClock(time.Time{})
	h := newLimiter(httpClock).Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	conn := newEnv(t, newLimiter(grpcClock)).dial(ratelimittest.DefaultRemoteAddr)
	fields := []string{"RateLimit", "RateLimit-Policy", "Retry-After", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}
	for i := range 10 {
		resp := ratelimittest.Do(h, ratelimittest.NewRequest(http.MethodPost, ping, ""))
		hdr, err := call(t, conn, ping, "x")
		if st, _ := status.FromError(err); (resp.Code == http.StatusOK) != (st.Code() == codes.OK) {
			t.Fatalf("request %d: HTTP %d, gRPC %v", i, resp.Code, err)
		}
		got := header(hdr)
		for _, f := range fields {
			if w, g := strings.Join(resp.Header.Values(f), ", "), strings.Join(got.Values(f), ", "); w != g {
				t.Fatalf("request %d: %s is %q over gRPC, %q over HTTP", i, f, g, w)
			}
		}
		if i%3 == 2 {
			httpClock.Advance(700 * time.Millisecond)
			grpcClock.Advance(700 * time.Millisecond)
		}
	}
}

func TestStreamDeniedWhenOpened(t *testing.T) {
	l := ratelimit.NewLimiter(ratelimit.PerMinute(1), ratelimit.ByIP(),
		ratelimit.WithClock(ratelimittest.NewClock(time.Time{})), ratelimit.WithName("streams"))
	conn := newEnv(t, l).dial(peerAddr(1))
	cs, hdr, err := openChat(t, conn)
	if err != nil {
		t.Fatal(err)
	}
	if rl, err := ratelimittest.ParseRateLimit(header(hdr)); err != nil || rl.Remaining != 0 {
		t.Fatalf("admitted stream: RateLimit %+v (%v) in %v", rl, err, hdr)
	}
	// Messages on an admitted stream are not limited.
	for range 5 {
		if err := cs.SendMsg(wrapperspb.String("more")); err != nil {
			t.Fatal(err)
		}
	}
	if err := closeChat(t, cs); err != nil {
		t.Fatal(err)
	}
	_, hdr, err = openChat(t, conn)
	st := mustCode(t, err, codes.ResourceExhausted)
	if ri, qf := details(st); ri == nil || ri.GetRetryDelay().AsDuration() < time.Second || qf == nil || qf.GetViolations()[0].GetQuotaId() != "streams" {
		t.Fatalf("details %v, %v", ri, qf)
	}
	if len(hdr.Get("retry-after")) != 1 || len(hdr.Get("ratelimit")) != 1 {
		t.Fatalf("denied stream: metadata %v lacks the fields", hdr)
	}
}

func TestFailClosedIsUnavailableWithRetryInfo(t *testing.T) {
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerMinute(10), Key: ratelimit.ByIP(), OnStoreError: ratelimit.FailurePolicy{Status: http.StatusServiceUnavailable}}}, ratelimit.WithStore(ratelimittest.FailingStore{Err: net.ErrClosed}))
	conn := newEnv(t, l).dial(peerAddr(1))
	hdr, err := call(t, conn, ping, "x")
	st := mustCode(t, err, codes.Unavailable)
	ri, qf := details(st)
	if ri == nil || ri.GetRetryDelay().AsDuration() != time.Second || qf != nil {
		t.Fatalf("details %v, %v; want RetryInfo 1s and no QuotaFailure", ri, qf)
	}
	if got := hdr.Get("retry-after"); len(got) != 1 || got[0] != "1" {
		t.Fatalf("retry-after %v", got)
	}
	_, _, err = openChat(t, conn)
	mustCode(t, err, codes.Unavailable)
}

func TestFailOpenLetsCallsThrough(t *testing.T) {
	l := ratelimit.NewLimiter(ratelimit.PerMinute(10), ratelimit.ByIP(),
		ratelimit.WithStore(ratelimittest.FailingStore{Err: net.ErrClosed}))
	conn := newEnv(t, l).dial(peerAddr(1))
	if _, err := call(t, conn, ping, "x"); err != nil {
		t.Fatal(err)
	}
}

// A denied handler replaces the 429 over HTTP; over gRPC the call is still
// refused, as ResourceExhausted with RetryInfo.
func TestDeniedHandlerStillRefusesTheCall(t *testing.T) {
	l := ratelimit.NewLimiter(ratelimit.PerMinute(1), ratelimit.ByIP(),
		ratelimit.WithClock(ratelimittest.NewClock(time.Time{})),
		ratelimit.WithDeniedHandler(func(w http.ResponseWriter, r *http.Request, _ *ratelimit.Verdict) {
			w.Write([]byte("slow down"))
		}))
	conn := newEnv(t, l).dial(peerAddr(1))
	if _, err := call(t, conn, ping, "x"); err != nil {
		t.Fatal(err)
	}
	_, err := call(t, conn, ping, "x")
	if ri, _ := details(mustCode(t, err, codes.ResourceExhausted)); ri == nil {
		t.Fatal("no RetryInfo")
	}
}

func TestNilLimiterAndOptionPanic(t *testing.T) {
	for name, f := range map[string]func(){
		"unary nil limiter":  func() { ratelimitgrpc.UnaryServerInterceptor(nil) },
		"stream nil limiter": func() { ratelimitgrpc.StreamServerInterceptor(nil) },
		"nil option": func() {
			ratelimitgrpc.UnaryServerInterceptor(ratelimit.NewLimiter(ratelimit.PerMinute(1), ratelimit.ByIP()), nil)
		},
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if p, _ := recover().(string); !strings.HasPrefix(p, "ratelimit: ") {
					t.Fatalf("panic %q, want a ratelimit: message", p)
				}
			}()
			f()
		})
	}
}

// A real TCP connection: the peer address the limiter keys by is the one
// the kernel reports.
func TestRealTCPPeerKeyedByIP(t *testing.T) {
	var keys ratelimittest.KeyRecorder
	l := ratelimit.NewLimiter(ratelimit.PerMinute(10), keys.Wrap(ratelimit.ByIP()))
	e := newEnv(t, l)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go e.srv.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hdr, err := call(t, conn, ping, "x")
	if err != nil {
		t.Fatal(err)
	}
	if k, _ := keys.MustLast(t); k != "127.0.0.1" {
		t.Fatalf("key %q, want 127.0.0.1", k)
	}
	if len(hdr.Get("ratelimit")) != 1 {
		t.Fatalf("metadata %v", hdr)
	}
}

// One limiter on an HTTP mux and a gRPC server: a client's HTTP requests
// and RPCs draw on one budget when their keys agree.
func TestHTTPAndGRPCShareOneLimiter(t *testing.T) {
	l := ratelimit.NewLimiter(ratelimit.PerMinute(2), ratelimit.ByAPIKey("X-API-Key"),
		ratelimit.WithClock(ratelimittest.NewClock(time.Time{})))
	h := l.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	conn := newEnv(t, l).dial(peerAddr(1))
	if resp := ratelimittest.Do(h, ratelimittest.NewRequest(http.MethodGet, "/", "", "X-API-Key", "k1")); resp.Code != http.StatusOK {
		t.Fatalf("HTTP %d", resp.Code)
	}
	if _, err := call(t, conn, ping, "x", "x-api-key", "k1"); err != nil {
		t.Fatal(err)
	}
	if resp := ratelimittest.Do(h, ratelimittest.NewRequest(http.MethodGet, "/", "", "X-API-Key", "k1")); resp.Code != http.StatusTooManyRequests {
		t.Fatalf("HTTP %d after the RPC took the second unit, want 429", resp.Code)
	}
	_, err := call(t, conn, ping, "x", "x-api-key", "k1")
	mustCode(t, err, codes.ResourceExhausted)
}

// With several rules, QuotaFailure names every rule that denied, and only
// those.
func TestQuotaFailureNamesEveryViolatedRule(t *testing.T) {
	l := ratelimit.NewRulesLimiter([]ratelimit.Rule{
		{Name: "per-ip", Limit: ratelimit.PerMinute(1), Key: ratelimit.ByIP()},
		{Name: "per-key", Limit: ratelimit.PerMinute(1), Key: ratelimit.ByAPIKey("x-api-key")},
		{Name: "global", Limit: ratelimit.PerMinute(100), Key: ratelimit.ByRoute()},
	}, ratelimit.WithClock(ratelimittest.NewClock(time.Time{})))
	conn := newEnv(t, l).dial(peerAddr(1))
	if _, err := call(t, conn, ping, "x", "x-api-key", "k1"); err != nil {
		t.Fatal(err)
	}
	violated := func(err error) string {
		t.Helper()
		_, qf := details(mustCode(t, err, codes.ResourceExhausted))
		var names []string
		for _, v := range qf.GetViolations() {
			names = append(names, v.GetQuotaId())
		}
		slices.Sort(names)
		return strings.Join(names, ",")
	}
	_, err := call(t, conn, ping, "x", "x-api-key", "k1")
	if got := violated(err); got != "per-ip,per-key" {
		t.Fatalf("violated %q, want per-ip,per-key", got)
	}
	_, err = call(t, conn, ping, "x", "x-api-key", "k2")
	if got := violated(err); got != "per-ip" {
		t.Fatalf("violated %q, want per-ip", got)
	}
}

// TestSettledCostReachesTheLimiter: a unary handler and a stream handler
// that settle 10 units under a settled limiter (estimate 1) are charged 10.
func TestSettledCostReachesTheLimiter(t *testing.T) {
	settle := func(ctx context.Context) error {
		if !ratelimit.Settle(ctx, nil, 10) {
			return errors.New("Settle found no settled rule in the handler's context")
		}
		return nil
	}
	ctx := grpc.NewContextWithServerTransportStream(context.Background(), &stubStream{})
	serves := map[string]func(*ratelimit.Limiter) error{
		"Unary": func(l *ratelimit.Limiter) error {
			_, err := ratelimitgrpc.UnaryServerInterceptor(l)(ctx, nil, &grpc.UnaryServerInfo{FullMethod: ping},
				func(ctx context.Context, _ any) (any, error) { return nil, settle(ctx) })
			return err
		},
		"Stream": func(l *ratelimit.Limiter) error {
			return ratelimitgrpc.StreamServerInterceptor(l)(nil, headerStream{ctx: ctx}, &grpc.StreamServerInfo{FullMethod: ping},
				func(_ any, ss grpc.ServerStream) error { return settle(ss.Context()) })
		},
	}
	for name, serve := range serves {
		t.Run(name, func(t *testing.T) {
			l := ratelimit.NewRulesLimiter([]ratelimit.Rule{{Limit: ratelimit.PerHour(100), Key: ratelimit.Global(), Settled: true}}, ratelimit.WithClock(ratelimittest.NewClock(ratelimittest.Epoch())))
			if err := serve(l); err != nil {
				t.Fatal(err)
			}
			if res, err := l.AllowN(context.Background(), "global", 0); err != nil || res.Remaining != 100-10 {
				t.Fatalf("after a call settled at 10: %+v, %v; want Remaining 90", res, err)
			}
		})
	}
}

// headerStream is a server stream with a context that takes header
// metadata and nothing else.
type headerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s headerStream) Context() context.Context    { return s.ctx }
func (s headerStream) SetHeader(metadata.MD) error { return nil }
